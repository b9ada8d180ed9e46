package esds

import (
	"fmt"
	"math/bits"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

func init() {
	automaton.Register(protocol{name: "esds"})
	automaton.Register(protocol{name: "esds-unopt", unopt: true})
	// Deliberately broken variants, kept so that the ESDS checker can be shown
	// to catch them (see the package doc). Never use them for data.
	automaton.Register(protocol{name: "esds-broken-earlystrict", earlyStrict: true})
	automaton.Register(protocol{name: "esds-broken-maxlabel", maxLabel: true})
}

type protocol struct {
	name        string
	unopt       bool // ESDSAlg instead of ESDSOptAlg by default
	earlyStrict bool // broken: strict operations answered once done locally
	maxLabel    bool // broken: gossip merges labels by maximum
}

func (p protocol) Name() string { return p.name }

// IdempotentRetry implements automaton.Protocol: an operation is identified by
// its id, so a retry of the same request (same RequestID, hence the same
// derived id, or the same client-chosen OpID) at any node joins the one
// operation; it appears once in the eventual total order.
func (p protocol) IdempotentRetry() bool { return true }

// Consistency implements automaton.ConsistencyModel.
func (p protocol) Consistency() automaton.Consistency { return automaton.EventuallySerializable }

// Defaults for the protocol parameters.
const (
	DefaultGossip     = 20 * time.Millisecond
	DefaultRetransmit = 100 * time.Millisecond
	DefaultBatch      = 512
	resultCacheSize   = 4096
	gcEveryTicks      = 10
	maxReplicas       = 64

	timerGossip automaton.TimerID = 1

	// AdminRemove is the operation kind of the membership admin request:
	// Op{Kind: AdminRemove, Key: "<node id>"} removes that replica from the
	// membership (see the package doc). It is intercepted before the service.
	AdminRemove = "esds.remove"
)

func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("esds: namespace %q has no service", cfg.Namespace)
	}
	if len(cfg.Nodes) > maxReplicas {
		return nil, fmt.Errorf("esds: %d nodes; at most %d replicas are supported", len(cfg.Nodes), maxReplicas)
	}
	a := &ESDS{
		proto:      p,
		cfg:        cfg,
		svc:        cfg.Service,
		index:      map[automaton.NodeID]int{},
		unopt:      p.unopt,
		gossipIvl:  DefaultGossip,
		retransmit: DefaultRetransmit,
		batch:      DefaultBatch,
	}
	a.self = -1
	for i, n := range cfg.Nodes {
		if _, dup := a.index[n]; dup {
			return nil, fmt.Errorf("esds: node %s listed twice", n)
		}
		a.index[n] = i
		if n == cfg.Self {
			a.self = i
		}
	}
	if a.self < 0 {
		return nil, fmt.Errorf("esds: self %s is not among the nodes %v", cfg.Self, cfg.Nodes)
	}
	a.all = uint64(1)<<len(cfg.Nodes) - 1
	if len(cfg.Nodes) == 64 {
		a.all = ^uint64(0)
	}
	for k, v := range cfg.Params {
		switch k {
		case "gossip", "retransmit":
			if k == "gossip" && v == "off" {
				a.gossipOff = true // experiments.go: replicas learn only through front ends
				continue
			}
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return nil, fmt.Errorf("esds: parameter %s: %q is not a positive duration", k, v)
			}
			if k == "gossip" {
				a.gossipIvl = d
			} else {
				a.retransmit = d
			}
		case "batch":
			var n int
			if _, err := fmt.Sscanf(v, "%d", &n); err != nil || n < 1 || fmt.Sprint(n) != v {
				return nil, fmt.Errorf("esds: parameter batch: %q is not a positive integer", v)
			}
			a.batch = n
		case "variant":
			switch v {
			case "opt":
				a.unopt = false
			case "unopt":
				a.unopt = true
			default:
				return nil, fmt.Errorf("esds: parameter variant: %q (want opt or unopt)", v)
			}
		case "values":
			switch v {
			case "memo":
				a.recompute = false
			case "recompute":
				a.recompute = true
			default:
				return nil, fmt.Errorf("esds: parameter values: %q (want memo or recompute)", v)
			}
		case "removed":
			for _, s := range strings.Split(v, ",") {
				i, ok := a.index[automaton.NodeID(strings.TrimSpace(s))]
				if !ok {
					return nil, fmt.Errorf("esds: parameter removed: %q is not a node", s)
				}
				if i == a.self {
					return nil, fmt.Errorf("esds: parameter removed: %s lists itself", cfg.Self)
				}
				a.removedParam |= 1 << i
			}
		default:
			return nil, fmt.Errorf("esds: unknown parameter %q (known: gossip, retransmit, batch, variant, values, removed)", k)
		}
	}
	a.retxTicks = int((a.retransmit + a.gossipIvl - 1) / a.gossipIvl)
	return a, nil
}

