package livetest

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/resp"
)

// TestAdamCallsAnotherCluster (issue 31 item 2): two Synod clusters, each 3
// node processes with fsync. Cluster A's adam namespace (the trail program:
// SET k v appends "<old v>;" to trail:k at the callee) calls the paxos
// namespace "default" of cluster B, named in A's cluster file under
// remotes with B's client addresses, its password and its CA (B's client
// ports speak only TLS). Every replica of A sends its own copy of each call
// over B's Redis protocol (SYNOD CALL) with the same id; B executes each
// once. Then kill -9 of a node of each cluster; every node of B killed (a
// SET at A then answers an error, never OK, and stores nothing); B
// restarted; every node of A killed and restarted. At the end every
// acknowledged SET's call is in B's trail exactly once.
func TestAdamCallsAnotherCluster(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	const pass = "b-secret"
	b := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "paxos", Durability: config.Fsync, Password: pass, TLS: true})
	tlsDir := filepath.Join(b.Dir, cluster.TLSDir)
	cf, kf := certs.ClientFiles(cluster.ClientCertName)
	remote := config.Remote{Name: "b", Nodes: b.ClientAddrs(), Password: pass, Timeout: "3s",
		TLS: &config.RemoteTLS{CA: filepath.Join(tlsDir, certs.CAFile), Cert: filepath.Join(tlsDir, cf), Key: filepath.Join(tlsDir, kf)}}
	a := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "adam", Durability: config.Fsync,
		Params: map[string]string{"callee": "b/default"}, Remotes: []config.Remote{remote}})
	defer func() {
		if t.Failed() {
			logTails(t, a.Dir, 30)
			logTails(t, b.Dir, 30)
		}
	}()
	ctx := context.Background()
	btls, err := b.ClientTLS()
	if err != nil {
		t.Fatal(err)
	}
	// setOnce sends one SET to A (a fresh client, so no retry inside).
	setOnce := func(k, v string) error {
		cl, err := client.New(a.ClientAddrs(), client.Options{Timeout: 15 * time.Second, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		return cl.Set(ctx, k, []byte(v))
	}
	acked := map[string]bool{}
	// A SET of v answered an error may still have had its call executed
	// at B (the error says "it may have been executed there": B answered
	// no attempt within the timeout). Its retry is a new request with a
	// new call: B's trail then holds the old value twice (the failed
	// attempt's call and the retry's), or v twice when the failed attempt
	// took effect whole.
	retried := map[string]bool{}
	set := func(k, v string) {
		t.Helper()
		deadline := time.Now().Add(40 * time.Second)
		for {
			err := setOnce(k, v)
			if err == nil {
				acked[v] = true
				return
			}
			retried[v] = true
			t.Logf("SET %s %s: %v (retrying)", k, v, err)
			if time.Now().After(deadline) {
				t.Fatalf("SET %s %s at A not acknowledged within 40 s: %v", k, v, err)
			}
			time.Sleep(200 * time.Millisecond)
		}
	}
	getA := func(k string) string {
		t.Helper()
		cl, err := client.New(a.ClientAddrs(), client.Options{Timeout: 5 * time.Second, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		defer cl.Close()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, _, err := cl.Get(ctx, k)
			if err == nil {
				return string(v)
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s at A within 30 s: %v", k, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	getB := func(k string) string {
		t.Helper()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, err := tlsGet(b.ClientAddrs()[0], btls, pass, k)
			if err == nil {
				return v
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s at B within 30 s: %v", k, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	const n = 5
	for i := 0; i < n; i++ {
		set("a", fmt.Sprintf("v%d", i))
	}
	want := ";"
	for i := 0; i < n-1; i++ {
		want += fmt.Sprintf("v%d;", i)
	}
	if got := getB("trail:a"); got != want {
		t.Fatalf("trail:a at cluster B = %q, want %q (one APPEND per SET, from 3 caller replicas)", got, want)
	}
	if got := getA("trail-len:a"); got != fmt.Sprint(len(want)) {
		t.Fatalf("trail-len:a at A = %q, want %d (B's APPEND answer)", got, len(want))
	}

	// kill -9 of one node in each cluster; SETs go on.
	if err := a.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	if err := b.Kill("n2"); err != nil {
		t.Fatal(err)
	}
	for i := n; i < 2*n; i++ {
		set("a", fmt.Sprintf("v%d", i))
	}
	if err := restartRetrying(t, a, "n1"); err != nil {
		t.Fatal(err)
	}
	if err := restartRetrying(t, b, "n2"); err != nil {
		t.Fatal(err)
	}

	// B unreachable: the SET answers an error and stores nothing.
	before := getA("a")
	onEveryNode(t, b, "kill -9", b.Kill)
	start := time.Now()
	err = setOnce("a", "unreachable")
	if err == nil {
		t.Fatal("SET at A answered OK while every node of B was down")
	}
	t.Logf("SET with B down answered after %v: %v", time.Since(start).Round(time.Millisecond), err)
	if !strings.Contains(err.Error(), `cluster "b"`) && !strings.Contains(err.Error(), "outcome unknown") {
		t.Errorf("the error does not name the unreachable cluster: %v", err)
	}
	// An error that says the call "may have been executed there" is an
	// unknown outcome at B (an attempt was written to a connection before
	// B's answer could come): that call may take effect at B, so B's trail
	// may hold the value it read (before) twice, its own call's and the
	// next SET's. The clean-clone CI at 85cb467 saw exactly that, quiet.
	// An error that says it did not reach the cluster allows no such copy.
	unknownAtB := map[string]bool{}
	if strings.Contains(err.Error(), "may have been executed") {
		unknownAtB[before] = true
	}
	if got := getA("a"); got != before {
		t.Fatalf("a = %q after the failed SET, want %q (nothing stored)", got, before)
	}
	onEveryNode(t, b, "restart", func(id string) error { return restartRetrying(t, b, id) })

	// kill -9 of every node of A, restart, one more SET.
	onEveryNode(t, a, "kill -9", a.Kill)
	onEveryNode(t, a, "restart", func(id string) error { return restartRetrying(t, a, id) })
	set("a", fmt.Sprintf("v%d", 2*n))

	trail := getB("trail:a")
	entries := strings.Split(strings.TrimPrefix(strings.TrimSuffix(trail, ";"), ";"), ";")
	count := map[string]int{}
	for _, e := range entries {
		count[e]++
	}
	for i := 0; i < 2*n; i++ {
		v, next := fmt.Sprintf("v%d", i), fmt.Sprintf("v%d", i+1)
		if count[v] != 1 && !((retried[v] || retried[next] || unknownAtB[v]) && count[v] == 2) {
			t.Fatalf("trail:a at B = %q holds the call of the acknowledged SET after %s %d times, want once", trail, v, count[v])
		}
	}
	if got := getA("a"); got != fmt.Sprintf("v%d", 2*n) {
		t.Fatalf("a = %q at A after the restarts, want v%d", got, 2*n)
	}
	t.Logf("trail:a at B: %d entries for %d acknowledged SETs at A", len(entries), len(acked))
}

// tlsGet runs AUTH pass and GET k on a TLS connection to addr.
func tlsGet(addr string, cfg *tls.Config, pass, k string) (string, error) {
	nc, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(5 * time.Second))
	w := resp.NewWriter(nc)
	r := resp.NewReader(bufio.NewReader(nc), resp.Limits{})
	w.WriteCommand([][]byte{[]byte("AUTH"), []byte(pass)})
	w.WriteCommand([][]byte{[]byte("GET"), []byte(k)})
	if err := w.Flush(); err != nil {
		return "", err
	}
	for i := 0; i < 2; i++ {
		rep, err := r.ReadReply()
		if err != nil {
			return "", err
		}
		if rep.Kind == resp.Error {
			return "", fmt.Errorf("%s", rep.Str)
		}
		if i == 1 {
			return string(rep.Str), nil
		}
	}
	return "", nil
}
