package paxos

import (
	"reflect"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

func incr(k, by string) service.Op {
	return service.Op{Kind: "incr", Key: k, Args: [][]byte{[]byte(by)}}
}

func group(client, seq uint64, ops ...service.Op) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: client, Seq: seq}, Ops: ops}
}

func resultStrings(rs []service.Result) []string {
	out := make([]string, len(rs))
	for i, r := range rs {
		out[i] = r.String()
	}
	return out
}

// An atomic group is one command in one instance, answered with one result
// per operation (through a forwarding follower too); a retry after a
// fail-over returns the first results without applying the group again; a
// read-only group takes the read path of a single read.
func TestAtomicGroup(t *testing.T) {
	c := newCluster(t, 3, "kv", map[string]string{"snapshot_every": "4"})
	c.elect("n1")
	before := c.node("n1").Status().MaxLog
	g := group(7, 1, set("a", "1"), incr("n", "5"), get("a"))
	r, ok := c.doReq("n2", g)
	want := []service.Result{service.OK(), service.Int(5), service.Bytes([]byte("1"))}
	if !ok || r.Result.Type != service.ResultOK || !reflect.DeepEqual(resultStrings(r.Results), resultStrings(want)) {
		t.Fatalf("group via a follower: %+v %v", r, ok)
	}
	if got := c.node("n1").Status().MaxLog - before; got != 1 {
		t.Fatalf("the group used %d instances, want 1", got)
	}
	// Fail-over, then a retry of the same group at another node.
	c.tickAll()
	c.Crash("n1")
	c.elect("n3")
	r, ok = c.doReq("n2", g)
	if !ok || !reflect.DeepEqual(resultStrings(r.Results), resultStrings(want)) {
		t.Fatalf("retried group: %+v %v (want the first results)", r, ok)
	}
	if r, _ := c.do("n3", automaton.RequestID{Client: 8, Seq: 1}, get("n"), automaton.ReadLog); string(r.Bytes) != "5" {
		t.Fatalf("n = %v after the retry: applied twice?", r)
	}
	// Read-only groups: quorum (no instance), log (one), local.
	for _, tc := range []struct {
		mode      automaton.ReadMode
		instances uint64
	}{{automaton.ReadQuorum, 0}, {automaton.ReadLog, 1}, {automaton.ReadLocal, 0}} {
		before := c.node("n3").Status().MaxLog
		rg := group(9, uint64(tc.mode)+1, get("a"), get("n"))
		rg.Opts.Read = tc.mode
		r, ok := c.doReq("n2", rg)
		if !ok || len(r.Results) != 2 || string(r.Results[0].Bytes) != "1" || string(r.Results[1].Bytes) != "5" {
			t.Fatalf("read group (%v): %+v %v", tc.mode, r, ok)
		}
		if got := c.node("n3").Status().MaxLog - before; got != tc.instances {
			t.Errorf("read group (%v) used %d instances, want %d", tc.mode, got, tc.instances)
		}
	}
	// A group with an invalid operation, or a membership change, is refused
	// whole.
	for i, bad := range []automaton.Request{
		group(10, 1, set("b", "1"), service.Op{Kind: "bogus"}),
		group(10, 2, set("b", "1"), service.Op{Kind: automaton.MemberOpKind, Key: "remove", Args: [][]byte{[]byte("n1")}}),
	} {
		if r, ok := c.doReq("n2", bad); !ok || !r.Result.IsErr() || r.Results != nil {
			t.Fatalf("bad group %d: %+v %v", i, r, ok)
		}
	}
	if r, _ := c.do("n3", automaton.RequestID{Client: 8, Seq: 2}, get("b"), automaton.ReadLog); r.Type != service.ResultNil {
		t.Fatalf("a refused group was applied: b = %v", r)
	}
}

// The dedup table keeps a group's results through a snapshot (version 2);
// a table without groups is written as version 1, as before groups existed.
func TestGroupResultsInSnapshot(t *testing.T) {
	m := newMachine(service.KV{}, 10, bootstrapConf([]automaton.NodeID{"n1"}))
	m.apply(cmd{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: set("k", "v")}, 1)
	if v := m.snapshot(1)[0]; v != snapVersion1 {
		t.Fatalf("snapshot without groups has version %d", v)
	}
	g := cmd{ID: automaton.RequestID{Client: 2, Seq: 1}, Ops: []service.Op{incr("n", "2"), get("k")}}
	first, _ := m.apply(g, 2)
	snap := m.snapshot(2)
	if snap[0] != snapVersion2 {
		t.Fatalf("snapshot with a group has version %d", snap[0])
	}
	if i, err := snapshotIndex(snap); err != nil || i != 2 {
		t.Fatalf("snapshotIndex: %d %v", i, err)
	}
	m2 := newMachine(service.KV{}, 10, bootstrapConf([]automaton.NodeID{"n1"}))
	if _, err := m2.restore(snap); err != nil {
		t.Fatal(err)
	}
	again, _ := m2.apply(g, 3)
	if !reflect.DeepEqual(resultStrings(again.results), resultStrings(first.results)) || again.results[0].Int != 2 {
		t.Fatalf("group after restore: %v, first %v", again, first)
	}
	if string(m2.snapshot(3)) != string(m.snapshot(3)) {
		t.Fatal("restored table re-encodes differently")
	}
}

