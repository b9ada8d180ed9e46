package blocking

import (
	"fmt"
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// net drives blocking automata through the shared harness: a FIFO queue
// (optionally shuffled), ticks fired by hand, and the protocol's invariants
// (mutual exclusion among them) checked after every step.
type net struct {
	*harness.Cluster
	rng *rand.Rand
}

func newNet(t *testing.T, n int, params map[string]string) *net {
	t.Helper()
	return &net{Cluster: harness.New(t, harness.Options{Protocol: "blocking", Nodes: n, Params: params}), rng: rand.New(rand.NewSource(1))}
}

func (w *net) node(id automaton.NodeID) *Blocking { return w.Node(id).(*Blocking) }

func (w *net) deliverAll(shuffle bool) {
	if shuffle {
		w.DeliverRandom(harness.Faults{Rand: w.rng, Reorder: 1})
	} else {
		w.DeliverAll()
	}
}

func (w *net) tick(shuffle bool) {
	w.FireAllNodes()
	w.deliverAll(shuffle)
}

func (w *net) settle(ticks int, shuffle bool) {
	for i := 0; i < ticks; i++ {
		w.tick(shuffle)
	}
}

func TestViewFormsAndWritesReplicate(t *testing.T) {
	for _, shuffle := range []bool{false, true} {
		w := newNet(t, 3, nil)
		w.settle(5, shuffle)
		for _, id := range w.IDs() {
			if n := w.node(id); !n.participating() || !n.canServe() {
				t.Fatalf("%s not active after boot: view %v promised %v active %v", id, n.view, n.promised, n.active)
			}
		}
		// Concurrent writes at every node, to one key.
		for i, id := range w.IDs() {
			req := automaton.Request{ID: automaton.RequestID{Client: uint64(i + 1), Seq: 1},
				Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v" + string(id))}}}
			w.Submit(id, req)
		}
		w.deliverAll(shuffle)
		w.settle(3, shuffle)
		for i := range w.IDs() {
			if r, ok := w.Response(automaton.RequestID{Client: uint64(i + 1), Seq: 1}); !ok || r.IsErr() {
				t.Fatalf("write %d: %v %v", i+1, ok, r)
			}
		}
		var first map[string]entry
		for _, id := range w.IDs() {
			n := w.node(id)
			if len(n.pending) != 0 {
				t.Errorf("%s still has pending writes %v", id, n.pending)
			}
			if first == nil {
				first = n.store
			} else if !reflect.DeepEqual(first, n.store) {
				t.Errorf("stores differ: %v vs %v", first, n.store)
			}
			if n.lastSeq[""] != 3 {
				t.Errorf("%s: %d writes in the view, want 3", id, n.lastSeq[""])
			}
		}
	}
}

// A node that promised a newer view refuses (does not acknowledge) a write
// of the old view: the fence that keeps a revoked holder from committing.
func TestFenceRefusesOldViewWrites(t *testing.T) {
	w := newNet(t, 3, nil)
	w.settle(5, false)
	n2 := w.node("n2")
	old := n2.view
	write := &message{Kind: kindWrite, View: old, Lock: "", Seq: 1, W: kentry{Key: "k", E: entry{Tag: Tag{View: old, Seq: 1}, Value: []byte("x")}}}
	acks := func(outs []automaton.Output) int {
		k := 0
		for _, o := range outs {
			if s, ok := o.(automaton.Send); ok {
				if m, err := unmarshal(s.Msg); err == nil && m.Kind == kindWriteAck {
					k++
				}
			}
		}
		return k
	}
	prep := &message{Kind: kindPrepare, Ballot: Ballot{Round: old.Round + 1, Node: 2}}
	outs := n2.Step(automaton.PeerMessage{From: "n3", Msg: prep.marshal()})
	var promised bool
	for _, o := range outs {
		if s, ok := o.(automaton.Send); ok {
			m, _ := unmarshal(s.Msg)
			promised = promised || m.Kind == kindPromise
		}
	}
	if !promised {
		t.Fatal("no promise for a higher ballot")
	}
	if k := acks(n2.Step(automaton.PeerMessage{From: "n1", Msg: write.marshal()})); k != 0 {
		t.Errorf("write of the old view acknowledged after the promise")
	}
	// A fresh node in the old view would have acknowledged it.
	w2 := newNet(t, 3, nil)
	w2.settle(5, false)
	write.View, write.W.E.Tag.View = w2.node("n2").view, w2.node("n2").view
	if k := acks(w2.node("n2").Step(automaton.PeerMessage{From: "n1", Msg: write.marshal()})); k != 1 {
		t.Errorf("write of the current view: %d acknowledgements, want 1", k)
	}
}

// A crashed lock holder is detected, the lock revoked, and writes resume.
func TestCrashedHolderRevoked(t *testing.T) {
	w := newNet(t, 3, nil)
	w.settle(5, false)
	// n1 takes the lock and sends its write, then crashes before any ack.
	req := automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("a")}}}
	w.Submit("n1", req)
	for i := 0; i < 20 && w.node("n1").holding[""] == nil; i++ {
		w.DeliverOne()
	}
	if w.node("n1").holding[""] == nil {
		t.Fatal("n1 never took the lock")
	}
	w.Crash("n1")
	w.deliverAll(false) // n2, n3 store the write as pending; their acks are lost
	req2 := automaton.Request{ID: automaton.RequestID{Client: 10, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("b")}}}
	w.Submit("n2", req2)
	w.settle(60, false) // > fail_timeout (15 heartbeats) and a view change
	r, ok := w.Response(req2.ID)
	if !ok || r.IsErr() {
		t.Fatalf("write after the holder crashed: %v %v", ok, r)
	}
	for _, id := range []automaton.NodeID{"n2", "n3"} {
		n := w.node(id)
		if n.members[0] {
			t.Errorf("%s: crashed n1 still a member", id)
		}
		if e := n.store["k"]; string(e.Value) != "b" {
			t.Errorf("%s: k = %q, want b", id, e.Value)
		}
	}
}

