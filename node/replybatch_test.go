package node

import (
	"context"
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
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

// TestSubmitReplyBatchOwned: SubmitReplyBatchOwned answers as
// SubmitReplyBatch does (each index once, with its own answer; a request
// admit refuses, an atomic group ABD does not run, answered at its own
// index while the others run), and the node keeps an owned request's
// arguments instead of copying them (admitArgs: the same bytes; without
// ownership a copy). Fails when admitArgs copies owned arguments or when a
// refusal before the batch's end shifts the others' indexes.
func TestSubmitReplyBatchOwned(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
	cfg, ls := mkCluster(t, 3, config.Memory, ns)
	c := startNodes(t, cfg, ls)["n1"]
	group := req("set", "g", "1")
	group.Ops = []service.Op{{Kind: "set", Key: "g", Args: [][]byte{[]byte("1")}}, {Kind: "get", Key: "g"}}
	rs := []automaton.Request{req("set", "b", "2"), group, req("get", "b"), req("set", "a", "3"), req("get", "a")}
	for i := range rs {
		rs[i].ID.Client = uint64(2000 + i)
	}
	var mu sync.Mutex
	got := make([]int, len(rs))
	answers := make([]string, len(rs))
	var wg sync.WaitGroup
	wg.Add(len(rs))
	ok := c.SubmitReplyBatchOwned(context.Background(), "default", rs, false, func(i int, r automaton.Response, err error) {
		defer wg.Done()
		mu.Lock()
		defer mu.Unlock()
		got[i]++
		if err != nil {
			t.Errorf("request %d: %v", i, err)
			return
		}
		if r.ID != rs[i].ID {
			t.Errorf("request %d answered with %v's response", i, r.ID)
		}
		answers[i] = r.Result.String()
	})
	if !ok {
		t.Fatal("SubmitReplyBatchOwned refused an ABD batch")
	}
	wg.Wait()
	for i, n := range got {
		if n != 1 {
			t.Errorf("request %d answered %d times", i, n)
		}
	}
	for i, want := range map[int]string{0: "OK", 2: `"2"`, 3: "OK", 4: `"3"`} {
		if answers[i] != want {
			t.Errorf("request %d %v: %s, want %s", i, rs[i].Op, answers[i], want)
		}
	}
	if !strings.HasPrefix(answers[1], "(error)") {
		t.Errorf("the atomic group: %s, want a refusal", answers[1])
	}

	l := c.loop("default")
	in := req("set", "k", "value")
	owned, _, ok := c.admitArgs(l, in, true, true)
	if !ok || &owned.Op.Args[0][0] != &in.Op.Args[0][0] {
		t.Errorf("owned arguments copied (admitted %v)", ok)
	}
	copied, _, ok := c.admitArgs(l, in, true, false)
	if !ok || &copied.Op.Args[0][0] == &in.Op.Args[0][0] || string(copied.Op.Args[0]) != "value" {
		t.Errorf("arguments not owned were not copied (admitted %v)", ok)
	}
}
