package mc

import (
	"fmt"
	"math/rand"
	"reflect"
	"sort"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
)

// A world is one state of the checked system: every node's automaton (or
// nothing, when it is down), its durable records and timers, the messages in
// flight, the clients' progress and the history they saw, and the
// protocol's invariant checker (whose memory is part of the state: it judges
// what comes next by what it saw).
//
// Runtime decisions, the same in every state (doc.go):
//   - Persist records are durable at the end of the step that emitted them
//     (each step ends with an fsync), so a crash loses no acknowledged record.
//   - A response reaches its client at once; only peer messages (and a
//     fanning-out client's copies of its request) travel the network.
//   - A client sends its next request only once the previous one is
//     answered, and only to a node that is up (a request to a down node
//     would just stay unanswered: the same as one sent later).

// EventKind names an enabled event.
type EventKind string

const (
	EvInvoke  EventKind = "invoke"  // a client sends its next request
	EvDeliver EventKind = "deliver" // a message in flight is delivered (and leaves the network)
	EvDup     EventKind = "dup"     // a message is delivered and a copy stays in flight
	EvDrop    EventKind = "drop"    // a message is lost
	EvTimer   EventKind = "timer"   // a node's timer fires
	EvCrash   EventKind = "crash"   // a node crashes (volatile state lost, records kept)
	EvRestart EventKind = "restart" // a crashed node restarts from its records
	EvEffect  EventKind = "effect"  // a node's pending Effect is carried out and answered (effect.go)
	// EvCrashUnsynced: a node crashes before the fsync of its last step,
	// losing the records that step persisted after its last output that
	// waits for them, when an Early Send already left (unsynced.go).
	EvCrashUnsynced EventKind = "crash-unsynced"
)

// Event is one transition. Msg indexes the messages in flight, in send
// order, as they stand in the state the event leaves.
type Event struct {
	Kind   EventKind         `json:"kind"`
	Client int               `json:"client,omitempty"`
	Node   int               `json:"node,omitempty"`
	Msg    int               `json:"msg,omitempty"`
	Timer  automaton.TimerID `json:"timer,omitempty"`
	// Desc is the event in words (filled in for traces).
	Desc string `json:"desc,omitempty"`
}

type message struct {
	from, to int
	data     []byte
	req      *automaton.Request // a fanning-out client's copy (from is -1-client)
	// h is msgHash(m, nil), computed once when the message is sent.
	h uint64
}

type nodeState struct {
	a      automaton.Automaton // nil when down
	disk   map[string][]byte
	timers []automaton.TimerID // sorted
	boots  int
	// owned: a belongs to this world alone; otherwise it is shared with
	// the state this one was copied from, and copied before it steps.
	owned bool
	// fp caches the automaton's hash (0: not computed since it stepped).
	fp uint64
	// diskShared: disk is shared with another world (copied before a
	// Persist changes it); diskSum is the commutative hash of its records
	// (diskEntryHash), kept up to date by every Persist.
	diskShared bool
	diskSum    uint64
	// effects are the incarnation's pending Effects, in emission order
	// (effect.go); a crash loses them.
	effects []pendingEffect
	// chkFP caches the hash of the invariant checker's part about this
	// node (automaton.ModelCheckerPartStater; 0: not computed since the
	// node last stepped or crashed).
	chkFP uint64
	// unsynced are the records the node persisted that a crash before
	// their fsync would lose while the outputs that do not wait for them
	// are out (unsynced.go), in emission order; never changed in place.
	unsynced []unsyncedRec
}

type clientState struct {
	next    int // index of the next (or pending) operation
	pending bool
	target  int
	// coord is the pending operation's coordination and phaseSeq the
	// request id of its current phase (client-driven models only:
	// clientdriven.go).
	coord    automaton.Coordination
	phaseSeq uint64
}

// hop is one entry of the history, in real-time order: an invocation, or a
// return with its result.
type hop struct {
	client, op int
	ret        bool
	res        service.Result
}

