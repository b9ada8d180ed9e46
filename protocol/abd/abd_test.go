package abd

import (
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// net is a hand-driven network of ABD automata: messages queue until delivered.
type net struct {
	t       *testing.T
	nodes   map[automaton.NodeID]automaton.Automaton
	disk    map[automaton.NodeID]map[string][]byte
	queue   []pending
	resps   map[automaton.RequestID]service.Result
	drop    func(from, to automaton.NodeID) bool
	dropMsg func(from automaton.NodeID, m message) bool
	timers  map[automaton.NodeID]map[automaton.TimerID]time.Duration
	trace   []string
	proto   string
	members []automaton.NodeID
}

type pending struct {
	from, to automaton.NodeID
	msg      []byte
}

func newNet(t *testing.T, proto string, n int) *net {
	t.Helper()
	nw := &net{t: t, nodes: map[automaton.NodeID]automaton.Automaton{}, disk: map[automaton.NodeID]map[string][]byte{},
		resps: map[automaton.RequestID]service.Result{}, timers: map[automaton.NodeID]map[automaton.TimerID]time.Duration{}, proto: proto}
	for i := 1; i <= n; i++ {
		nw.members = append(nw.members, automaton.NodeID("n"+string(rune('0'+i))))
	}
	for _, id := range nw.members {
		nw.disk[id] = map[string][]byte{}
		nw.boot(id)
	}
	return nw
}

func (nw *net) boot(id automaton.NodeID) {
	p, err := automaton.Lookup(nw.proto)
	if err != nil {
		nw.t.Fatal(err)
	}
	a, err := p.New(automaton.Config{Self: id, Nodes: nw.members, Namespace: "default", Service: service.KV{}, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		nw.t.Fatal(err)
	}
	nw.nodes[id] = a
	nw.timers[id] = map[automaton.TimerID]time.Duration{}
	recs := map[string][]byte{}
	for k, v := range nw.disk[id] {
		recs[k] = v
	}
	nw.step(id, automaton.Start{Records: recs})
}

func (nw *net) step(id automaton.NodeID, in automaton.Input) []automaton.Output {
	outs := nw.nodes[id].Step(in)
	persisted := false
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Send:
			if o.To == id {
				nw.t.Fatalf("%s sent to itself", id)
			}
			nw.queue = append(nw.queue, pending{id, o.To, o.Msg})
			nw.trace = append(nw.trace, "send")
		case automaton.Respond:
			nw.resps[o.Resp.ID] = o.Resp.Result
			nw.trace = append(nw.trace, "respond")
		case automaton.Persist:
			nw.disk[id][o.Key] = append([]byte(nil), o.Value...)
			persisted = true
			nw.trace = append(nw.trace, "persist")
		case automaton.SetTimer:
			nw.timers[id][o.ID] = o.After
		case automaton.CancelTimer:
			delete(nw.timers[id], o.ID)
		}
	}
	_ = persisted
	return outs
}

// deliver delivers queued messages (FIFO) until none are left.
func (nw *net) deliver() {
	for len(nw.queue) > 0 {
		p := nw.queue[0]
		nw.queue = nw.queue[1:]
		if nw.drop != nil && nw.drop(p.from, p.to) {
			continue
		}
		if nw.dropMsg != nil {
			if m, err := unmarshal(p.msg); err == nil && nw.dropMsg(p.from, m) {
				continue
			}
		}
		nw.step(p.to, automaton.PeerMessage{From: p.from, Msg: p.msg})
	}
}

var seq uint64

func (nw *net) do(at automaton.NodeID, op service.Op, mode automaton.ReadMode) (automaton.RequestID, service.Result, bool) {
	seq++
	id := automaton.RequestID{Client: 7, Seq: seq}
	nw.step(at, automaton.ClientRequest{Req: automaton.Request{ID: id, Op: op, Opts: automaton.Options{Read: mode}}})
	nw.deliver()
	r, ok := nw.resps[id]
	return id, r, ok
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
	_, r, ok := nw.do("n1", get("a"), 0)
	mustResult(t, r, ok, service.Nil())
	_, r, ok = nw.do("n1", set("a", "1"), 0)
	mustResult(t, r, ok, service.OK())
	_, r, ok = nw.do("n1", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("1")))
	_, r, ok = nw.do("n1", service.Op{Kind: "exists", Key: "a"}, 0)
	mustResult(t, r, ok, service.Int(1))
	_, r, ok = nw.do("n1", service.Op{Kind: "del", Key: "a"}, 0)
	mustResult(t, r, ok, service.Int(1))
	_, r, ok = nw.do("n1", get("a"), 0)
	mustResult(t, r, ok, service.Nil())
	_, r, ok = nw.do("n1", service.Op{Kind: "del", Key: "a"}, 0)
	mustResult(t, r, ok, service.Int(0))
}

