package abd

import (
	"bytes"
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

func newNet(t *testing.T, proto string, n int) *harness.Cluster {
	t.Helper()
	return harness.New(t, harness.Options{Protocol: proto, Nodes: n})
}

// do submits op at node at, delivers every message, and returns the answer.
func do(c *harness.Cluster, at automaton.NodeID, op service.Op, mode automaton.ReadMode) (automaton.RequestID, service.Result, bool) {
	id := c.Request(at, op, automaton.Options{Read: mode})
	c.DeliverAll()
	r, ok := c.Response(id)
	return id, r, ok
}

func abd(c *harness.Cluster, id automaton.NodeID) *ABD { return c.Node(id).(*ABD) }

// cut loses every message to or from one of the nodes.
func cut(ids ...automaton.NodeID) func(harness.Message) bool {
	return func(m harness.Message) bool {
		for _, id := range ids {
			if m.From == id || m.To == id {
				return true
			}
		}
		return false
	}
}

// storesFrom loses the Store messages from one node.
func storesFrom(from automaton.NodeID) func(harness.Message) bool {
	return func(m harness.Message) bool {
		mm, err := unmarshal(m.Msg)
		return m.From == from && err == nil && mm.Kind == kindStore
	}
}

func set(k, v string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}} }
func get(k string) service.Op    { return service.Op{Kind: "get", Key: k} }

func mustResult(t *testing.T, r service.Result, ok bool, want service.Result) {
	t.Helper()
	if !ok {
		t.Fatalf("no response; want %v", want)
	}
	if !r.Equal(want) {
		t.Fatalf("got %v, want %v", r, want)
	}
}

func TestSingleNodeSetGetDel(t *testing.T) {
	nw := newNet(t, "abd", 1)
	_, r, ok := do(nw, "n1", get("a"), 0)
	mustResult(t, r, ok, service.Nil())
	_, r, ok = do(nw, "n1", set("a", "1"), 0)
	mustResult(t, r, ok, service.OK())
	_, r, ok = do(nw, "n1", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("1")))
	_, r, ok = do(nw, "n1", service.Op{Kind: "exists", Key: "a"}, 0)
	mustResult(t, r, ok, service.Int(1))
	_, r, ok = do(nw, "n1", service.Op{Kind: "del", Key: "a"}, 0)
	mustResult(t, r, ok, service.Int(1))
	_, r, ok = do(nw, "n1", get("a"), 0)
	mustResult(t, r, ok, service.Nil())
	_, r, ok = do(nw, "n1", service.Op{Kind: "del", Key: "a"}, 0)
	mustResult(t, r, ok, service.Int(0))
}

func TestPersistPrecedesAcknowledgement(t *testing.T) {
	nw := newNet(t, "abd", 1)
	nw.ResetTrace()
	do(nw, "n1", set("a", "1"), 0)
	p, r := -1, -1
	for i, s := range nw.Trace() {
		if strings.HasPrefix(s, "  persist k/") && p < 0 {
			p = i
		}
		if strings.HasPrefix(s, "  respond ") {
			r = i
		}
	}
	if p < 0 || r < 0 || p > r {
		t.Fatalf("trace %q: the register must be persisted before the write is answered", nw.Trace())
	}
	// A replica receiving a Store persists before it sends the acknowledgement.
	nw3 := newNet(t, "abd", 3)
	outs := nw3.Step("n2", automaton.PeerMessage{From: "n1", Msg: (&message{Kind: kindStore, Op: 9, Key: "k", Tag: Tag{TS: 1, Node: "n1", Seq: 9}, Value: []byte("v")}).marshal()})
	if len(outs) != 2 {
		t.Fatalf("outputs %v, want persist then send", outs)
	}
	if _, ok := outs[0].(automaton.Persist); !ok {
		t.Fatalf("first output %T, want Persist", outs[0])
	}
	if _, ok := outs[1].(automaton.Send); !ok {
		t.Fatalf("second output %T, want Send", outs[1])
	}
}

func TestMajorityToleratesOneDownNode(t *testing.T) {
	nw := newNet(t, "abd", 3)
	nw.SetLoss(cut("n3"))
	_, r, ok := doRetrying(nw, "n1", set("a", "x"))
	mustResult(t, r, ok, service.OK())
	_, r, ok = doRetrying(nw, "n2", get("a"))
	mustResult(t, r, ok, service.Bytes([]byte("x")))
	// With two of three down, no quorum: no answer, however often the
	// coordinator retransmits.
	nw.SetLoss(func(harness.Message) bool { return true })
	_, _, ok = doRetrying(nw, "n1", set("a", "y"))
	if ok {
		t.Fatal("a write completed without a majority")
	}
}