type world struct {
	cfg    *Config
	proto  automaton.Protocol
	ids    []automaton.NodeID
	index  map[automaton.NodeID]int
	svc    service.Service
	nodes  []nodeState
	flight []message
	// flightSum is the multiset hash of flight (the sum of mix(m.h)),
	// kept up to date by send and unsend.
	flightSum uint64
	clients   []clientState
	hist      []hop
	// histH is histHash(hist, nil), extended by every hop appended.
	histH   uint64
	checker automaton.InvariantChecker
	// checkerFP caches the checker's hash (0: not computed since the
	// checker last changed, or since the set of automata up changed).
	checkerFP uint64
	// checkerOwned: like nodeState.owned, for the invariant checker.
	checkerOwned bool
	crashes      int
	// fired counts the timer firings on the path (Config.Timers' budget).
	fired int
	// ext is the log of effects carried out by executors that keep state
	// across effects (ModelConfig.StatefulEffects), in order (effect.go).
	ext []loggedEffect
	// fanout: the protocol's clients send to every node
	// (automaton.ClientFanoutOf); groups: the interchangeable clients
	// (symmetry.go). Both fixed at the start, shared by every state.
	fanout bool
	groups [][]int
	// sessions: the protocol reads Request.Unanswered
	// (automaton.SupportsSessions); fixed at the start.
	sessions bool
	// coordinator: the protocol's, in a client-driven model
	// (clientdriven.go); nil otherwise.
	coordinator automaton.ClientCoordinator
	// nodeGroups: the interchangeable nodes (nodesym.go), fixed at the
	// start; symRenamer renames node names in messages and records.
	nodeGroups [][]int
	symRenamer automaton.ModelMessageRenamer
	// seedGroups: nodeGroups as first computed, which seeds the nodes'
	// random sources (kept if the automata turn out not to rename).
	seedGroups [][]int
	// scripts caches cfg.script per client (shared by every state).
	scripts [][]service.Op
	// returned: the last step completed an operation (the history grew).
	returned bool
	// violation: what the last step broke ("" when nothing).
	violation string
}

func newWorld(cfg *Config) (*world, error) {
	p, err := automaton.LookupAny(cfg.Protocol)
	if err != nil {
		return nil, err
	}
	svcName := cfg.Model.Service
	if svcName == "" {
		svcName = "kv"
	}
	svc, err := service.Lookup(svcName)
	if err != nil {
		return nil, err
	}
	if err := automaton.CheckService(cfg.Protocol, svc); err != nil {
		return nil, err
	}
	w := &world{cfg: cfg, proto: p, svc: svc, index: map[automaton.NodeID]int{}, sessions: automaton.SupportsSessions(cfg.Protocol)}
	for i := 1; i <= cfg.Model.Nodes; i++ {
		id := automaton.NodeID(fmt.Sprintf("n%d", i))
		w.index[id] = len(w.ids)
		w.ids = append(w.ids, id)
	}
	w.nodes = make([]nodeState, len(w.ids))
	for i := range w.nodes {
		w.nodes[i].disk = map[string][]byte{}
	}
	w.checker, _ = automaton.NewInvariantChecker(cfg.Protocol)
	w.fanout = automaton.ClientFanoutOf(cfg.Protocol)
	w.clients = make([]clientState, cfg.Model.Clients)
	for c := range w.clients {
		switch cfg.Model.Target {
		case "first":
			w.clients[c].target = 0
		default:
			w.clients[c].target = c % len(w.ids)
		}
	}
	for c := range w.clients {
		w.scripts = append(w.scripts, cfg.script(c))
	}
	w.groups = w.symmetryGroups()
	w.nodeGroups, w.seedGroups = w.nodeSymmetryGroups()
	if cfg.Model.ClientDriven {
		if err := w.startClientDriven(); err != nil {
			return nil, err
		}
	}
	for i := range w.ids {
		if err := w.boot(i); err != nil {
			return nil, err
		}
		if w.violation != "" {
			break
		}
	}
	w.checkNodeRenamers()
	return w, nil
}

// boot creates node i's automaton and starts it from its records. Its
// random source depends only on the node and the boot count, so that a
// replay draws the same numbers.
func (w *world) boot(i int) error {
	n := &w.nodes[i]
	n.boots++
	rng := rand.New(rand.NewSource(int64(w.seedNode(i)+1)*7919 + int64(n.boots)))
	a, err := w.proto.New(automaton.Config{Self: w.ids[i], Nodes: append([]automaton.NodeID(nil), w.ids...),
		Namespace: "default", Service: w.svc, Params: w.cfg.Model.Params, Rand: rng})
	if err != nil {
		return fmt.Errorf("%s: %w", w.ids[i], err)
	}
	recordOrder(a) // workload_esds.go
	w.ownChecker(nil)
	n.a, n.owned, n.fp = a, true, 0
	n.timers, n.effects = nil, nil
	recs := make(map[string][]byte, len(n.disk))
	for k, v := range n.disk {
		recs[k] = v
	}
	w.step(i, automaton.Start{Records: recs})
	return nil
}