// ESDS is one node's replica and front end for one namespace.
type ESDS struct {
	proto protocol
	cfg   automaton.Config
	svc   service.Service
	index map[automaton.NodeID]int
	self  int
	all   uint64 // a bit per configured replica

	unopt                 bool
	gossipIvl, retransmit time.Duration
	retxTicks, batch      int
	removedParam          uint64
	gossipOff, recompute  bool // experiments.go

	inc     uint64 // this incarnation
	removed uint64 // replicas removed from the membership

	// Replica state (Fig. 4.2 / 4.5). An operation is in rcvd when it is in
	// ops; in done_r[r] when it has a label; done[i], solid[i] are bit masks.
	ops     map[string]*op
	waiting []*op  // rcvd − done_r[r], in arrival order
	counter uint64 // lbl-counter: at least every label counter seen
	arrival uint64

	// Memoised stable state (optimised variant): stable-state_r, the label
	// of the last operation applied to it, and the operations not yet
	// applied (kept sorted lazily).
	stable    service.State
	stableMax Label
	// Tentative state: stable state plus every non-applied done operation in
	// label order; valid until a label changes under it.
	tent      service.State
	tentMax   Label
	tentValid bool

	// Indexes (index.go).
	dna         []*op
	dnaNew      []*op
	maxSolid    Label
	appliedLive []*op

	gcd idSummary
	// goneQ: collected operations whose "gone" entry some peers (bits) have
	// not acknowledged yet.
	goneQ   map[string]uint64
	results map[string]service.Result // values of garbage-collected operations
	resultQ []string

	// Front end: the client requests waiting for each operation.
	pending map[string][]automaton.RequestID

	peers []peer
	tick  int

	recording bool
	orderLog  []string

	dirty map[string]bool
	seen  map[string]bool    // sendStream's scratch
	out   []automaton.Output // persists of this step
	post  []automaton.Output // sends and responses, released after out
}

// op is one operation object (seed 000 §4.2.2): the descriptor plus this
// replica's bookkeeping.
type op struct {
	id      string
	prev    []string
	strict  bool
	sop     service.Op
	label   Label  // minlabel_r
	done    uint64 // bit i: in done_r[i]
	solid   uint64 // bit i: in solid_r[i]
	applied bool   // in the stable state
	sval    service.Result
	svalOK  bool // sval is known (lost for operations applied before a restart)
	tval    service.Result
	tvalOK  bool
	arrival uint64
	inWait  bool // in a.waiting
	inDNA   bool // in a.dna (index.go)
	// What the record o/<id> last persisted says (flushDirty skips rewriting
	// an identical record).
	pFlags byte
	pLabel Label
	pOK    bool
}

// qent is one position of an outgoing stream: what this replica knew about
// the operation when the position was queued (the flags and label of its
// entry; the descriptor, which never changes, is read when sending). It is
// sent as it is, however often, so that every prefix of the stream is this
// replica's state at some past moment (see the package doc).
type qent struct {
	id    string
	flags byte // flagGone: collected when queued
	label Label
}

// peer is the gossip stream state towards (and from) one other replica.
type peer struct {
	// Outgoing stream (optimised variant).
	stream   uint64
	queue    []qent // queue[k] has sequence number acked+1+k
	acked    uint64
	sentUpTo uint64 // next to send is sentUpTo+1 (back to acked on retransmission)
	hiSent   uint64 // highest position ever sent on this stream
	lastRetx int
	// has: live operations whose descriptor the peer has acknowledged on
	// this stream; later entries for them are sent bare (flagBare).
	has map[string]bool
	// What we know of the peer: its incarnation, and incarnations it left.
	inc     uint64
	retired map[uint64]bool
	// Incoming stream from the peer.
	inStream uint64
	inNext   uint64 // next sequence number expected
	ackDue   bool
}

func (a *ESDS) members() uint64 { return a.all &^ a.removed }
func (a *ESDS) bit() uint64     { return 1 << a.self }