func TestPersistPrecedesAcknowledgement(t *testing.T) {
	nw := newNet(t, "abd", 1)
	nw.trace = nil
	nw.do("n1", set("a", "1"), 0)
	p, r := -1, -1
	for i, s := range nw.trace {
		if s == "persist" && p < 0 {
			p = i
		}
		if s == "respond" {
			r = i
		}
	}
	if p < 0 || r < 0 || p > r {
		t.Fatalf("trace %v: the register must be persisted before the write is answered", nw.trace)
	}
	// A replica receiving a Store persists before it sends the acknowledgement.
	nw3 := newNet(t, "abd", 3)
	outs := nw3.nodes["n2"].Step(automaton.PeerMessage{From: "n1", Msg: (&message{Kind: kindStore, Op: 9, Key: "k", Tag: Tag{TS: 1, Node: "n1", Seq: 9}, Value: []byte("v")}).marshal()})
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
	nw.drop = func(from, to automaton.NodeID) bool { return from == "n3" || to == "n3" }
	_, r, ok := nw.do("n1", set("a", "x"), 0)
	mustResult(t, r, ok, service.OK())
	_, r, ok = nw.do("n2", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("x")))
	// With two of three down, no quorum: no answer yet.
	nw.drop = func(from, to automaton.NodeID) bool { return from != to }
	_, _, ok = nw.do("n1", set("a", "y"), 0)
	if ok {
		t.Fatal("a write completed without a majority")
	}
}

func TestReadWritesBackUnlessMajorityHoldsTag(t *testing.T) {
	nw := newNet(t, "abd", 3)
	// The write's store reaches only n1 (the coordinator): n2 and n3 never see it.
	storesFromN1 := func(from automaton.NodeID, m message) bool { return from == "n1" && m.Kind == kindStore }
	nw.dropMsg = storesFromN1
	nw.do("n1", set("a", "new"), 0)
	nw.dropMsg = nil
	if got := nw.nodes["n2"].(*ABD).entry("a"); got.present() {
		t.Fatal("setup: n2 should not have the value")
	}
	// A read at n2 hears n1 (new) and n2 (nothing): it must write back "new" so
	// that a later read by a majority not containing n1 still returns it.
	nw.drop = func(from, to automaton.NodeID) bool { return from == "n3" || to == "n3" }
	nw.trace = nil
	_, r, ok := nw.do("n2", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("new")))
	if !nw.nodes["n2"].(*ABD).entry("a").present() {
		t.Fatal("read did not write back to its own replica")
	}
	// Now n1 is gone; a read through n3 with n2 must still see "new".
	nw.drop = func(from, to automaton.NodeID) bool { return from == "n1" || to == "n1" }
	_, r, ok = nw.do("n3", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("new")))

	// When a majority already holds the highest tag, the read answers after one
	// round trip: no Store is sent.
	nw.drop = nil
	nw.do("n1", set("b", "v"), 0)
	sent := 0
	nw.queue = nil
	_, _ = nw.nodes["n2"].Step(automaton.ClientRequest{Req: automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: get("b")}}), 0
	for len(nw.queue) > 0 {
		p := nw.queue[0]
		nw.queue = nw.queue[1:]
		for _, o := range nw.step(p.to, automaton.PeerMessage{From: p.from, Msg: p.msg}) {
			if s, ok := o.(automaton.Send); ok {
				if m, _ := unmarshal(s.Msg); m.Kind == kindStore {
					sent++
				}
			}
		}
	}
	if sent != 0 {
		t.Fatalf("read sent %d stores although a majority held the tag", sent)
	}
}

func TestRegularReadSkipsWriteBack(t *testing.T) {
	nw := newNet(t, "abd", 3)
	storesFromN1 := func(from automaton.NodeID, m message) bool { return from == "n1" && m.Kind == kindStore }
	nw.dropMsg = storesFromN1
	nw.do("n1", set("a", "new"), 0)
	nw.dropMsg = nil
	nw.drop = func(from, to automaton.NodeID) bool { return from == "n3" || to == "n3" }
	_, r, ok := nw.do("n2", get("a"), automaton.ReadRegular)
	mustResult(t, r, ok, service.Bytes([]byte("new")))
	if nw.nodes["n2"].(*ABD).entry("a").present() {
		t.Fatal("a regular read wrote back")
	}
	// A local read answers from the contacted replica alone: stale here.
	_, r, ok = nw.do("n3", get("a"), automaton.ReadLocal)
	mustResult(t, r, ok, service.Nil())
}

func TestRestartRestoresRegistersAndNewIncarnation(t *testing.T) {
	nw := newNet(t, "abd", 3)
	nw.do("n1", set("a", "1"), 0)
	inc := nw.nodes["n1"].(*ABD).incarnation
	for _, id := range nw.members {
		nw.boot(id) // crash and restart every node from its disk
	}
	if got := nw.nodes["n1"].(*ABD).incarnation; got != inc+1 {
		t.Fatalf("incarnation after restart %d, want %d", got, inc+1)
	}
	_, r, ok := nw.do("n2", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("1")))
	// A write after restart gets a higher tag than the one before.
	nw.do("n1", set("a", "2"), 0)
	_, r, ok = nw.do("n3", get("a"), 0)
	mustResult(t, r, ok, service.Bytes([]byte("2")))
}

