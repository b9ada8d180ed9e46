package livetest

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/storage"
)

// TestStorageFullDisk (issue 19 item 3): node n2 of a 3-node Multi-Paxos
// cluster keeps its data directory on a real 8 MiB tmpfs, and clients write
// 4 KiB values until that file system is full. n2 then refuses requests
// with "storage full" and says so on /healthz while n1 and n3 keep
// serving; once the file system is grown (space returns) and n2 restarted,
// it is healthy and takes part again. Every acknowledged write is read back
// at the end: none is lost. Needs root (mount); skipped otherwise.
func TestStorageFullDisk(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as n2's data directory")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, cluster.DataDir, "n2")
	if err := os.MkdirAll(data, 0o755); err != nil {
		t.Fatal(err)
	}
	unmount, err := storage.MountTmpfs(data, 8<<20)
	if err != nil {
		t.Skipf("cannot make a small file system here: %v", err)
	}
	t.Cleanup(func() { unmount() }) // after the cluster is down (cleanups run last first)
	c, err := cluster.Up(cluster.UpOptions{Dir: dir, Binary: synodBin, DieWithParent: true, Nodes: 3, Protocol: "paxos",
		Params: map[string]string{"heartbeat": "20ms", "election_timeout": "200ms"}})
	if err != nil {
		t.Fatalf("cluster.Up: %v", err)
	}
	t.Cleanup(func() {
		if _, err := cluster.Down(c.Dir, false); err != nil {
			t.Errorf("cluster.Down: %v", err)
		}
	})
	var n2 cluster.Node
	for _, n := range c.Nodes {
		if n.ID == "n2" {
			n2 = n
		}
	}
	cl, err := client.New(c.ClientAddrs(), client.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx := context.Background()
	val := strings.Repeat("v", 4<<10)

	// Writers until n2's disk is full (bounded), then a little longer.
	var mu sync.Mutex
	acked := map[string]string{}
	full := make(chan struct{})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for w := 0; w < 8; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				k, v := fmt.Sprintf("w%d/%d", w, i), fmt.Sprintf("%d:%s", i, val)
				if err := cl.Set(ctx, k, []byte(v)); err == nil {
					mu.Lock()
					acked[k] = v
					mu.Unlock()
				}
			}
		}()
	}
	go func() {
		for {
			if code, body := healthz(n2.Metrics); code == http.StatusServiceUnavailable {
				t.Logf("n2 /healthz: %s", strings.TrimSpace(body))
				close(full)
				return
			}
			select {
			case <-stop:
				return
			case <-time.After(50 * time.Millisecond):
			}
		}
	}()
	select {
	case <-full:
	case <-time.After(60 * time.Second):
		close(stop)
		wg.Wait()
		t.Fatalf("n2's 8 MiB disk never filled (%d writes acknowledged)", len(acked))
	}
	mu.Lock()
	atFull := len(acked)
	mu.Unlock()
	deadline := time.Now().Add(20 * time.Second)
	for {
		mu.Lock()
		n := len(acked)
		mu.Unlock()
		if n >= atFull+50 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("n1 and n3 served only %d writes in 20 s after n2's disk filled", n-atFull)
		}
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()

	// n2 refuses, saying why.
	one, err := client.New([]string{n2.Client}, client.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = one.Set(ctx, "refused", []byte("x"))
	one.Close()
	if err == nil || !strings.Contains(err.Error(), "node n2 storage full: ") || !strings.Contains(err.Error(), "no space left on device") {
		t.Fatalf("SET on the full node: %v", err)
	}
	t.Logf("SET on n2: %v", err)

	// Space returns; n2 is restarted and is healthy again.
	if err := syscall.Mount("tmpfs", data, "tmpfs", syscall.MS_REMOUNT, "size=64m"); err != nil {
		t.Fatalf("grow n2's tmpfs: %v", err)
	}
	if err := c.Kill("n2"); err != nil {
		t.Fatal(err)
	}
	if err := restartRetrying(t, c, "n2"); err != nil {
		t.Fatal(err)
	}
	if code, body := healthz(n2.Metrics); code != http.StatusOK {
		t.Fatalf("restarted n2: /healthz %d %q", code, body)
	}
	// With n1 down, n2 and n3 alone must serve: n2 rejoined.
	if err := c.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	t.Logf("%d writes acknowledged (%d before n2's disk filled); reading them back through n2 and n3", len(acked), atFull)
	rest, err := client.New([]string{n2.Client, c.Nodes[2].Client}, client.Options{Timeout: 2 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer rest.Close()
	rctx, cancel := context.WithTimeout(ctx, 60*time.Second)
	defer cancel()
	if err := rest.Set(rctx, "after", []byte("restart")); err != nil {
		t.Fatalf("write after the restart: %v", err)
	}
	lost := 0
	for k, v := range acked {
		got, ok, err := rest.Get(rctx, k)
		if err != nil {
			t.Fatalf("GET %s: %v", k, err)
		}
		if !ok || string(got) != v {
			lost++
		}
	}
	if lost > 0 {
		t.Fatalf("%d of %d acknowledged writes lost", lost, len(acked))
	}
}

func healthz(addr string) (int, string) {
	hc := http.Client{Timeout: time.Second}
	resp, err := hc.Get("http://" + addr + "/healthz")
	if err != nil {
		return 0, err.Error()
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}