// script is cfg.script(c), computed once.
func (w *world) script(c int) []service.Op {
	if c < len(w.scripts) {
		return w.scripts[c]
	}
	return w.script(c)
}

// request returns client c's i-th request.
func (w *world) request(c, i int) automaton.Request {
	if k := w.resendOf(c, i); k >= 0 {
		return w.request(c, k) // a copy (workload.go)
	}
	op := w.script(c)[i]
	var r automaton.Request
	if w.cfg.Model.Requests != nil {
		r = w.cfg.Model.Requests(c+1, i, op)
	} else {
		r = automaton.Request{Op: op}
	}
	r.ID = automaton.RequestID{Client: uint64(c + 1), Seq: uint64(i + 1)}
	r = w.workloadRequest(c, i, r)
	if w.sessions && !r.Nested {
		// A closed-loop client waits for this request only
		// (automaton.Request.Unanswered); a resend's copy carries its
		// original's, lower than the client's: a stale bound is safe.
		r.Unanswered = r.ID.Seq
	}
	return r
}

// step hands node i one input and applies its outputs.
func (w *world) step(i int, in automaton.Input) {
	n := &w.nodes[i]
	if n.a == nil {
		return
	}
	w.own(i)
	n.fp = 0
	outs := n.a.Step(in)
	// The step's outputs go through package release, the interpreter of
	// the contract every runtime runs. Each record is durable once
	// written (doc.go: the step's fsync covers it before anything else
	// happens), so outputs leave as they are emitted; the interpreter
	// still tells which records an Early Send exposes (unsynced.go).
	r := release.New(release.Config{Self: w.ids[i], Known: w.isNode})
	carried := w.carryUnsynced(i, r)
	io := &worldIO{w: w, i: i}
	for _, o := range outs {
		if err := r.Output(o, io); err != nil {
			w.fail(fmt.Sprintf("contract: %s %v", w.ids[i], err))
			continue
		}
		if r.Unsynced() {
			r.Durable(r.Last(), io)
		}
	}
	w.noteUnsynced(i, r, carried, io.undo)
	if w.checker != nil && w.violation == "" {
		w.checkerFP, n.chkFP = 0, 0
		up := w.upNodes()
		if err := w.checker.Check(w.ids[i], up); err != nil {
			w.fail("invariant: " + err.Error())
		}
		clear(up)
		upMaps.Put(up)
	}
	w.workloadCheck(i) // workload.go
}

// isNode reports whether id names a node of the model.
func (w *world) isNode(id automaton.NodeID) bool { _, ok := w.index[id]; return ok }

// worldIO carries out, for node i, what its interpreter decides
// (release.Runtime): records go to its disk, messages in flight,
// responses to the clients, effects to its pending list, timers to its
// set.
type worldIO struct {
	w *world
	i int
	// undo: how to undo each record of the step (CrashBeforeFsync only).
	undo []unsyncedAt
}

func (io *worldIO) Persist(seq uint64, p automaton.Persist) {
	n := &io.w.nodes[io.i]
	if io.w.cfg.CrashBeforeFsync {
		old, had := n.disk[p.Key]
		io.undo = append(io.undo, unsyncedAt{seq, unsyncedRec{key: p.Key, pos: p.Pos, old: old, had: had}})
	}
	n.persist(p)
}

func (io *worldIO) Release(o automaton.Output) {
	w, i := io.w, io.i
	switch o := o.(type) {
	case automaton.Send:
		w.send(message{from: i, to: w.index[o.To], data: o.Msg})
	case automaton.Respond:
		if w.coordinator != nil {
			w.drivenAnswer(i, o.Resp)
		} else {
			w.respond(o.Resp)
		}
	case automaton.Effect:
		n := &w.nodes[i]
		n.effects = append(n.effects[:len(n.effects):len(n.effects)], pendingEffect{id: o.ID, kind: o.Kind, payload: o.Payload, fp: valueHash(o.Payload)})
	}
}

