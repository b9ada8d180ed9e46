package blocking

import (
	"fmt"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities("blocking",
		"The ABD report §3.2's blocking protocol: writes under a Lamport mutex, written to every server, local reads (sequentially consistent), with views for failures (§4.4)")})
	// Deliberately broken (see the package doc): the holder answers and
	// releases the lock without waiting for acknowledgements, and replicas
	// apply writes as they arrive. Never use it for data.
	automaton.RegisterBroken("blocking", protocol{noAck: true, Capabilities: capabilities("blocking-broken-noack",
		"the lock holder answers and releases without waiting for acknowledgements, replicas apply writes as they arrive (the ABD report §3.2.2 without the wait): two writes get one tag and replicas diverge; the invariant \"tag-unique\" and the sequential checker catch it")})
}

// protocol is the registered value: its capabilities, and the variant.
type protocol struct {
	automaton.Capabilities
	noAck bool
}

// capabilities is the registration of the protocol or its variant.
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		Params: params.Defaults(),
		// There is no replicated deduplication table, so a write retried
		// at another node could apply twice.
		Idempotent:        false,
		RegisterSemantics: true,
		// Local reads make the protocol sequentially consistent for
		// clients that stay with one server, not linearizable (see the
		// package doc).
		Consistency: automaton.Sequential,
	}
}

// Defaults for the parameters.
const (
	DefaultHeartbeat   = 20 * time.Millisecond
	DefaultFailTimeout = 300 * time.Millisecond
	DefaultLease       = 500 * time.Millisecond
	DefaultOpTimeout   = 5 * time.Second
	doneCacheSize      = 4096
)

