package node

import (
	"context"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// TestSubmitReplyBatch: an ABD batch handed over with SubmitReplyBatch
// calls done once per request, with that request's index and answer (the
// response's ID is reqs[i]'s), and same-key requests take effect in batch
// order (a GET after a SET of its key in the batch sees it). Fails when the
// waiter answers with another index (waiterSet.bi) or a request is
// answered twice or not at all. A protocol that does not step client
// batches (paxos) is refused: false, nothing handed over.
func TestSubmitReplyBatch(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
	cfg, ls := mkCluster(t, 3, config.Memory, ns)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{}))
	}
	c := nodes[0]
	do(t, c, "default", req("set", "a", "1"))
	rs := []automaton.Request{req("set", "b", "2"), req("get", "a"), req("get", "b"), req("set", "a", "3"), req("get", "a")}
	for i := range rs {
		rs[i].ID.Client = uint64(1000 + i) // one client id per request, as the gateway's lanes
	}
	want := []string{"OK", `"1"`, `"2"`, "OK", `"3"`}
	var mu sync.Mutex
	got := make([]int, len(rs))
	var wg sync.WaitGroup
	wg.Add(len(rs))
	ok := c.SubmitReplyBatch(context.Background(), "default", rs, false, func(i int, r automaton.Response, err error) {
		defer wg.Done()
		mu.Lock()
		got[i]++
		mu.Unlock()
		if err != nil {
			t.Errorf("request %d: %v", i, err)
			return
		}
		if r.ID != rs[i].ID {
			t.Errorf("request %d answered with %v's response", i, r.ID)
		}
		if s := r.Result.String(); s != want[i] {
			t.Errorf("request %d %v: %s, want %s", i, rs[i].Op, s, want[i])
		}
	})
	if !ok {
		t.Fatal("SubmitReplyBatch refused an ABD batch")
	}
	wg.Wait()
	for i, n := range got {
		if n != 1 {
			t.Errorf("request %d answered %d times", i, n)
		}
	}

	pns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"}
	pcfg, pls := mkCluster(t, 3, config.Memory, pns)
	p := startNode(t, pcfg, pcfg.Nodes[0].ID, pls[0], Options{})
	if p.SubmitReplyBatch(context.Background(), "default", []automaton.Request{req("set", "x", "1")}, false, func(int, automaton.Response, error) {
		t.Error("paxos: a callback ran")
	}) {
		t.Error("paxos: SubmitReplyBatch took a batch of a protocol without client batches")
	}
}