func TestParams(t *testing.T) {
	kv, _ := service.Lookup("kv")
	p, _ := automaton.Lookup("blocking")
	for _, bad := range []map[string]string{
		{"lock": "sometimes"}, {"lease": "fast"}, {"lease": "1ms"}, {"bogus": "1s"},
	} {
		_, err := p.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: kv, Params: bad, Rand: rand.New(rand.NewSource(1))})
		if err == nil {
			t.Errorf("params %v accepted", bad)
		}
	}
	c, _ := service.Lookup("counter")
	if _, err := p.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: c}); err == nil || !strings.Contains(err.Error(), "kv") {
		t.Errorf("counter service: %v", err)
	}
	if c, _ := automaton.ConsistencyOf("blocking"); c != automaton.Sequential {
		t.Errorf("consistency %q", c)
	}
}

func FuzzUnmarshal(f *testing.F) {
	tag := Tag{View: Ballot{Round: 3, Node: 1}, Seq: 7}
	for _, m := range []*message{
		{Kind: kindState, View: Ballot{Round: 2, Node: 0}, Active: true, Promised: Ballot{Round: 2, Node: 0}, Members: []bool{true, false, true}, Clock: 9, Reqs: []lockReq{{"", 4}, {"k", 5}}},
		{Kind: kindWrite, View: Ballot{Round: 1, Node: 1}, Lock: "k", Seq: 3, W: kentry{Key: "k", E: entry{Tag: tag, Value: []byte("v")}}},
		{Kind: kindWriteAck, View: Ballot{Round: 1, Node: 1}, Lock: "k", Seq: 3},
		{Kind: kindCommit, Lock: "", Seq: 1},
		{Kind: kindPrepare, Ballot: Ballot{Round: 5, Node: 2}},
		{Kind: kindNack, Ballot: Ballot{Round: 5, Node: 2}, Promised: Ballot{Round: 6, Node: 0}},
		{Kind: kindPromise, Ballot: Ballot{Round: 5, Node: 2}, View: Ballot{Round: 4, Node: 0}, Snap: []kentry{{Key: "a", E: entry{Tag: tag, Tomb: true}}}},
		{Kind: kindInstall, Ballot: Ballot{Round: 5, Node: 2}, Members: []bool{true, true}, Snap: []kentry{{Key: "a", E: entry{Tag: tag, Value: []byte("x")}}}},
	} {
		b := m.marshal()
		got, err := unmarshal(b)
		if err != nil {
			f.Fatalf("%+v: %v", m, err)
		}
		if !reflect.DeepEqual(got.marshal(), b) {
			f.Fatalf("round trip changed %+v", m)
		}
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := unmarshal(b)
		if err != nil {
			return
		}
		if _, err := unmarshal(m.marshal()); err != nil {
			t.Fatalf("re-encoding a decoded message fails: %v", err)
		}
	})
}

// The interaction scripts under testdata (go test -rewrite regenerates them).
func TestInteractions(t *testing.T) { harness.RunDataDriven(t, "testdata") }