// doRetrying is do, firing every node's timers (the coordinator's
// retransmission) and delivering again while op has no answer, three
// times at most.
func doRetrying(c *harness.Cluster, at automaton.NodeID, op service.Op) (automaton.RequestID, service.Result, bool) {
	id, r, ok := do(c, at, op, 0)
	for i := 0; i < 3 && !ok; i++ {
		c.FireAllNodes()
		c.DeliverAll()
		r, ok = c.Response(id)
	}
	return id, r, ok
}

func TestReadWritesBackUnlessMajorityHoldsTag(t *testing.T) {
	nw := newNet(t, "abd", 3)
	// The write's store reaches only n1 (the coordinator): n2 and n3 never see it.
	nw.SetLoss(storesFrom("n1"))
	do(nw, "n1", set("a", "new"), 0)
	nw.Heal()
	if got := abd(nw, "n2").entry("a"); got.present() {
		t.Fatal("setup: n2 should not have the value")
	}
	// A read at n2 hears n1 (new) and n2 (nothing): it must write back "new" so
	// that a later read by a majority not containing n1 still returns it.
	nw.SetLoss(cut("n3"))
	_, r, ok := do(nw, "n2", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("new")))
	if !abd(nw, "n2").entry("a").present() {
		t.Fatal("read did not write back to its own replica")
	}
	// Now n1 is gone; a read through n3 with n2 must still see "new".
	nw.SetLoss(cut("n1"))
	_, r, ok = do(nw, "n3", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("new")))

	// When a majority already holds the highest tag, the read answers after one
	// round trip: no Store is sent.
	nw.Heal()
	do(nw, "n1", set("b", "v"), 0)
	nw.Drop(nil)
	sent := 0
	nw.Observe(func(_ automaton.NodeID, o automaton.Output) {
		if s, ok := o.(automaton.Send); ok {
			if m, _ := unmarshal(s.Msg); m.Kind == kindStore {
				sent++
			}
		}
	})
	_, r, ok = do(nw, "n2", get("b"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("v")))
	if sent != 0 {
		t.Fatalf("read sent %d stores although a majority held the tag", sent)
	}
}

func TestRegularReadSkipsWriteBack(t *testing.T) {
	nw := newNet(t, "abd", 3)
	nw.SetLoss(storesFrom("n1"))
	do(nw, "n1", set("a", "new"), 0)
	nw.SetLoss(cut("n3"))
	_, r, ok := do(nw, "n2", get("a"), automaton.ReadRegular)
	mustResult(t, r, ok, service.Bytes([]byte("new")))
	if abd(nw, "n2").entry("a").present() {
		t.Fatal("a regular read wrote back")
	}
	// A local read answers from the contacted replica alone: stale here.
	_, r, ok = do(nw, "n3", get("a"), automaton.ReadLocal)
	mustResult(t, r, ok, service.Nil())
}

func TestRestartRestoresRegistersAndNewIncarnation(t *testing.T) {
	nw := newNet(t, "abd", 3)
	do(nw, "n1", set("a", "1"), 0)
	inc := abd(nw, "n1").incarnation
	for _, id := range nw.IDs() {
		nw.Restart(id) // crash and restart every node from its disk
	}
	if got := abd(nw, "n1").incarnation; got != inc+1 {
		t.Fatalf("incarnation after restart %d, want %d", got, inc+1)
	}
	_, r, ok := do(nw, "n2", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("1")))
	// A write after restart gets a higher tag than the one before.
	do(nw, "n1", set("a", "2"), 0)
	_, r, ok = do(nw, "n3", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("2")))
}

func TestConcurrentWritersOrderedByWriterID(t *testing.T) {
	// Two coordinators pick the same timestamp; replicas must agree on one
	// winner because tags break ties by writer. The broken variant also
	// trips the store-held invariant on the way.
	for _, tc := range []struct {
		proto   string
		diverge bool
	}{{"abd", false}, {"abd-broken-nowriterid", true}} {
		var violation error
		nw := harness.New(t, harness.Options{Protocol: tc.proto, Nodes: 3,
			OnViolation: func(_ int, _ automaton.NodeID, err error) { violation = err }})
		// Run both query phases first, then deliver stores in opposite orders.
		nw.Submit("n1", automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: set("k", "from-n1")})
		nw.Submit("n3", automaton.Request{ID: automaton.RequestID{Client: 2, Seq: 1}, Op: set("k", "from-n3")})
		nw.DeliverAll()
		v1 := string(abd(nw, "n1").entry("k").Value)
		v3 := string(abd(nw, "n3").entry("k").Value)
		v2 := string(abd(nw, "n2").entry("k").Value)
		diverged := v1 != v2 || v2 != v3
		if diverged != tc.diverge {
			t.Fatalf("%s: replicas hold %q %q %q; diverged=%v, want %v", tc.proto, v1, v2, v3, diverged, tc.diverge)
		}
		if (violation != nil) != tc.diverge || (violation != nil && !strings.HasPrefix(violation.Error(), "store-held")) {
			t.Fatalf("%s: invariant violation %v, want one (store-held) only when replicas diverge", tc.proto, violation)
		}
	}
}

