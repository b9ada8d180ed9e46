package harness_test

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/blocking"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/service"
)

func set(k, v string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}} }
func get(k string) service.Op    { return service.Op{Kind: "get", Key: k} }

// fatal records the harness's failures instead of ending the test.
type fatal struct{ msgs []string }

func (f *fatal) Helper() {}
func (f *fatal) Fatalf(format string, args ...any) {
	f.msgs = append(f.msgs, fmt.Sprintf(format, args...))
}

// Messages wait until delivered; filters, drops, crashes and the loss rule
// decide which arrive.
func TestQueueControls(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "abd", Nodes: 3})
	id := c.Request("n1", set("a", "1"), automaton.Options{})
	if c.Pending() != 2 {
		t.Fatalf("%d messages in flight after a write's first step, want 2 queries", c.Pending())
	}
	if _, ok := c.Response(id); ok {
		t.Fatal("answered before any message was delivered")
	}
	// Deliver only what goes to n2, then only what comes back to n1.
	if n := c.Deliver(harness.Match("", "n2"), 0); n != 1 {
		t.Fatalf("delivered %d to n2, want 1", n)
	}
	if q := c.Queue(); len(q) != 2 || q[0].To != "n3" || q[1].From != "n2" {
		t.Fatalf("queue %v: the query to n3 keeps its place, n2's reply joins the end", q)
	}
	if n := c.Drop(harness.Match("n1", "n3")); n != 1 {
		t.Fatalf("dropped %d, want 1", n)
	}
	c.DeliverOne() // n2's reply: a majority, phase 2 starts
	if q := c.Queue(); len(q) != 2 {
		t.Fatalf("queue %v, want the two stores", q)
	}
	c.Crash("n3")
	c.DeliverAll()
	if r, ok := c.Response(id); !ok || !r.Equal(service.OK()) {
		t.Fatalf("write answered %v %v", r, ok)
	}
	if !strings.Contains(strings.Join(c.Trace(), "\n"), "n1 -> n3 lost (n3 is down)") {
		t.Fatal("the trace does not show the store lost to the crashed n3")
	}
	// n3 restarts from its disk: it never stored the value.
	c.Restart("n3")
	if _, ok := c.Disk("n3")["k/a"]; ok {
		t.Fatal("n3 has a record it never persisted")
	}
	if _, ok := c.Disk("n2")["k/a"]; !ok {
		t.Fatal("n2's persisted register is not on its disk")
	}
	c.Isolate("n1")
	id2 := c.Request("n1", get("a"), automaton.Options{})
	c.DeliverAll()
	if _, ok := c.Response(id2); ok {
		t.Fatal("an isolated node completed a read")
	}
	c.Heal()
	c.FireAll("n1") // retransmission
	c.DeliverAll()
	if r, _ := c.Response(id2); !r.Equal(service.Bytes([]byte("1"))) {
		t.Fatalf("read after healing answered %v", r)
	}
}

// Timers fire only when fired, once per setting.
func TestTimers(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "blocking", Nodes: 3})
	for _, id := range c.IDs() {
		if got := c.Timers(id); len(got) != 1 || got[0] != 1 {
			t.Fatalf("%s timers %v, want the heartbeat", id, got)
		}
	}
	steps := c.Steps()
	if !c.FireTimer("n1", 1) || c.FireTimer("n1", 2) {
		t.Fatal("FireTimer fired an unset timer or not a set one")
	}
	if c.Steps() != steps+1 {
		t.Fatalf("one firing took %d steps", c.Steps()-steps)
	}
	if n := c.FireAllNodes(); n != 3 {
		t.Fatalf("FireAllNodes fired %d timers, want 3 (n1 re-armed its heartbeat)", n)
	}
	c.Crash("n2")
	if len(c.Timers("n2")) != 0 || c.FireAll("n2") != 0 {
		t.Fatal("a crashed node kept its timers")
	}
}

