package esds

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// cluster drives ESDS automata input by input over a test network that the
// test controls: messages wait in a list until delivered, dropped, duplicated
// or reordered; persisted records go straight to a per-node disk.
type cluster struct {
	t     *testing.T
	proto string
	svc   service.Service
	ids   []automaton.NodeID
	a     map[automaton.NodeID]*ESDS
	disk  map[automaton.NodeID]map[string][]byte
	down  map[automaton.NodeID]bool
	msgs  []tmsg
	resp  map[automaton.RequestID][]service.Result
	rng   *rand.Rand
	seq   uint64
	param map[string]string
}

type tmsg struct {
	from, to automaton.NodeID
	b        []byte
}

func newCluster(t *testing.T, proto string, n int, svc service.Service, params map[string]string) *cluster {
	t.Helper()
	c := &cluster{t: t, proto: proto, svc: svc, a: map[automaton.NodeID]*ESDS{}, disk: map[automaton.NodeID]map[string][]byte{},
		down: map[automaton.NodeID]bool{}, resp: map[automaton.RequestID][]service.Result{}, rng: rand.New(rand.NewSource(1)), param: params}
	for i := 0; i < n; i++ {
		c.ids = append(c.ids, automaton.NodeID(fmt.Sprintf("n%d", i+1)))
	}
	for _, id := range c.ids {
		c.disk[id] = map[string][]byte{}
		c.boot(id)
	}
	return c
}

func (c *cluster) boot(id automaton.NodeID) {
	p, err := automaton.Lookup(c.proto)
	if err != nil {
		c.t.Fatal(err)
	}
	a, err := p.New(automaton.Config{Self: id, Nodes: c.ids, Namespace: "default", Service: c.svc, Params: c.param,
		Rand: rand.New(rand.NewSource(c.rng.Int63()))})
	if err != nil {
		c.t.Fatal(err)
	}
	e := a.(*ESDS)
	e.RecordOrder()
	c.a[id] = e
	c.down[id] = false
	recs := map[string][]byte{}
	for k, v := range c.disk[id] {
		recs[k] = append([]byte(nil), v...)
	}
	c.step(id, automaton.Start{Records: recs})
}

func (c *cluster) crash(id automaton.NodeID) {
	c.down[id] = true
	c.a[id] = nil
}

func (c *cluster) step(id automaton.NodeID, in automaton.Input) {
	persisted := false
	for _, o := range c.a[id].Step(in) {
		switch o := o.(type) {
		case automaton.Persist:
			persisted = true
			if o.Delete {
				delete(c.disk[id], o.Key)
			} else {
				c.disk[id][o.Key] = append([]byte(nil), o.Value...)
			}
		case automaton.Send:
			if o.To == id {
				c.t.Fatalf("%s sent to itself", id)
			}
			c.msgs = append(c.msgs, tmsg{id, o.To, o.Msg})
		case automaton.Respond:
			c.resp[o.Resp.ID] = append(c.resp[o.Resp.ID], o.Resp.Result)
		case automaton.SetTimer, automaton.CancelTimer:
		default:
			c.t.Fatalf("unexpected output %T", o)
		}
		_ = persisted
	}
	if err := c.a[id].checkIndexes(); err != nil {
		c.t.Fatal(err)
	}
}

// request submits an operation at node id and returns its request id.
func (c *cluster) request(id automaton.NodeID, opts automaton.Options, kind string, args ...string) automaton.RequestID {
	c.seq++
	r := automaton.RequestID{Client: 7, Seq: c.seq}
	o := service.Op{Kind: kind}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	c.step(id, automaton.ClientRequest{Req: automaton.Request{ID: r, Op: o, Opts: opts}})
	return r
}

// deliver delivers queued messages until none is left, with the given loss,
// duplication and reordering probabilities; messages to down nodes are lost.
func (c *cluster) deliver(loss, dup, reorder float64) {
	for n := 0; len(c.msgs) > 0; n++ {
		if n > 1_000_000 {
			c.t.Fatal("message storm")
		}
		i := 0
		if reorder > 0 && c.rng.Float64() < reorder {
			i = c.rng.Intn(len(c.msgs))
		}
		m := c.msgs[i]
		c.msgs = append(c.msgs[:i], c.msgs[i+1:]...)
		if c.down[m.to] || c.a[m.to] == nil || (loss > 0 && c.rng.Float64() < loss) {
			continue
		}
		c.step(m.to, automaton.PeerMessage{From: m.from, Msg: m.b})
		if dup > 0 && c.rng.Float64() < dup {
			c.step(m.to, automaton.PeerMessage{From: m.from, Msg: m.b})
		}
	}
}

func (c *cluster) tick() {
	for _, id := range c.ids {
		if !c.down[id] {
			c.step(id, automaton.TimerFired{ID: timerGossip})
		}
	}
}

