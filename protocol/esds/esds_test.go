package esds

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// cluster is a harness.Cluster of ESDS automata with this package's
// helpers; the harness is the network (lossy, duplicating, reordering on
// demand), the disks and the timers. Every replica records its order
// (RecordOrder), its indexes are compared with the scans they stand for
// after every step (checkIndexes), and the invariant checker runs after
// every step: the first violation fails the test unless tolerateInv is
// set, and is kept in invErr.
type cluster struct {
	*harness.Cluster
	t     *testing.T
	proto string
	svc   service.Service
	// rng decides the faulty deliveries (deliver) and the random loads.
	rng         *rand.Rand
	invErr      error
	tolerateInv bool
	// afterStep, when set, runs after every step (after checkIndexes).
	afterStep func(a *ESDS)
}

func newCluster(t *testing.T, proto string, n int, svc service.Service, params map[string]string) *cluster {
	t.Helper()
	return newClusterOpts(t, harness.Options{Protocol: proto, Nodes: n, Service: svc, Params: params})
}

// newClusterOpts builds a cluster from harness options (RandFor, OnBoot,
// AfterStep and OnViolation are this package's). Every boot draws its
// automaton's seed from c.rng, which starts at seed 1: a test that reseeds
// c.rng after creation decides every later boot and delivery.
func newClusterOpts(t *testing.T, o harness.Options) *cluster {
	t.Helper()
	c := &cluster{t: t, proto: o.Protocol, svc: o.Service, rng: rand.New(rand.NewSource(1))}
	o.RandFor = func(automaton.NodeID, int) *rand.Rand { return rand.New(rand.NewSource(c.rng.Int63())) }
	o.OnBoot = func(_ automaton.NodeID, a automaton.Automaton) { a.(*ESDS).RecordOrder() }
	o.AfterStep = func(_ automaton.NodeID, a automaton.Automaton) error {
		// (esds-broken-duplabel's equal labels leave the label order of its
		// index undecided: the scan may sort ties either way.)
		e := a.(*ESDS)
		if c.afterStep != nil {
			defer c.afterStep(e)
		}
		if !e.proto.dupLabel {
			return e.checkIndexes()
		}
		return nil
	}
	o.OnViolation = func(step int, id automaton.NodeID, err error) {
		c.invErr = err
		if !c.tolerateInv {
			t.Fatalf("%s after step %d of %s: %v", c.proto, step, id, err)
		}
	}
	c.Cluster = harness.New(t, o)
	return c
}

// esds returns the automaton of node id (nil when it is down).
func (c *cluster) esds(id automaton.NodeID) *ESDS {
	a, _ := c.Node(id).(*ESDS)
	return a
}

// request submits an operation at node id and returns its request id.
func (c *cluster) request(id automaton.NodeID, opts automaton.Options, kind string, args ...string) automaton.RequestID {
	o := service.Op{Kind: kind}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return c.Request(id, o, opts)
}

// deliver delivers messages in flight until none is left, with the given
// loss, duplication and reordering probabilities (drawn from c.rng);
// messages to down nodes are lost.
func (c *cluster) deliver(loss, dup, reorder float64) {
	c.DeliverRandom(harness.Faults{Rand: c.rng, Loss: loss, Dup: dup, Reorder: reorder})
}

// tick fires the gossip timer of every up node.
func (c *cluster) tick() {
	for _, id := range c.IDs() {
		if c.Up(id) && !c.FireTimer(id, timerGossip) {
			c.t.Fatalf("%s has no gossip timer", id)
		}
	}
}

// settle runs gossip rounds over a reliable network.
func (c *cluster) settle(rounds int) {
	for i := 0; i < rounds; i++ {
		c.tick()
		c.DeliverAll()
	}
}

func (c *cluster) answer(r automaton.RequestID) (service.Result, bool) { return c.Response(r) }

