package harness

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
)

// Dumper is implemented by automata that describe their state for tests
// (the datadriven `state` command). The text should be deterministic: sorted
// keys, no pointers.
type Dumper interface {
	Dump() string
}

// MessageDescriber is implemented by automata that decode their own peer
// messages into one line for traces ("query key=a op=3"). The harness
// renders traces when they are read, with the automaton that was up when
// the line was recorded: the description must not depend on its state.
type MessageDescriber interface {
	DescribeMessage(msg []byte) string
}

// Options configure a Cluster.
type Options struct {
	// Protocol is a registered protocol or broken variant.
	Protocol string
	// Nodes is the number of nodes, named n1..nN.
	Nodes int
	// Service defaults to service.KV{}.
	Service service.Service
	// Params are the namespace parameters handed to every automaton.
	Params map[string]string
	// Namespace defaults to "default".
	Namespace string
	// Seed derives every automaton's random source (default 1).
	Seed int64
	// Down lists nodes that are configured but not booted at creation.
	Down []automaton.NodeID
	// RandFor, when set, gives the random source of the boot-th boot (from
	// 1) of node id instead of the derived one.
	RandFor func(id automaton.NodeID, boot int) *rand.Rand
	// OnBoot runs after an automaton is created and before its Start.
	OnBoot func(id automaton.NodeID, a automaton.Automaton)
	// AfterStep runs after every step (before the invariant checker); an
	// error fails the test like an invariant violation.
	AfterStep func(id automaton.NodeID, a automaton.Automaton) error
	// NoInvariants disables the protocol's invariant checker.
	NoInvariants bool
	// OnViolation, when set, receives the first invariant violation
	// instead of failing the test.
	OnViolation func(step int, node automaton.NodeID, err error)
	// MaxSteps bounds one DeliverAll (a message storm fails the test);
	// default 1,000,000.
	MaxSteps int
}

// Message is a message in flight.
type Message struct {
	From, To automaton.NodeID
	Msg      []byte
}

// Response is a response collected from a node.
type Response struct {
	Node automaton.NodeID
	Resp automaton.Response
}

// Cluster is a hand-driven cluster of automata of one protocol.
type Cluster struct {
	t       TB
	opts    Options
	proto   automaton.Protocol
	ids     []automaton.NodeID
	index   map[automaton.NodeID]int
	nodes   map[automaton.NodeID]automaton.Automaton // up nodes only
	disk    map[automaton.NodeID]map[string][]byte
	timers  map[automaton.NodeID]map[automaton.TimerID]time.Duration
	boots   map[automaton.NodeID]int
	queue   []Message
	loss    func(Message) bool
	resps   map[automaton.RequestID][]service.Result
	full    map[automaton.RequestID]automaton.Response
	order   []Response
	members map[automaton.NodeID][]automaton.Member
	trace   []traceLine
	checker automaton.InvariantChecker
	invs    []string
	violate string
	steps   int
	seq     uint64
	observe func(automaton.NodeID, automaton.Output)
	run     string                                    // the executors' run name, unique in the process
	effects []PendingEffect                           // effect.go
	execs   map[automaton.NodeID]*automaton.Executors // effect.go
	// rel interprets each up node's outputs (package release, the
	// interpreter every runtime runs).
	rel map[automaton.NodeID]*release.Interp
}

// nodeRuntime carries out what the interpreter decides for node id: the
// harness's I/O (its disk, its queue of messages, the responses collected,
// the timers and effects waiting for the test).
type nodeRuntime struct {
	c  *Cluster
	id automaton.NodeID
}

func (r *nodeRuntime) Persist(_ uint64, p automaton.Persist) {
	if p.Delete {
		delete(r.c.disk[r.id], p.Key)
	} else {
		r.c.disk[r.id][p.Key] = append([]byte(nil), p.Value...)
	}
}

func (r *nodeRuntime) Release(o automaton.Output) {
	c, id := r.c, r.id
	switch o := o.(type) {
	case automaton.Send:
		c.queue = append(c.queue, Message{From: id, To: o.To, Msg: o.Msg})
	case automaton.Respond:
		c.resps[o.Resp.ID] = append(c.resps[o.Resp.ID], o.Resp.Result)
		c.full[o.Resp.ID] = o.Resp
		c.order = append(c.order, Response{Node: id, Resp: o.Resp})
	case automaton.Effect:
		c.effects = append(c.effects, PendingEffect{Node: id, Effect: o})
	}
}

func (r *nodeRuntime) SetTimer(t automaton.SetTimer)   { r.c.timers[r.id][t.ID] = t.After }
func (r *nodeRuntime) CancelTimer(t automaton.TimerID) { delete(r.c.timers[r.id], t) }
func (r *nodeRuntime) Members(m automaton.Members) {
	r.c.members[r.id] = append([]automaton.Member(nil), m.Members...)
}

