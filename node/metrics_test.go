package node

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// startPaxos starts a cluster of size nodes serving namespace "default"
// with paxos on fast timers, in memory.
func startPaxos(t *testing.T, size int) []*Node {
	t.Helper()
	nsPaxos := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv",
		Params: map[string]string{"heartbeat": "10ms", "election_timeout": "100ms"}}
	cfg, ls := mkCluster(t, size, config.Memory, nsPaxos)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{}))
	}
	return nodes
}

// TestKeysMetric: every replica of a paxos namespace reports the keys its
// state holds (synod_keys), following writes and deletes.
func TestKeysMetric(t *testing.T) {
	nodes := startPaxos(t, 3)
	for _, k := range []string{"a", "b", "c"} {
		if r := do(t, nodes[0], "default", req("set", k, "v")); r.IsErr() {
			t.Fatalf("set %s: %v", k, r)
		}
	}
	keysAre := func(want float64) func() bool {
		return func() bool {
			for _, n := range nodes {
				if v, ok := metricValue(t, n, "synod_keys", "default", ""); !ok || v != want {
					return false
				}
			}
			return true
		}
	}
	eventually(t, "every replica reports 3 keys", keysAre(3))
	if r := do(t, nodes[1], "default", req("del", "a")); r.IsErr() {
		t.Fatalf("del: %v", r)
	}
	eventually(t, "every replica reports 2 keys after a delete", keysAre(2))
}

// TestErrorsMetric: the RESP server's error replies are exported by kind
// (synod_errors_total{kind}).
func TestErrorsMetric(t *testing.T) {
	n := startPaxos(t, 1)[0]
	nc, err := net.Dial("tcp", n.ClientAddr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(nc)
	for _, cmd := range []string{"NOPE\r\n", "SET s x\r\n", "LPUSH s y\r\n", "INCR s\r\n"} {
		nc.Write([]byte(cmd))
		if _, err := r.ReadString('\n'); err != nil {
			t.Fatal(err)
		}
	}
	mfs, err := n.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "synod_errors_total" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "kind" {
					got[l.GetValue()] = m.GetCounter().GetValue()
				}
			}
		}
	}
	if got["ERR"] != 2 || got["WRONGTYPE"] != 1 || len(got) != 2 {
		t.Errorf("synod_errors_total by kind: %v, want ERR 2, WRONGTYPE 1", got)
	}
}

// TestHandoffsCounted: one ABD put at a coordinator without direct
// passes counts at least the hand-offs its path cannot avoid then: the
// request to the loop, a quorum's reply in each of the two phases (the
// transport's reader to the loop) and the response to the caller; each
// replica counts the messages it was handed (eventually: the put needs
// only one of them). synod_handoffs_total
// exports the same count.
func TestHandoffsCounted(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
	cfg, ls := mkCluster(t, 3, config.Memory, ns)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{noDirect: true}))
	}
	do(t, nodes[0], "default", req("set", "warm", "x"))
	h0 := nodes[0].Handoffs()
	do(t, nodes[0], "default", req("set", "k", "v"))
	if d := nodes[0].Handoffs() - h0; d < 4 {
		t.Errorf("coordinator: %d hand-offs for one put, want at least 4 (request, a reply per phase, response)", d)
	}
	for _, n := range nodes[1:] { // a replica's messages may arrive after the quorum's answer
		eventually(t, "replica "+string(n.id)+" counts a hand-off", func() bool { return n.Handoffs() > 0 })
	}
	mfs, err := nodes[0].m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for _, mf := range mfs {
		if mf.GetName() == "synod_handoffs_total" {
			found = mf.GetMetric()[0].GetCounter().GetValue() >= float64(h0+4)
		}
	}
	if !found {
		t.Errorf("synod_handoffs_total missing or below the count")
	}
}

// TestDirectPass: puts one after another at an idle ABD coordinator are
// stepped on the caller's goroutine (Node.Do's direct pass) rather than
// handed to the loop goroutine, and a batch (DoBatch) keeps its order;
// each answer is what serial execution gives. Without direct passes
// (noDirect) none is.
func TestDirectPass(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
	for _, noDirect := range []bool{false, true} {
		cfg, ls := mkCluster(t, 3, config.Memory, ns)
		var nodes []*Node
		for i, n := range cfg.Nodes {
			nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{noDirect: noDirect}))
		}
		c := nodes[0]
		for i := 0; i < 20; i++ {
			v := fmt.Sprint(i)
			do(t, c, "default", req("set", "k", v))
			if got := do(t, c, "default", req("get", "k")); string(got.Bytes) != v {
				t.Fatalf("get after set %s: %v", v, got)
			}
		}
		rs := []automaton.Request{req("set", "b", "1"), req("get", "b"), req("set", "b", "2"), req("get", "b")}
		out, errs := c.DoBatch(context.Background(), "default", rs)
		for i, want := range []string{"OK", `"1"`, "OK", `"2"`} {
			if errs[i] != nil || out[i].Result.String() != want {
				t.Errorf("noDirect=%v: batch answer %d: %v %v, want %s", noDirect, i, out[i].Result, errs[i], want)
			}
		}
		d := c.loop("default").directs.Load()
		if noDirect && d != 0 {
			t.Errorf("noDirect: %d direct passes", d)
		}
		if !noDirect && d == 0 {
			t.Errorf("41 requests at an idle coordinator, none stepped in a direct pass")
		}
	}
}
