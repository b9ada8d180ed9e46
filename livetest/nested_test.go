package livetest

import (
	"context"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

// TestAdamCallsPBPaxos (issue 31 item 2): an adam namespace (the seed's
// trail program: SET k v appends "<old v>;" to trail:k at the callee and
// stores the APPEND's answer in trail-len:k) calling a pbpaxos namespace,
// on 3 node processes with fsync. Every replica of the adam namespace
// sends its own copy of each call; pbpaxos executes each once: the trail
// holds exactly one entry per SET, and trail-len:k equals the trail's
// length. Then kill -9 of one node, more SETs, and kill -9 of every node
// and a restart: every acknowledged SET's call is still in the trail, and
// no call was executed twice (no entry repeated).
func TestAdamCallsPBPaxos(t *testing.T) { testAdamCalls(t, "pbpaxos") }

// TestAdamCallsUnreplicated: the same with an unreplicated callee, whose
// one server is n1: killing n1 kills the callee too, and it is restarted
// while the SETs wait for their calls (the caller re-sends them, same id,
// until the server is back); its deduplication table is rebuilt from its
// records (protocol/unreplicated/nested.go).
func TestAdamCallsUnreplicated(t *testing.T) { testAdamCalls(t, "unreplicated") }

func testAdamCalls(t *testing.T, callee string) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "adam", Durability: config.Fsync,
		Extra: []config.Namespace{{Name: "remote", Protocol: callee, Service: "kv"}}})
	defer func() {
		if t.Failed() {
			logTails(t, c.Dir, 30)
		}
	}()
	ctx := context.Background()
	open := func(ns string) *client.Client {
		cl, err := client.New(c.ClientAddrs(), client.Options{Namespace: ns, Timeout: 5 * time.Second, PoolSize: 1})
		if err != nil {
			t.Fatal(err)
		}
		return cl
	}
	// set retries a SET until it is acknowledged (a retry after an unknown
	// outcome is a second SET of the same value: a second trail entry,
	// never a repeated one, since its old value is then that value).
	set := func(k, v string) {
		t.Helper()
		cl := open("")
		defer cl.Close()
		deadline := time.Now().Add(30 * time.Second)
		for {
			err := cl.Set(ctx, k, []byte(v))
			if err == nil {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("SET %s %s not acknowledged within 30 s: %v", k, v, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	get := func(ns, k string) string {
		t.Helper()
		cl := open(ns)
		defer cl.Close()
		deadline := time.Now().Add(30 * time.Second)
		for {
			v, _, err := cl.Get(ctx, k)
			if err == nil {
				return string(v)
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET %s at %q within 30 s: %v", k, ns, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
	const n = 6
	for i := 0; i < n; i++ {
		set("a", fmt.Sprintf("v%d", i))
	}
	// No faults: exactly one entry per SET, in order.
	want := ";"
	for i := 0; i < n-1; i++ {
		want += fmt.Sprintf("v%d;", i)
	}
	if got := get("remote", "trail:a"); got != want {
		t.Fatalf("trail:a at the %s callee = %q, want %q (one APPEND per SET)", callee, got, want)
	}
	if got := get("", "trail-len:a"); got != fmt.Sprint(len(want)) {
		t.Fatalf("trail-len:a = %q, want %d (the APPEND's answer)", got, len(want))
	}

	// kill -9 of one node, SETs on the others, its restart; then kill -9
	// of every node and a restart of all.
	if err := c.Kill("n1"); err != nil {
		t.Fatal(err)
	}
	restarted := make(chan error, 1)
	if callee == "unreplicated" { // n1 is the callee's server: bring it back while the SETs wait
		go func() {
			time.Sleep(time.Second)
			restarted <- restartRetrying(t, c, "n1")
		}()
	}
	for i := n; i < 2*n; i++ {
		set("a", fmt.Sprintf("v%d", i))
	}
	if callee != "unreplicated" {
		restarted <- restartRetrying(t, c, "n1")
	}
	if err := <-restarted; err != nil {
		t.Fatal(err)
	}
	onEveryNode(t, c, "kill -9", c.Kill)
	onEveryNode(t, c, "restart", func(id string) error { return restartRetrying(t, c, id) })
	set("a", fmt.Sprintf("v%d", 2*n))

	trail := get("remote", "trail:a")
	entries := strings.Split(strings.TrimSuffix(trail, ";"), ";")
	for i := 0; i < 2*n; i++ {
		if !strings.Contains(trail, fmt.Sprintf(";v%d;", i)) {
			t.Fatalf("trail:a = %q lacks the call of the acknowledged SET after v%d", trail, i)
		}
	}
	for i := 1; i < len(entries); i++ {
		if entries[i] == entries[i-1] {
			t.Fatalf("trail:a = %q: entry %q repeated (a call executed twice)", trail, entries[i])
		}
	}
	if got := get("", "a"); got != fmt.Sprintf("v%d", 2*n) {
		t.Fatalf("a = %q after the restart, want v%d", got, 2*n)
	}
	t.Logf("trail:a after kill -9 of n1 and of every node: %d entries for %d acknowledged SETs", len(entries), 2*n+1)
}
