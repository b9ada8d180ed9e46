package peers

import (
	"context"
	"io"
	"net"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestZnodeNames(t *testing.T) {
	for _, ok := range []string{"key:000001", "synod-com:000042", "a.b", "..."} {
		if err := checkZnodeName(ok); err != nil {
			t.Errorf("checkZnodeName(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", ".", "..", "a/b", "a\x00b"} {
		if err := checkZnodeName(bad); err == nil {
			t.Errorf("checkZnodeName(%q) accepted", bad)
		}
	}
	for _, ok := range []string{"/synod-bench", "/a/b"} {
		if err := checkZnodePath(ok); err != nil {
			t.Errorf("checkZnodePath(%q): %v", ok, err)
		}
	}
	for _, bad := range []string{"", "/", "x", "/a/", "//a", "/a/../b"} {
		if err := checkZnodePath(bad); err == nil {
			t.Errorf("checkZnodePath(%q) accepted", bad)
		}
	}
}

// A ZooKeeper target refuses a bad root before dialing, and gives up on an
// address where nothing answers within its timeout, naming the address.
func TestZooKeeperTargetErrors(t *testing.T) {
	if _, err := NewZooKeeperTarget(context.Background(), "127.0.0.1:1", ZooKeeperOptions{Root: "/a/"}); err == nil || !strings.Contains(err.Error(), "root") {
		t.Fatalf("bad root: %v", err)
	}
	srv := newSilentServer(t) // accepts TCP, never completes a ZooKeeper handshake
	start := time.Now()
	_, err := NewZooKeeperTarget(context.Background(), srv.addr(), ZooKeeperOptions{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), srv.addr()) {
		t.Fatalf("want a no-session error naming %s, got %v", srv.addr(), err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("gave up after %v, timeout was 300ms", d)
	}
}

// An etcd target reports a member that does not answer as a connect error
// naming it, within its timeout.
func TestEtcdTargetConnectError(t *testing.T) {
	srv := newSilentServer(t) // accepts TCP, speaks no HTTP/2
	start := time.Now()
	_, err := NewEtcdTarget(context.Background(), srv.addr(), EtcdOptions{Timeout: 300 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), srv.addr()) {
		t.Fatalf("want a connect error naming %s, got %v", srv.addr(), err)
	}
	if d := time.Since(start); d > 3*time.Second {
		t.Fatalf("gave up after %v, timeout was 300ms", d)
	}
}

// silentServer accepts connections on 127.0.0.1 and reads from them without
// ever answering: a peer system that does not complete its handshake.
type silentServer struct{ ln net.Listener }

func newSilentServer(t *testing.T) *silentServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	var conns []net.Conn
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			wg.Add(1)
			go func() { defer wg.Done(); io.Copy(io.Discard, c) }()
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		mu.Lock()
		for _, c := range conns {
			c.Close()
		}
		mu.Unlock()
		wg.Wait()
	})
	return &silentServer{ln}
}

func (s *silentServer) addr() string { return s.ln.Addr().String() }
