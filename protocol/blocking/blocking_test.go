package blocking

import (
	"math/rand"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// net is a tiny deterministic harness: automata exchange messages through a
// FIFO queue (optionally shuffled), and ticks are delivered by hand.
type net struct {
	t     *testing.T
	ids   []automaton.NodeID
	nodes map[automaton.NodeID]*Blocking
	q     []delivery
	resp  map[automaton.RequestID]service.Result
	rng   *rand.Rand
	down  map[automaton.NodeID]bool
}

type delivery struct {
	from, to automaton.NodeID
	msg      []byte
}

func newNet(t *testing.T, n int, params map[string]string) *net {
	kv, err := service.Lookup("kv")
	if err != nil {
		t.Fatal(err)
	}
	w := &net{t: t, nodes: map[automaton.NodeID]*Blocking{}, resp: map[automaton.RequestID]service.Result{},
		rng: rand.New(rand.NewSource(1)), down: map[automaton.NodeID]bool{}}
	for i := 1; i <= n; i++ {
		w.ids = append(w.ids, automaton.NodeID("n"+string(rune('0'+i))))
	}
	p, _ := automaton.Lookup("blocking")
	for _, id := range w.ids {
		a, err := p.New(automaton.Config{Self: id, Nodes: w.ids, Namespace: "default", Service: kv, Params: params, Rand: rand.New(rand.NewSource(2))})
		if err != nil {
			t.Fatal(err)
		}
		w.nodes[id] = a.(*Blocking)
		w.step(id, automaton.Start{})
	}
	return w
}

func (w *net) step(id automaton.NodeID, in automaton.Input) {
	if w.down[id] {
		return
	}
	for _, o := range w.nodes[id].Step(in) {
		switch o := o.(type) {
		case automaton.Send:
			if o.To == id {
				w.t.Fatalf("%s sent to itself", id)
			}
			w.q = append(w.q, delivery{from: id, to: o.To, msg: o.Msg})
		case automaton.Respond:
			w.resp[o.Resp.ID] = o.Resp.Result
		}
	}
	w.checkMutex()
}

// checkMutex: no two live nodes ever hold the global lock of one view at once.
func (w *net) checkMutex() {
	holders := map[Ballot]int{}
	for id, n := range w.nodes {
		if !w.down[id] && n.holding[""] != nil && n.participating() {
			holders[n.view]++
		}
	}
	for _, k := range holders {
		if k > 1 {
			w.t.Fatalf("%d nodes hold the lock at once", k)
		}
	}
}

func (w *net) deliverAll(shuffle bool) {
	for i := 0; len(w.q) > 0 && i < 100000; i++ {
		k := 0
		if shuffle {
			k = w.rng.Intn(len(w.q))
		}
		d := w.q[k]
		w.q = append(w.q[:k], w.q[k+1:]...)
		w.step(d.to, automaton.PeerMessage{From: d.from, Msg: d.msg})
	}
}

func (w *net) tick(shuffle bool) {
	for _, id := range w.ids {
		w.step(id, automaton.TimerFired{ID: timerTick})
	}
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
		for _, id := range w.ids {
			if n := w.nodes[id]; !n.participating() || !n.canServe() {
				t.Fatalf("%s not active after boot: view %v promised %v active %v", id, n.view, n.promised, n.active)
			}
		}
		// Concurrent writes at every node, to one key.
		for i, id := range w.ids {
			req := automaton.Request{ID: automaton.RequestID{Client: uint64(i + 1), Seq: 1},
				Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v" + string(id))}}}
			w.step(id, automaton.ClientRequest{Req: req})
		}
		w.deliverAll(shuffle)
		w.settle(3, shuffle)
		for i := range w.ids {
			if r, ok := w.resp[automaton.RequestID{Client: uint64(i + 1), Seq: 1}]; !ok || r.IsErr() {
				t.Fatalf("write %d: %v %v", i+1, ok, r)
			}
		}
		var first map[string]entry
		for _, id := range w.ids {
			n := w.nodes[id]
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
	n2 := w.nodes["n2"]
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
	write.View, write.W.E.Tag.View = w2.nodes["n2"].view, w2.nodes["n2"].view
	if k := acks(w2.nodes["n2"].Step(automaton.PeerMessage{From: "n1", Msg: write.marshal()})); k != 1 {
		t.Errorf("write of the current view: %d acknowledgements, want 1", k)
	}
}

// A crashed lock holder is detected, the lock revoked, and writes resume.
func TestCrashedHolderRevoked(t *testing.T) {
	w := newNet(t, 3, nil)
	w.settle(5, false)
	// n1 takes the lock and sends its write, then crashes before any ack.
	req := automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("a")}}}
	w.step("n1", automaton.ClientRequest{Req: req})
	for i := 0; i < 20 && w.nodes["n1"].holding[""] == nil; i++ {
		d := w.q[0]
		w.q = w.q[1:]
		w.step(d.to, automaton.PeerMessage{From: d.from, Msg: d.msg})
	}
	if w.nodes["n1"].holding[""] == nil {
		t.Fatal("n1 never took the lock")
	}
	w.down["n1"] = true
	w.deliverAll(false) // n2, n3 store the write as pending; their acks are lost
	req2 := automaton.Request{ID: automaton.RequestID{Client: 10, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("b")}}}
	w.step("n2", automaton.ClientRequest{Req: req2})
	w.settle(60, false) // > fail_timeout (15 heartbeats) and a view change
	r, ok := w.resp[req2.ID]
	if !ok || r.IsErr() {
		t.Fatalf("write after the holder crashed: %v %v", ok, r)
	}
	for _, id := range []automaton.NodeID{"n2", "n3"} {
		n := w.nodes[id]
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
	tag := Tag{View: Ballot{3, 1}, Seq: 7}
	for _, m := range []*message{
		{Kind: kindState, View: Ballot{2, 0}, Active: true, Promised: Ballot{2, 0}, Members: []bool{true, false, true}, Clock: 9, Reqs: []lockReq{{"", 4}, {"k", 5}}},
		{Kind: kindWrite, View: Ballot{1, 1}, Lock: "k", Seq: 3, W: kentry{Key: "k", E: entry{Tag: tag, Value: []byte("v")}}},
		{Kind: kindWriteAck, View: Ballot{1, 1}, Lock: "k", Seq: 3},
		{Kind: kindCommit, Lock: "", Seq: 1},
		{Kind: kindPrepare, Ballot: Ballot{5, 2}},
		{Kind: kindNack, Ballot: Ballot{5, 2}, Promised: Ballot{6, 0}},
		{Kind: kindPromise, Ballot: Ballot{5, 2}, View: Ballot{4, 0}, Snap: []kentry{{Key: "a", E: entry{Tag: tag, Tomb: true}}}},
		{Kind: kindInstall, Ballot: Ballot{5, 2}, Members: []bool{true, true}, Snap: []kentry{{Key: "a", E: entry{Tag: tag, Value: []byte("x")}}}},
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