func (c *cluster) mustAnswer(r automaton.RequestID) service.Result {
	c.t.Helper()
	res, ok := c.answer(r)
	if !ok {
		c.t.Fatalf("request %v not answered", r)
	}
	return res
}

// agreedOrder returns every live replica's FinalOrder, failing unless they
// agree.
func (c *cluster) agreedOrder() []string {
	c.t.Helper()
	var first []string
	var firstID automaton.NodeID
	for _, id := range c.IDs() {
		if !c.Up(id) {
			continue
		}
		o := c.esds(id).FinalOrder()
		if firstID == "" {
			first, firstID = o, id
			continue
		}
		if !reflect.DeepEqual(o, first) {
			c.t.Fatalf("replicas disagree:\n%s: %v\n%s: %v", firstID, first, id, o)
		}
	}
	return first
}

// opts builds a request's ESDS options: id ("" leaves it to the protocol),
// strict, prev.
func opts(id string, strict bool, prev ...string) automaton.Options {
	var o automaton.Options
	if id != "" {
		o.Set(automaton.OptOpID, []string{id})
	}
	if prev != nil {
		o.Set(automaton.OptPrev, prev)
	}
	o.Set(automaton.OptStrict, automaton.BoolOption(strict))
	return o
}

func counterAdd(n int) (string, []string) { return "add", []string{fmt.Sprint(n)} }