func (io *worldIO) SetTimer(t automaton.SetTimer)    { io.w.nodes[io.i].setTimer(t.ID) }
func (io *worldIO) CancelTimer(id automaton.TimerID) { io.w.nodes[io.i].cancelTimer(id) }
func (io *worldIO) Members(automaton.Members)        {}

// upMaps holds the maps handed to the invariant checker (a world keeps
// none: a map per state was a tenth of abd's search). A checker reads the
// map during Check and keeps none of it (none does; the automata it holds
// it keeps by pointer).
var upMaps = sync.Pool{New: func() any { return map[automaton.NodeID]automaton.Automaton{} }}

// upNodes returns a map from upMaps of the automata of the nodes that are
// up (the caller clears it and puts it back).
func (w *world) upNodes() map[automaton.NodeID]automaton.Automaton {
	up := upMaps.Get().(map[automaton.NodeID]automaton.Automaton)
	for i := range w.nodes {
		if a := w.nodes[i].a; a != nil {
			up[w.ids[i]] = a
		}
	}
	return up
}

// persist applies a Persist output to the node's records (copied first
// when shared) and to their hash.
func (n *nodeState) persist(o automaton.Persist) {
	if n.disk == nil || n.diskShared {
		d := make(map[string][]byte, len(n.disk)+1)
		for k, v := range n.disk {
			d[k] = v // record values are never modified in place
		}
		n.disk, n.diskShared = d, false
	}
	if old, ok := n.disk[o.Key]; ok {
		n.diskSum -= diskEntryHash(o.Key, old)
	}
	if o.Delete {
		delete(n.disk, o.Key)
		return
	}
	v := append([]byte(nil), o.Value...)
	n.disk[o.Key] = v
	n.diskSum += diskEntryHash(o.Key, v)
}

// send puts m in flight.
func (w *world) send(m message) {
	m.h = msgHash(&m, nil)
	w.flight = append(w.flight, m)
	w.flightSum += mix(m.h)
}

// unsend takes message k out of flight (into a new slice: the old one may
// be shared with other worlds).
func (w *world) unsend(k int) {
	w.flightSum -= mix(w.flight[k].h)
	f := make([]message, 0, len(w.flight)-1)
	f = append(f, w.flight[:k]...)
	w.flight = append(f, w.flight[k+1:]...)
}

// addHop appends x to the history and to its hash.
func (w *world) addHop(x hop) {
	w.hist = append(w.hist[:len(w.hist):len(w.hist)], x)
	w.histH = hopHash(w.histH, x, nil)
}

func (w *world) fail(s string) {
	if w.violation == "" {
		w.violation = s
	}
}

func (n *nodeState) setTimer(id automaton.TimerID) {
	k := sort.Search(len(n.timers), func(j int) bool { return n.timers[j] >= id })
	if k < len(n.timers) && n.timers[k] == id {
		return
	}
	t := make([]automaton.TimerID, 0, len(n.timers)+1)
	t = append(t, n.timers[:k]...)
	t = append(t, id)
	n.timers = append(t, n.timers[k:]...)
}

func (n *nodeState) cancelTimer(id automaton.TimerID) {
	for k, t := range n.timers {
		if t == id {
			n.timers = append(append([]automaton.TimerID(nil), n.timers[:k]...), n.timers[k+1:]...)
			return
		}
	}
}

// respond hands a response to its client: the first non-silent answer to
// the pending request completes it.
func (w *world) respond(r automaton.Response) {
	c := int(r.ID.Client) - 1
	if c < 0 || c >= len(w.clients) || r.Silent {
		return
	}
	cl := &w.clients[c]
	if !cl.pending || r.ID.Seq != w.expectedSeq(c, cl.next) {
		return
	}
	w.nestedAnswerCheck(c, cl.next, hopResult(r)) // workload.go
	cl.pending = false
	w.addHop(hop{client: c, op: cl.next, ret: true, res: hopResult(r)}) // workload.go
	cl.next++
	w.returned = true
}