// A seeded random delivery replays exactly.
func TestDeliverRandomReplays(t *testing.T) {
	run := func() string {
		c := harness.New(t, harness.Options{Protocol: "blocking", Nodes: 3})
		f := harness.Faults{Rand: rand.New(rand.NewSource(5)), Reorder: 0.5, Dup: 0.1, Loss: 0.05}
		for i := 0; i < 6; i++ {
			c.FireAllNodes()
			c.DeliverRandom(f)
		}
		c.Request("n2", set("k", "v"), automaton.Options{})
		for i := 0; i < 4; i++ {
			c.FireAllNodes()
			c.DeliverRandom(f)
		}
		return strings.Join(c.Trace(), "\n")
	}
	if a, b := run(), run(); a != b {
		t.Fatal("two runs with one seed differ")
	}
}

// The same scenario trips an invariant of a broken variant and none of the
// real protocol: ABD's concurrent writers with equal timestamps (the
// writer id breaks the tie), the blocking protocol's concurrent writes
// (the acknowledgements number the writes).
func TestBrokenVariantsTripInvariants(t *testing.T) {
	abdScenario := func(c *harness.Cluster) {
		c.Request("n1", set("k", "from-n1"), automaton.Options{})
		c.Request("n3", set("k", "from-n3"), automaton.Options{})
		c.DeliverAll()
	}
	blockingScenario := func(c *harness.Cluster) {
		for i := 0; i < 5; i++ {
			c.FireAllNodes()
			c.DeliverAll()
		}
		for _, id := range c.IDs() {
			c.Request(id, set("k", "from-"+string(id)), automaton.Options{})
		}
		for i := 0; i < 3; i++ {
			c.DeliverAll()
			c.FireAllNodes()
		}
	}
	for _, tc := range []struct {
		real, broken string
		scenario     func(*harness.Cluster)
		invariant    string
	}{
		{"abd", "abd-broken-nowriterid", abdScenario, "store-held"},
		{"blocking", "blocking-broken-noack", blockingScenario, "tag-unique"},
	} {
		if automaton.BrokenOf(tc.broken) != tc.real {
			t.Errorf("%s is not registered as a broken variant of %s", tc.broken, tc.real)
		}
		// The real protocol: the harness fails the test on a violation.
		real := harness.New(t, harness.Options{Protocol: tc.real, Nodes: 3})
		if len(real.Invariants()) < 2 {
			t.Errorf("%s states %d invariants, want at least 2", tc.real, len(real.Invariants()))
		}
		tc.scenario(real)
		var got error
		broken := harness.New(t, harness.Options{Protocol: tc.broken, Nodes: 3,
			OnViolation: func(_ int, _ automaton.NodeID, err error) { got = err }})
		tc.scenario(broken)
		if got == nil || !strings.HasPrefix(got.Error(), tc.invariant) {
			t.Errorf("%s: violation %v, want %s", tc.broken, got, tc.invariant)
		}
	}
	// Without OnViolation the first violation fails the test, naming the
	// node and the step.
	f := &fatal{}
	abdScenario(harness.New(f, harness.Options{Protocol: "abd-broken-nowriterid", Nodes: 3}))
	if len(f.msgs) == 0 || !strings.Contains(f.msgs[0], "invariant violated after step") || !strings.Contains(f.msgs[0], " at n") {
		t.Fatalf("failures %q, want one naming the step and the node", f.msgs)
	}
}

// Unknown protocols and bad configurations fail the test at once.
func TestNewFailsOnBadConfig(t *testing.T) {
	f := &fatal{}
	harness.New(f, harness.Options{Protocol: "nosuch", Nodes: 1})
	if len(f.msgs) == 0 {
		t.Fatal("unknown protocol accepted")
	}
	f = &fatal{}
	harness.New(f, harness.Options{Protocol: "abd", Nodes: 1, Params: map[string]string{"bogus": "1s"}})
	if len(f.msgs) == 0 || !strings.Contains(f.msgs[0], "bogus") {
		t.Fatalf("bad parameter: %q", f.msgs)
	}
}

