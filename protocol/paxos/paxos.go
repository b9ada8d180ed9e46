package paxos

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

func init() {
	automaton.Register(protocol{name: "paxos"})
	// Deliberately broken variants (see the package doc). Never use them for data.
	automaton.Register(protocol{name: "paxos-broken-skipphase1values", skipPhase1Values: true})
	automaton.Register(protocol{name: "paxos-broken-stickyleader", stickyLeader: true})
	automaton.Register(protocol{name: "paxos-broken-bootquorum", bootQuorum: true})
}

type protocol struct {
	name             string
	skipPhase1Values bool // a new leader ignores the values reported in phase 1
	stickyLeader     bool // a follower never gives up on the first leader it heard of
	bootQuorum       bool // phase 2 counts majorities of the bootstrap configuration
}

func (p protocol) Name() string          { return p.name }
func (p protocol) IdempotentRetry() bool { return true }

// Defaults of the parameters (see the package doc).
const (
	DefaultHeartbeat       = 50 * time.Millisecond
	DefaultElectionTimeout = 500 * time.Millisecond
	DefaultOpTimeout       = 5 * time.Second
	DefaultWindow          = 8
	DefaultBatch           = 256
	DefaultSnapshotEvery   = 20000
	DefaultLeaseDrift      = 0.1
	DefaultDedupClients    = 100000
	maxNodes               = 63
	catchupBudget          = 1 << 20 // bytes of values per catch-up message
	catchupMaxEntries      = 512
)

// Params are the parsed protocol parameters.
type Params struct {
	Heartbeat, ElectionTimeout, OpTimeout, LeaseMargin time.Duration
	Window, Batch, SnapshotEvery, DedupClients         int
	LeaseDrift                                         float64
	// Read is the mode a request asking for the default linearizable read
	// gets: ReadQuorum (the default), ReadLog or ReadLease.
	Read automaton.ReadMode
}

// Lease is the lease a leader assumes after a majority acknowledged a
// heartbeat: ElectionTimeout/(1+LeaseDrift) - LeaseMargin.
func (p Params) Lease() time.Duration {
	return time.Duration(float64(p.ElectionTimeout)/(1+p.LeaseDrift)) - p.LeaseMargin
}

var paramNames = "heartbeat, election_timeout, op_timeout, window, batch, snapshot_every, lease_drift, lease_margin, dedup_clients, read"

// ParseParams parses the namespace parameters; unknown names are errors.
func ParseParams(m map[string]string) (Params, error) {
	p := Params{
		Heartbeat: DefaultHeartbeat, ElectionTimeout: DefaultElectionTimeout, OpTimeout: DefaultOpTimeout,
		Window: DefaultWindow, Batch: DefaultBatch, SnapshotEvery: DefaultSnapshotEvery,
		LeaseDrift: DefaultLeaseDrift, DedupClients: DefaultDedupClients, LeaseMargin: -1,
		Read: automaton.ReadQuorum,
	}
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		v := m[k]
		dur := func(dst *time.Duration) error {
			d, err := time.ParseDuration(v)
			if err != nil || d <= 0 {
				return fmt.Errorf("paxos: parameter %s: %q is not a positive duration", k, v)
			}
			*dst = d
			return nil
		}
		num := func(dst *int) error {
			n, err := strconv.Atoi(v)
			if err != nil || n < 1 {
				return fmt.Errorf("paxos: parameter %s: %q is not a positive integer", k, v)
			}
			*dst = n
			return nil
		}
		var err error
		switch k {
		case "heartbeat":
			err = dur(&p.Heartbeat)
		case "election_timeout":
			err = dur(&p.ElectionTimeout)
		case "op_timeout":
			err = dur(&p.OpTimeout)
		case "lease_margin":
			d, e := time.ParseDuration(v)
			if e != nil || d < 0 {
				err = fmt.Errorf("paxos: parameter %s: %q is not a non-negative duration", k, v)
			}
			p.LeaseMargin = d
		case "window":
			err = num(&p.Window)
		case "batch":
			err = num(&p.Batch)
		case "snapshot_every":
			err = num(&p.SnapshotEvery)
		case "dedup_clients":
			err = num(&p.DedupClients)
		case "lease_drift":
			f, e := strconv.ParseFloat(v, 64)
			if e != nil || f < 0 || f >= 1 {
				err = fmt.Errorf("paxos: parameter %s: %q is not a number in [0, 1)", k, v)
			}
			p.LeaseDrift = f
		case "read":
			switch v {
			case "quorum":
				p.Read = automaton.ReadQuorum
			case "log":
				p.Read = automaton.ReadLog
			case "lease":
				p.Read = automaton.ReadLease
			default:
				err = fmt.Errorf("paxos: parameter %s: %q is not one of quorum, log, lease", k, v)
			}
		default:
			err = fmt.Errorf("paxos: unknown parameter %q (known: %s)", k, paramNames)
		}
		if err != nil {
			return p, err
		}
	}
	if p.LeaseMargin < 0 {
		p.LeaseMargin = p.Heartbeat
	}
	if p.ElectionTimeout < 3*p.Heartbeat {
		return p, fmt.Errorf("paxos: election_timeout %v must be at least 3 heartbeats (%v)", p.ElectionTimeout, 3*p.Heartbeat)
	}
	if p.Lease() <= 0 {
		return p, fmt.Errorf("paxos: lease election_timeout/(1+lease_drift)-lease_margin = %v is not positive", p.Lease())
	}
	return p, nil
}

func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("paxos: namespace %q has no service", cfg.Namespace)
	}
	if cfg.Rand == nil {
		return nil, fmt.Errorf("paxos: no Config.Rand")
	}
	if len(cfg.Nodes) < 1 {
		return nil, fmt.Errorf("paxos: no nodes")
	}
	params := map[string]string{}
	for k, v := range cfg.Params {
		params[k] = v
	}
	boot := cfg.Nodes
	if v, ok := params["members"]; ok {
		// The bootstrap membership, when the cluster file lists more nodes
		// than the configuration began with (nodes added since).
		var err error
		if boot, err = parseMembers(v); err != nil {
			return nil, err
		}
		delete(params, "members")
	}
	if len(boot) > maxNodes {
		return nil, fmt.Errorf("paxos: %d nodes (want 1 to %d)", len(boot), maxNodes)
	}
	prm, err := ParseParams(params)
	if err != nil {
		return nil, err
	}
	a := &Paxos{proto: p, cfg: cfg, prm: prm, index: map[automaton.NodeID]int{}}
	seen := map[automaton.NodeID]bool{}
	selfListed := false
	for _, n := range cfg.Nodes {
		if seen[n] {
			return nil, fmt.Errorf("paxos: node %s listed twice", n)
		}
		seen[n] = true
		selfListed = selfListed || n == cfg.Self
	}
	if !selfListed {
		return nil, fmt.Errorf("paxos: self %s is not among the nodes %v", cfg.Self, cfg.Nodes)
	}
	a.boot = bootstrapConf(boot)
	a.self = a.handle(cfg.Self)
	a.reset()
	return a, nil
}

// Roles.
const (
	follower = iota
	candidate
	leader
)

// Timers. Lease timers are leaseTimerBase + heartbeat round.
const (
	tmTick         automaton.TimerID = 1
	tmElection     automaton.TimerID = 2
	tmAlive        automaton.TimerID = 3
	leaseTimerBase automaton.TimerID = 1 << 32
)