// enabled lists the events enabled in w, in a deterministic order.
func (w *world) enabled() []Event {
	evs := make([]Event, 0, len(w.clients)+3*len(w.flight)+len(w.nodes))
	for c := range w.clients {
		cl := &w.clients[c]
		if cl.pending || cl.next >= len(w.script(c)) {
			continue
		}
		if w.cfg.Model.Target == "any" && !w.fanout && w.coordinator == nil {
			for i := range w.nodes {
				if w.nodes[i].a != nil {
					evs = append(evs, Event{Kind: EvInvoke, Client: c, Node: i})
				}
			}
		} else if w.nodes[cl.target].a != nil || w.fanout || w.coordinator != nil {
			evs = append(evs, Event{Kind: EvInvoke, Client: c, Node: cl.target})
		}
	}
	inbox := -1 // Network.ByNode: the node whose inbox drains now
	if w.cfg.Net.ByNode {
		for k := range w.flight {
			if to := w.flight[k].to; to > inbox {
				inbox = to
			}
		}
	}
	for k := range w.flight {
		if !w.deliverable(k) || inbox >= 0 && w.flight[k].to != inbox {
			continue
		}
		evs = append(evs, Event{Kind: EvDeliver, Msg: k})
		if w.cfg.Net.Duplicating {
			evs = append(evs, Event{Kind: EvDup, Msg: k})
		}
		if w.cfg.Net.Lossy {
			evs = append(evs, Event{Kind: EvDrop, Msg: k})
		}
	}
	if w.timersSpent() {
		// no more timeouts on this path
	} else if mode := w.cfg.timerMode(); mode == "all" || mode == "quiet" && len(w.flight) == 0 {
		for i := range w.nodes {
			if w.nodes[i].a == nil {
				continue
			}
			for _, t := range w.nodes[i].timers {
				evs = append(evs, Event{Kind: EvTimer, Node: i, Timer: t})
			}
		}
	}
	for i := range w.nodes {
		if w.nodes[i].a == nil {
			continue
		}
		for k := range w.nodes[i].effects {
			evs = append(evs, Event{Kind: EvEffect, Node: i, Msg: k})
		}
	}
	for i := range w.nodes {
		if w.nodes[i].a != nil && w.crashes < w.cfg.Crashes {
			evs = append(evs, Event{Kind: EvCrash, Node: i})
			if len(w.nodes[i].unsynced) > 0 {
				evs = append(evs, Event{Kind: EvCrashUnsynced, Node: i})
			}
		}
		if w.nodes[i].a == nil {
			evs = append(evs, Event{Kind: EvRestart, Node: i})
		}
	}
	return evs
}

// timersSpent: the path used up Config.Timers' budget. A state quiet only
// for that is not judged by the bounded eventually property (a timeout
// would have moved it on).
func (w *world) timersSpent() bool {
	b := w.cfg.timerBudget()
	return b > 0 && w.fired >= b
}

// deliverable: under an ordered network only a link's oldest message may
// go; under an unordered one, of identical messages on a link only the
// first is offered (the others lead to the same states).
func (w *world) deliverable(k int) bool {
	m := &w.flight[k]
	for j := 0; j < k; j++ {
		o := &w.flight[j]
		if o.from != m.from || o.to != m.to {
			continue
		}
		if w.cfg.Net.Ordered || (string(o.data) == string(m.data) && o.req == m.req) {
			return false
		}
	}
	return true
}