// Spares (Down, AddNode) boot later with the configuration as it is then;
// OnBoot and AfterStep run for every incarnation and step.
func TestSparesAndHooks(t *testing.T) {
	boots, steps := 0, 0
	c := harness.New(t, harness.Options{Protocol: "abd", Nodes: 3, Down: []automaton.NodeID{"n3"},
		OnBoot:    func(automaton.NodeID, automaton.Automaton) { boots++ },
		AfterStep: func(automaton.NodeID, automaton.Automaton) error { steps++; return nil }})
	if c.Up("n3") || boots != 2 {
		t.Fatalf("n3 up=%v, %d boots, want n3 down and 2 boots", c.Up("n3"), boots)
	}
	c.AddNode("n4")
	c.Boot("n4")
	if boots != 3 || steps != c.Steps() {
		t.Fatalf("%d boots, hook saw %d of %d steps", boots, steps, c.Steps())
	}
	if len(c.IDs()) != 4 {
		t.Fatalf("ids %v", c.IDs())
	}
}

// Pop hands the test the oldest message to deliver itself (DeliverMessage
// returns the receiver's outputs); Members outputs are recorded per node;
// LastResponse keeps a whole response.
func TestPopDeliverMessageMembers(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: "paxos", Nodes: 3})
	if ms := c.Members("n2"); len(ms) != 3 || !ms[0].Voting || ms[2].ID != "n3" {
		t.Fatalf("n2's Members output %+v, want the three voting members", ms)
	}
	if !c.FireTimer("n1", 2) { // paxos's election timer
		t.Fatal("n1 has no election timer")
	}
	m, ok := c.Pop()
	if !ok || m.From != "n1" || m.To != "n2" || c.Pending() != 1 {
		t.Fatalf("popped %v %v with %d left, want n1's Prepare to n2 and one more", m, ok, c.Pending())
	}
	outs := c.DeliverMessage(m)
	if len(outs) == 0 || c.Pending() != 2 {
		t.Fatalf("the Prepare gave %v, %d in flight", outs, c.Pending())
	}
	c.Crash("n3")
	if outs := c.DeliverMessage(harness.Message{From: "n1", To: "n3", Msg: m.Msg}); outs != nil || c.Members("n3") != nil {
		t.Fatal("a crashed node took a message or kept its Members output")
	}
	c.DeliverAll()
	id := automaton.RequestID{Client: 9, Seq: 1}
	c.Submit("n1", automaton.Request{ID: id, Ops: []service.Op{set("a", "1"), get("a")}})
	c.DeliverAll()
	if r, ok := c.LastResponse(id); !ok || len(r.Results) != 2 || !r.Results[1].Equal(service.Bytes([]byte("1"))) {
		t.Fatalf("group answered %+v %v", r, ok)
	}
	c.ForgetResponses(id)
	if _, ok := c.LastResponse(id); ok {
		t.Fatal("ForgetResponses kept the whole response")
	}
}

// DeliverRandom loses a message to a down node without drawing for loss or
// duplication (a crash decided), so a crash does not shift the random
// choices of later deliveries.
func TestDeliverRandomDownNodeDrawsNothing(t *testing.T) {
	draws := func(crash bool) int {
		c := harness.New(t, harness.Options{Protocol: "abd", Nodes: 3})
		if crash {
			c.Crash("n2")
			c.Crash("n3")
		}
		c.Request("n1", get("k"), automaton.Options{})
		src := &countingSource{Source: rand.NewSource(1)}
		c.DeliverRandom(harness.Faults{Rand: rand.New(src), Loss: 0.1, Dup: 0.1})
		return src.n
	}
	if n := draws(true); n != 0 {
		t.Fatalf("%d draws for two queries to down nodes", n)
	}
	if n := draws(false); n == 0 {
		t.Fatal("no draws for deliveries to up nodes")
	}
}

type countingSource struct {
	rand.Source
	n int
}

func (s *countingSource) Int63() int64 { s.n++; return s.Source.Int63() }