// Step implements automaton.Automaton.
func (a *ESDS) Step(in automaton.Input) []automaton.Output {
	a.out, a.post = nil, nil
	if a.dirty == nil {
		a.dirty = map[string]bool{}
	} else {
		clear(a.dirty)
	}
	switch in := in.(type) {
	case automaton.Start:
		a.onStart(in)
	case automaton.ClientRequest:
		a.onRequest(in.Req)
	case automaton.PeerMessage:
		a.onMessage(in.From, in.Msg)
	case automaton.TimerFired:
		if in.ID == timerGossip {
			a.onTick()
		}
	}
	if a.ops != nil {
		a.progress()
		a.flushDirty()
	}
	out := append(a.out, a.post...)
	a.out, a.post = nil, nil
	return out
}

// RecordOrder makes the replica keep the ids of the operations it applied to
// its stable state, in order, also across garbage collection and restarts, so
// that FinalOrder is complete. Call it before Start. Tests and the simulator
// use it; it costs memory that grows with the operations.
func (a *ESDS) RecordOrder() { a.recording = true }

// FinalOrder returns this replica's total order of the operations it has
// done: those applied to the stable state, in the order applied, then the
// others by label. After quiescence every replica returns the same order (the
// eventual total order). Without RecordOrder, garbage-collected operations are
// missing from it.
func (a *ESDS) FinalOrder() []string {
	out := append([]string(nil), a.orderLog...)
	for _, o := range a.doneNotApplied() {
		out = append(out, o.id)
	}
	return out
}

// doneNotApplied lists the done, non-applied operations in label order.
// The caller must not keep the slice across a change.
func (a *ESDS) doneNotApplied() []*op {
	a.dnaSettle()
	return a.dna
}

// ---- input actions ----

// onStart restores the persisted state (see the package doc) and starts the
// gossip timer.
func (a *ESDS) onStart(s automaton.Start) {
	a.ops = map[string]*op{}
	a.waiting = nil
	a.dna, a.dnaNew, a.maxSolid, a.appliedLive = nil, nil, Label{}, nil
	a.pending = map[string][]automaton.RequestID{}
	a.results = map[string]service.Result{}
	a.resultQ = nil
	a.gcd = idSummary{}
	a.goneQ = map[string]uint64{}
	a.stable = a.svc.NewState()
	a.stableMax = Label{}
	a.orderLog = nil
	a.tentValid = false
	a.removed = a.removedParam
	a.counter = 0
	if err := a.restore(s.Records); err != nil {
		panic(fmt.Sprintf("esds %s: corrupt persisted state: %v", a.cfg.Self, err))
	}
	a.inc = a.cfg.Rand.Uint64() | 1
	a.peers = make([]peer, len(a.cfg.Nodes))
	for i := range a.peers {
		if i != a.self {
			a.resetStream(i)
		}
	}
	a.emit(automaton.SetTimer{ID: timerGossip, After: a.gossipIvl})
}

// onRequest is the front end's request_c(x) and the local replica's
// receive_{f,r}("request", x): the front end is the node the client reached,
// and it submits the operation to its own replica (seed 000 §4.2.4).
func (a *ESDS) onRequest(req automaton.Request) {
	if a.ops == nil {
		return // not started
	}
	if req.Op.Kind == AdminRemove {
		a.onRemove(req)
		return
	}
	if err := a.svc.Validate(req.Op); err != nil {
		a.respond(req.ID, service.Errorf("ERR %v", err))
		return
	}
	id := req.Opts.OpID
	if id == "" {
		id = DerivedID(req.ID)
	}
	for _, p := range req.Opts.Prev {
		if p == id {
			a.respond(req.ID, service.Errorf("ERR operation %q lists itself in prev", id))
			return
		}
	}
	if a.gcd.has(id) {
		if res, ok := a.results[id]; ok {
			a.respond(req.ID, res)
		} else {
			a.respond(req.ID, service.Errorf("ERR operation %q is stable and its value is no longer kept", id))
		}
		return
	}
	o := a.ops[id]
	if o == nil {
		o = &op{id: id, prev: append([]string(nil), req.Opts.Prev...), strict: req.Opts.Strict, sop: req.Op}
		a.receive(o)
	}
	a.pending[id] = append(a.pending[id], req.ID)
}

// DerivedID is the operation id given to a request that carries no OpID:
// "<client id as 16 hex digits>-<seq>", the form the gateway assigns too.
func DerivedID(r automaton.RequestID) string { return fmt.Sprintf("%016x-%d", r.Client, r.Seq) }