func TestRetransmitAndTimeout(t *testing.T) {
	nw := newNet(t, "abd", 3)
	nw.SetLoss(func(harness.Message) bool { return true })
	id := automaton.RequestID{Client: 3, Seq: 1}
	nw.Submit("n1", automaton.Request{ID: id, Op: set("a", "1")})
	nw.DeliverAll()
	timers := nw.Timers("n1")
	if len(timers) != 1 {
		t.Fatalf("want one retransmit timer, have %v", timers)
	}
	if d, _ := nw.TimerAfter("n1", timers[0]); d != DefaultRetransmit {
		t.Fatalf("retransmit timer set for %v, want %v", d, DefaultRetransmit)
	}
	// The network heals: the next retransmission completes the write.
	nw.Heal()
	nw.FireTimer("n1", timers[0])
	nw.DeliverAll()
	r, ok := nw.Response(id)
	mustResult(t, r, ok, service.OK())
	if len(nw.Timers("n1")) != 0 {
		t.Fatal("timer not cancelled after completion")
	}
	// With no network at all, the request fails after op_timeout.
	nw.SetLoss(func(harness.Message) bool { return true })
	id2 := automaton.RequestID{Client: 3, Seq: 2}
	nw.Submit("n1", automaton.Request{ID: id2, Op: get("a")})
	for i := 0; i < int(DefaultOpTimeout/DefaultRetransmit)+1 && len(nw.Timers("n1")) > 0; i++ {
		nw.FireAll("n1")
		nw.DeliverAll()
	}
	r, ok = nw.Response(id2)
	if !ok || !r.IsErr() || !strings.HasPrefix(r.Err, "TRYAGAIN") {
		t.Fatalf("got %v %v, want a TRYAGAIN error", r, ok)
	}
}

func TestDuplicateRequestAnsweredOnce(t *testing.T) {
	nw := newNet(t, "abd", 3)
	id := automaton.RequestID{Client: 5, Seq: 1}
	req := automaton.Request{ID: id, Op: set("a", "1")}
	nw.Submit("n1", req)
	nw.Submit("n1", req) // retry while in flight: joins
	nw.DeliverAll()
	if n := len(nw.Responses(id)); n != 1 {
		t.Fatalf("%d answers to a request retried while in flight, want 1", n)
	}
	tag := abd(nw, "n1").entry("a").Tag
	nw.ForgetResponses(id)
	nw.Submit("n1", req) // retry after completion: remembered answer, no new write
	nw.DeliverAll()
	r, ok := nw.Response(id)
	mustResult(t, r, ok, service.OK())
	if got := abd(nw, "n1").entry("a").Tag; got != tag {
		t.Fatalf("retry wrote again: tag %v -> %v", tag, got)
	}
}

// Atomic groups and interactive transactions are refused before anything
// is applied.
func TestRefusesGroupsAndTransactions(t *testing.T) {
	nw := newNet(t, "abd", 3)
	group := automaton.Request{ID: automaton.RequestID{Client: 4, Seq: 1}, Ops: []service.Op{set("a", "1"), set("b", "2")}}
	if outs := nw.Submit("n1", group); len(outs) != 1 {
		t.Fatalf("a refused group produced %v, want only the answer", outs)
	}
	if r, _ := nw.Response(group.ID); !r.IsErr() || r.Err != fmt.Sprintf(automaton.ErrNoAtomic, "abd") {
		t.Fatalf("atomic group answered %v", r)
	}
	txn := automaton.Request{ID: automaton.RequestID{Client: 4, Seq: 2}, Op: set("a", "1"),
		Txn: &automaton.TxnStep{Txn: automaton.RequestID{Client: 4, Seq: 2}, Action: automaton.TxnBegin}}
	nw.Submit("n1", txn)
	if r, _ := nw.Response(txn.ID); !r.IsErr() || r.Err != fmt.Sprintf(automaton.ErrNoInteractive, "abd") {
		t.Fatalf("transaction step answered %v", r)
	}
	if nw.Pending() != 0 || abd(nw, "n1").entry("a").present() {
		t.Fatal("a refused request reached the replicas")
	}
}