func TestOneReplicaSolidifies(t *testing.T) {
	for _, proto := range []string{"esds", "esds-unopt"} {
		c := newCluster(t, proto, 1, service.Counter{}, nil)
		r1 := c.request("n1", opts("", false), "add", "5")
		r2 := c.request("n1", opts("", true), "add", "2")
		r3 := c.request("n1", opts("", true), "read")
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
		a := c.request("n1", opts("a", false), "append", "a")
		if got := c.mustAnswer(a); string(got.Bytes) != "a" {
			t.Fatalf("%s: non-strict append answered %v", proto, got)
		}
		b := c.request("n2", opts("b", true), "append", "b")
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
	x := c.request("n1", opts("x", false), "append", "x")
	y := c.request("n2", opts("y", false, "x"), "append", "y")
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
	z := c.request("n1", opts("z", false, "z"), "read")
	if got := c.mustAnswer(z); !got.IsErr() {
		t.Fatalf("self-prev accepted: %v", got)
	}
}

func TestRetryIsIdempotent(t *testing.T) {
	c := newCluster(t, "esds", 3, service.Counter{}, nil)
	once := opts("once", false)
	c.request("n1", once, "add", "10")
	c.request("n2", once, "add", "10") // the same operation retried elsewhere
	c.request("n3", opts("r", false), "read")
	c.settle(8)
	order := c.agreedOrder()
	if len(order) != 2 {
		t.Fatalf("order %v: the retried operation is not there exactly once", order)
	}
	s := c.request("n3", opts("final", true), "read")
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
//
// It returns the number of strict operations answered, which the callers
// require to be positive over their seeds: with crashes, a seed in about
// twenty answers none (every strict operation's front end crashed while it
// waited for stability; seeds 1..40 before issue 18's stream changes: 2
// such, after: 3), which says nothing about the checks above.
func randomLoad(t *testing.T, proto string, seed int64, ops int, crash bool) int {
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
			victim := c.IDs()[c.rng.Intn(len(c.IDs()))]
			if c.Up(victim) {
				c.Crash(victim)
			} else {
				c.Boot(victim)
			}
		}
		n := c.IDs()[c.rng.Intn(len(c.IDs()))]
		if !c.Up(n) {
			continue
		}
		id := fmt.Sprintf("op%d", i)
		strict := c.rng.Intn(3) == 0
		var prev []string
		if len(answered) > 0 && c.rng.Intn(2) == 0 {
			prev = []string{answered[c.rng.Intn(len(answered))]}
		}
		o1 := opts(id, strict, prev...)
		o := service.Op{Kind: "append", Args: [][]byte{[]byte(fmt.Sprintf("<%d>", i))}}
		if c.rng.Intn(3) == 0 {
			o = service.Op{Kind: "read"}
		}
		sops[id] = o
		rid := c.Request(n, o, o1)
		reqs[id] = req{rid, strict, prev}
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
	for _, id := range c.IDs() {
		if !c.Up(id) {
			c.Boot(id)
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
	if !c.esds("n1").unopt {
		c.settle(2 * gcEveryTicks)
		for _, id := range c.IDs() {
			if n := len(c.esds(id).ops); n != 0 {
				var dump []string
				for _, id := range c.IDs() {
					dump = append(dump, string(id)+": "+c.esds(id).Dump())
				}
				t.Fatalf("%s seed %d: %s still holds %d operations after quiescence\n%s", proto, seed, id, n, strings.Join(dump, "\n"))
			}
		}
	}
	return strict
}

func contains(l []string, s string) bool {
	for _, x := range l {
		if x == s {
			return true
		}
	}
	return false
}

func TestRandomLoadFaultyNetwork(t *testing.T) { randomLoads(t, false) }

func TestRandomLoadCrashRestart(t *testing.T) { randomLoads(t, true) }

// randomLoads runs randomLoad on seeds 1..6 for either variant; each
// variant answers some strict operations over the seeds.
func randomLoads(t *testing.T, crash bool) {
	var opt, unopt int
	for seed := int64(1); seed <= 6; seed++ {
		opt += randomLoad(t, "esds", seed, 60, crash)
		unopt += randomLoad(t, "esds-unopt", seed, 40, crash)
	}
	if opt == 0 || unopt == 0 {
		t.Fatalf("strict operations answered over seeds 1..6: esds %d, esds-unopt %d; want some of each", opt, unopt)
	}
}

// The interaction scripts under testdata (go test -run TestInteractions
// -rewrite regenerates them; read the diff before keeping it). The fuzz
// corpus under testdata/fuzz is skipped by RunDataDriven.
func TestInteractions(t *testing.T) { harness.RunDataDriven(t, "testdata") }

// TestPrevWaitIsBounded: an operation naming in prev an id that never
// arrives is answered an error naming it after prev_timeout (it hung the
// client for ever, issue 29), not before; one whose prev arrives in time
// is answered its value; a cycle of prev sets is refused when it closes,
// and the operation already waiting on it times out.
func TestPrevWaitIsBounded(t *testing.T) {
	c := newCluster(t, "esds", 3, service.String{}, map[string]string{"prev_timeout": "100ms"}) // 5 gossip ticks
	ghost := c.request("n1", opts("w", false, "never"), "append", "w")
	c.settle(4)
	if _, ok := c.answer(ghost); ok {
		t.Fatal("answered before prev_timeout")
	}
	c.settle(1)
	got := c.mustAnswer(ghost)
	if !got.IsErr() || !strings.Contains(got.String(), ": never (") {
		t.Fatalf("an operation waiting for an id never submitted: %v, want an error naming it", got)
	}
	// A prev that arrives within the timeout is waited for.
	late := c.request("n2", opts("b", false, "a"), "append", "b")
	c.settle(2)
	c.request("n1", opts("a", false), "append", "a")
	c.settle(3)
	if got := c.mustAnswer(late); got.IsErr() {
		t.Fatalf("b, whose prev a arrived in time: %v", got)
	}
	// p names q (not yet submitted); q naming p closes a cycle: refused.
	p := c.request("n3", opts("p", false, "q"), "append", "p")
	q := c.request("n3", opts("q", false, "p"), "append", "q")
	if got := c.mustAnswer(q); !got.IsErr() || !strings.Contains(got.String(), "cycle") {
		t.Fatalf("q closing a prev cycle: %v, want refused", got)
	}
	c.settle(6)
	if got := c.mustAnswer(p); !got.IsErr() {
		t.Fatalf("p, waiting for q that was refused: %v, want the prev timeout's error", got)
	}
}
