package unreplicated

import (
	"errors"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

func op(kind, key string, args ...string) service.Op {
	o := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

func newCluster(t *testing.T, proto string, params map[string]string) *harness.Cluster {
	t.Helper()
	return harness.New(t, harness.Options{Protocol: proto, Nodes: 3, Params: params})
}

// do submits op at node, delivers every message, and returns the answer.
func do(t *testing.T, c *harness.Cluster, at automaton.NodeID, o service.Op) service.Result {
	t.Helper()
	id := c.Request(at, o, automaton.Options{})
	c.DeliverAll()
	res, ok := c.Response(id)
	if !ok {
		t.Fatalf("%v at %s: no answer", o, at)
	}
	return res
}

func server(c *harness.Cluster) *Unreplicated { return c.Node("n1").(*Unreplicated) }

func TestForwardersReachTheServersState(t *testing.T) {
	c := newCluster(t, Name, nil)
	if r := do(t, c, "n2", op("set", "k", "v1")); r.Type != service.ResultOK {
		t.Fatalf("set at n2: %v", r)
	}
	if r := do(t, c, "n3", op("get", "k")); string(r.Bytes) != "v1" {
		t.Fatalf("get at n3 after set at n2: %v, want \"v1\"", r)
	}
	if r := do(t, c, "n1", op("incr", "n", "1")); r.Int != 1 {
		t.Fatalf("incr at the server: %v", r)
	}
	for _, id := range []automaton.NodeID{"n2", "n3"} {
		if u := c.Node(id).(*Unreplicated); u.st != nil || len(c.Disk(id)) != 0 {
			t.Fatalf("forwarder %s holds state (%v) or records (%d)", id, u.st != nil, len(c.Disk(id)))
		}
	}
	if server(c).applied != 2 {
		t.Fatalf("server applied %d writes, want 2", server(c).applied)
	}
}

// A write's record precedes its answer in the step's outputs; a read
// persists nothing.
func TestWriteRecordPrecedesAnswer(t *testing.T) {
	c := newCluster(t, Name, nil)
	outs := c.Submit("n1", automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: op("set", "k", "v")})
	if len(outs) != 2 {
		t.Fatalf("outputs %v, want a Persist then a Respond", outs)
	}
	if p, ok := outs[0].(automaton.Persist); !ok || p.Key != writeKey(1) {
		t.Fatalf("first output %#v, want the Persist of %s", outs[0], writeKey(1))
	}
	if _, ok := outs[1].(automaton.Respond); !ok {
		t.Fatalf("second output %#v, want the Respond", outs[1])
	}
	outs = c.Submit("n1", automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 2}, Op: op("get", "k")})
	if len(outs) != 1 {
		t.Fatalf("a read emitted %v, want one Respond", outs)
	}
}

func TestBrokenVariantTripsPersistBeforeAnswer(t *testing.T) {
	var got string
	c := harness.New(t, harness.Options{Protocol: BrokenAnswerFirst, Nodes: 3,
		OnViolation: func(step int, node automaton.NodeID, err error) { got = err.Error() }})
	do(t, c, "n1", op("get", "k")) // reads are fine
	if got != "" {
		t.Fatalf("violation on a read: %s", got)
	}
	do(t, c, "n2", op("set", "k", "v"))
	if !strings.HasPrefix(got, "persist-before-answer") {
		t.Fatalf("violation %q, want persist-before-answer", got)
	}
}

// Recovery: the snapshot, then the write records after it, in order.
func TestRecoveryFromSnapshotAndRecords(t *testing.T) {
	c := newCluster(t, Name, map[string]string{"snapshot_every": "3"})
	for i, v := range []string{"a", "b", "c", "d", "e", "f", "g"} {
		do(t, c, automaton.NodeID([]string{"n1", "n2", "n3"}[i%3]), op("append", "k", v))
	}
	disk := c.Disk("n1")
	keys := make([]string, 0, len(disk))
	for k := range disk {
		keys = append(keys, k)
	}
	if len(disk) != 2 || disk[snapKey] == nil || disk[writeKey(7)] == nil {
		t.Fatalf("disk holds %v, want the snapshot (6 writes) and %s", keys, writeKey(7))
	}
	before := service.StateHash(server(c).st)
	c.Restart("n1")
	if u := server(c); u.applied != 7 || u.snapAt != 6 || u.restored != 7 {
		t.Fatalf("after restart: applied %d, snapshot at %d, restored %d; want 7, 6, 7", u.applied, u.snapAt, u.restored)
	}
	if service.StateHash(server(c).st) != before {
		t.Fatal("the restored state differs from the state before the crash")
	}
	if r := do(t, c, "n3", op("get", "k")); string(r.Bytes) != "abcdefg" {
		t.Fatalf("get after restart: %v, want \"abcdefg\"", r)
	}
	// The next write gets index 8 and the next snapshot comes at 9.
	do(t, c, "n2", op("append", "k", "h"))
	do(t, c, "n2", op("append", "k", "i"))
	if d := c.Disk("n1"); len(d) != 1 || d[snapKey] == nil {
		t.Fatalf("after 9 writes the disk holds %d records, want the snapshot alone", len(d))
	}
}