// receive adds a new operation to rcvd and queues it for gossip.
func (a *ESDS) receive(o *op) {
	a.arrival++
	o.arrival = a.arrival
	a.ops[o.id] = o
	if !o.label.Set {
		a.waiting = append(a.waiting, o)
		o.inWait = true
	}
	a.newInfo(o)
}

// onRemove handles the membership admin request (see the package doc).
func (a *ESDS) onRemove(req automaton.Request) {
	i, ok := a.index[automaton.NodeID(req.Op.Key)]
	switch {
	case !ok:
		a.respond(req.ID, service.Errorf("ERR %s: %q is not a node of this namespace", AdminRemove, req.Op.Key))
		return
	case i == a.self:
		a.respond(req.ID, service.Errorf("ERR %s: a replica cannot remove itself (ask another node)", AdminRemove))
		return
	}
	a.setRemoved(a.removed | 1<<i)
	a.respond(req.ID, service.OK())
}

func (a *ESDS) setRemoved(m uint64) {
	m &^= a.bit() // nobody can remove us from our own point of view
	m &= a.all
	if m == a.removed {
		return
	}
	a.removed = m
	a.dirty[recMembers] = true
	// Stability is computed over the members: it may hold now for any operation.
	for _, o := range a.sortedOps() {
		a.checkSolid(o)
	}
}

// onMessage is receive_{r',r}("gossip", R, D, L, S).
func (a *ESDS) onMessage(from automaton.NodeID, b []byte) {
	j, ok := a.index[from]
	if !ok || j == a.self || a.removed&(1<<j) != 0 {
		return // not a member: ignore
	}
	m, err := unmarshal(b)
	if err != nil {
		return // corrupt: drop (gossip is retransmitted)
	}
	p := &a.peers[j]
	if p.retired[m.Inc] {
		return // from an earlier incarnation of the peer
	}
	if p.inc != m.Inc {
		if p.inc != 0 {
			// The peer restarted: it lost our stream's progress; start a new
			// stream carrying our whole state.
			if p.retired == nil {
				p.retired = map[uint64]bool{}
			}
			p.retired[p.inc] = true
			a.resetStream(j)
			p.inStream, p.inNext = 0, 0
		}
		p.inc = m.Inc
	}
	a.setRemoved(a.removed | m.Removed)
	switch m.Kind {
	case kindFull:
		a.merge(j, m.Entries)
	case kindStream:
		if m.AckStream == p.stream && m.AckSeq > p.acked && m.AckSeq <= p.acked+uint64(len(p.queue)) {
			n := m.AckSeq - p.acked
			for _, q := range p.queue[:n] {
				if a.ops[q.id] != nil {
					// Live now, so live when sent: the entry carried the
					// descriptor, or the peer had acknowledged one before.
					p.has[q.id] = true
				} else if g, ok := a.goneQ[q.id]; ok && q.flags == flagGone {
					if g &^= 1 << j; g == 0 {
						delete(a.goneQ, q.id)
					} else {
						a.goneQ[q.id] = g
					}
				}
			}
			clear(p.queue[:n])
			p.queue = p.queue[n:]
			p.acked = m.AckSeq
			if p.sentUpTo < p.acked {
				p.sentUpTo = p.acked
			}
		}
		if m.To < m.From {
			return // an acknowledgement only
		}
		p.ackDue = true
		if m.Stream != p.inStream {
			if m.From != 1 {
				return // the start of this stream was lost: wait for the retransmission
			}
			p.inStream, p.inNext = m.Stream, 1
		}
		if m.From > p.inNext {
			return // a gap: wait for the retransmission (explicit sequencing, §6.2)
		}
		if m.To < p.inNext {
			return // a duplicate
		}
		for i := range m.Entries {
			if x := &m.Entries[i]; x.Flags&flagBare != 0 && a.ops[x.ID] == nil && !a.gcd.has(x.ID) {
				// Cannot happen (the sender saw us acknowledge the
				// descriptor, and a restart of ours starts a new stream);
				// refuse the message rather than skip what it says.
				return
			}
		}
		a.merge(j, m.Entries)
		p.inNext = m.To + 1
	}
}