// apply performs ev on w.
func (w *world) apply(ev Event) error {
	w.returned, w.violation = false, ""
	switch ev.Kind {
	case EvInvoke:
		cl := &w.clients[ev.Client]
		if cl.pending || cl.next >= len(w.script(ev.Client)) {
			return fmt.Errorf("client %d has no request to send", ev.Client+1)
		}
		if w.coordinator != nil {
			return w.invokeDriven(ev.Client)
		}
		cl.pending = true
		w.addHop(hop{client: ev.Client, op: cl.next})
		req := w.request(ev.Client, cl.next)
		if w.fanout {
			req.Fanout = true
			r := req
			for i := range w.nodes {
				w.send(message{from: -1 - ev.Client, to: i, req: &r})
			}
			return nil
		}
		w.step(ev.Node, automaton.ClientRequest{Req: req})
	case EvDeliver, EvDup, EvDrop:
		if ev.Msg < 0 || ev.Msg >= len(w.flight) {
			return fmt.Errorf("no message %d in flight", ev.Msg)
		}
		m := w.flight[ev.Msg]
		if ev.Kind != EvDup {
			w.unsend(ev.Msg)
		}
		if ev.Kind == EvDrop {
			return nil
		}
		if m.req != nil {
			w.step(m.to, automaton.ClientRequest{Req: *m.req})
		} else {
			w.step(m.to, automaton.PeerMessage{From: w.ids[m.from], Msg: m.data})
		}
	case EvTimer:
		n := &w.nodes[ev.Node]
		had := false
		for _, t := range n.timers {
			had = had || t == ev.Timer
		}
		if n.a == nil || !had {
			return fmt.Errorf("timer %d is not set at %s", ev.Timer, w.ids[ev.Node])
		}
		n.cancelTimer(ev.Timer)
		w.fired++
		w.step(ev.Node, automaton.TimerFired{ID: ev.Timer})
	case EvCrash, EvCrashUnsynced:
		n := &w.nodes[ev.Node]
		if n.a == nil {
			return fmt.Errorf("%s is down already", w.ids[ev.Node])
		}
		if ev.Kind == EvCrashUnsynced {
			if len(n.unsynced) == 0 {
				return fmt.Errorf("%s has no unsynced records", w.ids[ev.Node])
			}
			n.loseUnsynced()
		}
		n.unsynced = nil
		n.a, n.timers, n.effects, n.owned, n.fp = nil, nil, nil, false, 0
		w.checkerFP, n.chkFP = 0, 0 // the checker's references to it hash by content now
		w.crashes++
	case EvRestart:
		if w.nodes[ev.Node].a != nil {
			return fmt.Errorf("%s is up", w.ids[ev.Node])
		}
		return w.boot(ev.Node)
	case EvEffect:
		return w.completeEffect(ev.Node, ev.Msg)
	default:
		return fmt.Errorf("unknown event %q", ev.Kind)
	}
	return nil
}

// clone returns a copy of w that shares its automata and checker until
// one of them changes (own): an event steps one node, so a successor
// copies one automaton and the checker, not the whole cluster.
func (w *world) clone() *world {
	// The original gives up ownership too: should it step again, it
	// copies rather than change what the copy shares.
	for i := range w.nodes {
		w.nodes[i].owned, w.nodes[i].diskShared = false, true
	}
	w.checkerOwned = false
	c := *w
	c.nodes = append([]nodeState(nil), w.nodes...)
	for i := range c.nodes {
		n := &c.nodes[i]
		n.timers = n.timers[:len(n.timers):len(n.timers)]
		n.effects = n.effects[:len(n.effects):len(n.effects)]
	}
	c.checkerOwned = false
	c.flight = w.flight[:len(w.flight):len(w.flight)]
	c.clients = append([]clientState(nil), w.clients...)
	c.hist = w.hist[:len(w.hist):len(w.hist)]
	c.ext = w.ext[:len(w.ext):len(w.ext)]
	return &c
}

// own gives node i an automaton of this world's own (a deep copy of the
// shared one: the generic copier, or its Snapshot) and copies the checker
// with it, so that the checker's references to node i follow the copy and
// its references to the other nodes stay on their (shared) automata.
func (w *world) own(i int) {
	n := &w.nodes[i]
	if n.owned {
		return
	}
	old := n.a
	if ms, ok := old.(automaton.ModelStater); ok && !w.cfg.Reflective && len(n.effects) == 0 {
		// The fast path: the automaton copies itself, and the checker
		// (itself, or by the reflective copier) follows it to the copy.
		a := ms.CloneModel()
		n.a, n.owned = a, true
		if cs, ok := w.checker.(automaton.ModelCheckerStater); ok {
			w.checker = cs.CloneChecker(func(x automaton.Automaton) automaton.Automaton {
				if x == old {
					return a
				}
				return x
			})
			w.checkerOwned = true
			return
		}
		w.checkerOwned = false
		cp := w.sharingCopier(i)
		cp.seen[reflect.ValueOf(old).Pointer()] = reflect.ValueOf(a)
		w.ownChecker(cp)
		return
	}
	cp := w.sharingCopier(i)
	var a automaton.Automaton
	if s, ok := n.a.(automaton.Snapshotter); ok && w.checker == nil && len(n.effects) == 0 {
		a = s.Snapshot()
	} else {
		a = cp.copyAny(n.a).(automaton.Automaton)
	}
	n.a, n.owned = a, true
	if len(n.effects) > 0 {
		// The payloads of pending effects may share memory with the
		// automaton (Eve's batch state): copied with it, by one copier.
		effs := make([]pendingEffect, len(n.effects))
		for k, e := range n.effects {
			effs[k] = e
			effs[k].payload = cp.copyAny(e.payload)
		}
		n.effects = effs
	}
	w.checkerOwned = false
	w.ownChecker(cp)
}