// settle runs gossip rounds over a reliable network.
func (c *cluster) settle(rounds int) {
	for i := 0; i < rounds; i++ {
		c.tick()
		c.deliver(0, 0, 0)
	}
}

func (c *cluster) answer(r automaton.RequestID) (service.Result, bool) {
	l := c.resp[r]
	if len(l) == 0 {
		return service.Result{}, false
	}
	return l[len(l)-1], true
}

func (c *cluster) mustAnswer(r automaton.RequestID) service.Result {
	c.t.Helper()
	res, ok := c.answer(r)
	if !ok {
		c.t.Fatalf("request %v not answered", r)
	}
	return res
}

// orders returns every live replica's FinalOrder, failing unless they agree.
func (c *cluster) agreedOrder() []string {
	c.t.Helper()
	var first []string
	for i, id := range c.ids {
		if c.down[id] {
			continue
		}
		o := c.a[id].FinalOrder()
		if i == 0 || first == nil {
			first = o
			continue
		}
		if !reflect.DeepEqual(o, first) {
			c.t.Fatalf("replicas disagree:\n%s: %v\n%s: %v", c.ids[0], first, id, o)
		}
	}
	return first
}

func counterAdd(n int) (string, []string) { return "add", []string{fmt.Sprint(n)} }

func TestOneReplicaSolidifies(t *testing.T) {
	for _, proto := range []string{"esds", "esds-unopt"} {
		c := newCluster(t, proto, 1, service.Counter{}, nil)
		r1 := c.request("n1", automaton.Options{}, "add", "5")
		r2 := c.request("n1", automaton.Options{Strict: true}, "add", "2")
		r3 := c.request("n1", automaton.Options{Strict: true}, "read")
		for r, want := range map[automaton.RequestID]int64{r1: 5, r2: 7, r3: 7} {
			if got := c.mustAnswer(r); !got.Equal(service.Int(want)) {
				t.Fatalf("%s: %v answered %v, want %d", proto, r, got, want)
			}
		}
	}
}

func TestNonStrictAnsweredAtOnceStrictAfterStability(t *testing.T) {
	for _, proto := range []string{"esds", "esds-unopt"} {
		c := newCluster(t, proto, 3, service.String{}, nil)
		a := c.request("n1", automaton.Options{OpID: "a"}, "append", "a")
		if got := c.mustAnswer(a); string(got.Bytes) != "a" {
			t.Fatalf("%s: non-strict append answered %v", proto, got)
		}
		b := c.request("n2", automaton.Options{OpID: "b", Strict: true}, "append", "b")
		if _, ok := c.answer(b); ok {
			t.Fatalf("%s: strict op answered before any gossip", proto)
		}
		c.settle(1)
		if _, ok := c.answer(b); ok && proto == "esds" {
			// One round spreads "done"; stability at every replica needs more.
			t.Fatalf("%s: strict op answered after one gossip round", proto)
		}
		c.settle(6)
		got := c.mustAnswer(b)
		order := c.agreedOrder()
		if want := strings.Join(order, ""); string(got.Bytes) != want {
			t.Fatalf("%s: strict answer %q, final order %v", proto, got.Bytes, order)
		}
	}
}

func TestPrevWaitsForDependencies(t *testing.T) {
	c := newCluster(t, "esds", 3, service.String{}, nil)
	// y names x, which n2 has not seen: y waits at n2.
	x := c.request("n1", automaton.Options{OpID: "x"}, "append", "x")
	y := c.request("n2", automaton.Options{OpID: "y", Prev: []string{"x"}}, "append", "y")
	if _, ok := c.answer(y); ok {
		t.Fatal("y answered before its prev x was done locally")
	}
	c.settle(4)
	if got := c.mustAnswer(y); string(got.Bytes) != "xy" {
		t.Fatalf("y answered %q, want xy", got.Bytes)
	}
	_ = x
	if o := c.agreedOrder(); !reflect.DeepEqual(o, []string{"x", "y"}) {
		t.Fatalf("order %v", o)
	}
	// A self-reference is refused.
	z := c.request("n1", automaton.Options{OpID: "z", Prev: []string{"z"}}, "read")
	if got := c.mustAnswer(z); !got.IsErr() {
		t.Fatalf("self-prev accepted: %v", got)
	}
}

func TestRetryIsIdempotent(t *testing.T) {
	c := newCluster(t, "esds", 3, service.Counter{}, nil)
	opts := automaton.Options{OpID: "once"}
	c.request("n1", opts, "add", "10")
	c.request("n2", opts, "add", "10") // the same operation retried elsewhere
	c.request("n3", automaton.Options{OpID: "r"}, "read")
	c.settle(8)
	order := c.agreedOrder()
	if len(order) != 2 {
		t.Fatalf("order %v: the retried operation is not there exactly once", order)
	}
	s := c.request("n3", automaton.Options{OpID: "final", Strict: true}, "read")
	c.settle(8)
	if got := c.mustAnswer(s); got.Int != 10 {
		t.Fatalf("counter reads %v after one add of 10 submitted twice", got)
	}
}