// slot is one log instance at this replica.
type slot struct {
	bal    Ballot // accepted ballot (zero for a value learnt as chosen)
	val    []byte
	chosen bool
}

// flight is a leader's phase 2 bookkeeping for one instance.
type flight struct {
	acks nodeSet // handles of the nodes that accepted
	conf *conf   // the configuration of this instance
	sent uint64  // tick of the last (re)transmission
}

// Request states at the node that holds them.
const (
	pWaiting  = iota // not at a leader: forwarded (or waiting for one)
	pQueued          // leader: waiting for a proposal slot
	pProposed        // leader: in an instance not yet executed
	pRead            // leader: quorum or lease read waiting for its conditions
	pLearner         // leader: a member add waiting for its node to catch up
)

// pend is a client request this node must answer: to a local client, and/or
// to followers that forwarded it.
type pend struct {
	req    automaton.Request
	local  bool
	remote []int
	state  int
	age    int // ticks since it arrived
	fwdAge int // ticks since it was last forwarded
	fwdTo  int // node it was last forwarded to (-1: none)
	// Reads under ReadQuorum/ReadLease: instance to have executed, and the
	// heartbeat round whose majority acknowledgement confirms leadership.
	readIndex, round uint64
}

// Paxos is one node's replica of a Multi-Paxos namespace: acceptor, learner,
// and (when elected) leader.
type Paxos struct {
	proto protocol
	cfg   automaton.Config
	prm   Params
	// Nodes are named inside the automaton by local handles, indices into
	// nodes given in the order this replica first heard of them (self is 0).
	// Handles are not shared between replicas: ballots carry member numbers.
	index map[automaton.NodeID]int
	nodes []automaton.NodeID
	self  int
	boot  *conf // bootstrap configuration (Config.Nodes or param members)
	// nums: the ballot number of every node of any configuration seen.
	nums map[automaton.NodeID]uint32
	// book: addresses of nodes named by configurations and changes seen, and
	// of learners; lastMembers is the Members output last emitted.
	book        map[automaton.NodeID]member
	lastMembers string

	// Acceptor.
	promised Ballot
	log      map[uint64]*slot
	logStart uint64 // lowest instance that may be in log
	maxInst  uint64 // highest instance in log

	// Learner and state machine.
	chosenUpTo uint64 // every instance up to it is chosen (and here)
	executed   uint64
	snapIndex  uint64 // instance of the last persisted snapshot
	sinceSnap  int    // commands executed since that snapshot
	savedC     uint64 // commit index last persisted
	sm         *machine

	// Election.
	role        int
	ballot      Ballot // own ballot while candidate or leader
	leaderAlive bool   // a live leader (aliveLeader) was heard within election_timeout
	aliveLeader int    // -1: unknown
	leaderHint  int    // where to forward (-1: unknown)
	maxRound    uint64
	promises    map[int]*message
	p1Confs     []*conf // configurations phase 1 needs a majority of
	p1Ticks     int
	failures    int

	// Leader.
	ready       bool
	next        uint64
	inflight    map[uint64]*flight
	queue       []automaton.RequestID
	tick        uint64
	hbRound     uint64
	ackRound    map[int]uint64
	acked       map[int]uint64 // highest instance (or chosen prefix) each peer acknowledged
	quorumRound uint64
	quorumTick  uint64
	leaseFired  uint64 // highest heartbeat round whose lease timer fired
	inLog       map[automaton.RequestID]uint64
	// ownUnsaved: instances proposed in this step whose own acceptance is
	// persisted after the Accept is broadcast (persistOwn).
	ownUnsaved []uint64
	// changes in flight (proposed, not executed) with the configuration each
	// one makes, in instance order. While there is one the leader proposes
	// nothing new: the configuration of later instances is not known yet.
	changes []pendingChange
	// learners: nodes being added, caught up before their add is proposed.
	learners map[automaton.NodeID]*learner

	// Requests this node must answer; reads: those in state pRead; fwdQ:
	// requests routed to the leader since the last forwarding pass, which
	// went to fwdHint (-1: the next pass looks at every pending request).
	pending map[automaton.RequestID]*pend
	reads   map[automaton.RequestID]*pend
	fwdQ    []automaton.RequestID
	fwdHint int

	// Catch-up: the outstanding request's peer, and the highest chosen
	// instance some peer is known to have.
	catchupFrom  int
	catchupTicks int
	behindTo     uint64
	behindPeer   int

	out []automaton.Output
}

func (a *Paxos) reset() {
	a.promised = Ballot{}
	a.log = map[uint64]*slot{}
	a.logStart, a.maxInst = 1, 0
	a.chosenUpTo, a.executed, a.snapIndex, a.savedC = 0, 0, 0, 0
	a.sinceSnap = 0
	a.sm = newMachine(a.cfg.Service, a.prm.DedupClients, a.boot)
	a.nums = map[automaton.NodeID]uint32{}
	a.book = map[automaton.NodeID]member{}
	a.lastMembers = ""
	a.noteConf(a.boot)
	a.changes = nil
	a.learners = map[automaton.NodeID]*learner{}
	a.role = follower
	a.aliveLeader, a.leaderHint, a.catchupFrom, a.behindPeer = -1, -1, -1, -1
	a.behindTo = 0
	a.pending = map[automaton.RequestID]*pend{}
	a.reads = map[automaton.RequestID]*pend{}
	a.fwdQ, a.fwdHint = nil, -1
	a.inflight = map[uint64]*flight{}
	a.inLog = map[automaton.RequestID]uint64{}
	a.ackRound = map[int]uint64{}
	a.acked = map[int]uint64{}
}

func (a *Paxos) myNode() uint32 { return a.nums[a.cfg.Self] }
func (a *Paxos) emit(o automaton.Output) {
	a.out = append(a.out, o)
}
func (a *Paxos) send(to int, m *message) {
	a.emit(automaton.Send{To: a.nodes[to], Msg: m.marshal()})
}

// broadcast sends m to every peer of the leader (peers).
func (a *Paxos) broadcast(m *message) {
	var b []byte
	for _, h := range a.peers(false) {
		if b == nil {
			b = m.marshal()
		}
		a.emit(automaton.Send{To: a.nodes[h], Msg: b})
	}
}
func (a *Paxos) persist(k string, v []byte) { a.emit(automaton.Persist{Key: k, Value: v}) }
func (a *Paxos) ticksOf(d time.Duration) int {
	t := int((d + a.prm.Heartbeat - 1) / a.prm.Heartbeat)
	if t < 1 {
		t = 1
	}
	return t
}

// Step implements automaton.Automaton.
func (a *Paxos) Step(in automaton.Input) []automaton.Output {
	a.out = nil
	switch in := in.(type) {
	case automaton.Start:
		a.onStart(in)
	case automaton.ClientRequest:
		a.onClientRequest(in.Req)
	case automaton.PeerMessage:
		a.onPeerMessage(in.From, in.Msg)
	case automaton.TimerFired:
		a.onTimer(in.ID)
	}
	return a.out
}

// ---------------------------------------------------------------- recovery

