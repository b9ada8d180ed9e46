package node

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// A client's session end in a sharded namespace reaches every group
// (shardsession.go): a client that wrote to both groups of a two-group
// paxos namespace, one group on each node, ends its session at n1 (s0
// there, s1 forwarded to n2); afterwards a new write under its id and a
// retry of its earlier write are refused, not executed, in both groups.
// Fails before session 51, when the session end was routed by its
// placeholder key to one group: in the other the row stayed, the retry
// was answered its first outcome and the new write executed.
func TestShardedSessionEndReachesEveryGroup(t *testing.T) {
	n1, m := twoGroups(t)
	var keys [2]string
	for i := 0; keys[0] == "" || keys[1] == ""; i++ {
		if k := fmt.Sprintf("k%d", i); keys[m.Group(k)] == "" {
			keys[m.Group(k)] = k
		}
	}
	const client = 0x5e55
	set := func(seq uint64, key, v string) automaton.Request {
		return automaton.Request{ID: automaton.RequestID{Client: client, Seq: seq}, Op: service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(v)}}, Unanswered: seq}
	}
	first := [2]automaton.Request{set(1, keys[0], "a"), set(2, keys[1], "b")}
	for _, r := range first {
		if res := do(t, n1, "default", r); res.Type != service.ResultOK {
			t.Fatalf("set %s: %v", r.Op.Key, res)
		}
	}
	end := automaton.Request{ID: automaton.RequestID{Client: client, Seq: 3}, Op: automaton.SessionEnd(), Checked: true}
	if res := do(t, n1, "default", end); res.Type != service.ResultOK {
		t.Fatalf("session end: %v", res)
	}
	ended := func(what string, res service.Result) {
		t.Helper()
		if res.Type != service.ResultErr || !strings.Contains(res.Err, "session ended") {
			t.Fatalf("%s after the session ended = %v, want refused (its client's session ended)", what, res)
		}
	}
	for g, k := range keys {
		ended(fmt.Sprintf("a new write to %s (group s%d)", k, g), do(t, n1, "default", set(uint64(4+g), k, "late")))
		ended(fmt.Sprintf("a retry of the write to %s (group s%d)", k, g), do(t, n1, "default", first[g]))
		want := string(first[g].Op.Args[0])
		if res := do(t, n1, "default", req("get", k)); string(res.Bytes) != want {
			t.Fatalf("get %s = %v, want %q: a refused write ran", k, res, want)
		}
	}
}

// A request forwarded to the group's node carries its client's bound
// (shard.go encodeRequest): 100 writes to a key of s1 (on n2) sent at n1,
// each telling its bound, leave one outcome in s1's row, so a retry of
// write 50 is refused, not answered; before session 52 the forward
// dropped the bound, the row kept the window of 64 (writes 37-100) and the
// retry got its first outcome.
func TestShardedForwardCarriesBound(t *testing.T) {
	n1, m := twoGroups(t)
	key := ""
	for i := 0; key == ""; i++ {
		if k := fmt.Sprintf("k%d", i); m.Group(k) == 1 {
			key = k
		}
	}
	set := func(seq uint64, v string) automaton.Request {
		return automaton.Request{ID: automaton.RequestID{Client: 0xb0d, Seq: seq}, Op: service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(v)}}, Unanswered: seq}
	}
	for s := uint64(1); s <= 100; s++ {
		if res := do(t, n1, "default", set(s, fmt.Sprint("v", s))); res.Type != service.ResultOK {
			t.Fatalf("write %d: %v", s, res)
		}
	}
	if res := do(t, n1, "default", set(50, "again")); res.Type != service.ResultErr || !strings.Contains(res.Err, "not executed") {
		t.Fatalf("a retry of write 50 through the forward = %v, want refused (its outcome forgotten: the group saw the bound)", res)
	}
	if res := do(t, n1, "default", set(100, "again")); res.Type != service.ResultOK {
		t.Fatalf("a retry of write 100 = %v, want its first outcome", res)
	}
	if res := do(t, n1, "default", req("get", key)); string(res.Bytes) != "v100" {
		t.Fatalf("get %s = %v, want v100", key, res)
	}
}

// twoGroups starts a two-group paxos namespace, s0 on n1 and s1 on n2, and
// returns n1 and the slot map.
func twoGroups(t *testing.T) (*Node, *shard.Map) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Shards: []config.Shard{
		{Name: "s0", Slots: "0-8191", Nodes: []string{"n1"}},
		{Name: "s1", Slots: "8192-16383", Nodes: []string{"n2"}},
	}}
	cfg, ls := mkCluster(t, 2, config.Memory, ns)
	n1 := startNode(t, cfg, "n1", ls[0], Options{})
	startNode(t, cfg, "n2", ls[1], Options{})
	return n1, config.SlotMap(cfg.Namespaces[0])
}