// merge applies gossip entries from replica j (Fig. 4.2 / 4.5, receive gossip).
func (a *ESDS) merge(j int, entries []entry) {
	bj := uint64(1) << j
	for i := range entries {
		x := &entries[i]
		if a.gcd.has(x.ID) {
			continue // stable everywhere, collected here
		}
		o := a.ops[x.ID]
		if x.Flags == flagGone {
			// Collected at j, hence stable at every member.
			if o != nil && o.label.Set && o.solid|a.all != o.solid {
				o.done |= a.all
				o.solid |= a.all
				a.dirty[o.id] = true
				a.newInfo(o)
				a.noteSolid(o)
			}
			continue
		}
		fresh := o == nil
		if fresh { // rcvd_r ∪= R
			o = &op{id: x.ID, prev: x.Prev, strict: x.Strict, sop: x.Op}
		}
		changed := fresh
		inD, inS := x.Flags&flagDone != 0, x.Flags&flagSolid != 0
		if inD && x.Label.Set { // minlabel_r = min(minlabel_r, L)
			if x.Label.C > a.counter {
				a.counter = x.Label.C
			}
			better := x.Label.Less(o.label)
			if a.proto.maxLabel && o.label.Set {
				better = o.label.Less(x.Label) // broken: merge by maximum
			}
			if better {
				// (A stable operation's label is final in the correct
				// protocol; only the broken maxlabel variant changes one.)
				wasDone := o.label.Set
				a.dnaRemove(o) // re-inserted under the new label
				o.label = x.Label
				changed = true
				a.labelChanged(o, wasDone)
			}
		}
		if inD || inS { // done_r[r'] ∪= D ∪ S; done_r[r] ∪= D ∪ S
			if o.done|bj|a.bit() != o.done {
				o.done |= bj | a.bit()
				changed = true
			}
		}
		if inS { // done_r[i] ∪= S; solid_r[r'] ∪= S; solid_r[r] ∪= S
			if o.done|a.all != o.done || o.solid|bj|a.bit() != o.solid {
				o.done |= a.all
				if o.solid&a.bit() == 0 {
					a.dirty[o.id] = true
				}
				o.solid |= bj | a.bit()
				changed = true
			}
		}
		if x.Flags&flagAll != 0 && o.solid|a.all != o.solid {
			o.done |= a.all
			o.solid |= a.all
			a.dirty[o.id] = true
			changed = true
		}
		if fresh {
			a.receive(o)
		} else if changed {
			a.newInfo(o)
		}
		if o.label.Set && !fresh && changed {
			a.dirty[o.id] = true
		}
		if fresh && o.label.Set {
			a.dirty[o.id] = true
		}
		a.checkSolid(o) // solid_r[r] ∪= ⋂_i done_r[i]
		a.noteSolid(o)
	}
	if a.unopt {
		// ESDSAlg's self-gossip (the replica's gossip to itself) does nothing
		// beyond this rule, which every merge applies.
		return
	}
}

// labelChanged keeps the waiting list and the tentative state consistent after
// o got a (lower) label.
func (a *ESDS) labelChanged(o *op, wasDone bool) {
	if !wasDone {
		a.unwait(o)
		o.done |= a.bit()
	}
	a.dnaInsert(o)
	a.noteSolid(o) // (only the broken maxlabel variant moves a stable label)
	o.tvalOK = false
	if !o.applied && a.svc.IsRead(o.sop) {
		// A read leaves the state unchanged: wherever it lands in the label
		// order, the tentative state and the other operations' values are
		// those without it. Its own value is computed when asked for.
		return
	}
	if !a.tentValid || !a.tentMax.Less(o.label) || wasDone {
		a.tentValid = false
		return
	}
	// Appended after every tentatively ordered operation: extend in place.
	a.tentApply(o)
}

func (a *ESDS) unwait(o *op) {
	if !o.inWait {
		return
	}
	o.inWait = false
	for i, w := range a.waiting {
		if w == o {
			a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
			return
		}
	}
}

// checkSolid: solid_r[r] ∪= ⋂_i done_r[i], for one operation. The optimised
// variant does this on gossip receipt and in solidify (one replica); the
// unoptimised one also in do_it. Both reach it from here.
func (a *ESDS) checkSolid(o *op) {
	if !o.label.Set || o.solid&a.bit() != 0 {
		return
	}
	if m := a.members(); o.done&m == m {
		o.solid |= a.bit()
		a.dirty[o.id] = true
		a.newInfo(o)
		a.noteSolid(o)
	}
}

// onTick sends gossip, retransmits, and garbage-collects.
func (a *ESDS) onTick() {
	a.tick++
	a.emit(automaton.SetTimer{ID: timerGossip, After: a.gossipIvl})
	for j := range a.peers {
		if j == a.self || a.removed&(1<<j) != 0 || a.gossipOff {
			continue
		}
		if a.unopt {
			a.sendFull(j)
		} else {
			a.sendStream(j)
		}
	}
	if !a.unopt && a.tick%gcEveryTicks == 0 {
		a.collect()
	}
}