func TestRefusesReadModifyWrite(t *testing.T) {
	nw := newNet(t, "abd", 1)
	for _, op := range []service.Op{
		{Kind: "incr", Key: "a", Args: [][]byte{[]byte("1")}},
		{Kind: "append", Key: "a", Args: [][]byte{[]byte("x")}},
		{Kind: "set", Key: "a", Args: [][]byte{[]byte("x"), []byte("nx")}},
	} {
		_, r, ok := do(nw, "n1", op, 0)
		if !ok || !r.IsErr() || !strings.Contains(r.Err, "consensus") {
			t.Fatalf("%v: got %v, want an error pointing to a consensus protocol", op, r)
		}
	}
}

func TestBadConfig(t *testing.T) {
	p, _ := automaton.Lookup("abd")
	base := automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: service.KV{}, Rand: rand.New(rand.NewSource(1))}
	c := base
	c.Service = service.Counter{}
	if _, err := p.New(c); err == nil {
		t.Fatal("abd accepted a counter service")
	}
	c = base
	c.Self = "n9"
	if _, err := p.New(c); err == nil {
		t.Fatal("abd accepted a self outside the membership")
	}
	c = base
	c.Params = map[string]string{"retransmit": "fast"}
	if _, err := p.New(c); err == nil || !strings.Contains(err.Error(), "retransmit") {
		t.Fatalf("bad parameter error %v does not name the parameter", err)
	}
	c.Params = map[string]string{"bogus": "1s"}
	if _, err := p.New(c); err == nil {
		t.Fatal("unknown parameter accepted")
	}
}

func TestGarbageMessagesIgnored(t *testing.T) {
	nw := newNet(t, "abd", 3)
	for _, b := range [][]byte{nil, {1}, {9, 9, 9}, {1, 3, 200}, []byte("hello world")} {
		if outs := nw.Step("n1", automaton.PeerMessage{From: "n2", Msg: b}); len(outs) != 0 {
			t.Fatalf("garbage %q produced outputs %v", b, outs)
		}
	}
	// From a non-member: ignored even if well-formed.
	good := (&message{Kind: kindQuery, Op: 1, Key: "a"}).marshal()
	if outs := nw.Node("n1").Step(automaton.PeerMessage{From: "x", Msg: good}); len(outs) != 0 {
		t.Fatalf("message from a stranger answered: %v", outs)
	}
}

func FuzzUnmarshal(f *testing.F) {
	f.Add((&message{Kind: kindStore, Op: 3, Key: "k", Tag: Tag{1, "n1", 2}, Value: []byte("v")}).marshal())
	f.Add((&message{Kind: kindQuery, Op: 3, Key: "k"}).marshal())
	f.Add([]byte{1, 2, 0xff, 0xff, 0xff, 0xff, 0xff, 0x7f})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := unmarshal(b)
		if err != nil {
			return
		}
		// A message that decodes re-encodes to something that decodes equal.
		m2, err := unmarshal(m.marshal())
		if err != nil || m2.Kind != m.Kind || m2.Key != m.Key || m2.Tag != m.Tag || string(m2.Value) != string(m.Value) {
			t.Fatalf("round trip changed %+v into %+v (%v)", m, m2, err)
		}
	})
}

// The interaction scripts under testdata (go test -rewrite regenerates them).
func TestInteractions(t *testing.T) { harness.RunDataDriven(t, "testdata") }

// The real protocol is registered as such, the broken variants apart with a
// description, and the default parameters are those New uses.
func TestRegistration(t *testing.T) {
	for _, name := range []string{"abd-broken-nowriteback", "abd-broken-nowriterid"} {
		if _, err := automaton.Lookup(name); err == nil {
			t.Errorf("%s found among the real protocols", name)
		}
		c, err := automaton.CapabilitiesOf(name)
		if err != nil || automaton.BrokenOf(name) != "abd" {
			t.Fatalf("%s: %v, breaks %q", name, err, automaton.BrokenOf(name))
		}
		if c.Doc == "" {
			t.Errorf("%s has no description", name)
		}
	}
	p, err := automaton.Lookup("abd")
	if err != nil {
		t.Fatal(err)
	}
	params := automaton.DefaultParams("abd")
	if len(params) != 6 {
		t.Fatalf("default params %v, want retransmit, op_timeout, window, gather, peer_pipeline and thrifty", params)
	}
	a, err := p.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: service.KV{}, Params: params, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		t.Fatalf("the default params are refused: %v", err)
	}
	if x := a.(*ABD); x.retransmit != DefaultRetransmit || x.opTimeout != DefaultOpTimeout {
		t.Fatalf("default params give retransmit %v op_timeout %v", x.retransmit, x.opTimeout)
	}
	if _, names := automaton.NewInvariantChecker("abd"); len(names) < 2 {
		t.Fatalf("invariants %v", names)
	}
	if automaton.TransactionsOf("abd") != (automaton.TxnSupport{}) {
		t.Fatal("abd claims transaction support")
	}
}