// params is the parameter table.
var params = proto.NewSpec(
	proto.Param{Name: "lock", Kind: proto.Enum, Default: "global", Choices: []string{"global", "per-key"},
		Doc: "one Lamport lock for all writes, or one per key"},
	proto.Param{Name: "heartbeat", Kind: proto.Duration, Default: DefaultHeartbeat.String(), Min: "0", MinOpen: true,
		Doc: "state message interval; the other times are counted in heartbeats"},
	proto.Param{Name: "fail_timeout", Kind: proto.Duration, Default: DefaultFailTimeout.String(), Min: "0", MinOpen: true,
		Doc: "silence before a member is suspected; at least 2 heartbeats"},
	proto.Param{Name: "lease", Kind: proto.Duration, Default: DefaultLease.String(), Min: "0", MinOpen: true,
		Doc: "how long a lock holder may keep the lock; at least 2 heartbeats"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a request's time limit; at least 2 heartbeats"},
)

func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil || cfg.Service.Name() != "kv" {
		return nil, fmt.Errorf("%s replicates registers: namespace %q needs service kv", p.Protocol, cfg.Namespace)
	}
	index, self, err := proto.Positions(p.Protocol, cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	if len(cfg.Nodes) > maxNodes {
		return nil, fmt.Errorf("%s: at most %d nodes", p.Protocol, maxNodes)
	}
	prm, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	b := &Blocking{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, index: index, self: self, perKey: prm.String("lock") == "per-key"}
	hb, fail, lease, opt := prm.Duration("heartbeat"), prm.Duration("fail_timeout"), prm.Duration("lease"), prm.Duration("op_timeout")
	ticks := func(name string, d time.Duration) (uint64, error) {
		t := uint64((d + hb - 1) / hb)
		if t < 2 {
			return 0, fmt.Errorf("%s: %s (%v) must be at least two heartbeats (%v)", p.Protocol, name, d, hb)
		}
		return t, nil
	}
	b.hb = hb
	if b.failTicks, err = ticks("fail_timeout", fail); err != nil {
		return nil, err
	}
	if b.leaseTicks, err = ticks("lease", lease); err != nil {
		return nil, err
	}
	if b.opTicks, err = ticks("op_timeout", opt); err != nil {
		return nil, err
	}
	return b, nil
}

// Blocking is one node's replica, lock participant and write coordinator.
type Blocking struct {
	proto  protocol
	cfg    automaton.Config
	index  map[automaton.NodeID]int
	self   int
	perKey bool

	hb                             time.Duration
	failTicks, leaseTicks, opTicks uint64
	now                            uint64 // heartbeats since Start

	// Durable state.
	promised Ballot
	view     Ballot // the latest installed view
	members  []bool
	active   bool              // view is activated (its start state is the store)
	store    map[string]entry  // committed registers: what reads see
	pending  map[string]kentry // by lock: a write applied but not committed
	staged   []kentry          // the start state of view while !active
	lastSeq  map[string]uint64 // by lock: highest write seq seen in view
	servedIn bool              // activated a view in this incarnation

	// Lamport mutual exclusion (volatile; reset at every view).
	clock   uint64
	peers   []peer
	myReq   map[string]uint64 // by lock: my outstanding request's timestamp
	holding map[string]*wop   // by lock: my write in progress
	waiting map[string][]*wop // by lock: local writes waiting for the lock
	head    map[string]headSeen
	commits [][]kentryRef // by node: commits not yet acknowledged

	reads []*rop

	prop        *proposal
	maxRound    uint64
	wantSince   uint64 // tick since which a view change has been wanted (0: not)
	changeSince uint64 // tick of the last promise (a view change under way)
	backoffTill uint64
	// settled are my writes that a view change rolled forward: answered OK
	// when the view is activated (so that the client's next read sees them).
	settled []*wop

	done      map[automaton.RequestID]service.Result
	doneOrder []automaton.RequestID
	inflight  map[automaton.RequestID]bool

	proto.Outbox
	// changed lists the keys whose committed register this step changed
	// (for the invariant checker, invariant.go).
	changed []string
}

// peer is what this node knows of another node.
type peer struct {
	heard    uint64 // tick of the last message (0: never)
	view     Ballot
	active   bool
	promised Ballot
	members  []bool
	clock    uint64            // highest Lamport clock from it in the current view
	reqs     map[string]uint64 // its outstanding requests (current view)
	inactive int               // consecutive state messages not active in my view
}

type headSeen struct {
	node  int
	ts    uint64
	since uint64
}

type kentryRef struct {
	lock string
	seq  uint64
}

// wop is a client write at this node.
type wop struct {
	req      automaton.Request
	start    uint64
	answered bool
	// While holding the lock:
	lock string
	tag  Tag
	acks []bool
	res  service.Result // the reply once it succeeds
}

// rop is a read waiting until the node may serve reads.
type rop struct {
	req   automaton.Request
	start uint64
}

// proposal is a view change this node runs.
type proposal struct {
	ballot    Ballot
	phase     int // 1 prepare, 2 install
	start     uint64
	majAt     uint64 // tick a majority promised (0: not yet)
	promises  map[int]*message
	members   []bool
	snap      []kentry
	installed []bool
}

const timerTick automaton.TimerID = 1

func (b *Blocking) n() int { return len(b.cfg.Nodes) }

func (b *Blocking) lockOf(key string) string {
	if b.perKey {
		return key
	}
	return ""
}

// Step implements automaton.Automaton.
func (b *Blocking) Step(in automaton.Input) []automaton.Output {
	b.Begin()
	b.changed = b.changed[:0]
	proto.Dispatch(b, in)
	b.progress()
	return b.Out
}

// OnTimer: the heartbeat.
func (b *Blocking) OnTimer(id automaton.TimerID) {
	if id == timerTick {
		b.onTick()
	}
}

func (b *Blocking) send(to int, m *message) {
	if to != b.self {
		b.Send(b.cfg.Nodes[to], m.marshal())
	}
}

func (b *Blocking) persist(key string, v []byte) {
	b.Emit(automaton.Persist{Key: key, Value: v})
}

func (b *Blocking) unpersist(key string) { b.Emit(automaton.Persist{Key: key, Delete: true}) }

// OnStart restores the durable state and enters recovery: the node serves
// nothing and takes no part in locking until a view change installs and
// activates a view that includes it.
func (b *Blocking) OnStart(s automaton.Start) {
	b.store = map[string]entry{}
	b.pending = map[string]kentry{}
	b.lastSeq = map[string]uint64{}
	b.peers = make([]peer, b.n())
	b.myReq = map[string]uint64{}
	b.holding = map[string]*wop{}
	b.waiting = map[string][]*wop{}
	b.head = map[string]headSeen{}
	b.commits = make([][]kentryRef, b.n())
	b.done = map[automaton.RequestID]service.Result{}
	b.inflight = map[automaton.RequestID]bool{}
	b.now = 1
	for _, k := range sortedKeys(s.Records) {
		v := s.Records[k]
		var err error
		switch {
		case k == "promised":
			b.promised, err = unmarshalBallot(v)
		case k == "view":
			var vr viewRecord
			vr, err = unmarshalView(v)
			b.view, b.members, b.active = vr.View, vr.Members, vr.Active
		case k == "staged":
			b.staged, err = unmarshalSnap(v)
		case strings.HasPrefix(k, "k/"):
			var ke kentry
			ke, err = unmarshalKEntry(v)
			b.store[k[2:]] = ke.E
		case strings.HasPrefix(k, "p/"):
			var ke kentry
			ke, err = unmarshalKEntry(v)
			b.pending[k[2:]] = ke
		}
		if err != nil {
			panic(fmt.Sprintf("%s: corrupt record %q: %v", b.proto.Protocol, k, err))
		}
	}
	// Whether or not the view was active, this incarnation must rejoin.
	b.servedIn = false
	b.maxRound = b.promised.Round
	b.Emit(automaton.SetTimer{ID: timerTick, After: b.hb})
}

// participating reports whether this node takes part in locking and writes
// of its view: the view is active and no higher ballot was promised.
func (b *Blocking) participating() bool {
	return b.servedIn && b.active && b.promised == b.view
}

// canServe reports whether local reads may be answered: the node activated
// a view in this incarnation, no live peer reports a newer active view (it
// would mean this node was excluded), and it hears from a majority.
func (b *Blocking) canServe() bool {
	if !b.servedIn {
		return false
	}
	heard := 1
	for i := range b.peers {
		if i == b.self {
			continue
		}
		p := &b.peers[i]
		if p.heard == 0 || b.now-p.heard > b.failTicks {
			continue
		}
		heard++
		if p.active && b.view.Less(p.view) {
			return false
		}
	}
	return heard >= automaton.Majority(b.n())
}

// Validator implements proto.Validating.
func (b *Blocking) Validator(automaton.Request) service.Service { return b.cfg.Service }

// Invalid implements proto.Validating.
func (b *Blocking) Invalid(req automaton.Request, r service.Result) { b.Respond(req.ID, r) }

// OnRequest takes a validated request (Validator): it serves a read locally, or queues a write for the lock (the ABD report
// §3.2.1).
func (b *Blocking) OnRequest(req automaton.Request) {
	if res, refused := automaton.RefuseUnsupported(b.proto.Protocol, req); refused {
		b.Respond(req.ID, res) // no atomic groups, no transactions: nothing applied
		return
	}
	if b.inflight[req.ID] {
		return // a retry of a request in progress: answered when it completes
	}
	if res, ok := b.done[req.ID]; ok {
		b.Respond(req.ID, res)
		return
	}
	o := req.Op
	if !service.RegisterKinds[o.Kind] || (o.Kind == "set" && len(o.Args) != 1) {
		what := o.Kind
		if o.Kind == "set" {
			what = "set with a condition (NX/XX)"
		}
		b.Respond(req.ID, service.Errorf("ERR %s needs an atomic read-modify-write; namespace %q uses %s, which offers get, set, del and exists: use a consensus protocol", what, b.cfg.Namespace, b.proto.Protocol))
		return
	}
	if b.cfg.Service.IsRead(o) {
		if b.canServe() && len(b.reads) == 0 {
			b.Respond(req.ID, b.readResult(o))
			return
		}
		b.inflight[req.ID] = true
		b.reads = append(b.reads, &rop{req: req, start: b.now})
		return
	}
	b.inflight[req.ID] = true
	l := b.lockOf(o.Key)
	b.waiting[l] = append(b.waiting[l], &wop{req: req, start: b.now})
}

func (b *Blocking) readResult(o service.Op) service.Result {
	e, ok := b.store[o.Key]
	if o.Kind == "exists" {
		if ok && e.present() {
			return service.Int(1)
		}
		return service.Int(0)
	}
	if !ok || !e.present() {
		return service.Nil()
	}
	return service.Bytes(e.Value)
}

// progress runs after every input: answer waiting reads, request locks for
// waiting writes, enter the locks whose turn has come.
func (b *Blocking) progress() {
	if len(b.reads) > 0 && b.canServe() {
		for _, r := range b.reads {
			b.finish(r.req.ID, b.readResult(r.req.Op))
		}
		b.reads = nil
	}
	if !b.participating() {
		return
	}
	changed := false
	for _, l := range sortedKeys(b.waiting) {
		if len(b.waiting[l]) == 0 {
			delete(b.waiting, l)
			continue
		}
		if _, ok := b.myReq[l]; !ok {
			b.clock++
			b.myReq[l] = b.clock // Lamport: timestamp the request, broadcast it
			changed = true
		}
	}
	if changed {
		b.broadcastState()
	}
	for _, l := range sortedKeys(b.myReq) {
		if b.holding[l] == nil && b.mayEnter(l) {
			b.enter(l)
		}
	}
}

// mayEnter is Lamport's rule: my request heads my queue for lock l (requests
// ordered by (timestamp, node index)) and every other member has sent me a
// message timestamped later than it.
func (b *Blocking) mayEnter(l string) bool {
	ts := b.myReq[l]
	for j := range b.members {
		if !b.members[j] || j == b.self {
			continue
		}
		p := &b.peers[j]
		if p.clock <= ts {
			return false
		}
		if t, ok := p.reqs[l]; ok && (t < ts || (t == ts && j < b.self)) {
			return false
		}
	}
	return true
}

// enter starts the first waiting write under lock l (the ABD report §3.2.1 step
// 2-3): apply it locally as pending, send it to every member.
func (b *Blocking) enter(l string) {
	q := b.waiting[l]
	if len(q) == 0 {
		b.release(l)
		return
	}
	w := q[0]
	b.waiting[l] = q[1:]
	// The lock passed to me, so every earlier write of this view under l was
	// acknowledged by all members: my pending one (if any) is committed.
	b.commitPending(l)
	seq := b.lastSeq[l] + 1
	b.lastSeq[l] = seq
	w.lock = l
	w.tag = Tag{View: b.view, Seq: seq}
	w.res = service.OK()
	if w.req.Op.Kind == "del" {
		// DEL's count is a hint (register semantics): was the key present in
		// my committed store when I took the lock.
		w.res = service.Int(0)
		if e, ok := b.store[w.req.Op.Key]; ok && e.present() {
			w.res = service.Int(1)
		}
	}
	ke := kentry{Key: w.req.Op.Key, E: entry{Tag: w.tag}}
	if w.req.Op.Kind == "del" {
		ke.E.Tomb = true
	} else {
		ke.E.Value = w.req.Op.Args[0]
	}
	if b.proto.noAck {
		// Broken: commit, answer and release at once; replicas apply on arrival.
		b.store[ke.Key] = ke.E
		b.changed = append(b.changed, ke.Key)
		b.persist("k/"+ke.Key, marshalKEntry(ke))
		m := &message{Kind: kindWrite, View: b.view, Lock: l, Seq: seq, W: ke}
		b.toMembers(m)
		b.answerWrite(w, w.res, false)
		b.release(l)
		return
	}
	b.pending[l] = ke
	b.persist("p/"+l, marshalKEntry(ke))
	w.acks = make([]bool, b.n())
	w.acks[b.self] = true
	b.holding[l] = w
	b.toMembers(&message{Kind: kindWrite, View: b.view, Lock: l, Seq: seq, W: ke})
	b.checkAcks(l)
}

func (b *Blocking) toMembers(m *message) {
	var enc []byte
	for j, in := range b.members {
		if in && j != b.self {
			if enc == nil {
				enc = m.marshal()
			}
			b.Emit(automaton.Send{To: b.cfg.Nodes[j], Msg: enc})
		}
	}
}

// checkAcks completes the write under l once every member acknowledged it:
// commit locally, answer the client, tell the members to commit, release.
func (b *Blocking) checkAcks(l string) {
	w := b.holding[l]
	if w == nil {
		return
	}
	for j, in := range b.members {
		if in && !w.acks[j] {
			return
		}
	}
	delete(b.holding, l)
	b.commitPending(l)
	b.answerWrite(w, w.res, true)
	for j, in := range b.members {
		if in && j != b.self {
			b.commits[j] = append(b.commits[j], kentryRef{lock: l, seq: w.tag.Seq})
			b.send(j, &message{Kind: kindCommit, View: b.view, Lock: l, Seq: w.tag.Seq})
		}
	}
	b.release(l)
}

// release gives up lock l (Lamport: the release is the next state message).
func (b *Blocking) release(l string) {
	delete(b.myReq, l)
	b.broadcastState()
}

// commitPending makes the pending write under l visible.
func (b *Blocking) commitPending(l string) {
	ke, ok := b.pending[l]
	if !ok {
		return
	}
	delete(b.pending, l)
	b.unpersist("p/" + l)
	if cur, ok := b.store[ke.Key]; !ok || cur.Tag.Less(ke.E.Tag) {
		b.store[ke.Key] = ke.E
		b.changed = append(b.changed, ke.Key)
		b.persist("k/"+ke.Key, marshalKEntry(ke))
	}
}

func (b *Blocking) answerWrite(w *wop, res service.Result, cache bool) {
	if w.answered {
		return
	}
	w.answered = true
	if cache {
		b.finish(w.req.ID, res)
	} else {
		delete(b.inflight, w.req.ID)
		b.Respond(w.req.ID, res)
	}
}

func (b *Blocking) finish(id automaton.RequestID, res service.Result) {
	delete(b.inflight, id)
	if !res.IsErr() {
		if len(b.doneOrder) >= doneCacheSize {
			delete(b.done, b.doneOrder[0])
			b.doneOrder = b.doneOrder[1:]
		}
		b.done[id] = res
		b.doneOrder = append(b.doneOrder, id)
	}
	b.Respond(id, res)
}

func (b *Blocking) stateMessage() *message {
	b.clock++
	m := &message{Kind: kindState, View: b.view, Active: b.active && b.servedIn, Promised: b.promised,
		Members: b.members, Clock: b.clock}
	if b.participating() {
		for _, l := range sortedKeys(b.myReq) {
			m.Reqs = append(m.Reqs, lockReq{Lock: l, TS: b.myReq[l]})
		}
	}
	return m
}

// broadcastState sends the state message to every configured node.
func (b *Blocking) broadcastState() {
	for j := range b.cfg.Nodes {
		if j != b.self {
			b.send(j, b.stateMessage())
		}
	}
}

func (b *Blocking) OnMessage(from automaton.NodeID, raw []byte) {
	j, ok := b.index[from]
	if !ok || j == b.self {
		return
	}
	m, err := unmarshal(raw)
	if err != nil {
		return // corrupt: drop (senders repeat what matters)
	}
	b.peers[j].heard = b.now
	switch m.Kind {
	case kindState:
		b.onState(j, &m)
	case kindWrite:
		b.onWrite(j, &m)
	case kindWriteAck:
		if w := b.holding[m.Lock]; w != nil && m.View == b.view && w.tag.Seq == m.Seq && w.tag.View == m.View {
			w.acks[j] = true
			b.checkAcks(m.Lock)
		}
	case kindCommit:
		if m.View == b.view && b.active {
			if ke, ok := b.pending[m.Lock]; ok && ke.E.Tag == (Tag{View: m.View, Seq: m.Seq}) {
				b.commitPending(m.Lock)
			}
			b.send(j, &message{Kind: kindCommitAck, View: m.View, Lock: m.Lock, Seq: m.Seq})
		}
	case kindCommitAck:
		c := b.commits[j][:0]
		for _, r := range b.commits[j] {
			if r.lock != m.Lock || r.seq != m.Seq {
				c = append(c, r)
			}
		}
		b.commits[j] = c
	case kindPrepare:
		b.onPrepare(j, &m)
	case kindPromise:
		if p := b.prop; p != nil && p.phase == 1 && m.Ballot == p.ballot {
			p.promises[j] = &m
			b.maybeInstall()
		}
	case kindNack:
		if m.Promised.Round > b.maxRound {
			b.maxRound = m.Promised.Round
		}
		if p := b.prop; p != nil && m.Ballot == p.ballot && p.ballot.Less(m.Promised) {
			b.abandon()
		}
	case kindInstall:
		b.onInstall(j, &m)
	case kindInstallAck:
		if p := b.prop; p != nil && p.phase == 2 && m.Ballot == p.ballot {
			p.installed[j] = true
			b.maybeActivate()
		}
	}
}

// onState handles a heartbeat: failure detection, view discovery, and
// Lamport's request/reply/release (a request is answered at once by a state
// message, whose clock is later than the request's timestamp).
func (b *Blocking) onState(j int, m *message) {
	p := &b.peers[j]
	p.view, p.active, p.promised, p.members = m.View, m.Active, m.Promised, m.Members
	if m.Active && m.View == b.view {
		p.inactive = 0
	} else {
		p.inactive++
	}
	if m.Promised.Round > b.maxRound {
		b.maxRound = m.Promised.Round
	}
	if m.View.Round > b.maxRound {
		b.maxRound = m.View.Round
	}
	if m.Clock > b.clock {
		b.clock = m.Clock
	}
	b.clock++
	// A member already active in my installed view activates it here too.
	if m.Active && m.View == b.view && !b.active && b.promised == b.view && b.staged != nil {
		b.activate()
	}
	if !b.participating() || m.View != b.view || !m.Active || !b.members[j] {
		return
	}
	if m.Clock <= p.clock {
		return // older than what I have: messages may be reordered
	}
	p.clock = m.Clock
	reply := false
	reqs := map[string]uint64{}
	for _, r := range m.Reqs {
		reqs[r.Lock] = r.TS
		if old, ok := p.reqs[r.Lock]; !ok || old != r.TS {
			reply = true
		}
	}
	p.reqs = reqs
	if reply {
		b.send(j, b.stateMessage())
	}
}

// onWrite is a replica applying a holder's write (the ABD report §3.2.2
// SERVER_WRITE), fenced by the view: only a write of the view this node is
// active in, and has promised nothing newer than, is applied.
func (b *Blocking) onWrite(j int, m *message) {
	if m.View == b.view && !b.active && b.promised == b.view && b.staged != nil {
		b.activate() // a write of my installed view proves it is active
	}
	if !b.participating() || m.View != b.view || !b.members[j] {
		return
	}
	if b.proto.noAck {
		b.store[m.W.Key] = m.W.E
		b.changed = append(b.changed, m.W.Key)
		b.persist("k/"+m.W.Key, marshalKEntry(m.W))
		return
	}
	last := b.lastSeq[m.Lock]
	switch {
	case m.Seq <= last:
		// A retransmission of a write already applied.
	case m.Seq == last+1:
		b.commitPending(m.Lock) // the next write proves the previous one is everywhere
		b.pending[m.Lock] = m.W
		b.lastSeq[m.Lock] = m.Seq
		b.persist("p/"+m.Lock, marshalKEntry(m.W))
	default:
		return // a gap cannot happen within a view; refuse (the view will change)
	}
	b.send(j, &message{Kind: kindWriteAck, View: m.View, Lock: m.Lock, Seq: m.Seq})
}

// onTick is the heartbeat: send state, retransmit, expire requests, detect
// failures and stalled lock holders, drive view changes.
func (b *Blocking) onTick() {
	b.now++
	b.Emit(automaton.SetTimer{ID: timerTick, After: b.hb})
	b.broadcastState()
	// Retransmit writes and commits that are not acknowledged.
	for _, l := range sortedKeys(b.holding) {
		w := b.holding[l]
		ke := b.pending[l]
		m := &message{Kind: kindWrite, View: b.view, Lock: l, Seq: w.tag.Seq, W: ke}
		for j, in := range b.members {
			if in && !w.acks[j] && b.participating() {
				b.send(j, m)
			}
		}
	}
	for j := range b.commits {
		for _, r := range b.commits[j] {
			b.send(j, &message{Kind: kindCommit, View: b.view, Lock: r.lock, Seq: r.seq})
		}
	}
	b.expire()
	if p := b.prop; p != nil {
		switch p.phase {
		case 1:
			b.maybeInstall()
			if b.prop == p && b.now-p.start > 2*b.failTicks {
				b.abandon() // no majority in time
			}
		case 2:
			for j, in := range p.members {
				if in && !p.installed[j] {
					b.send(j, &message{Kind: kindInstall, Ballot: p.ballot, Members: p.members, Snap: p.snap})
				}
			}
			if b.now-p.start > 4*b.failTicks {
				b.abandon()
			}
		}
		return
	}
	why := b.wantViewChange()
	if why == "" {
		b.wantSince = 0
		return
	}
	if b.wantSince == 0 {
		b.wantSince = b.now
	}
	if b.now < b.backoffTill || b.now <= 2 {
		return // (at boot, first hear who is there)
	}
	// The lowest-numbered node this node hears from proposes; the others
	// step in only if nothing happens for two failure timeouts.
	if b.preferred() || b.now-b.wantSince > 2*b.failTicks {
		b.startViewChange()
	}
}

// expire answers requests that waited longer than op_timeout.
func (b *Blocking) expire() {
	var keep []*rop
	for _, r := range b.reads {
		if b.now-r.start > b.opTicks {
			b.finish(r.req.ID, service.Fail(synoderr.TryAgain, "node %s cannot serve reads now (recovering, or cut off from its view)", b.cfg.Self))
		} else {
			keep = append(keep, r)
		}
	}
	b.reads = keep
	for _, l := range sortedKeys(b.waiting) {
		var q []*wop
		for _, w := range b.waiting[l] {
			if b.now-w.start > b.opTicks {
				b.answerWrite(w, service.Fail(synoderr.TryAgain, "the write lock was not granted within the operation timeout; the write was not applied"), false)
			} else {
				q = append(q, w)
			}
		}
		b.waiting[l] = q
	}
	for _, l := range sortedKeys(b.holding) {
		if w := b.holding[l]; b.now-w.start > b.opTicks {
			b.answerWrite(w, service.Fail(synoderr.TryAgain, "the write was not acknowledged by every server in time (its outcome is unknown)"), false)
		}
	}
}

// wantViewChange says why this node wants a new view, or "".
func (b *Blocking) wantViewChange() string {
	if !b.participating() {
		if b.changeSince != 0 && b.now-b.changeSince <= 2*b.failTicks {
			return "" // a view change is under way: give it time
		}
		return "not in an active view"
	}
	for j := range b.cfg.Nodes {
		if j == b.self {
			continue
		}
		p := &b.peers[j]
		alive := p.heard != 0 && b.now-p.heard <= b.failTicks
		switch {
		case b.members[j] && !alive:
			return fmt.Sprintf("member %s silent", b.cfg.Nodes[j])
		case b.members[j] && p.inactive >= 3:
			// (A member that just installed the view activates within a round
			// trip; three heartbeats saying otherwise mean it restarted.)
			return fmt.Sprintf("member %s left the view", b.cfg.Nodes[j])
		case !b.members[j] && alive && b.now-p.heard <= 1 && !(p.active && p.view == b.view):
			return fmt.Sprintf("node %s wants to join", b.cfg.Nodes[j])
		}
	}
	// The lease: a request that heads the queue too long means a crashed or
	// stalled holder (or a member that does not reply): revoke the lock.
	heads := map[string]headSeen{}
	for j := range b.members {
		if !b.members[j] || j == b.self {
			continue
		}
		for l, ts := range b.peers[j].reqs {
			h, ok := heads[l]
			if !ok || ts < h.ts || (ts == h.ts && j < h.node) {
				heads[l] = headSeen{node: j, ts: ts}
			}
		}
	}
	for l, ts := range b.myReq {
		if h, ok := heads[l]; ok && (ts < h.ts || (ts == h.ts && b.self < h.node)) {
			delete(heads, l) // mine heads it: others watch my lease
		}
	}
	why := ""
	for _, l := range sortedKeys(heads) {
		h := heads[l]
		old, ok := b.head[l]
		if !ok || old.node != h.node || old.ts != h.ts {
			h.since = b.now
			b.head[l] = h
			continue
		}
		if b.now-old.since > b.leaseTicks && why == "" {
			why = fmt.Sprintf("lease of %s on lock %q expired", b.cfg.Nodes[h.node], l)
		}
	}
	for _, l := range sortedKeys(b.head) {
		if _, ok := heads[l]; !ok {
			delete(b.head, l)
		}
	}
	return why
}

// preferred reports whether this node is the lowest-numbered node it hears.
func (b *Blocking) preferred() bool {
	for j := 0; j < b.self; j++ {
		if p := &b.peers[j]; p.heard != 0 && b.now-p.heard <= b.failTicks {
			return false
		}
	}
	return true
}

// startViewChange proposes a new view (phase 1: prepare), promising it
// itself.
func (b *Blocking) startViewChange() {
	bal := Ballot{Round: b.maxRound}.Next(uint32(b.self))
	b.maxRound = bal.Round
	b.prop = &proposal{ballot: bal, phase: 1, start: b.now, promises: map[int]*message{}}
	b.promise(bal)
	b.prop.promises[b.self] = b.promiseMessage(bal)
	m := &message{Kind: kindPrepare, Ballot: bal}
	for j := range b.cfg.Nodes {
		b.send(j, m)
	}
	b.maybeInstall()
}

func (b *Blocking) abandon() {
	b.prop = nil
	b.backoffTill = b.now + 1 + uint64(b.cfg.Rand.Int63n(int64(b.failTicks)))
}

// promise records a promise for bal: from now on no write of an older view
// is acknowledged, and the lock of the old view is given up.
func (b *Blocking) promise(bal Ballot) {
	b.promised = bal
	b.persist("promised", marshalBallot(bal))
	b.myReq = map[string]uint64{}
	b.changeSince = b.now
}

// promiseMessage describes this node's latest state: its staged start state,
// or its committed registers with its pending writes.
func (b *Blocking) promiseMessage(bal Ballot) *message {
	m := &message{Kind: kindPromise, Ballot: bal, View: b.view, Members: b.members}
	if b.staged != nil && !b.active {
		m.Snap = b.staged
		return m
	}
	all := map[string]entry{}
	for k, e := range b.store {
		all[k] = e
	}
	for _, ke := range b.pending {
		if cur, ok := all[ke.Key]; !ok || cur.Tag.Less(ke.E.Tag) {
			all[ke.Key] = ke.E
		}
	}
	for _, k := range sortedKeys(all) {
		m.Snap = append(m.Snap, kentry{Key: k, E: all[k]})
	}
	return m
}

func (b *Blocking) onPrepare(j int, m *message) {
	if !b.promised.Less(m.Ballot) {
		b.send(j, &message{Kind: kindNack, Ballot: m.Ballot, Promised: b.promised})
		return
	}
	if m.Ballot.Round > b.maxRound {
		b.maxRound = m.Ballot.Round
	}
	if b.prop != nil {
		b.prop = nil // a higher ballot wins
	}
	b.promise(m.Ballot)
	b.send(j, b.promiseMessage(m.Ballot))
}

// maybeInstall ends phase 1 once a majority promised and every node heard
// recently promised too (or two heartbeats passed since the majority): the
// promisers are the new view's members, and its start state is merged from
// their states (see the package doc: the promisers with the highest installed
// view, and per key the highest tag among them, pending writes included).
func (b *Blocking) maybeInstall() {
	p := b.prop
	if p == nil || p.phase != 1 {
		return
	}
	if len(p.promises) < automaton.Majority(b.n()) {
		return
	}
	if p.majAt == 0 {
		p.majAt = b.now
	}
	all := true
	for j := range b.cfg.Nodes {
		q := &b.peers[j]
		if j != b.self && q.heard != 0 && b.now-q.heard <= b.failTicks && p.promises[j] == nil {
			all = false
		}
	}
	if !all && b.now-p.majAt < 2 {
		return
	}
	var top Ballot
	for _, m := range p.promises {
		if top.Less(m.View) {
			top = m.View
		}
	}
	merged := map[string]entry{}
	p.members = make([]bool, b.n())
	for j := range b.cfg.Nodes {
		m := p.promises[j]
		if m == nil {
			continue
		}
		p.members[j] = true
		if m.View != top {
			continue
		}
		for _, ke := range m.Snap {
			if cur, ok := merged[ke.Key]; !ok || cur.Tag.Less(ke.E.Tag) {
				merged[ke.Key] = ke.E
			}
		}
	}
	for _, k := range sortedKeys(merged) {
		p.snap = append(p.snap, kentry{Key: k, E: merged[k]})
	}
	p.phase = 2
	p.installed = make([]bool, b.n())
	m := &message{Kind: kindInstall, Ballot: p.ballot, Members: p.members, Snap: p.snap}
	for j, in := range p.members {
		if in {
			b.send(j, m)
		}
	}
	b.onInstall(b.self, m)
}

// onInstall stages a view's start state (phase 2). Reads keep using the
// committed store until the view is activated, that is until every member
// installed it.
func (b *Blocking) onInstall(j int, m *message) {
	if m.Ballot.Less(b.promised) {
		return
	}
	if m.Ballot == b.view {
		b.ackInstall(j, m.Ballot) // a retransmission
		return
	}
	if len(m.Members) != b.n() || !m.Members[b.self] {
		return
	}
	if b.promised != m.Ballot {
		b.promise(m.Ballot)
	}
	// Settle my own writes caught by the view change (see the package doc).
	start := map[string]entry{}
	for _, ke := range m.Snap {
		start[ke.Key] = ke.E
	}
	// Writes caught by the view change: mine in progress, and those an
	// earlier install rolled forward but which no view activated yet.
	caught := b.settled
	b.settled = nil
	for _, l := range sortedKeys(b.holding) {
		caught = append(caught, b.holding[l])
		delete(b.holding, l)
	}
	for _, w := range caught {
		l := w.lock
		cur := start[w.req.Op.Key]
		switch {
		case cur.Tag == w.tag:
			b.settled = append(b.settled, w) // rolled forward: OK once active
		case cur.Tag.Less(w.tag):
			if !w.answered { // rolled back: take the lock again in the new view
				b.waiting[l] = append([]*wop{w}, b.waiting[l]...)
			}
		default:
			b.answerWrite(w, service.Fail(synoderr.TryAgain, "the write lock was revoked; the write's outcome is unknown"), false)
		}
	}
	for _, l := range sortedKeys(b.pending) {
		b.unpersist("p/" + l)
	}
	b.pending = map[string]kentry{}
	b.view, b.members, b.active = m.Ballot, m.Members, false
	b.staged = m.Snap
	if b.staged == nil {
		b.staged = []kentry{}
	}
	b.persist("staged", marshalSnap(b.staged))
	b.persist("view", viewRecord{View: b.view, Members: b.members}.marshal())
	b.resetLocks()
	b.ackInstall(j, m.Ballot)
}

func (b *Blocking) ackInstall(j int, bal Ballot) {
	if j == b.self {
		if p := b.prop; p != nil && p.ballot == bal && p.phase == 2 {
			p.installed[b.self] = true
			b.maybeActivate()
		}
		return
	}
	b.send(j, &message{Kind: kindInstallAck, Ballot: bal})
}

// maybeActivate: every member installed the proposer's view; activate it.
func (b *Blocking) maybeActivate() {
	p := b.prop
	if p == nil || p.phase != 2 {
		return
	}
	for j, in := range p.members {
		if in && !p.installed[j] {
			return
		}
	}
	b.prop = nil
	b.wantSince = 0
	if b.view == p.ballot && !b.active {
		b.activate()
	}
}

// activate makes the staged start state the committed store and starts the
// view's lock.
func (b *Blocking) activate() {
	start := map[string]entry{}
	for _, ke := range b.staged {
		start[ke.Key] = ke.E
	}
	for _, k := range sortedKeys(b.store) {
		if _, ok := start[k]; !ok {
			b.unpersist("k/" + k)
		}
	}
	for _, ke := range b.staged {
		if cur, ok := b.store[ke.Key]; !ok || cur.Tag != ke.E.Tag || cur.Tomb != ke.E.Tomb {
			b.persist("k/"+ke.Key, marshalKEntry(ke))
		}
	}
	b.store = start
	for _, ke := range b.staged {
		b.changed = append(b.changed, ke.Key)
	}
	b.staged = nil
	b.unpersist("staged")
	b.active = true
	b.servedIn = true
	b.wantSince = 0
	b.changeSince = 0
	for _, w := range b.settled {
		b.answerWrite(w, w.res, true)
	}
	b.settled = nil
	b.persist("view", viewRecord{View: b.view, Members: b.members, Active: true}.marshal())
	b.resetLocks()
	b.broadcastState()
}

// resetLocks forgets the lock state of the previous view.
func (b *Blocking) resetLocks() {
	b.lastSeq = map[string]uint64{}
	b.myReq = map[string]uint64{}
	b.head = map[string]headSeen{}
	for j := range b.peers {
		b.peers[j].clock = 0
		b.peers[j].reqs = nil
		b.peers[j].inactive = 0
	}
	for j := range b.commits {
		b.commits[j] = nil
	}
}