func TestConcurrentWritersOrderedByWriterID(t *testing.T) {
	// Two coordinators pick the same timestamp; replicas must agree on one
	// winner because tags break ties by writer.
	for _, tc := range []struct {
		proto   string
		diverge bool
	}{{"abd", false}, {"abd-broken-nowriterid", true}} {
		nw := newNet(t, tc.proto, 3)
		// Run both query phases first, then deliver stores in opposite orders.
		nw.step("n1", automaton.ClientRequest{Req: automaton.Request{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: set("k", "from-n1")}})
		nw.step("n3", automaton.ClientRequest{Req: automaton.Request{ID: automaton.RequestID{Client: 2, Seq: 1}, Op: set("k", "from-n3")}})
		nw.deliver()
		v1 := string(nw.nodes["n1"].(*ABD).entry("k").Value)
		v3 := string(nw.nodes["n3"].(*ABD).entry("k").Value)
		v2 := string(nw.nodes["n2"].(*ABD).entry("k").Value)
		diverged := v1 != v2 || v2 != v3
		if diverged != tc.diverge {
			t.Fatalf("%s: replicas hold %q %q %q; diverged=%v, want %v", tc.proto, v1, v2, v3, diverged, tc.diverge)
		}
	}
}

func TestRetransmitAndTimeout(t *testing.T) {
	nw := newNet(t, "abd", 3)
	nw.drop = func(from, to automaton.NodeID) bool { return true }
	id := automaton.RequestID{Client: 3, Seq: 1}
	nw.step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id, Op: set("a", "1")}})
	nw.deliver()
	timers := nw.timers["n1"]
	if len(timers) != 1 {
		t.Fatalf("want one retransmit timer, have %v", timers)
	}
	var tid automaton.TimerID
	for k := range timers {
		tid = k
	}
	// The network heals: the next retransmission completes the write.
	nw.drop = nil
	nw.step("n1", automaton.TimerFired{ID: tid})
	nw.deliver()
	mustResult(t, nw.resps[id], true, service.OK())
	if len(nw.timers["n1"]) != 0 {
		t.Fatal("timer not cancelled after completion")
	}
	// With no network at all, the request fails after op_timeout.
	nw.drop = func(from, to automaton.NodeID) bool { return true }
	id2 := automaton.RequestID{Client: 3, Seq: 2}
	nw.step("n1", automaton.ClientRequest{Req: automaton.Request{ID: id2, Op: get("a")}})
	for i := 0; i < int(DefaultOpTimeout/DefaultRetransmit)+1 && len(nw.timers["n1"]) > 0; i++ {
		for k := range nw.timers["n1"] {
			nw.step("n1", automaton.TimerFired{ID: k})
		}
		nw.deliver()
	}
	r, ok := nw.resps[id2]
	if !ok || !r.IsErr() || !strings.HasPrefix(r.Err, "TRYAGAIN") {
		t.Fatalf("got %v %v, want a TRYAGAIN error", r, ok)
	}
}

func TestDuplicateRequestAnsweredOnce(t *testing.T) {
	nw := newNet(t, "abd", 3)
	id := automaton.RequestID{Client: 5, Seq: 1}
	req := automaton.ClientRequest{Req: automaton.Request{ID: id, Op: set("a", "1")}}
	nw.step("n1", req)
	nw.step("n1", req) // retry while in flight: joins
	nw.deliver()
	tag := nw.nodes["n1"].(*ABD).entry("a").Tag
	delete(nw.resps, id)
	nw.step("n1", req) // retry after completion: remembered answer, no new write
	nw.deliver()
	mustResult(t, nw.resps[id], true, service.OK())
	if got := nw.nodes["n1"].(*ABD).entry("a").Tag; got != tag {
		t.Fatalf("retry wrote again: tag %v -> %v", tag, got)
	}
}

func TestRefusesReadModifyWrite(t *testing.T) {
	nw := newNet(t, "abd", 1)
	for _, op := range []service.Op{
		{Kind: "incr", Key: "a", Args: [][]byte{[]byte("1")}},
		{Kind: "append", Key: "a", Args: [][]byte{[]byte("x")}},
		{Kind: "set", Key: "a", Args: [][]byte{[]byte("x"), []byte("nx")}},
	} {
		_, r, ok := nw.do("n1", op, 0)
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
		if outs := nw.nodes["n1"].Step(automaton.PeerMessage{From: "n2", Msg: b}); len(outs) != 0 {
			t.Fatalf("garbage %q produced outputs %v", b, outs)
		}
	}
	// From a non-member: ignored even if well-formed.
	good := (&message{Kind: kindQuery, Op: 1, Key: "a"}).marshal()
	if outs := nw.nodes["n1"].Step(automaton.PeerMessage{From: "x", Msg: good}); len(outs) != 0 {
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