// A missing record ends recovery: later records were never answered (an
// answer waits for every earlier record), so they are dropped and deleted;
// records the snapshot covers are deleted too.
func TestRecoveryStopsAtTheFirstGap(t *testing.T) {
	c := newCluster(t, Name, map[string]string{"snapshot_every": "100"})
	for _, v := range []string{"a", "b", "c", "d"} {
		do(t, c, "n1", op("append", "k", v))
	}
	c.Crash("n1")
	c.SetRecord("n1", writeKey(3), nil)                                                  // lost
	c.SetRecord("n1", snapKey, marshalSnap(0, service.KV{}.NewState().Snapshot(), nil))  // empty snapshot at 0
	c.SetRecord("n1", writeKey(0x10), writeRecord{Op: op("append", "k", "x")}.marshal()) // stray, after the gap
	c.Restart("n1")
	u := server(c)
	if u.applied != 2 {
		t.Fatalf("recovered %d writes, want 2 (records 1 and 2, then the gap at 3)", u.applied)
	}
	d := c.Disk("n1")
	if d[writeKey(4)] != nil || d[writeKey(0x10)] != nil || d[writeKey(1)] == nil {
		t.Fatalf("records after the gap kept, or records before it deleted: %d records", len(d))
	}
	if r := do(t, c, "n2", op("get", "k")); string(r.Bytes) != "ab" {
		t.Fatalf("get after recovery: %v, want \"ab\"", r)
	}
	// A stale record below the snapshot is deleted.
	c.Crash("n1")
	c.SetRecord("n1", snapKey, marshalSnap(2, mustSnapshot(t, "k", "ab"), nil))
	c.Restart("n1")
	if d := c.Disk("n1"); d[writeKey(1)] != nil || d[writeKey(2)] != nil {
		t.Fatal("records covered by the snapshot were not deleted")
	}
	if r := do(t, c, "n2", op("get", "k")); string(r.Bytes) != "ab" {
		t.Fatalf("get after recovery from the snapshot: %v, want \"ab\"", r)
	}
}

func mustSnapshot(t *testing.T, key, val string) []byte {
	t.Helper()
	st := service.KV{}.NewState()
	st.Apply(op("set", key, val))
	return st.Snapshot()
}

// Matchmaker: the server applies with the request's Env, and recovery
// replays each write with its recorded Env, so the random choice of a
// machine survives a crash.
func TestNondeterministicServiceRecovers(t *testing.T) {
	if c, _ := automaton.CapabilitiesOf(Name); !c.Nondeterminism {
		t.Fatal("unreplicated must declare Nondeterminism")
	}
	if err := automaton.CheckService(Name, service.Matchmaker{}); err != nil {
		t.Fatalf("CheckService refuses the Matchmaker: %v", err)
	}
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 2, Service: service.Matchmaker{}})
	seq := uint64(0)
	run := func(at automaton.NodeID, o service.Op, env service.Env) service.Result {
		seq++
		id := automaton.RequestID{Client: 5, Seq: seq}
		c.Submit(at, automaton.Request{ID: id, Op: o, Env: env})
		c.DeliverAll()
		r, ok := c.Response(id)
		if !ok {
			t.Fatalf("%v: no answer", o)
		}
		return r
	}
	for _, m := range []string{"m1", "m2", "m3", "m4", "m5", "m6"} {
		run("n2", op("advertise", m, "4", "4", "4"), service.Env{})
	}
	var chosen []string
	for i, j := range []string{"j1", "j2", "j3"} {
		r := run("n2", op("submit", j, "1", "1", "1"), service.Env{Time: int64(i), Seed: uint64(1000 + 77*i)})
		if r.Type != service.ResultBytes {
			t.Fatalf("submit %s: %v", j, r)
		}
		chosen = append(chosen, string(r.Bytes))
	}
	before := service.StateHash(server(c).st)
	c.Restart("n1")
	if service.StateHash(server(c).st) != before {
		t.Fatal("recovery gave another state: the Env was not replayed")
	}
	for i, j := range []string{"j1", "j2", "j3"} {
		if r := run("n2", op("job", j), service.Env{}); string(r.Bytes) != chosen[i] {
			t.Fatalf("job %s after restart: %v, want %s", j, r, chosen[i])
		}
	}
}