// onStart rebuilds the replica from its records: promise, snapshot, log and
// chosen prefix; it re-executes the chosen log after the snapshot.
func (a *Paxos) onStart(s automaton.Start) {
	a.reset()
	var commit uint64
	if v, ok := s.Records[recPromised]; ok {
		d, err := unmarshalBallotRec(v)
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt record %q: %v", recPromised, err))
		}
		a.promised = d
	}
	if v, ok := s.Records[recSnapshot]; ok {
		idx, err := a.sm.restore(v)
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt snapshot record: %v", err))
		}
		a.snapIndex, a.executed, a.chosenUpTo = idx, idx, idx
		a.logStart = idx + 1
		a.noteConf(a.sm.conf)
	}
	if v, ok := s.Records[recCommit]; ok {
		c, err := decodeUint(v)
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt record %q: %v", recCommit, err))
		}
		commit = c
		a.savedC = c
	}
	keys := make([]string, 0, len(s.Records))
	for k := range s.Records {
		if len(k) == len(recSlotPfx)+16 && k[:len(recSlotPfx)] == recSlotPfx {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	first := true
	for _, k := range keys {
		i, err := strconv.ParseUint(k[len(recSlotPfx):], 16, 64)
		if err != nil {
			panic(fmt.Sprintf("paxos: bad record key %q", k))
		}
		if i <= a.snapIndex {
			a.emit(automaton.Persist{Key: k, Delete: true}) // left over from a truncation
			continue
		}
		sl, err := decodeSlot(s.Records[k])
		if err != nil {
			panic(fmt.Sprintf("paxos: corrupt record %q: %v", k, err))
		}
		if i <= commit {
			sl.chosen = true
		}
		a.log[i] = sl
		if first {
			a.logStart, first = i, false
		}
		if i > a.maxInst {
			a.maxInst = i
		}
	}
	if a.maxInst < a.snapIndex {
		a.maxInst = a.snapIndex
	}
	a.maxRound = a.promised.Round
	a.advance(false)
	// A node that may have acknowledged a leader's heartbeat before it
	// crashed honours that leader's lease for a full election timeout more.
	if len(s.Records) > 0 {
		a.leaderAlive = true
		a.emit(automaton.SetTimer{ID: tmAlive, After: a.prm.ElectionTimeout})
	}
	a.armElection()
	a.emit(automaton.SetTimer{ID: tmTick, After: a.prm.Heartbeat})
	a.emitMembers()
}

// armElection (re)starts the randomised election timer: election_timeout
// plus a random part of up to election_timeout << min(failures, 3).
func (a *Paxos) armElection() {
	et := a.prm.ElectionTimeout
	spread := et << uint(min(a.failures, 3))
	a.emit(automaton.SetTimer{ID: tmElection, After: et + time.Duration(a.cfg.Rand.Int63n(int64(spread)))})
}

// ------------------------------------------------------------------ timers

func (a *Paxos) onTimer(id automaton.TimerID) {
	switch {
	case id == tmTick:
		a.onTick()
		a.emit(automaton.SetTimer{ID: tmTick, After: a.prm.Heartbeat})
	case id == tmAlive:
		if !a.proto.stickyLeader {
			a.leaderAlive = false
		}
	case id == tmElection:
		a.onElectionTimeout()
	case id >= leaseTimerBase:
		if r := uint64(id - leaseTimerBase); r > a.leaseFired {
			a.leaseFired = r
		}
	}
}

func (a *Paxos) onElectionTimeout() {
	if a.role != follower || !a.isMember() {
		return // only members stand for election
	}
	if a.leaderAlive {
		a.armElection()
		return
	}
	a.startPhase1()
}

// onTick runs every heartbeat interval: leader heartbeats and
// retransmissions, candidate retransmissions, request timeouts, forwarding
// retries and catch-up retries.
func (a *Paxos) onTick() {
	a.tick++
	switch a.role {
	case leader:
		a.sendHeartbeat()
		a.retransmitAccepts()
		// Check quorum: a leader that has not heard a majority acknowledge a
		// heartbeat for an election timeout steps down.
		if int(a.tick-a.quorumTick) > a.ticksOf(a.prm.ElectionTimeout) {
			a.stepDown()
		}
	case candidate:
		a.p1Ticks++
		if a.p1Ticks > a.ticksOf(a.prm.ElectionTimeout) {
			a.failures++
			a.stepDown()
		} else {
			a.sendPrepares()
		}
	}
	// Requests: time out, (re)forward.
	var expired []automaton.RequestID
	opTicks := a.ticksOf(a.prm.OpTimeout)
	for id, p := range a.pending {
		p.age++
		p.fwdAge++
		if p.age > opTicks {
			expired = append(expired, id)
		}
	}
	sortIDs(expired)
	for _, id := range expired {
		a.finish(id, service.Errorf("TRYAGAIN paxos: request %v not done within %v (leader unavailable?); a write's outcome is unknown", id, a.prm.OpTimeout))
	}
	if a.role != leader {
		a.fwdHint = -1 // a full pass: re-forward what waited four ticks
		a.forwardPending()
	}
	if a.catchupFrom >= 0 {
		a.catchupTicks++
		if a.catchupTicks > 4 {
			a.catchupFrom = -1 // lost: ask again
		}
	}
	if a.catchupFrom < 0 && a.behindTo > a.chosenUpTo && a.behindPeer >= 0 {
		a.requestCatchup(a.behindPeer, a.chosenUpTo+1, a.behindTo)
	}
	if a.role == leader && len(a.learners) > 0 {
		a.checkLearners()
	}
}

func sortIDs(ids []automaton.RequestID) {
	sort.Slice(ids, func(i, j int) bool {
		if ids[i].Client != ids[j].Client {
			return ids[i].Client < ids[j].Client
		}
		return ids[i].Seq < ids[j].Seq
	})
}

// ---------------------------------------------------------------- election

// startPhase1 makes this node a candidate with a fresh ballot and sends one
// Prepare covering every instance from the first one not known chosen
// (seed 002, chapter VI.A.2: "a single message ... for 88, 89 and all
// instances greater than 90").
func (a *Paxos) startPhase1() {
	r := a.maxRound
	if a.promised.Round > r {
		r = a.promised.Round
	}
	if !a.isMember() {
		return
	}
	a.ballot = Ballot{Round: r + 1, Node: a.myNode()}
	a.maxRound = a.ballot.Round
	a.role = candidate
	a.ready = false
	a.p1Ticks = 0
	a.promises = map[int]*message{}
	a.promised = a.ballot
	a.persist(recPromised, encodeBallotRec(a.promised))
	a.promises[a.self] = a.promiseFor(a.chosenUpTo + 1)
	a.p1Confs = []*conf{a.sm.conf}
	a.sendPrepares()
	a.checkPhase1()
}

// sendPrepares asks every member of the configurations phase 1 needs (the
// current one, and those that changes found in the promises make) that has
// not promised yet.
func (a *Paxos) sendPrepares() {
	m := &message{Kind: kindPrepare, Ballot: a.ballot, From: a.chosenUpTo + 1}
	var b []byte
	sent := map[int]bool{}
	for _, c := range a.p1Confs {
		for _, mb := range c.members {
			h := a.handle(mb.ID)
			if h == a.self || a.promises[h] != nil || sent[h] {
				continue
			}
			sent[h] = true
			if b == nil {
				b = m.marshal()
			}
			a.emit(automaton.Send{To: mb.ID, Msg: b})
		}
	}
}

// promiseFor builds this acceptor's phase 1b answer for instances >= from: its
// chosen prefix, and every accepted instance beyond both.
func (a *Paxos) promiseFor(from uint64) *message {
	m := &message{Kind: kindPromise, Ballot: a.promised, OK: true, Commit: a.chosenUpTo}
	lo := from
	if a.chosenUpTo+1 > lo {
		lo = a.chosenUpTo + 1
	}
	for i := lo; i <= a.maxInst; i++ {
		if s := a.log[i]; s != nil {
			m.Entries = append(m.Entries, entry{I: i, Ballot: s.bal, Chosen: s.chosen, Value: s.val})
		}
	}
	return m
}

// onPrepare is the acceptor's phase 1 (seed 002 chapter V; Lamport's
// "Paxos made simple"), with the leader-stability rule: a node that heard a
// live leader within election_timeout does not promise anyone else.
func (a *Paxos) onPrepare(from int, m *message) {
	b := m.Ballot
	if !a.ballotOf(from, b) {
		return // a ballot names its proposer
	}
	if !a.sm.conf.has(a.nodes[from]) {
		// Not a member as far as this replica knows: no promise, and the
		// commit index, so that a removed node catches up and learns it.
		a.send(from, &message{Kind: kindPromise, Ballot: b, OK: false, Promised: a.promised, Commit: a.chosenUpTo})
		return
	}
	if b.Round > a.maxRound {
		a.maxRound = b.Round
	}
	grant := b == a.promised ||
		(a.promised.Less(b) && a.role == follower && (!a.leaderAlive || a.aliveLeader == from || a.leaderRemoved()))
	if !grant {
		if m.From > a.chosenUpTo+1 {
			// The candidate knows more chosen (a removed leader's successor
			// does): learn it, the retransmitted Prepare may then be granted.
			a.requestCatchup(from, a.chosenUpTo+1, m.From-1)
		}
		a.send(from, &message{Kind: kindPromise, Ballot: b, OK: false, Promised: a.promised, Commit: a.chosenUpTo})
		return
	}
	if b != a.promised {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	a.heardLeader(from)
	a.armElection()
	a.send(from, a.promiseFor(m.From))
}

// heardLeader records that from, a leader (or a candidate this node promised),
// is alive now: no other node gets a promise for election_timeout.
func (a *Paxos) heardLeader(from int) {
	if a.proto.stickyLeader && a.aliveLeader >= 0 && a.aliveLeader != from {
		return
	}
	a.aliveLeader = from
	a.leaderAlive = true
	a.emit(automaton.SetTimer{ID: tmAlive, After: a.prm.ElectionTimeout})
}

func (a *Paxos) onPromise(from int, m *message) {
	if a.role != candidate || m.Ballot != a.ballot || a.promises[from] != nil {
		return
	}
	if !m.OK {
		if m.Commit > a.chosenUpTo {
			a.requestCatchup(from, a.chosenUpTo+1, m.Commit)
		}
		if a.ballot.Less(m.Promised) {
			if m.Promised.Round > a.maxRound {
				a.maxRound = m.Promised.Round
			}
			a.failures++
			a.stepDown()
		}
		return
	}
	a.promises[from] = m
	a.checkPhase1()
}

// checkPhase1 completes phase 1 once a majority of every configuration
// involved promised. For every instance from the first not chosen here to the
// highest reported, the value is the chosen one if any acceptor knows it,
// else the one accepted with the highest ballot, else a no-op; all of them
// are proposed again, in one Accept message. Instances up to the highest
// reported chosen prefix are chosen already: the candidate fetches them by
// catch-up first (it must know every value before an instance to know that
// instance's configuration), and completes phase 1 after.
//
// Configurations (membership.go): the configuration of instance i is the one
// after executing instances < i. Walking the values in instance order, every
// change met makes the configuration of the instances after it; the
// candidate needs promises from a majority of each configuration met, and
// asks the members it did not know yet.
func (a *Paxos) checkPhase1() {
	if a.role != candidate {
		return
	}
	a.promises[a.self] = a.promiseFor(a.chosenUpTo + 1)
	var cmax uint64
	cfrom := -1
	top := a.chosenUpTo
	best := map[uint64]entry{}
	hs := make([]int, 0, len(a.promises))
	for h := range a.promises {
		hs = append(hs, h)
	}
	sort.Ints(hs)
	for _, h := range hs {
		p := a.promises[h]
		if p.Commit > cmax {
			cmax, cfrom = p.Commit, h
		}
		for _, e := range p.Entries {
			if e.I <= a.chosenUpTo {
				continue
			}
			if e.I > top {
				top = e.I
			}
			if a.proto.skipPhase1Values {
				continue // broken on purpose: forget what was accepted
			}
			cur, ok := best[e.I]
			if !ok || (!cur.Chosen && (e.Chosen || cur.Ballot.Less(e.Ballot))) {
				best[e.I] = e
			}
		}
	}
	if cmax > a.chosenUpTo {
		if !a.hasMajority(a.sm.conf, a.promises) {
			return
		}
		// Chosen instances this candidate lacks: fetch them, then decide.
		if cfrom != a.self {
			a.requestCatchup(cfrom, a.chosenUpTo+1, cmax)
		}
		return
	}
	// Walk the values, building each instance's configuration.
	type seg struct {
		at uint64 // the change's instance
		c  *conf  // configuration of the instances after it
	}
	vals := map[uint64][]byte{}
	confs := []*conf{a.sm.conf}
	var segs []seg
	cur := a.sm.conf
	for i := a.chosenUpTo + 1; i <= top; i++ {
		v := noop
		if s := a.log[i]; s != nil && s.chosen {
			v = s.val
		} else if e, ok := best[i]; ok {
			v = e.Value
		}
		vals[i] = v
		if ch, ok := valueChange(v); ok {
			a.noteChange(ch)
			if n, err := cur.apply(ch, i); err == nil {
				cur = n
				segs = append(segs, seg{i, n})
				confs = append(confs, n)
			}
		}
	}
	asked := map[automaton.NodeID]bool{}
	for _, c := range a.p1Confs {
		for _, m := range c.members {
			asked[m.ID] = true
		}
	}
	a.p1Confs = confs
	for _, c := range confs {
		if !a.hasMajority(c, a.promises) {
			a.emitMembers()
			// Ask the members of configurations met for the first time.
			prep := (&message{Kind: kindPrepare, Ballot: a.ballot, From: a.chosenUpTo + 1}).marshal()
			for _, c := range confs {
				for _, m := range c.members {
					if !asked[m.ID] && m.ID != a.cfg.Self {
						asked[m.ID] = true
						a.emit(automaton.Send{To: m.ID, Msg: prep})
					}
				}
			}
			return
		}
	}
	a.role = leader
	a.ready = true
	a.failures = 0
	a.leaderHint = a.self
	a.aliveLeader = a.self
	a.promises = nil
	a.p1Confs = nil
	a.inflight = map[uint64]*flight{}
	a.inLog = map[automaton.RequestID]uint64{}
	a.ackRound = map[int]uint64{}
	a.acked = map[int]uint64{}
	a.changes = nil
	for _, sg := range segs {
		a.changes = append(a.changes, pendingChange{at: sg.at, conf: sg.c})
	}
	a.quorumRound, a.quorumTick = a.hbRound, a.tick
	a.emit(automaton.CancelTimer{ID: tmElection})
	var entries []entry
	c := a.sm.conf
	k := 0
	for i := a.chosenUpTo + 1; i <= top; i++ {
		ci := c
		if k < len(segs) && segs[k].at == i {
			c = segs[k].c
			k++
		}
		if s := a.log[i]; s != nil && s.chosen {
			continue
		}
		entries = append(entries, a.proposeAt(i, vals[i], ci))
	}
	a.next = top + 1
	a.emitMembers()
	if len(entries) > 0 {
		a.broadcast(&message{Kind: kindAccept, Ballot: a.ballot, Commit: a.chosenUpTo, Entries: entries})
	}
	a.persistOwn()
	a.sendHeartbeat()
	a.checkChosen()
	// Requests that waited for a leader.
	ids := make([]automaton.RequestID, 0, len(a.pending))
	for id := range a.pending {
		ids = append(ids, id)
	}
	sortIDs(ids)
	for _, id := range ids {
		if p := a.pending[id]; p != nil && p.state == pWaiting {
			a.lead(p)
		}
	}
	a.propose()
}

// hasMajority reports whether the nodes in set (by handle) hold a majority of c.
func (a *Paxos) hasMajority(c *conf, set map[int]*message) bool {
	n := 0
	for _, m := range c.members {
		if h, ok := a.index[m.ID]; ok && set[h] != nil {
			n++
		}
	}
	return n >= c.majority()
}

// proposeAt accepts v at instance i under the leader's own ballot and starts
// counting acceptances, the leader's own included. The leader's acceptance
// record is not persisted here: the caller broadcasts the Accept first and
// then calls persistOwn, so the Accept leaves before the leader's fsync (see
// "Phase 2, commit and execution" in the package doc for why counting the
// vote at once is safe).
func (a *Paxos) proposeAt(i uint64, v []byte, c *conf) entry {
	s := &slot{bal: a.ballot, val: v}
	a.putSlot(i, s)
	a.ownUnsaved = append(a.ownUnsaved, i)
	f := &flight{conf: c, sent: a.tick}
	f.acks.add(a.self)
	a.inflight[i] = f
	if cmds, err := decodeBatch(v); err == nil {
		for _, c := range cmds {
			a.inLog[c.ID] = i
		}
	}
	return entry{I: i, Value: v}
}

// persistOwn emits the Persist of the leader's own acceptances proposed
// in this step (proposeAt), after the Accept that carries them. Every output
// emitted from here on, in this step or a later one, is released only once
// these records are durable (automaton contract), and every output that
// depends on the leader's own vote (a choice it completes, a commit notice,
// an answer) is emitted after this call.
func (a *Paxos) persistOwn() {
	for _, i := range a.ownUnsaved {
		if s := a.log[i]; s != nil && s.bal == a.ballot {
			a.persist(slotKey(i), encodeSlot(s))
		}
	}
	a.ownUnsaved = a.ownUnsaved[:0]
}

func (a *Paxos) putSlot(i uint64, s *slot) {
	a.log[i] = s
	if i > a.maxInst {
		a.maxInst = i
	}
	if i < a.logStart {
		a.logStart = i
	}
}

// stepDown makes a leader or candidate a follower. Requests it holds are
// forwarded to the next leader it hears of.
func (a *Paxos) stepDown() {
	if a.role == follower {
		return
	}
	a.role = follower
	a.ready = false
	a.promises = nil
	a.inflight = map[uint64]*flight{}
	a.inLog = map[automaton.RequestID]uint64{}
	a.queue = nil
	a.changes = nil
	a.p1Confs = nil
	a.learners = map[automaton.NodeID]*learner{}
	a.leaderAlive = false
	a.aliveLeader = -1
	if a.leaderHint == a.self {
		a.leaderHint = -1
	}
	for _, p := range a.pending {
		p.state = pWaiting
		p.fwdTo = -1 // forward at the first chance
	}
	a.fwdHint = -1
	clear(a.reads)
	a.emitMembers()
	a.armElection()
}

// ------------------------------------------------------------------ leader

func (a *Paxos) sendHeartbeat() {
	a.hbRound++
	a.ackRound[a.self] = a.hbRound
	a.emit(automaton.SetTimer{ID: leaseTimerBase + automaton.TimerID(a.hbRound), After: a.prm.Lease()})
	m := &message{Kind: kindHeartbeat, Ballot: a.ballot, Commit: a.chosenUpTo, Round: a.hbRound}
	var b []byte
	for _, h := range a.peers(true) {
		if b == nil {
			b = m.marshal()
		}
		a.emit(automaton.Send{To: a.nodes[h], Msg: b})
	}
	a.updateQuorumRound()
}

// retransmitAccepts resends, in one Accept per peer, the instances in flight
// for at least a tick that the peer has not acknowledged.
func (a *Paxos) retransmitAccepts() {
	if len(a.inflight) == 0 {
		return
	}
	ids := make([]uint64, 0, len(a.inflight))
	for i, f := range a.inflight {
		if f.sent < a.tick {
			ids = append(ids, i)
		}
	}
	sort.Slice(ids, func(x, y int) bool { return ids[x] < ids[y] })
	for _, to := range a.peers(false) {
		var entries []entry
		for _, i := range ids {
			if !a.inflight[i].acks.has(to) {
				entries = append(entries, entry{I: i, Value: a.log[i].val})
			}
		}
		if len(entries) > 0 {
			a.send(to, &message{Kind: kindAccept, Ballot: a.ballot, Commit: a.chosenUpTo, Entries: entries})
		}
	}
	for _, i := range ids {
		a.inflight[i].sent = a.tick
	}
}

// lead handles a request at the leader.
func (a *Paxos) lead(p *pend) {
	id := p.req.ID
	op := p.req.Op
	mode := p.req.Opts.Read
	if mode == automaton.ReadDefault {
		mode = a.prm.Read
	}
	if !automaton.IsMemberOp(op) && a.cfg.Service.IsRead(op) && (mode == automaton.ReadQuorum || mode == automaton.ReadLease) {
		// Everything acknowledged before the read arrived is at or below the
		// highest instance this leader has proposed.
		p.state = pRead
		a.reads[id] = p
		p.readIndex = a.next - 1
		p.round = a.hbRound + 1
		if mode == automaton.ReadLease && a.leaseValid() {
			p.round = 0 // the lease stands in for the confirmation round
		} else if a.quorumRound >= a.hbRound {
			a.sendHeartbeat() // no round in flight: start one now
		}
		a.serveReads()
		return
	}
	if !a.cfg.Service.IsRead(op) || automaton.IsMemberOp(op) {
		if res, ok := a.sm.lookup(id); ok {
			a.finish(id, res)
			return
		}
	}
	if _, ok := a.inLog[id]; ok {
		p.state = pProposed
		return
	}
	if p.state == pQueued || p.state == pLearner {
		return
	}
	if automaton.IsMemberOp(op) {
		a.leadChange(p)
		return
	}
	p.state = pQueued
	a.queue = append(a.queue, id)
	a.propose()
}

// leaseValid: a majority acknowledged a heartbeat whose lease timer has not
// fired yet (timers are set when each heartbeat is sent, so they fire in
// round order; a lease is never assumed longer than the timer says).
func (a *Paxos) leaseValid() bool {
	return a.role == leader && a.ready && a.quorumRound > a.leaseFired && a.quorumRound > 0
}

// serveReads answers the quorum and lease reads whose conditions hold.
func (a *Paxos) serveReads() {
	if len(a.reads) == 0 {
		return
	}
	var done []automaton.RequestID
	for id, p := range a.reads {
		if p.state != pRead || p.readIndex > a.executed {
			continue
		}
		if p.round == 0 {
			if !a.leaseValid() {
				p.round = a.hbRound + 1 // lease lapsed: confirm with a round
				continue
			}
		} else if a.quorumRound < p.round {
			continue
		}
		done = append(done, id)
	}
	sortIDs(done)
	for _, id := range done {
		a.finish(id, a.sm.st.Apply(a.pending[id].req.Op))
	}
}

// propose fills the phase 2 window with batches of queued commands, all sent
// in one Accept message.
//
// A membership change is proposed alone in its instance k, and nothing is
// proposed after it until it has executed: the configuration of the
// instances after k is the one k makes, known only once k is chosen.
func (a *Paxos) propose() {
	if a.role != leader || !a.ready || len(a.changes) > 0 || !a.isMember() {
		return
	}
	var entries []entry
	for len(a.queue) > 0 && a.next-1-a.chosenUpTo < uint64(a.prm.Window) && len(a.changes) == 0 {
		var cmds []cmd
		for len(a.queue) > 0 && len(cmds) < a.prm.Batch {
			id := a.queue[0]
			p := a.pending[id]
			if p == nil || p.state != pQueued {
				a.queue = a.queue[1:]
				continue
			}
			if _, ok := a.inLog[id]; ok {
				a.queue = a.queue[1:]
				p.state = pProposed
				continue
			}
			if automaton.IsMemberOp(p.req.Op) {
				if len(cmds) > 0 {
					break // close the batch before the change
				}
				a.queue = a.queue[1:]
				p.state = pProposed
				a.inLog[id] = a.next
				c := cmd{ID: id, Op: p.req.Op}
				entries = append(entries, a.proposeAt(a.next, encodeChange(c), a.sm.conf))
				if ch, err := parseChange(c.Op); err == nil {
					if n, err := a.sm.conf.apply(ch, a.next); err == nil {
						a.noteChange(ch)
						a.changes = append(a.changes, pendingChange{at: a.next, conf: n})
						a.quorumRound = 0 // leases and reads count against both configurations now
						a.emitMembers()
					}
				}
				a.next++
				break
			}
			a.queue = a.queue[1:]
			p.state = pProposed
			cmds = append(cmds, cmd{ID: id, Op: p.req.Op})
			a.inLog[id] = a.next
		}
		if len(cmds) == 0 {
			continue
		}
		entries = append(entries, a.proposeAt(a.next, encodeBatch(cmds), a.sm.conf))
		a.next++
	}
	if len(a.changes) > 0 {
		a.updateQuorumRound()
	}
	if len(entries) > 0 {
		a.broadcast(&message{Kind: kindAccept, Ballot: a.ballot, Commit: a.chosenUpTo, Entries: entries})
		a.persistOwn()
		a.checkChosen()
	}
}

func (a *Paxos) onAccepted(from int, m *message) {
	if a.role != leader || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRejected(m.Promised)
		return
	}
	top := a.acked[from]
	for _, i := range m.Acks {
		if f := a.inflight[i]; f != nil {
			f.acks.add(from)
		}
		top = max(top, i)
	}
	a.acked[from] = top
	a.checkChosen()
}

// onRejected: an acceptor promised a higher ballot (typically a node that
// ran for election while cut off). The leader runs phase 1 again with a
// ballot above it: its followers, which hear it alive, promise again at once,
// so a returning node does not depose a healthy leader. A deposed leader's
// new Prepare is refused by the followers of the real one, and it steps down.
func (a *Paxos) onRejected(promised Ballot) {
	if !a.ballot.Less(promised) {
		return
	}
	if promised.Round > a.maxRound {
		a.maxRound = promised.Round
	}
	a.startPhase1()
}

// checkChosen marks instances accepted by a majority as chosen and executes
// the chosen prefix.
func (a *Paxos) checkChosen() {
	any := false
	for i, f := range a.inflight {
		if a.chosenBy(f) {
			if s := a.log[i]; s != nil {
				s.chosen = true
			}
			delete(a.inflight, i)
			any = true
		}
	}
	if any {
		a.advance(true)
		a.propose()
	}
}

func (a *Paxos) onHeartbeatAck(from int, m *message) {
	if a.role != leader || m.Ballot != a.ballot {
		return
	}
	if !m.OK {
		a.onRejected(m.Promised)
		return
	}
	if l := a.learners[a.nodes[from]]; l != nil {
		if m.Commit > l.commit {
			l.commit = m.Commit
			a.checkLearners()
		}
		return // a learner's acknowledgement confirms nothing
	}
	a.acked[from] = max(a.acked[from], m.Commit)
	if m.Round > a.ackRound[from] {
		a.ackRound[from] = m.Round
		a.updateQuorumRound()
	}
	// A follower behind the leader's log start needs a snapshot, which it
	// asks for itself (catch-up).
}

// updateQuorumRound: the highest heartbeat round acknowledged by a majority
// of the current configuration and of every configuration a change in flight
// makes (a competing candidate may need either).
func (a *Paxos) updateQuorumRound() {
	var q uint64
	for i, c := range a.leaderConfs() {
		r := make([]uint64, 0, len(c.members))
		for _, m := range c.members {
			if h, ok := a.index[m.ID]; ok {
				r = append(r, a.ackRound[h])
			} else {
				r = append(r, 0)
			}
		}
		sort.Slice(r, func(x, y int) bool { return r[x] > r[y] })
		if v := r[c.majority()-1]; i == 0 || v < q {
			q = v
		}
	}
	if q > a.quorumRound {
		a.quorumRound = q
		a.quorumTick = a.tick
		a.serveReads()
		// Reads waiting for a round that has not been sent yet.
		for _, p := range a.reads {
			if p.state == pRead && p.round > a.hbRound {
				a.sendHeartbeat()
				break
			}
		}
	}
}

// ---------------------------------------------------------------- acceptor

// acceptFrom applies the ballot rule shared by Accept and Heartbeat: a
// message from a ballot at least the promised one makes its sender the live
// leader (and the promise follows the ballot).
func (a *Paxos) acceptBallot(from int, b Ballot) bool {
	if !a.ballotOf(from, b) || b.Less(a.promised) {
		return false
	}
	if b != a.promised {
		a.promised = b
		a.persist(recPromised, encodeBallotRec(b))
	}
	if b.Round > a.maxRound {
		a.maxRound = b.Round
	}
	if a.role != follower {
		a.stepDown()
	}
	a.heardLeader(from)
	a.leaderHint = from
	a.armElection()
	a.forwardPending()
	return true
}

func (a *Paxos) onAccept(from int, m *message) {
	if !a.acceptBallot(from, m.Ballot) {
		if a.role == candidate && m.Ballot.Less(a.ballot) && !a.removed(from) {
			// A live leader with a lower ballot: give up the candidacy; the
			// rejection below makes that leader take a higher ballot.
			a.stepDown()
		}
		a.send(from, &message{Kind: kindAccepted, Ballot: m.Ballot, OK: false, Promised: a.promised})
		return
	}
	acks := make([]uint64, 0, len(m.Entries))
	for _, e := range m.Entries {
		if e.I <= a.chosenUpTo {
			acks = append(acks, e.I) // chosen here already: the value is the same
			continue
		}
		if s := a.log[e.I]; s != nil && s.chosen {
			acks = append(acks, e.I)
			continue
		}
		s := &slot{bal: m.Ballot, val: e.Value}
		a.putSlot(e.I, s)
		a.persist(slotKey(e.I), encodeSlot(s))
		acks = append(acks, e.I)
		if ch, ok := valueChange(e.Value); ok && ch.add {
			a.noteChange(ch)
			a.emitMembers()
		}
	}
	a.send(from, &message{Kind: kindAccepted, Ballot: m.Ballot, OK: true, Acks: acks})
	a.learnCommit(from, m.Ballot, m.Commit)
}

func (a *Paxos) onHeartbeat(from int, m *message) {
	if !a.acceptBallot(from, m.Ballot) {
		if a.role == candidate && m.Ballot.Less(a.ballot) && !a.removed(from) {
			a.stepDown()
		}
		a.send(from, &message{Kind: kindHeartbeatAck, Ballot: m.Ballot, OK: false, Promised: a.promised, Round: m.Round})
		return
	}
	a.send(from, &message{Kind: kindHeartbeatAck, Ballot: m.Ballot, OK: true, Round: m.Round, Commit: a.chosenUpTo})
	a.learnCommit(from, m.Ballot, m.Commit)
}

// learnCommit applies a commit notice: every instance up to commit is chosen;
// an instance accepted here under the notice's ballot holds the chosen value.
// Anything else is fetched from the sender.
func (a *Paxos) learnCommit(from int, b Ballot, commit uint64) {
	if commit <= a.chosenUpTo {
		return
	}
	for i := a.chosenUpTo + 1; i <= commit; i++ {
		s := a.log[i]
		if s == nil || (!s.chosen && s.bal != b) {
			a.requestCatchup(from, i, commit)
			break
		}
		s.chosen = true
	}
	a.advance(true)
}

// ------------------------------------------------------------- catch-up

func (a *Paxos) requestCatchup(from int, lo, hi uint64) {
	if from == a.self {
		return
	}
	if hi > a.behindTo {
		a.behindTo, a.behindPeer = hi, from
	}
	if a.catchupFrom >= 0 {
		return
	}
	a.catchupFrom, a.catchupTicks = from, 0
	a.send(from, &message{Kind: kindCatchupReq, From: lo, To: hi})
}

// onCatchupReq serves chosen instances from m.From, or a snapshot when they
// were truncated behind one.
func (a *Paxos) onCatchupReq(from int, m *message) {
	if m.From > a.chosenUpTo {
		return
	}
	if m.From < a.logStart || a.log[m.From] == nil {
		if a.executed >= m.From {
			a.send(from, &message{Kind: kindSnapshot, Index: a.executed, Data: a.sm.snapshot(a.executed)})
		}
		return
	}
	out := &message{Kind: kindCatchup, Commit: a.chosenUpTo}
	size := 0
	for i := m.From; i <= a.chosenUpTo && i <= m.To && len(out.Entries) < catchupMaxEntries && size < catchupBudget; i++ {
		s := a.log[i]
		if s == nil {
			break
		}
		out.Entries = append(out.Entries, entry{I: i, Value: s.val})
		size += len(s.val)
	}
	a.send(from, out)
}

func (a *Paxos) onCatchup(from int, m *message) {
	if from == a.catchupFrom {
		a.catchupFrom = -1
	}
	for _, e := range m.Entries {
		if e.I <= a.chosenUpTo {
			continue
		}
		if s := a.log[e.I]; s != nil && s.chosen {
			continue
		}
		s := &slot{val: e.Value, chosen: true}
		a.putSlot(e.I, s)
		a.persist(slotKey(e.I), encodeSlot(s))
	}
	a.advance(true)
	if m.Commit > a.chosenUpTo && len(m.Entries) > 0 {
		a.requestCatchup(from, a.chosenUpTo+1, m.Commit)
	}
	a.checkPhase1() // a candidate may have been waiting for these
}

// onSnapshot installs a snapshot newer than the executed state.
func (a *Paxos) onSnapshot(from int, m *message) {
	if from == a.catchupFrom {
		a.catchupFrom = -1
	}
	if idx, err := snapshotIndex(m.Data); err != nil || idx != m.Index || m.Index <= a.executed {
		return
	}
	confBefore := a.sm.conf
	idx, err := a.sm.restore(m.Data)
	if err != nil {
		return // corrupt: ignored (restore replaces the state only on success)
	}
	a.persist(recSnapshot, m.Data)
	for i := a.logStart; i <= idx && i <= a.maxInst; i++ {
		if a.log[i] != nil {
			delete(a.log, i)
			a.emit(automaton.Persist{Key: slotKey(i), Delete: true})
		}
	}
	a.logStart = idx + 1
	if a.maxInst < idx {
		a.maxInst = idx
	}
	a.executed, a.snapIndex = idx, idx
	a.sinceSnap = 0
	if a.chosenUpTo < idx {
		a.chosenUpTo = idx
	}
	for i := range a.inflight {
		if i <= idx {
			delete(a.inflight, i)
		}
	}
	if a.role == leader && a.next <= idx {
		a.next = idx + 1
	}
	// Writes executed inside the snapshot are answered from the dedup table;
	// the rest wait (or are forwarded again).
	var done []automaton.RequestID
	for id, p := range a.pending {
		if _, ok := a.sm.lookup(id); ok && !a.cfg.Service.IsRead(p.req.Op) {
			done = append(done, id)
		} else if i, ok := a.inLog[id]; ok && i <= idx {
			delete(a.inLog, id)
			if p.state == pProposed {
				p.state = pWaiting
				a.lead(p)
			}
		}
	}
	sortIDs(done)
	for _, id := range done {
		r, _ := a.sm.lookup(id)
		a.finish(id, r)
	}
	if a.sm.conf != confBefore {
		a.onConfChange(idx)
	}
	a.advance(true)
	a.checkPhase1()
}

// ---------------------------------------------------------------- learning

// advance extends the chosen prefix, persists it, executes it in instance
// order, answers waiting requests, and snapshots every snapshot_every
// executed instances.
func (a *Paxos) advance(persist bool) {
	for {
		s := a.log[a.chosenUpTo+1]
		if s == nil || !s.chosen {
			break
		}
		a.chosenUpTo++
	}
	for a.executed < a.chosenUpTo {
		i := a.executed + 1
		cmds, err := decodeBatch(a.log[i].val)
		if err != nil {
			panic(fmt.Sprintf("paxos: instance %d holds a corrupt value: %v", i, err))
		}
		before := a.sm.conf
		for _, c := range cmds {
			res := a.sm.apply(c, i)
			delete(a.inLog, c.ID)
			if p := a.pending[c.ID]; p != nil && p.state != pRead {
				a.finish(c.ID, res)
			}
		}
		a.executed = i
		a.sinceSnap += len(cmds)
		if a.sm.conf != before {
			a.onConfChange(i)
		}
	}
	// The chosen-prefix record is persisted after the answers above: they
	// depend only on the instances being chosen, which a majority's durable
	// acceptances already guarantee; "c" only spares a restarted replica
	// from learning the prefix again (package doc, "Durability").
	if persist && a.chosenUpTo > a.savedC {
		a.savedC = a.chosenUpTo
		a.persist(recCommit, encodeUint(a.chosenUpTo))
	}
	if persist && a.executed > a.snapIndex && a.sinceSnap >= a.prm.SnapshotEvery {
		a.takeSnapshot()
	}
	if a.role == leader {
		a.serveReads()
	}
}

// takeSnapshot persists the state machine at the executed instance and
// truncates the log (in memory and on disk) behind the previous snapshot, so
// that peers slightly behind can still catch up from the log.
func (a *Paxos) takeSnapshot() {
	prev := a.snapIndex
	a.persist(recSnapshot, a.sm.snapshot(a.executed))
	a.snapIndex = a.executed
	a.sinceSnap = 0
	for i := a.logStart; i <= prev && i <= a.maxInst; i++ {
		if a.log[i] != nil {
			delete(a.log, i)
			a.emit(automaton.Persist{Key: slotKey(i), Delete: true})
		}
	}
	if prev+1 > a.logStart {
		a.logStart = prev + 1
	}
}

// ---------------------------------------------------------------- clients

func (a *Paxos) onClientRequest(req automaton.Request) {
	if !a.isMember() {
		a.respond(req.ID, a.notMemberError())
		return
	}
	if automaton.IsMemberOp(req.Op) {
		a.onMemberRequest(req)
		return
	}
	if err := a.cfg.Service.Validate(req.Op); err != nil {
		a.respond(req.ID, service.Errorf("ERR %v", err))
		return
	}
	if a.cfg.Service.IsRead(req.Op) && (req.Opts.Read == automaton.ReadLocal || req.Opts.Read == automaton.ReadRegular) {
		a.respond(req.ID, a.sm.st.Apply(req.Op))
		return
	}
	if req.Opts.Read > automaton.ReadLease {
		a.respond(req.ID, service.Errorf("ERR paxos: unknown read mode %v", req.Opts.Read))
		return
	}
	if p := a.pending[req.ID]; p != nil {
		p.local = true // a retry of a request in progress
		return
	}
	p := &pend{req: req, local: true, fwdTo: -1}
	a.pending[req.ID] = p
	a.route(p)
}

// route sends a new request to the leader: handled here when this node
// leads, forwarded otherwise.
func (a *Paxos) route(p *pend) {
	if a.role == leader && a.ready {
		a.lead(p)
		return
	}
	p.state = pWaiting
	p.fwdTo = -1
	a.fwdQ = append(a.fwdQ, p.req.ID)
	a.forwardPending()
}

// forwardPending forwards waiting requests to the known leader: at once when
// they have not been sent to it yet, and again every four heartbeats (the
// leader deduplicates by request id).
func (a *Paxos) forwardPending() {
	to := a.leaderHint
	if to < 0 || to == a.self || a.role == leader {
		if len(a.fwdQ) > 0 {
			a.fwdQ, a.fwdHint = a.fwdQ[:0], -1 // the next pass is a full one
		}
		return
	}
	var ids []automaton.RequestID
	if to != a.fwdHint {
		// Everything waiting (leader change, step down, tick): a full pass.
		for id, p := range a.pending {
			if p.state == pWaiting && (p.fwdTo != to || p.fwdAge >= 4) {
				ids = append(ids, id)
			}
		}
		sortIDs(ids)
		a.fwdHint = to
	} else {
		// The same leader as the last pass: only the requests routed since.
		for _, id := range a.fwdQ {
			if p := a.pending[id]; p != nil && p.state == pWaiting && p.fwdTo != to {
				ids = append(ids, id)
			}
		}
	}
	a.fwdQ = a.fwdQ[:0]
	for _, id := range ids {
		p := a.pending[id]
		p.fwdAge, p.fwdTo = 0, to
		a.send(to, &message{Kind: kindForward, Req: p.req})
	}
}

func (a *Paxos) onForward(from int, m *message) {
	var bad error
	if automaton.IsMemberOp(m.Req.Op) {
		_, bad = parseChange(m.Req.Op)
	} else {
		bad = a.cfg.Service.Validate(m.Req.Op)
	}
	if bad != nil || m.Req.Opts.Read > automaton.ReadLease {
		a.send(from, &message{Kind: kindForwardReply, Req: m.Req, Result: service.Errorf("ERR invalid forwarded request")})
		return
	}
	if !a.isMember() {
		a.send(from, &message{Kind: kindForwardReply, Req: m.Req, Result: a.notMemberError()})
		return
	}
	p := a.pending[m.Req.ID]
	if p == nil {
		if automaton.IsMemberOp(m.Req.Op) || !a.cfg.Service.IsRead(m.Req.Op) {
			if res, ok := a.sm.lookup(m.Req.ID); ok {
				a.send(from, &message{Kind: kindForwardReply, Req: m.Req, Result: res})
				return
			}
		}
		p = &pend{req: m.Req, fwdTo: -1}
		a.pending[m.Req.ID] = p
	}
	seen := false
	for _, r := range p.remote {
		seen = seen || r == from
	}
	if !seen {
		p.remote = append(p.remote, from)
	}
	if p.state == pWaiting {
		a.route(p)
	}
}

func (a *Paxos) onForwardReply(m *message) {
	if a.pending[m.Req.ID] != nil {
		a.finish(m.Req.ID, m.Result)
	}
}

// finish answers a request to everyone waiting for it.
func (a *Paxos) finish(id automaton.RequestID, res service.Result) {
	p := a.pending[id]
	if p == nil {
		return
	}
	delete(a.pending, id)
	delete(a.reads, id)
	if p.local {
		a.respond(id, res)
	}
	for _, r := range p.remote {
		a.send(r, &message{Kind: kindForwardReply, Req: p.req, Result: res})
	}
}

func (a *Paxos) respond(id automaton.RequestID, res service.Result) {
	a.emit(automaton.Respond{Resp: automaton.Response{ID: id, Result: res}})
}

// --------------------------------------------------------------- messages

func (a *Paxos) onPeerMessage(fromID automaton.NodeID, b []byte) {
	if fromID == a.cfg.Self || fromID == "" {
		return
	}
	from := a.handle(fromID)
	m, err := unmarshal(b)
	if err != nil {
		return // corrupt: dropped (senders retransmit)
	}
	switch m.Kind {
	case kindPrepare:
		a.onPrepare(from, m)
	case kindPromise:
		a.onPromise(from, m)
	case kindAccept:
		a.onAccept(from, m)
	case kindAccepted:
		a.onAccepted(from, m)
	case kindHeartbeat:
		a.onHeartbeat(from, m)
	case kindHeartbeatAck:
		a.onHeartbeatAck(from, m)
	case kindCatchupReq:
		a.onCatchupReq(from, m)
	case kindCatchup:
		a.onCatchup(from, m)
	case kindSnapshot:
		a.onSnapshot(from, m)
	case kindForward:
		a.onForward(from, m)
	case kindForwardReply:
		a.onForwardReply(m)
	case kindTakeOver:
		a.onTakeOver(from, m)
	}
}

// Status is a summary of a replica's state, for tests and diagnostics.
type Status struct {
	Role                                    string
	Ballot, Promised                        Ballot
	ChosenUpTo, Executed, SnapIndex, MaxLog uint64
	LogLen, Pending                         int
	Leader                                  automaton.NodeID
	LeaseValid                              bool
	// Members is the current configuration (after the executed prefix),
	// made by instance ConfEpoch (0: bootstrap); Member: this node is in it.
	Members   []automaton.NodeID
	ConfEpoch uint64
	Member    bool
}

// Status reports the replica's state.
func (a *Paxos) Status() Status {
	s := Status{Role: [...]string{"follower", "candidate", "leader"}[a.role], Ballot: a.ballot, Promised: a.promised,
		ChosenUpTo: a.chosenUpTo, Executed: a.executed, SnapIndex: a.snapIndex, MaxLog: a.maxInst,
		LogLen: len(a.log), Pending: len(a.pending), LeaseValid: a.leaseValid()}
	if a.leaderHint >= 0 {
		s.Leader = a.nodes[a.leaderHint]
	}
	s.Member = a.isMember()
	for _, m := range a.sm.conf.members {
		s.Members = append(s.Members, m.ID)
	}
	s.ConfEpoch = a.sm.conf.epoch
	return s
}