// runs numbers the clusters of the process: the executors' run name
// (automaton.ExecEnv.Run) keys state that outlives crashes, such as a
// simulated database, and must not be shared by two clusters (the
// cluster's address was used before, and the garbage collector reuses
// addresses: a new cluster found an earlier one's database).
var runs atomic.Int64

// TB is the part of testing.TB the harness uses.
type TB interface {
	Helper()
	Fatalf(format string, args ...any)
}

// New creates a cluster and boots every node not listed in opts.Down.
func New(t TB, opts Options) *Cluster {
	t.Helper()
	p, err := automaton.LookupAny(opts.Protocol)
	if err != nil {
		t.Fatalf("harness: %v", err)
		return nil
	}
	if opts.Service == nil {
		opts.Service = service.KV{}
	}
	if opts.Namespace == "" {
		opts.Namespace = "default"
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	if opts.MaxSteps == 0 {
		opts.MaxSteps = 1_000_000
	}
	c := &Cluster{t: t, opts: opts, proto: p, index: map[automaton.NodeID]int{},
		nodes: map[automaton.NodeID]automaton.Automaton{}, disk: map[automaton.NodeID]map[string][]byte{},
		timers: map[automaton.NodeID]map[automaton.TimerID]time.Duration{}, boots: map[automaton.NodeID]int{},
		resps: map[automaton.RequestID][]service.Result{}, full: map[automaton.RequestID]automaton.Response{},
		members: map[automaton.NodeID][]automaton.Member{}, execs: map[automaton.NodeID]*automaton.Executors{},
		rel: map[automaton.NodeID]*release.Interp{}, run: fmt.Sprintf("harness-%d", runs.Add(1))}
	if !opts.NoInvariants {
		c.checker, c.invs = automaton.NewInvariantChecker(opts.Protocol)
	}
	for i := 1; i <= opts.Nodes; i++ {
		c.AddNode(automaton.NodeID(fmt.Sprintf("n%d", i)))
	}
	down := map[automaton.NodeID]bool{}
	for _, id := range opts.Down {
		down[id] = true
	}
	for _, id := range c.ids {
		if !down[id] {
			c.Boot(id)
		}
	}
	return c
}

// setTB points failures at t (the datadriven layer runs each directive in
// its own subtest).
func (c *Cluster) setTB(t TB) { c.t = t }

// Protocol returns the protocol's name.
func (c *Cluster) Protocol() string { return c.opts.Protocol }

// IDs returns the configured nodes in order.
func (c *Cluster) IDs() []automaton.NodeID { return append([]automaton.NodeID(nil), c.ids...) }

// Invariants names the invariants checked (nil when none).
func (c *Cluster) Invariants() []string { return c.invs }

// Steps returns the number of steps taken so far.
func (c *Cluster) Steps() int { return c.steps }

// AddNode adds a node to the configuration, down, with an empty disk. Nodes
// booted later see it in Config.Nodes; running automata do not.
func (c *Cluster) AddNode(id automaton.NodeID) {
	if _, ok := c.index[id]; ok {
		c.t.Fatalf("harness: node %s added twice", id)
	}
	c.index[id] = len(c.ids)
	c.ids = append(c.ids, id)
	c.disk[id] = map[string][]byte{}
}

func (c *Cluster) known(id automaton.NodeID) {
	c.t.Helper()
	if _, ok := c.index[id]; !ok {
		c.t.Fatalf("harness: unknown node %s (nodes %v)", id, c.ids)
		panic("harness: unknown node " + string(id)) // for a TB whose Fatalf returns
	}
}

// Node returns the automaton of node id, or nil when it is down.
func (c *Cluster) Node(id automaton.NodeID) automaton.Automaton { return c.nodes[id] }

// Up reports whether node id is up.
func (c *Cluster) Up(id automaton.NodeID) bool { return c.nodes[id] != nil }

// Boot creates a new automaton for node id (crashing the running one, if
// any) and starts it with the records it persisted.
func (c *Cluster) Boot(id automaton.NodeID) {
	c.t.Helper()
	c.known(id)
	if c.nodes[id] != nil {
		c.Crash(id)
	}
	c.boots[id]++
	var rng *rand.Rand
	if c.opts.RandFor != nil {
		rng = c.opts.RandFor(id, c.boots[id])
	} else {
		rng = rand.New(rand.NewSource(c.opts.Seed*1_000_003 + int64(c.index[id])*1009 + int64(c.boots[id])))
	}
	a, err := c.proto.New(automaton.Config{Self: id, Nodes: c.IDs(), Namespace: c.opts.Namespace,
		Service: c.opts.Service, Params: c.opts.Params, Rand: rng})
	if err != nil {
		c.t.Fatalf("harness: %s: %v", id, err)
		return
	}
	if c.opts.OnBoot != nil {
		c.opts.OnBoot(id, a)
	}
	c.nodes[id] = a
	c.timers[id] = map[automaton.TimerID]time.Duration{}
	c.rel[id] = release.New(release.Config{Self: id, Known: func(to automaton.NodeID) bool { _, ok := c.index[to]; return ok }})
	recs := c.Disk(id)
	c.Step(id, automaton.Start{Records: recs})
}

// Restart crashes node id if it is up and boots it again from its records.
func (c *Cluster) Restart(id automaton.NodeID) { c.t.Helper(); c.Boot(id) }

// Crash stops node id: its automaton and timers are forgotten, its disk
// stays. Messages it sent are still in flight.
func (c *Cluster) Crash(id automaton.NodeID) {
	c.t.Helper()
	c.known(id)
	if c.nodes[id] == nil {
		return
	}
	delete(c.nodes, id)
	delete(c.timers, id)
	c.rel[id].Crash() // holds nothing: the harness's disk is synchronous
	delete(c.rel, id)
	delete(c.members, id)
	c.dropEffects(id)
	c.note(fmt.Sprintf("%s crash", id))
}

// Wipe erases node id's disk (a node replaced by a new machine).
func (c *Cluster) Wipe(id automaton.NodeID) { c.known(id); c.disk[id] = map[string][]byte{} }

// SetRecord writes (or, with a nil value, deletes) one durable record of
// node id behind its back: a corrupted or rolled-back disk.
func (c *Cluster) SetRecord(id automaton.NodeID, key string, value []byte) {
	c.known(id)
	if value == nil {
		delete(c.disk[id], key)
		return
	}
	c.disk[id][key] = append([]byte(nil), value...)
}

// Disk returns a copy of node id's durable records.
func (c *Cluster) Disk(id automaton.NodeID) map[string][]byte {
	out := make(map[string][]byte, len(c.disk[id]))
	for k, v := range c.disk[id] {
		out[k] = append([]byte(nil), v...)
	}
	return out
}

// Step hands node id one input and applies its outputs: sends are queued,
// persists written, timers recorded, responses collected. It returns the
// outputs. A down node takes no input (nil).
func (c *Cluster) Step(id automaton.NodeID, in automaton.Input) []automaton.Output {
	c.t.Helper()
	c.known(id)
	a := c.nodes[id]
	if a == nil {
		c.noteInput(id, in, true)
		return nil
	}
	c.steps++
	c.noteInput(id, in, false)
	outs := a.Step(in)
	r, rt := c.rel[id], &nodeRuntime{c, id}
	for _, o := range outs {
		if err := r.Output(o, rt); err != nil {
			c.t.Fatalf("harness: step %d: %s %v", c.steps, id, err)
			return outs
		}
		if r.Unsynced() {
			// The harness's disk is synchronous: a record is durable
			// once written, so outputs leave as they are emitted.
			r.Durable(r.Last(), rt)
		}
		c.noteOutput(id, a, o)
		if c.observe != nil {
			c.observe(id, o)
		}
	}
	c.afterStep(id, a)
	return outs
}

func (c *Cluster) afterStep(id automaton.NodeID, a automaton.Automaton) {
	c.t.Helper()
	if c.opts.AfterStep != nil {
		if err := c.opts.AfterStep(id, a); err != nil {
			c.t.Fatalf("harness: after step %d at %s: %v", c.steps, id, err)
		}
	}
	c.check(id)
}

// CheckInvariants runs the invariant checker now, as after a step of node
// id: for tests that change an automaton's state behind its back and want
// the checker (with what it remembers of earlier steps) to judge it.
func (c *Cluster) CheckInvariants(id automaton.NodeID) {
	c.t.Helper()
	c.known(id)
	if c.nodes[id] == nil {
		return
	}
	c.check(id)
}

func (c *Cluster) check(id automaton.NodeID) {
	c.t.Helper()
	if c.checker == nil || c.violate != "" {
		return
	}
	if err := c.checker.Check(id, c.nodes); err != nil {
		c.violate = fmt.Sprintf("after step %d at %s: %v", c.steps, id, err)
		c.note("INVARIANT VIOLATED " + c.violate)
		if c.opts.OnViolation != nil {
			c.opts.OnViolation(c.steps, id, err)
			return
		}
		c.t.Fatalf("invariant violated %s\ntrace (last lines):\n%s", c.violate, strings.Join(c.lines(max(0, len(c.trace)-40)), "\n"))
	}
}

// Observe calls f with every output of every later step, in order, after
// the harness applied it (nil: stop).
func (c *Cluster) Observe(f func(id automaton.NodeID, o automaton.Output)) { c.observe = f }

// Violation returns the first invariant violation ("" when none).
func (c *Cluster) Violation() string { return c.violate }

// Request submits op at node at with options opts and returns the request's
// id (client 1, sequence numbers from 1).
func (c *Cluster) Request(at automaton.NodeID, op service.Op, opts automaton.Options) automaton.RequestID {
	c.t.Helper()
	c.seq++
	id := automaton.RequestID{Client: 1, Seq: c.seq}
	c.Submit(at, automaton.Request{ID: id, Op: op, Opts: opts})
	return id
}

// RequestFanout submits op, as one request with Fanout set, to every up
// node in configuration order (a fan-out client, automaton.FanoutProtocol)
// and returns its id.
func (c *Cluster) RequestFanout(op service.Op, opts automaton.Options) automaton.RequestID {
	c.t.Helper()
	c.seq++
	id := automaton.RequestID{Client: 1, Seq: c.seq}
	c.SubmitFanout(automaton.Request{ID: id, Op: op, Opts: opts})
	return id
}

// SubmitFanout hands req, with Fanout set, to every up node in
// configuration order.
func (c *Cluster) SubmitFanout(req automaton.Request) {
	c.t.Helper()
	req.Fanout = true
	for _, n := range c.ids {
		if c.nodes[n] != nil {
			c.Submit(n, req)
		}
	}
}

// Submit hands req to node at as a ClientRequest.
func (c *Cluster) Submit(at automaton.NodeID, req automaton.Request) []automaton.Output {
	c.t.Helper()
	return c.Step(at, automaton.ClientRequest{Req: req})
}

// Response returns the latest response to id.
func (c *Cluster) Response(id automaton.RequestID) (service.Result, bool) {
	l := c.resps[id]
	if len(l) == 0 {
		return service.Result{}, false
	}
	return l[len(l)-1], true
}

// Responses returns every response to id, in order.
func (c *Cluster) Responses(id automaton.RequestID) []service.Result { return c.resps[id] }

// LastResponse returns the latest whole response to id (with an atomic
// group's Results).
func (c *Cluster) LastResponse(id automaton.RequestID) (automaton.Response, bool) {
	r, ok := c.full[id]
	return r, ok
}

// ForgetResponses forgets the responses to id.
func (c *Cluster) ForgetResponses(id automaton.RequestID) {
	delete(c.resps, id)
	delete(c.full, id)
}

// Members returns the set of nodes node id last said (automaton.Members
// output) it exchanges messages with, or nil when it said none since it
// booted.
func (c *Cluster) Members(id automaton.NodeID) []automaton.Member {
	return append([]automaton.Member(nil), c.members[id]...)
}

// AllResponses returns every response collected, in order.
func (c *Cluster) AllResponses() []Response { return c.order }

// Trace returns the trace lines so far.
func (c *Cluster) Trace() []string { return c.lines(0) }

// ResetTrace empties the trace.
func (c *Cluster) ResetTrace() { c.trace = nil }

// Timers returns the timers set at node id, sorted by id.
func (c *Cluster) Timers(id automaton.NodeID) []automaton.TimerID {
	out := make([]automaton.TimerID, 0, len(c.timers[id]))
	for t := range c.timers[id] {
		out = append(out, t)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// TimerAfter returns the duration timer tid of node id was set for.
func (c *Cluster) TimerAfter(id automaton.NodeID, tid automaton.TimerID) (time.Duration, bool) {
	d, ok := c.timers[id][tid]
	return d, ok
}

// FireTimer fires timer tid at node id if it is set, and reports whether it
// was.
func (c *Cluster) FireTimer(id automaton.NodeID, tid automaton.TimerID) bool {
	c.t.Helper()
	if _, ok := c.timers[id][tid]; !ok {
		return false
	}
	delete(c.timers[id], tid)
	c.Step(id, automaton.TimerFired{ID: tid})
	return true
}

// FireAll fires every timer set at node id now, in timer id order (timers
// set by these steps wait for the next call). It returns how many fired.
func (c *Cluster) FireAll(id automaton.NodeID) int {
	c.t.Helper()
	n := 0
	for _, tid := range c.Timers(id) {
		if c.FireTimer(id, tid) {
			n++
		}
	}
	return n
}

// FireAllNodes fires every timer of every up node, node by node.
func (c *Cluster) FireAllNodes() int {
	c.t.Helper()
	n := 0
	for _, id := range c.ids {
		n += c.FireAll(id)
	}
	return n
}