func TestAtomicGroup(t *testing.T) {
	if sup := automaton.TransactionsOf(Name); !sup.Atomic || !sup.Interactive {
		t.Fatalf("declared %+v, want atomic groups and interactive transactions", sup)
	}
	c := newCluster(t, Name, nil)
	id := automaton.RequestID{Client: 3, Seq: 1}
	c.Submit("n3", automaton.Request{ID: id, Ops: []service.Op{op("set", "a", "1"), op("incr", "a", "1"), op("get", "a")}})
	c.DeliverAll()
	var resp automaton.Response
	for _, r := range c.AllResponses() {
		if r.Resp.ID == id {
			resp = r.Resp
		}
	}
	if resp.Result.Type != service.ResultOK || len(resp.Results) != 3 || resp.Results[1].Int != 2 || string(resp.Results[2].Bytes) != "2" {
		t.Fatalf("group answered %v %v", resp.Result, resp.Results)
	}
	if server(c).applied != 1 || len(c.Disk("n1")) != 1 {
		t.Fatalf("a group is one write record: applied %d, %d records", server(c).applied, len(c.Disk("n1")))
	}
	c.Restart("n1")
	if r := do(t, c, "n2", op("get", "a")); string(r.Bytes) != "2" {
		t.Fatalf("group not recovered: %v", r)
	}
	// An invalid operation refuses the whole group before anything applies.
	gid := automaton.RequestID{Client: 3, Seq: 2}
	c.Submit("n2", automaton.Request{ID: gid, Ops: []service.Op{op("set", "b", "1"), op("nosuch", "b")}})
	c.DeliverAll()
	if r, _ := c.Response(gid); !r.IsErr() || server(c).applied != 1 {
		t.Fatalf("invalid group: %v, applied %d", r, server(c).applied)
	}
}

// A lost read is retransmitted; a lost write is not (it could apply twice)
// and times out with TRYAGAIN.
func TestRetransmitReadsOnly(t *testing.T) {
	c := newCluster(t, Name, map[string]string{"retransmit": "10ms", "op_timeout": "30ms"})
	w := c.Request("n2", op("set", "k", "v"), automaton.Options{})
	r := c.Request("n2", op("get", "k"), automaton.Options{})
	if n := c.Drop(harness.Match("n2", "n1")); n != 2 {
		t.Fatalf("dropped %d forwards, want 2", n)
	}
	c.FireAll("n2") // 10ms: the read is sent again, the write is not
	q := c.Queue()
	if len(q) != 1 || !strings.Contains(server(c).DescribeMessage(q[0].Msg), "get") {
		t.Fatalf("after one retransmit interval, in flight: %d messages", len(q))
	}
	c.DeliverAll()
	if res, ok := c.Response(r); !ok || res.Type != service.ResultNil {
		t.Fatalf("retransmitted read: %v %v", res, ok)
	}
	c.FireAll("n2") // 20ms
	c.FireAll("n2") // 30ms: the write gives up
	res, ok := c.Response(w)
	if !ok || !strings.HasPrefix(res.Err, "TRYAGAIN") {
		t.Fatalf("lost write: %v %v, want TRYAGAIN", res, ok)
	}
	if server(c).applied != 0 || len(c.Timers("n2")) != 0 {
		t.Fatalf("applied %d, timers left %v", server(c).applied, c.Timers("n2"))
	}
}