// The invariants catch a replica whose tag goes down, in memory or across a
// restart, and a completed write that a majority does not hold.
func TestInvariantsCatchTamperedState(t *testing.T) {
	var got []string
	record := harness.Options{Protocol: "abd", Nodes: 3,
		OnViolation: func(_ int, _ automaton.NodeID, err error) { got = append(got, err.Error()) }}
	c := harness.New(t, record)
	do(c, "n1", set("a", "1"), 0)
	do(c, "n1", set("a", "2"), 0)
	// n2's register is rolled back to nothing in memory; a Store of the first
	// write (lower than what n2 held) is then installed.
	delete(abd(c, "n2").store, "a")
	c.Step("n2", automaton.PeerMessage{From: "n1", Msg: (&message{Kind: kindStore, Op: 1, Key: "a", Tag: Tag{TS: 1, Node: "n1", Seq: 1}, Value: []byte("1")}).marshal()})
	if len(got) != 1 || !strings.HasPrefix(got[0], "tag-monotonic") {
		t.Fatalf("violations %q, want tag-monotonic", got)
	}

	// Across restarts: a restart from a disk that lost a register trips
	// it; a wiped disk (a fresh start) does not.
	got = nil
	c = harness.New(t, record)
	do(c, "n1", set("a", "1"), 0)
	c.Restart("n2")
	c.Restart("n3")
	c.Wipe("n3")
	c.Restart("n3")
	if len(got) != 0 {
		t.Fatalf("violations %q after a restart and a fresh start", got)
	}
	c.SetRecord("n2", "k/a", nil)
	c.Restart("n2")
	if len(got) != 1 || !strings.HasPrefix(got[0], "tag-monotonic") || !strings.Contains(got[0], "restarted") {
		t.Fatalf("violations %q, want tag-monotonic at the restart", got)
	}

	// A write that completes while only its coordinator holds the tag.
	got = nil
	c = harness.New(t, record)
	c.SetLoss(storesFrom("n1"))
	id := c.Request("n1", set("a", "1"), automaton.Options{})
	c.DeliverAll()
	for _, n := range []automaton.NodeID{"n2", "n3"} { // acknowledge without storing
		c.Step("n1", automaton.PeerMessage{From: n, Msg: (&message{Kind: kindStoreAck, Op: abd(c, "n1").reqs[id].op}).marshal()})
	}
	if len(got) != 1 || !strings.HasPrefix(got[0], "majority-holds") {
		t.Fatalf("violations %q, want majority-holds", got)
	}
}

// TestAppendPhaseIsMarshal holds the coordinator's phase messages,
// encoded into the step's scratch buffer (appendPhase), to the encoding
// of message.marshal, which peers and the golden files read.
func TestAppendPhaseIsMarshal(t *testing.T) {
	o := &op{id: 1<<40 | 7, req: automaton.Request{Op: service.Op{Kind: "set", Key: "key", Args: [][]byte{[]byte("v")}}}, phase: 1,
		write: true, max: entry{Tag: Tag{TS: 2, Node: "n3", Seq: 5}, Value: []byte("old")}}
	if got, want := appendPhase([]byte("xx"), o), (&message{Kind: kindQueryAbove, Op: o.id, Key: "key", Tag: o.max.Tag, Writes: true}).marshal(); !bytes.Equal(got[2:], want) {
		t.Fatalf("query %x, want %x", got[2:], want)
	}
	for _, put := range []entry{{Tag: Tag{TS: 3, Node: "n2", Seq: 9}, Value: []byte("value")}, {Tag: Tag{TS: 4, Node: "n1", Seq: 1}, Tomb: true}} {
		o.phase, o.put = 2, put
		want := (&message{Kind: kindStore, Op: o.id, Key: "key", Tag: put.Tag, Tomb: put.Tomb, Value: put.Value}).marshal()
		if got := appendPhase(nil, o); !bytes.Equal(got, want) {
			t.Fatalf("store %x, want %x", got, want)
		}
	}
}