// ---- locally controlled actions ----

// progress runs every enabled locally controlled action until none is: do_it,
// solidify (one replica), the stable-state advance, and the responses.
func (a *ESDS) progress() {
	for changed := true; changed; {
		changed = false
		for i := 0; i < len(a.waiting); i++ {
			o := a.waiting[i]
			if a.prevDone(o) {
				a.waiting = append(a.waiting[:i], a.waiting[i+1:]...)
				o.inWait = false
				a.doIt(o)
				changed = true
				i--
			}
		}
	}
	if !a.unopt {
		a.advanceStable()
	}
	ids := make([]string, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	for _, id := range ids {
		reqs := a.pending[id]
		o := a.ops[id]
		if o == nil {
			continue
		}
		if !a.canRespond(o) {
			continue
		}
		res, ok := a.value(o)
		if !ok {
			res = service.Errorf("ERR operation %q is stable but its value was not kept across a restart", id)
		}
		for _, r := range reqs {
			a.respond(r, res)
		}
		delete(a.pending, id)
	}
}

func (a *ESDS) prevDone(o *op) bool {
	for _, p := range o.prev {
		if a.gcd.has(p) {
			continue
		}
		q := a.ops[p]
		if q == nil || !q.label.Set {
			return false
		}
	}
	return true
}

// doIt is do_it_r(x, l): give x a label above every label seen.
func (a *ESDS) doIt(o *op) {
	a.counter++
	o.label = Label{C: a.counter, R: uint32(a.self), Set: true}
	o.done |= a.bit()
	a.dnaInsert(o)
	a.dirty[o.id] = true
	a.newInfo(o)
	if a.tentValid && a.tentMax.Less(o.label) && !a.unopt && !a.recompute {
		a.tentApply(o)
	} else {
		a.tentValid = false
	}
	// ESDSAlg's do_it adds ⋂ done to solid_r[r]; ESDSOptAlg's does not, and
	// uses solidify for one replica instead. For one operation both amount to
	// this check (with one member, done here means done everywhere).
	if a.unopt || a.members() == a.bit() {
		a.checkSolid(o)
	}
}

// canRespond is send_{r,f}("response", x, v)'s precondition.
func (a *ESDS) canRespond(o *op) bool {
	if !o.label.Set {
		return false
	}
	if !o.strict || a.proto.earlyStrict {
		return true
	}
	m := a.members()
	if o.solid&a.bit() == 0 {
		return false
	}
	// x ∈ ⋂_i solid_r[i]
	return o.solid&m == m
}

// value is v: stable-value_r(x) for an applied operation, else val_r(x).
func (a *ESDS) value(o *op) (service.Result, bool) {
	if o.applied {
		return o.sval, o.svalOK
	}
	if !o.tvalOK || a.unopt || a.recompute {
		a.recomputeTent()
	}
	return o.tval, o.tvalOK
}

// ---- states ----

// recomputeTent rebuilds the tentative state: the stable state (σ0 in the
// unoptimised variant, which recomputes every value from scratch as ESDSImpl
// does) plus every non-applied done operation in label order.
func (a *ESDS) recomputeTent() {
	if a.stableMax.Set {
		a.tent = a.copyStable()
	} else {
		a.tent = a.svc.NewState()
	}
	a.tentMax = a.stableMax
	for _, o := range a.doneNotApplied() {
		a.tentApply(o)
	}
	a.tentValid = true
}

func (a *ESDS) tentApply(o *op) {
	if a.tent == nil {
		a.tent = a.svc.NewState()
	}
	o.tval = a.tent.Apply(o.sop)
	o.tvalOK = true
	a.tentMax = o.label
}

// advanceStable is the optimised variant's stable-state memo (Fig. 4.5):
// apply, in label order, every operation whose label is at most the label of
// max-stable_r, the highest-labelled operation stable here.
func (a *ESDS) advanceStable() {
	maxStable := a.maxSolid // max-stable_r (index.go)
	if !maxStable.Set {
		return
	}
	a.maxSolid = Label{} // every operation stable here is applied below
	a.dnaSettle()
	n := 0
	for n < len(a.dna) && !maxStable.Less(a.dna[n].label) {
		a.applyStable(a.dna[n])
		n++
	}
	rest := copy(a.dna, a.dna[n:])
	clear(a.dna[rest:])
	a.dna = a.dna[:rest]
}

func (a *ESDS) applyStable(o *op) {
	o.sval = a.stable.Apply(o.sop)
	o.svalOK = true
	o.applied = true
	o.inDNA = false
	a.appliedLive = append(a.appliedLive, o)
	a.stableMax = o.label
	if a.recording {
		a.orderLog = append(a.orderLog, o.id)
	}
	// The tentative state stays valid: the stable order is a prefix of it.
}

// sortedOps lists every operation by label, then (undone ones) by arrival.
func (a *ESDS) sortedOps() []*op {
	l := make([]*op, 0, len(a.ops))
	for _, o := range a.ops {
		l = append(l, o)
	}
	sort.Slice(l, func(x, y int) bool {
		if l[x].label != l[y].label {
			return l[x].label.Less(l[y].label)
		}
		return l[x].arrival < l[y].arrival
	})
	return l
}

// ---- gossip ----

// newInfo queues o for gossip to every peer (gossip_r[i] ∪= {x}).
func (a *ESDS) newInfo(o *op) {
	if a.unopt || a.peers == nil {
		return
	}
	for j := range a.peers {
		if j != a.self {
			a.enqueue(j, o.id)
		}
	}
}

// enqueue appends to j's stream what this replica knows about id now. The
// stream's last position, if it has never been sent, is updated instead:
// nothing was queued after it, so it still marks a moment of this replica's
// state. Any earlier position keeps what it said (see the package doc).
func (a *ESDS) enqueue(j int, id string) {
	p := &a.peers[j]
	q := qent{id: id, flags: flagGone}
	if o := a.ops[id]; o != nil {
		x := a.entryOf(o)
		q.flags, q.label = x.Flags, x.Label
	}
	if n := len(p.queue); n > 0 && p.acked+uint64(n) > p.hiSent && p.queue[n-1].id == id {
		p.queue[n-1] = q
		return
	}
	p.queue = append(p.queue, q)
}

// resetStream starts a new stream to peer j carrying every operation.
func (a *ESDS) resetStream(j int) {
	p := &a.peers[j]
	p.stream = a.cfg.Rand.Uint64() | 1
	p.queue, p.acked, p.sentUpTo, p.hiSent, p.lastRetx = nil, 0, 0, 0, a.tick
	p.has = map[string]bool{}
	if a.unopt {
		return
	}
	// Label order (then arrival): a done operation never precedes one done
	// before it, which the receiver's stability rule relies on.
	for _, o := range a.sortedOps() {
		a.enqueue(j, o.id)
	}
	gone := make([]string, 0, len(a.goneQ))
	for id := range a.goneQ {
		gone = append(gone, id)
	}
	sort.Strings(gone)
	for _, id := range gone {
		a.goneQ[id] |= 1 << j
		a.enqueue(j, id)
	}
}

func (a *ESDS) entryOf(o *op) entry {
	x := entry{ID: o.id, Prev: o.prev, Strict: o.strict, Op: o.sop}
	if o.label.Set {
		x.Flags |= flagDone
		x.Label = o.label
	}
	if o.solid&a.bit() != 0 {
		x.Flags |= flagSolid
	}
	if m := a.members(); o.label.Set && o.solid&m == m {
		x.Flags |= flagAll
	}
	return x
}

// sendStream sends the next part of the stream to j (incremental gossip with
// explicit sequencing, retransmission and duplicate removal: seed §6.2).
func (a *ESDS) sendStream(j int) {
	p := &a.peers[j]
	if p.sentUpTo > p.acked && a.tick-p.lastRetx >= a.retxTicks {
		p.sentUpTo = p.acked // retransmit the unacknowledged window
	}
	if p.sentUpTo == p.acked {
		p.lastRetx = a.tick
	}
	end := p.acked + uint64(len(p.queue))
	if p.sentUpTo >= end && !p.ackDue {
		return
	}
	m := message{Kind: kindStream, Inc: a.inc, Removed: a.removed, Stream: p.stream,
		From: p.sentUpTo + 1, To: p.sentUpTo, AckStream: p.inStream}
	if p.inNext > 0 {
		m.AckSeq = p.inNext - 1
	}
	m.To = min(end, p.sentUpTo+uint64(a.batch))
	// The receiver merges a message as a whole before it acts on it, so an
	// operation queued at several of its positions needs only its last
	// entry (which says at least what the earlier ones said). Built
	// backwards, then reversed.
	if a.seen == nil {
		a.seen = map[string]bool{}
	}
	clear(a.seen)
	for s := m.To; s > p.sentUpTo; s-- {
		q := p.queue[s-p.acked-1]
		if a.seen[q.id] {
			continue
		}
		a.seen[q.id] = true
		o := a.ops[q.id]
		switch {
		case o == nil:
			// Collected since (or when) queued: stable at every member,
			// the receiver included, which therefore needs nothing else
			// first (see the package doc). Only "gone" can be said
			// without the descriptor.
			if a.gcd.has(q.id) {
				m.Entries = append(m.Entries, entry{ID: q.id, Flags: flagGone})
			}
		case p.has[q.id]:
			m.Entries = append(m.Entries, entry{ID: q.id, Flags: q.flags | flagBare, Label: q.label})
		default:
			m.Entries = append(m.Entries, entry{ID: q.id, Prev: o.prev, Strict: o.strict, Op: o.sop, Flags: q.flags, Label: q.label})
		}
	}
	slices.Reverse(m.Entries)
	p.sentUpTo = m.To
	if p.hiSent < m.To {
		p.hiSent = m.To
	}
	p.ackDue = false
	a.send(j, m.marshal())
}

// sendFull is ESDSAlg's send_{r,r'}("gossip", R, D, L, S): the whole state.
func (a *ESDS) sendFull(j int) {
	if len(a.ops) == 0 && a.removed == 0 {
		return
	}
	m := message{Kind: kindFull, Inc: a.inc, Removed: a.removed}
	for _, o := range a.sortedOps() {
		m.Entries = append(m.Entries, a.entryOf(o))
	}
	a.send(j, m.marshal())
}

// ---- garbage collection ----

// collect discards operations that are applied here and stable at every
// member (so nobody needs them from us), keeping their ids in the summary and
// their values in a bounded cache, and persists the stable state that now
// stands for them.
func (a *ESDS) collect() {
	m := a.members()
	var gone []*op
	live := a.appliedLive[:0]
	for _, o := range a.appliedLive {
		if o.applied && o.solid&m == m && len(a.pending[o.id]) == 0 {
			gone = append(gone, o)
		} else {
			live = append(live, o)
		}
	}
	clear(a.appliedLive[len(live):])
	a.appliedLive = live
	if len(gone) == 0 {
		return
	}
	sort.Slice(gone, func(x, y int) bool { return gone[x].label.Less(gone[y].label) })
	for _, o := range gone {
		a.gcd.add(o.id)
		if o.svalOK {
			a.results[o.id] = o.sval
			a.resultQ = append(a.resultQ, o.id)
			if len(a.resultQ) > resultCacheSize {
				delete(a.results, a.resultQ[0])
				a.resultQ = a.resultQ[1:]
			}
		}
		delete(a.ops, o.id)
		delete(a.dirty, o.id)
		a.goneQ[o.id] = m &^ a.bit()
		for j := range a.peers {
			delete(a.peers[j].has, o.id)
			if j != a.self && m&(1<<j) != 0 {
				a.enqueue(j, o.id)
			}
		}
	}
	a.out = append(a.out, automaton.Persist{Key: recStable, Value: a.marshalStable()})
	for _, o := range gone {
		a.out = append(a.out, automaton.Persist{Key: recOp + o.id, Delete: true})
	}
}

// ---- outputs ----

func (a *ESDS) emit(o automaton.Output) { a.post = append(a.post, o) }

func (a *ESDS) send(j int, b []byte) {
	a.post = append(a.post, automaton.Send{To: a.cfg.Nodes[j], Msg: b})
}

func (a *ESDS) respond(id automaton.RequestID, res service.Result) {
	a.post = append(a.post, automaton.Respond{Resp: automaton.Response{ID: id, Result: res}})
}

// flushDirty persists every operation whose durable part changed in this step,
// ahead of the step's sends and responses.
func (a *ESDS) flushDirty() {
	if len(a.dirty) == 0 {
		return
	}
	keys := make([]string, 0, len(a.dirty))
	for k := range a.dirty {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if k == recMembers {
			a.out = append(a.out, automaton.Persist{Key: recMembers, Value: uvarintBytes(a.removed)})
			continue
		}
		o := a.ops[k]
		if o == nil || !o.label.Set {
			continue
		}
		if f := a.entryOf(o).Flags; o.pOK && o.pFlags == f && o.pLabel == o.label {
			continue // the record already says this
		} else {
			o.pOK, o.pFlags, o.pLabel = true, f, o.label
		}
		a.out = append(a.out, automaton.Persist{Key: recOp + k, Value: a.marshalOp(o)})
	}
}

func popcount(m uint64) int { return bits.OnesCount64(m) }