// randomLoad runs ops random operations at random nodes under loss,
// duplication and reordering (and crashes and restarts if crash is set),
// then heals the network and checks: the replicas agree on one order, it
// holds every answered operation once and respects every prev set, every
// strict answer equals the operation's value in that order, and (optimised
// variant) every operation has been garbage-collected.
func randomLoad(t *testing.T, proto string, seed int64, ops int, crash bool) {
	t.Helper()
	c := newCluster(t, proto, 4, service.String{}, nil)
	c.rng = rand.New(rand.NewSource(seed))
	type req struct {
		rid    automaton.RequestID
		strict bool
		prev   []string
	}
	reqs := map[string]req{}
	sops := map[string]service.Op{}
	var answered []string
	for i := 0; i < ops; i++ {
		if crash && c.rng.Intn(8) == 0 {
			victim := c.ids[c.rng.Intn(len(c.ids))]
			if c.down[victim] {
				c.boot(victim)
			} else {
				c.crash(victim)
			}
		}
		n := c.ids[c.rng.Intn(len(c.ids))]
		if c.down[n] {
			continue
		}
		id := fmt.Sprintf("op%d", i)
		opts := automaton.Options{OpID: id, Strict: c.rng.Intn(3) == 0}
		if len(answered) > 0 && c.rng.Intn(2) == 0 {
			opts.Prev = []string{answered[c.rng.Intn(len(answered))]}
		}
		o := service.Op{Kind: "append", Args: [][]byte{[]byte(fmt.Sprintf("<%d>", i))}}
		if c.rng.Intn(3) == 0 {
			o = service.Op{Kind: "read"}
		}
		sops[id] = o
		c.seq++
		rid := automaton.RequestID{Client: 9, Seq: c.seq}
		c.step(n, automaton.ClientRequest{Req: automaton.Request{ID: rid, Op: o, Opts: opts}})
		reqs[id] = req{rid, opts.Strict, opts.Prev}
		for k := 0; k < 1+c.rng.Intn(3); k++ {
			c.tick()
			c.deliver(0.3, 0.2, 0.4)
		}
		for id, r := range reqs {
			if _, ok := c.answer(r.rid); ok && !contains(answered, id) {
				answered = append(answered, id)
			}
		}
		sort.Strings(answered)
	}
	for _, id := range c.ids {
		if c.down[id] {
			c.boot(id)
		}
	}
	c.settle(60)
	order := c.agreedOrder()
	pos := map[string]int{}
	st := c.svc.NewState()
	val := map[string]service.Result{}
	for i, id := range order {
		if _, dup := pos[id]; dup {
			t.Fatalf("%s seed %d: %s twice in the order", proto, seed, id)
		}
		o, ok := sops[id]
		if !ok {
			t.Fatalf("%s seed %d: unknown id %s in the order", proto, seed, id)
		}
		for _, p := range reqs[id].prev {
			if q, ok := pos[p]; !ok || q >= i {
				t.Fatalf("%s seed %d: %s ordered before its prev %s", proto, seed, id, p)
			}
		}
		pos[id] = i
		val[id] = st.Apply(o)
	}
	strict := 0
	for id, r := range reqs {
		res, ok := c.answer(r.rid)
		if !ok {
			continue
		}
		if res.IsErr() {
			t.Fatalf("%s seed %d: %s answered with an error: %v", proto, seed, id, res)
		}
		if _, in := pos[id]; !in {
			t.Fatalf("%s seed %d: %s was answered but is not in the final order", proto, seed, id)
		}
		if r.strict {
			strict++
			if !res.Equal(val[id]) {
				t.Fatalf("%s seed %d: strict %s answered %v, its value in the final order is %v", proto, seed, id, res, val[id])
			}
		}
	}
	if strict == 0 {
		t.Fatalf("%s seed %d: no strict operation was answered", proto, seed)
	}
	if !c.a[c.ids[0]].unopt {
		c.settle(2 * gcEveryTicks)
		for _, id := range c.ids {
			if n := len(c.a[id].ops); n != 0 {
				t.Fatalf("%s seed %d: %s still holds %d operations after quiescence\n%s", proto, seed, id, n, c.a["n1"].dump()+c.a["n2"].dump()+c.a["n3"].dump()+c.a["n4"].dump())
			}
		}
	}
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestRandomLoadFaultyNetwork(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		randomLoad(t, "esds", seed, 60, false)
		randomLoad(t, "esds-unopt", seed, 40, false)
	}
}

func TestRandomLoadCrashRestart(t *testing.T) {
	for seed := int64(1); seed <= 6; seed++ {
		randomLoad(t, "esds", seed, 60, true)
		randomLoad(t, "esds-unopt", seed, 40, true)
	}
}