// A duplicated Forward of a write is answered from the server's memory and
// applied once.
func TestDuplicateForwardAppliedOnce(t *testing.T) {
	c := newCluster(t, Name, nil)
	id := c.Request("n2", op("incr", "n", "1"), automaton.Options{})
	q := c.Queue()
	if len(q) != 1 {
		t.Fatalf("%d messages in flight, want the forward", len(q))
	}
	c.Step("n1", automaton.PeerMessage{From: "n2", Msg: q[0].Msg}) // the duplicate, first
	c.DeliverAll()
	if server(c).applied != 1 {
		t.Fatalf("applied %d times", server(c).applied)
	}
	if got := c.Responses(id); len(got) != 1 || got[0].Int != 1 {
		t.Fatalf("answers %v, want one (integer) 1", got)
	}
	// After the forwarder restarts, its new sequence numbers are not taken
	// for duplicates of its old ones.
	c.Restart("n2")
	if r := do(t, c, "n2", op("incr", "n", "1")); r.Int != 2 {
		t.Fatalf("incr after the forwarder's restart: %v, want 2", r)
	}
}

func TestServerDownGivesTryAgain(t *testing.T) {
	c := newCluster(t, Name, map[string]string{"op_timeout": "50ms"})
	c.Crash("n1")
	id := c.Request("n3", op("get", "k"), automaton.Options{})
	for i := 0; i < 5; i++ {
		c.FireAll("n3")
		c.DeliverAll()
	}
	if r, _ := c.Response(id); !strings.HasPrefix(r.Err, "TRYAGAIN") {
		t.Fatalf("with the server down: %v", r)
	}
}

func TestParams(t *testing.T) {
	p, err := automaton.Lookup(Name)
	if err != nil {
		t.Fatal(err)
	}
	cfg := automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: service.KV{}, Params: automaton.DefaultParams(Name)}
	if _, err := p.New(cfg); err != nil {
		t.Fatalf("the declared defaults are refused: %v", err)
	}
	for _, bad := range []map[string]string{{"nosuch": "1"}, {"snapshot_every": "0"}, {"retransmit": "-1s"}, {"op_timeout": "x"}} {
		cfg.Params = bad
		if _, err := p.New(cfg); err == nil {
			t.Errorf("params %v accepted", bad)
		}
	}
	cfg.Params, cfg.Self = nil, "n9"
	if _, err := p.New(cfg); err == nil {
		t.Error("a node outside the configuration accepted")
	}
}

func TestRegistration(t *testing.T) {
	if p, err := automaton.Lookup(Name); err != nil || p.IdempotentRetry() {
		t.Fatalf("lookup: %v, idempotent retry must be false", err)
	}
	if _, err := automaton.Lookup(BrokenAnswerFirst); err == nil {
		t.Fatal("the broken variant is offered as a real protocol")
	}
	if automaton.BrokenOf(BrokenAnswerFirst) != Name || len(automaton.ScenariosOf(BrokenAnswerFirst)) == 0 {
		t.Fatal("the broken variant is not registered with scenarios")
	}
	if _, names := automaton.NewInvariantChecker(Name); len(names) != 3 {
		t.Fatalf("invariants %v", names)
	}
}

func TestCodecRoundTrip(t *testing.T) {
	msgs := []message{
		{Kind: kindForward, Inc: 1 << 60, Seq: 7, Req: automaton.RequestID{Client: 3, Seq: 4}, Op: op("set", "k", "v"), Env: service.Env{Time: -5, Seed: 9}},
		{Kind: kindForward, Inc: 2, Seq: 8, Ops: []service.Op{op("get", "a"), op("del", "b")}},
		{Kind: kindReply, Inc: 2, Seq: 8, Result: service.OK(), Results: []service.Result{service.Nil(), service.Int(1)}},
		{Kind: kindReply, Inc: 2, Seq: 9, Result: service.Errorf("ERR x")},
	}
	for _, m := range msgs {
		got, err := unmarshal(m.marshal())
		if err != nil || got.marshal() == nil || string(got.marshal()) != string(m.marshal()) {
			t.Fatalf("round trip of %+v: %+v, %v", m, got, err)
		}
	}
	if _, err := unmarshal([]byte{header.Version, 99}); !errors.Is(err, proto.ErrUnknownType) {
		t.Fatal("unknown kind accepted")
	}
	if _, err := unmarshal(msgs[0].marshal()[:5]); err == nil {
		t.Fatal("truncated message accepted")
	}
	if i, ok := parseWriteKey(writeKey(0xabc)); !ok || i != 0xabc {
		t.Fatalf("write key round trip: %d %v", i, ok)
	}
}

// TestInteractions runs the golden interaction scripts under testdata
// (go test ./protocol/unreplicated -run Interactions -rewrite regenerates
// them).
func TestInteractions(t *testing.T) { harness.RunDataDriven(t, "testdata") }