// Forward carries a group and an environment, ForwardReply a group's
// results; a plain request is encoded as before (no trailer). Batches with
// groups, environments or parts round-trip; a plain batch is version 1.
func TestGroupCodecs(t *testing.T) {
	fw := &message{Kind: kindForward, Req: automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 2},
		Ops: []service.Op{set("a", "1"), get("a")}, Env: service.Env{Time: -3, Seed: 4}, Opts: automaton.Options{Read: automaton.ReadLog}}}
	m, err := unmarshal(fw.marshal())
	if err != nil || !reflect.DeepEqual(m.Req, fw.Req) {
		t.Fatalf("forward: %+v %v", m, err)
	}
	plain := &message{Kind: kindForward, Req: automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 2}, Op: set("a", "1")}}
	b := plain.marshal()
	if m, err := unmarshal(b); err != nil || m.Req.Ops != nil || m.Req.Env != (service.Env{}) {
		t.Fatalf("plain forward: %+v %v", m, err)
	}
	old := wire.Encoder{}
	old.Byte(msgVersion)
	old.Byte(kindForward)
	old.Uvarint(1)
	old.Uvarint(2)
	old.Byte(0)
	service.EncodeOp(&old, set("a", "1"))
	if string(b) != string(old.B) {
		t.Fatalf("a plain forward is not encoded as before: %x, want %x", b, old.B)
	}
	fr := &message{Kind: kindForwardReply, Result: service.OK(), Results: []service.Result{service.Int(1), service.Nil()}}
	if m, err := unmarshal(fr.marshal()); err != nil || !reflect.DeepEqual(resultStrings(m.Results), resultStrings(fr.Results)) {
		t.Fatalf("forward reply: %+v %v", m, err)
	}
	cmds := []cmd{
		{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: set("a", "1")},
		{ID: automaton.RequestID{Client: 2, Seq: 1}, Ops: []service.Op{set("a", "1"), get("a")}, Env: service.Env{Time: 1, Seed: 2}},
		{ID: automaton.RequestID{Client: 3, Seq: 1}, Op: get("a"), part: 1, parts: 2},
	}
	v := encodeBatch(cmds)
	if v[0] != batchVersion3 {
		t.Fatalf("batch version %d", v[0])
	}
	got, err := decodeBatch(v)
	if err != nil || !reflect.DeepEqual(got, cmds) {
		t.Fatalf("batch: %+v %v", got, err)
	}
	if v := encodeBatch(cmds[:1]); v[0] != msgVersion {
		t.Fatalf("plain batch version %d", v[0])
	}
}

// paxos-broken-splitgroup orders a group's operations as separate commands:
// two groups in one batch interleave and observably half-apply (A's read
// sees B's write between A's write and read). The real protocol executes
// each group whole.
func TestSplitGroupHalfApplies(t *testing.T) {
	for _, p := range []protocol{{Capabilities: capabilities("paxos", "")}, {splitGroups: true, Capabilities: capabilities("paxos-broken-splitgroup", "")}} {
		c := newClusterOf(t, p.Protocol, 3, "kv", map[string]string{"window": "1"})
		c.elect("n1")
		// A filler fills the window, so A and B wait and go out in one batch.
		c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: set("y", "0")}})
		a, b := group(2, 1, set("x", "A"), get("x")), group(3, 1, set("x", "B"), get("x"))
		c.Step("n1", automaton.ClientRequest{Req: a})
		c.Step("n1", automaton.ClientRequest{Req: b})
		c.DeliverAll()
		ra, _ := c.LastResponse(a.ID)
		rb, _ := c.LastResponse(b.ID)
		if len(ra.Results) != 2 || len(rb.Results) != 2 {
			t.Fatalf("%s: answers %+v %+v", p.Protocol, ra, rb)
		}
		halfA := string(ra.Results[1].Bytes) != "A"
		halfB := string(rb.Results[1].Bytes) != "B"
		if p.splitGroups && !(halfA || halfB) {
			t.Errorf("%s: no group half-applied: %v %v", p.Protocol, resultStrings(ra.Results), resultStrings(rb.Results))
		}
		if !p.splitGroups && (halfA || halfB) {
			t.Errorf("%s: a group half-applied: %v %v", p.Protocol, resultStrings(ra.Results), resultStrings(rb.Results))
		}
	}
}
