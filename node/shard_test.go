package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// A sharded paxos namespace on five nodes: s0 on n1-n3, s1 on n3-n5. Every
// node serves every key: its own groups' keys on their loops, the others'
// by forwarding; a group runs only on its nodes.
func TestShardedNamespace(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1", "n2", "n3"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n3", "n4", "n5"}},
	}}
	cfg, ls := mkCluster(t, 5, config.Memory, ns)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{}))
	}
	for i, n := range nodes {
		_, has0 := n.Counters("default#s0")
		_, has1 := n.Counters("default#s1")
		if has0 != (i <= 2) || has1 != (i >= 2) {
			t.Fatalf("n%d runs s0=%v s1=%v", i+1, has0, has1)
		}
	}
	// Keys of both groups, written at every node, read at every node.
	m := config.SlotMap(cfg.Namespaces[0])
	var keys []string
	seen := [2]int{}
	for i := 0; len(keys) < 20; i++ {
		k := fmt.Sprintf("key%d", i)
		g := m.Group(k)
		if seen[g] < 10 {
			seen[g]++
			keys = append(keys, k)
		}
	}
	for i, k := range keys {
		w := nodes[i%len(nodes)]
		if r := do(t, w, "default", req("set", k, "v-"+k)); r.Type != service.ResultOK {
			t.Fatalf("set %s at %s: %v", k, w.ID(), r)
		}
	}
	for _, n := range nodes {
		for _, k := range keys {
			if r := do(t, n, "default", req("get", k)); string(r.Bytes) != "v-"+k {
				t.Fatalf("get %s at %s = %v", k, n.ID(), r)
			}
		}
	}
	// Only a group's nodes persisted its writes: n1 holds no s1 loop, n4
	// no s0 loop, and n4's s1 loop persisted.
	if c, _ := nodes[3].Counters("default#s1"); c.Persists == 0 {
		t.Fatal("n4 persisted nothing for s1")
	}

	// An atomic group inside one hash tag runs; one across groups runs as
	// a cross-shard transaction (txn.go); one operation whose keys are in
	// two groups is refused with CROSSSLOT before anything applies.
	a, b := "{t}a", "{t}b"
	grp := req("set", "", "")
	grp.Ops = []service.Op{{Kind: "set", Key: a, Args: [][]byte{[]byte("1")}}, {Kind: "set", Key: b, Args: [][]byte{[]byte("2")}}}
	if r := do(t, nodes[0], "default", grp); r.Type == service.ResultErr {
		t.Fatalf("same-tag group: %v", r)
	}
	var k0, k1 string
	for _, k := range keys {
		if m.Group(k) == 0 && k0 == "" {
			k0 = k
		}
		if m.Group(k) == 1 && k1 == "" {
			k1 = k
		}
	}
	cross := req("set", "", "")
	cross.Ops = []service.Op{{Kind: "set", Key: k0, Args: [][]byte{[]byte("x")}}, {Kind: "set", Key: k1, Args: [][]byte{[]byte("x")}}}
	if r := do(t, nodes[0], "default", cross); r.Type == service.ResultErr {
		t.Fatalf("cross-shard group = %v", r)
	}
	for _, k := range []string{k0, k1} {
		if r := do(t, nodes[4], "default", req("get", k)); string(r.Bytes) != "x" {
			t.Fatalf("after the cross-shard group, %s = %v", k, r)
		}
	}
	// A multi-key operation across groups runs as a computed cross-shard
	// transaction (RENAME names two keys: service.Lockable).
	if r := do(t, nodes[1], "default", req("set", k0, "renamed")); r.Type != service.ResultOK {
		t.Fatal(r)
	}
	if r := do(t, nodes[1], "default", req("rename", k0, k1)); r.Type != service.ResultOK {
		t.Fatalf("cross-shard rename = %v", r)
	}
	if r := do(t, nodes[4], "default", req("get", k1)); string(r.Bytes) != "renamed" {
		t.Fatalf("after the rename, %s = %v", k1, r)
	}
	if r := do(t, nodes[4], "default", req("exists", k0)); r.Int != 0 {
		t.Fatalf("after the rename, %s exists: %v", k0, r)
	}
	// The whole keyspace: every node answers for every group (shardks.go).
	if a, b := do(t, nodes[1], "default", req("dbsize", "")), do(t, nodes[4], "default", req("dbsize", "")); a.Type != service.ResultInt || a.Int == 0 || a.Int != b.Int {
		t.Fatalf("dbsize on a sharded namespace at n2 = %v, at n5 = %v; want the same count", a, b)
	}

	// What the gateway asks: each slot's group and whether it is local.
	if local, addr := nodes[0].SlotLocal("default", shard.KeySlot(k1)); local || addr == "" {
		t.Fatalf("n1 says s1's slot is local=%v addr=%q", local, addr)
	}
	if local, _ := nodes[0].SlotLocal("default", shard.KeySlot(k0)); !local {
		t.Fatal("n1 says s0's slot is not local")
	}
	shards, ok := nodes[0].ClusterShards("default")
	if !ok || len(shards) != 2 || len(shards[1].Nodes) != 3 {
		t.Fatalf("ClusterShards = %+v", shards)
	}
	// n1 learned s1's leader from a forwarded answer.
	if !shards[1].LeaderKnown {
		t.Errorf("n1 does not know s1's leader after forwarding to it")
	}
	if l := shards[1].Nodes[0].ID; l != "n3" && l != "n4" && l != "n5" {
		t.Fatalf("s1's leader %s is not one of its nodes", l)
	}
}

// A request that reaches a group with a key of another group's slot (a
// node whose cluster file placed the slots differently forwarded it) is
// refused before the group's automaton sees it: no group accepts a write
// to a slot it does not own.
func TestShardRefusesUnownedSlot(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n1"}},
	}}
	cfg, ls := mkCluster(t, 1, config.Memory, ns)
	n := startNode(t, cfg, "n1", ls[0], Options{})
	m := config.SlotMap(cfg.Namespaces[0])
	var k1 string
	for i := 0; k1 == ""; i++ {
		if k := fmt.Sprintf("k%d", i); m.Group(k) == 1 {
			k1 = k
		}
	}
	r := do(t, n, "default#s0", req("set", k1, "x"))
	if want := fmt.Sprintf("MOVED %d", shard.KeySlot(k1)); !strings.HasPrefix(r.Err, want) {
		t.Fatalf("set %s on s0 = %v, want %s", k1, r, want)
	}
	if r := do(t, n, "default#s1", req("get", k1)); r.Type != service.ResultNil {
		t.Fatalf("the refused write reached s1: %v", r)
	}
	if r := do(t, n, "default#s1", req("set", k1, "y")); r.Type != service.ResultOK {
		t.Fatalf("set %s on its own group: %v", k1, r)
	}
}