// The real protocol is registered as such, the broken variant apart with a
// description; the default parameters are accepted and are New's defaults.
func TestRegistration(t *testing.T) {
	if _, err := automaton.Lookup("blocking-broken-noack"); err == nil {
		t.Error("the broken variant is among the real protocols")
	}
	c, err := automaton.CapabilitiesOf("blocking-broken-noack")
	if err != nil || automaton.BrokenOf("blocking-broken-noack") != "blocking" {
		t.Fatalf("broken variant: %v", err)
	}
	if c.Doc == "" {
		t.Error("the broken variant has no description")
	}
	params := automaton.DefaultParams("blocking")
	if len(params) != 5 || params["lock"] != "global" {
		t.Fatalf("default params %v", params)
	}
	real, _ := automaton.Lookup("blocking")
	a, err := real.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: service.KV{}, Params: params, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		t.Fatalf("the default params are refused: %v", err)
	}
	d, _ := real.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Service: service.KV{}, Rand: rand.New(rand.NewSource(1))})
	x, y := a.(*Blocking), d.(*Blocking)
	if x.hb != y.hb || x.failTicks != y.failTicks || x.leaseTicks != y.leaseTicks || x.opTicks != y.opTicks || x.perKey != y.perKey {
		t.Fatalf("default params differ from the defaults: %+v vs %+v", x, y)
	}
	if _, names := automaton.NewInvariantChecker("blocking"); len(names) < 2 {
		t.Fatalf("invariants %v", names)
	}
}

// Atomic groups and interactive transactions are refused before anything
// is applied: no lock is requested.
func TestRefusesGroupsAndTransactions(t *testing.T) {
	w := newNet(t, 3, nil)
	w.settle(5, false)
	group := automaton.Request{ID: automaton.RequestID{Client: 4, Seq: 1}, Ops: []service.Op{
		{Kind: "set", Key: "a", Args: [][]byte{[]byte("1")}}, {Kind: "set", Key: "b", Args: [][]byte{[]byte("2")}}}}
	if outs := w.Submit("n1", group); len(outs) != 1 {
		t.Fatalf("a refused group produced %v, want only the answer", outs)
	}
	if r, _ := w.Response(group.ID); !r.IsErr() || r.Err != fmt.Sprintf(automaton.ErrNoAtomic, "blocking") {
		t.Fatalf("atomic group answered %v", r)
	}
	txn := automaton.Request{ID: automaton.RequestID{Client: 4, Seq: 2}, Op: service.Op{Kind: "get", Key: "a"},
		Txn: &automaton.TxnStep{Txn: automaton.RequestID{Client: 4, Seq: 1}, Action: automaton.TxnOp}}
	if outs := w.Submit("n1", txn); len(outs) != 1 {
		t.Fatalf("a refused transaction step produced %v", outs)
	}
	if r, _ := w.Response(txn.ID); !r.IsErr() || r.Err != fmt.Sprintf(automaton.ErrNoInteractive, "blocking") {
		t.Fatalf("transaction step answered %v", r)
	}
	if n := w.node("n1"); len(n.waiting) != 0 || len(n.myReq) != 0 {
		t.Fatal("a refused request waits for the lock")
	}
}

// The invariants catch a view that goes down and two holders of one lock.
func TestInvariantsCatchTamperedState(t *testing.T) {
	var got []string
	c := harness.New(t, harness.Options{Protocol: "blocking", Nodes: 3,
		OnViolation: func(_ int, _ automaton.NodeID, err error) { got = append(got, err.Error()) }})
	w := &net{Cluster: c, rng: rand.New(rand.NewSource(1))}
	w.settle(5, false)
	if len(got) != 0 {
		t.Fatalf("violations %q in a healthy cluster", got)
	}
	n1, n2 := w.node("n1"), w.node("n2")
	n1.holding[""] = &wop{}
	n2.holding[""] = &wop{}
	w.Step("n2", automaton.PeerMessage{From: "n1"}) // an empty message: ignored, but a step
	if len(got) != 1 || !strings.HasPrefix(got[0], "mutex") {
		t.Fatalf("violations %q, want mutex", got)
	}
	got = nil
	c = harness.New(t, harness.Options{Protocol: "blocking", Nodes: 3,
		OnViolation: func(_ int, _ automaton.NodeID, err error) { got = append(got, err.Error()) }})
	w = &net{Cluster: c, rng: rand.New(rand.NewSource(1))}
	w.settle(5, false)
	w.node("n3").promised = Ballot{}
	w.Step("n3", automaton.PeerMessage{From: "n1"})
	if len(got) != 1 || !strings.HasPrefix(got[0], "view-monotonic") {
		t.Fatalf("violations %q, want view-monotonic", got)
	}
}