// sharingCopier returns a copier that leaves the automata of nodes other
// than i where they are (references to them are kept, not copied).
func (w *world) sharingCopier(i int) *copier {
	cp := newCopier()
	for j := range w.nodes {
		if a := w.nodes[j].a; a != nil && j != i {
			v := reflect.ValueOf(a)
			cp.seen[v.Pointer()] = v
		}
	}
	return cp
}

// ownChecker copies the shared checker (with cp, whose map says where
// references to automata go; nil: a fresh copier).
func (w *world) ownChecker(cp *copier) {
	if w.checker == nil || w.checkerOwned {
		return
	}
	if cs, ok := w.checker.(automaton.ModelCheckerStater); ok && cp == nil && !w.cfg.Reflective {
		w.checker = cs.CloneChecker(func(x automaton.Automaton) automaton.Automaton { return x })
		w.checkerOwned = true
		return
	}
	if cp == nil {
		cp = w.sharingCopier(-1)
	}
	w.checker = cp.copyAny(w.checker).(automaton.InvariantChecker)
	w.checkerOwned = true
}

// describe renders ev as it applies to w (before it happens).
func (w *world) describe(ev Event) string {
	switch ev.Kind {
	case EvInvoke:
		if w.coordinator != nil {
			return w.describeInvokeDriven(ev.Client)
		}
		cl := w.clients[ev.Client]
		op := "?"
		if cl.next < len(w.script(ev.Client)) {
			op = w.script(ev.Client)[cl.next].String()
		}
		if w.fanout {
			return fmt.Sprintf("client %d sends %s to every node", ev.Client+1, op)
		}
		return fmt.Sprintf("client %d sends %s to %s", ev.Client+1, op, w.ids[ev.Node])
	case EvDeliver, EvDup, EvDrop:
		if ev.Msg >= len(w.flight) {
			return fmt.Sprintf("%s message %d (none)", ev.Kind, ev.Msg)
		}
		verb := map[EventKind]string{EvDeliver: "deliver", EvDup: "deliver a copy of", EvDrop: "lose"}[ev.Kind]
		return verb + " " + w.describeMsg(w.flight[ev.Msg])
	case EvTimer:
		return fmt.Sprintf("%s: timer %d fires", w.ids[ev.Node], ev.Timer)
	case EvCrash:
		return fmt.Sprintf("%s crashes", w.ids[ev.Node])
	case EvCrashUnsynced:
		return fmt.Sprintf("%s crashes before its fsync, losing %d unsynced record(s)", w.ids[ev.Node], len(w.nodes[ev.Node].unsynced))
	case EvEffect:
		if effs := w.nodes[ev.Node].effects; ev.Msg < len(effs) {
			return fmt.Sprintf("%s: effect %d (%s) is carried out", w.ids[ev.Node], effs[ev.Msg].id, effs[ev.Msg].kind)
		}
		return fmt.Sprintf("%s: effect %d (none)", w.ids[ev.Node], ev.Msg)
	case EvRestart:
		return fmt.Sprintf("%s restarts", w.ids[ev.Node])
	}
	return string(ev.Kind)
}

// messageDescriber is harness.MessageDescriber (automata that decode their
// own messages).
type messageDescriber interface {
	DescribeMessage(msg []byte) string
}

// dumper is harness.Dumper (automata that describe their state).
type dumper interface{ Dump() string }

func (w *world) describeMsg(m message) string {
	if m.req != nil {
		return fmt.Sprintf("client %d -> %s: request %v %s%s", -m.from, w.ids[m.to], m.req.ID, m.req.Op, extString(m.req.Opts.Ext))
	}
	var d automaton.Automaton
	for _, n := range w.nodes {
		if n.a != nil {
			d = n.a
			break
		}
	}
	body := fmt.Sprintf("%d bytes", len(m.data))
	if md, ok := d.(messageDescriber); ok {
		body = md.DescribeMessage(m.data)
	}
	return fmt.Sprintf("%s -> %s: %s", w.ids[m.from], w.ids[m.to], body)
}
