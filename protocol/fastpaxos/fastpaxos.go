package fastpaxos

import (
	"fmt"
	"sort"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Name is the protocol's registered name.
const Name = "fastpaxos"

// Broken variants (package doc, "Broken variants").
const (
	BrokenClassicLearn = "fastpaxos-broken-classiclearn"
	BrokenRecovery     = "fastpaxos-broken-recovery"
	BrokenStaleVote    = "fastpaxos-broken-stalevote"
	BrokenSkipGap      = "fastpaxos-broken-skipgap"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"multi-instance Fast Paxos (the Grid Services thesis chapter V; Lamport 2006): clients propose to every acceptor, learners learn on fast quorums, collisions resolved by the leader's coordinated recovery")})
	automaton.RegisterBroken(Name, protocol{classicLearn: true, Capabilities: capabilities(BrokenClassicLearn,
		"a learner learns on a classic quorum of votes in a fast round; the invariant \"learned values are chosen\" catches it with 3 nodes (classic 2, fast 3)")})
	automaton.RegisterBroken(Name, protocol{ignoreRule: true, Capabilities: capabilities(BrokenRecovery,
		"the leader's coordinated recovery proposes the highest-numbered reporter's vote instead of applying Lamport's rule, overriding values chosen on the fast path; the invariant \"at most one value chosen per instance\" catches it")})
	automaton.RegisterBroken(Name, protocol{staleVote: true, Capabilities: capabilities(BrokenStaleVote,
		"an acceptor votes for a deposed leader's phase 2a below the promise it gave a newer one; the invariant \"votes respect promises\" catches it")})
	automaton.RegisterBroken(Name, protocol{skipGap: true, Capabilities: capabilities(BrokenSkipGap,
		"a learner executes the next learned instance past one it has not learned yet, skipping it for good; the invariant \"executed prefixes agree\" catches it")})
}

// protocol is the registered value: its capabilities, and the variant (its
// invariants and scenarios are methods).
type protocol struct {
	automaton.Capabilities
	classicLearn bool // a learner learns on a classic quorum in a fast round
	ignoreRule   bool // the leader's recovery ignores Lamport's rule
	staleVote    bool // an acceptor votes for a phase 2a below its promise
	skipGap      bool // a learner executes past an instance it has not learned
}

// Capabilities (automaton/capability.go).
var (
	_ automaton.InvariantStater  = protocol{}
	_ automaton.ScenarioDeclarer = protocol{}
	_ automaton.LeaderReporter   = (*FastPaxos)(nil)
	_ automaton.StateReporter    = (*FastPaxos)(nil)
)

// capabilities is the registration of the protocol or a variant.
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// The deduplication table is part of the replicated state machine,
		// so a retry with the same RequestID at another node executes at
		// most once (within a client's window of dedupWindow writes).
		Idempotent: true,
		// Clients are the proposers and send each request to every
		// acceptor (the Grid Services thesis V.A, V.C).
		ClientFanout: true,
		// Client sessions (machine.go): a request's bound drops outcomes,
		// SessionEnd removes a closed client's row.
		Sessions: true,
		Params:   params.Defaults(),
	}
}

// Defaults.
const (
	DefaultHeartbeat       = 20 * time.Millisecond
	DefaultElectionTimeout = 300 * time.Millisecond
	DefaultRetry           = 200 * time.Millisecond
	DefaultOpTimeout       = 5 * time.Second
	maxNodes               = 63
	catchupMax             = 256 // instances per catch-up message
	recoverMax             = 64  // instances a leader starts recovering per tick
	stuckTicks             = 2   // ticks an instance may stay undecided before the leader recovers it
)

var params = proto.NewSpec(
	proto.Param{Name: "heartbeat", Kind: proto.Duration, Default: DefaultHeartbeat.String(), Min: "0", MinOpen: true,
		Doc: "tick: the leader's any/heartbeat, retransmissions, stuck-instance checks"},
	proto.Param{Name: "election_timeout", Kind: proto.Duration, Default: DefaultElectionTimeout.String(), Min: "0", MinOpen: true,
		Doc: "silence before a node runs phase 1; at least 3 heartbeats"},
	proto.Param{Name: "retry", Kind: proto.Duration, Default: DefaultRetry.String(), Min: "0", MinOpen: true,
		Doc: "a proposer resends a request not yet executed after this"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a request's time limit at a node (fanned out: then a Silent answer)"},
	proto.Param{Name: "classic_quorum", Kind: proto.Int, NoDefault: true, Min: "1",
		Doc: "classic quorum size (absent: derived from n; validated with fast_quorum)"},
	proto.Param{Name: "fast_quorum", Kind: proto.Int, NoDefault: true, Min: "1",
		Doc: "fast quorum size (absent: ceil((2n+1)/3), the seed's 2t+1 for n=3t+1)"},
	proto.Param{Name: "observe", Kind: proto.String, Default: "",
		Doc: "the name of a Recorder (NewRecorder) that collects counters and events (experiments)"},
)

// Params are the parsed parameters.
type Params struct {
	Heartbeat, ElectionTimeout, Retry, OpTimeout time.Duration
	Classic, Fast                                int // 0: derived
	Observe                                      string
}

// ParseParams parses the namespace parameters; unknown names are errors.
func ParseParams(m map[string]string) (Params, error) {
	v, err := params.Parse(Name, m)
	if err != nil {
		return Params{}, err
	}
	p := Params{Heartbeat: v.Duration("heartbeat"), ElectionTimeout: v.Duration("election_timeout"),
		Retry: v.Duration("retry"), OpTimeout: v.Duration("op_timeout"), Observe: v.String("observe")}
	if v.Given("classic_quorum") {
		p.Classic = v.Int("classic_quorum")
	}
	if v.Given("fast_quorum") {
		p.Fast = v.Int("fast_quorum")
	}
	if p.ElectionTimeout < 3*p.Heartbeat {
		return p, fmt.Errorf("fastpaxos: election_timeout %v must be at least 3 heartbeats (%v)", p.ElectionTimeout, 3*p.Heartbeat)
	}
	return p, nil
}

// quorumsFor applies the parameters to n acceptors: a size given alone
// keeps the other derived, and the pair is validated.
func (p Params) quorumsFor(n int) (quorums, error) {
	q := defaultQuorums(n)
	if p.Fast > 0 {
		q.fast = p.Fast
		if p.Classic == 0 {
			q.classic = min(n, max(n/2+1, 2*n-2*q.fast+1))
		}
	}
	if p.Classic > 0 {
		q.classic = p.Classic
	}
	return q, q.validate()
}

func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("fastpaxos: namespace %q has no service", cfg.Namespace)
	}
	if cfg.Rand == nil {
		return nil, fmt.Errorf("fastpaxos: no Config.Rand")
	}
	if service.IsNondeterministic(cfg.Service) {
		return nil, fmt.Errorf("fastpaxos: the nondeterministic service %s is not supported: every acceptor would vote with the environment it observed itself, so no two votes would match", cfg.Service.Name())
	}
	if len(cfg.Nodes) < 1 || len(cfg.Nodes) > maxNodes {
		return nil, fmt.Errorf("fastpaxos: %d nodes (want 1 to %d)", len(cfg.Nodes), maxNodes)
	}
	pos, me, err := proto.Positions(Name, cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	prm, err := ParseParams(cfg.Params)
	if err != nil {
		return nil, err
	}
	q, err := prm.quorumsFor(len(cfg.Nodes))
	if err != nil {
		return nil, err
	}
	a := &FastPaxos{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, prm: prm, q: q, pos: pos, self: me}
	if prm.Observe != "" {
		if a.rec = lookupRecorder(prm.Observe); a.rec == nil {
			return nil, fmt.Errorf("fastpaxos: observe=%s names no recorder", prm.Observe)
		}
	}
	a.reset()
	return a, nil
}

// Timers.
const (
	tmTick     automaton.TimerID = 1
	tmElection automaton.TimerID = 2
)

// Roles.
const (
	follower = iota
	candidate
	leader
)

// inst is the acceptor's state at one instance: rnd is the round promised
// for this instance alone (a recovery round above the node-wide promise; zero
// otherwise), vrnd and vval its vote.
type inst struct {
	rnd, vrnd Ballot
	vval      []byte
}

// vote is what a learner heard from one acceptor about one instance.
type vote struct {
	bal Ballot
	val []byte
}

// pend is a client request this node must answer.
type pend struct {
	req    automaton.Request
	fanout bool // the client sent it to every node (else: this node proposes)
	age    int  // ticks since it arrived
	since  int  // ticks since it was last (re)proposed
}

// recovery is the leader's coordinated recovery of one instance.
type recovery struct {
	reports map[int]report // explicit phase 1b answers (Recovered)
	val     []byte         // proposed in the recovery round (nil: not yet)
	sent    uint64         // tick of the last (re)transmission
}

// track is the leader's count of the acceptors that voted for one request
// in its fast round (the Grid Services thesis V.C, "might not be chosen").
type track struct {
	voters   uint64 // bit per acceptor
	insts    []uint64
	notified bool
}

// Stats counts what experiments measure (package doc, "Statistics").
type Stats struct {
	// FastLearned: instances this node learned from a fast quorum of votes.
	FastLearned uint64
	// ClassicLearned: instances learned from a classic quorum of a
	// recovery round; CaughtUp: learned from another learner.
	ClassicLearned, CaughtUp uint64
	// Collisions: instances where this node, leading, saw a classic quorum
	// of fast votes that did not agree (coordinated recovery started).
	Collisions uint64
	// Recovered: instances this node, leading, proposed in a recovery round
	// (after a collision, a stuck instance, or phase 1).
	Recovered uint64
	// NotChosen: "might not be chosen" notices this node sent as leader.
	NotChosen uint64
	// Resent: requests this node proposed again (notice or retry timer).
	Resent uint64
}

// FastPaxos is one node's replica: acceptor, learner, proposer for the
// clients that reach it alone, and leader when elected.
type FastPaxos struct {
	proto protocol
	cfg   automaton.Config
	prm   Params
	q     quorums
	pos   map[automaton.NodeID]int
	self  int

	// Acceptor (durable: promised, insts).
	promised   Ballot
	insts      map[uint64]*inst
	maxInstRnd Ballot // highest per-instance round
	anyBal     Ballot // fast round this acceptor may vote in (volatile)
	anyFrom    uint64
	fastNext   uint64 // next instance for a fast vote
	votedFor   map[automaton.RequestID]uint64

	// Learner.
	votes      map[uint64]map[int]vote
	chosen     map[uint64][]byte
	chosenReq  map[automaton.RequestID]uint64
	chosenUpTo uint64
	maxSeen    uint64 // highest instance with a vote heard of
	executed   uint64
	sm         *machine

	// Election and leadership.
	role       int
	ballot     Ballot // own fast round while candidate or leader
	maxRound   uint64
	leaderHint int
	heard      bool // a leader's any was heard within election_timeout
	promises   map[int]*message
	p1Ticks    int
	tick       uint64
	recovering map[uint64]*recovery
	stuck      map[uint64]int
	tracks     map[automaton.RequestID]*track
	lastFast   map[int]uint64 // highest instance each acceptor voted in the leader's fast round
	resync     bool

	// Proposer.
	pending map[automaton.RequestID]*pend

	// Catch-up.
	catchupTicks int
	leaderCommit uint64

	stats      Stats
	rec        *Recorder // parameter observe (observe.go)
	touched    []uint64  // instances whose acceptor state changed in this step (invariants)
	cast       []cast    // votes this step cast, in order (invariants: one may be overwritten within the step)
	learnedNow []uint64  // instances learned in this step (invariants)
	proto.Outbox
}

func (a *FastPaxos) reset() {
	a.promised, a.maxInstRnd, a.anyBal = Ballot{}, Ballot{}, Ballot{}
	a.insts = map[uint64]*inst{}
	a.anyFrom, a.fastNext = 1, 1
	a.votedFor = map[automaton.RequestID]uint64{}
	a.votes = map[uint64]map[int]vote{}
	a.chosen = map[uint64][]byte{}
	a.chosenReq = map[automaton.RequestID]uint64{}
	a.chosenUpTo, a.maxSeen, a.executed = 0, 0, 0
	a.sm = newMachine(a.cfg.Service)
	a.role, a.leaderHint = follower, -1
	a.pending = map[automaton.RequestID]*pend{}
	a.clearLeader()
}

func (a *FastPaxos) clearLeader() {
	a.promises = nil
	a.recovering = map[uint64]*recovery{}
	a.stuck = map[uint64]int{}
	a.tracks = map[automaton.RequestID]*track{}
	a.lastFast = map[int]uint64{}
	a.resync = false
}

func (a *FastPaxos) n() int { return len(a.cfg.Nodes) }

func (a *FastPaxos) persist(k string, v []byte) {
	a.Emit(automaton.Persist{Key: k, Value: v})
}
func (a *FastPaxos) send(to int, m *message) {
	a.Emit(automaton.Send{To: a.cfg.Nodes[to], Msg: m.marshal()})
}

// broadcast sends m to every other node.
func (a *FastPaxos) broadcast(m *message) {
	b := m.marshal()
	for i, id := range a.cfg.Nodes {
		if i != a.self {
			a.Emit(automaton.Send{To: id, Msg: b})
		}
	}
}

func (a *FastPaxos) ticksOf(d time.Duration) int {
	t := int((d + a.prm.Heartbeat - 1) / a.prm.Heartbeat)
	return max(t, 1)
}

// Step implements automaton.Automaton.
func (a *FastPaxos) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.touched = a.touched[:0]
	a.cast = a.cast[:0]
	a.learnedNow = a.learnedNow[:0]
	proto.Dispatch(a, in)
	if a.rec != nil {
		a.rec.record(a.cfg.Self, a.stats)
	}
	return a.Out
}

func (a *FastPaxos) OnMessage(fromID automaton.NodeID, b []byte) {
	from, ok := a.pos[fromID]
	if !ok || from == a.self {
		return
	}
	m, err := unmarshal(b)
	if err != nil {
		return // corrupt: dropped (senders retransmit)
	}
	switch m.Kind {
	case kindPrepare:
		a.onPrepare(from, m)
	case kindPromise:
		a.onPromise(from, m)
	case kindAny:
		a.onAny(from, m)
	case kindPropose:
		a.onPropose(m.Req)
	case kindAccept:
		a.onAccept(from, m)
	case kindVoted:
		a.onVoted(from, m)
	case kindRefuse:
		a.onRefuse(m)
	case kindRecover:
		a.onRecover(from, m)
	case kindRecovered:
		a.onRecovered(from, m)
	case kindNotChosen:
		a.onNotChosen(m.Req.ID)
	case kindCatchupReq:
		a.onCatchupReq(from, m)
	case kindCatchup:
		a.onCatchup(m)
	}
}

func (a *FastPaxos) OnTimer(id automaton.TimerID) {
	switch id {
	case tmTick:
		a.onTick()
		a.Emit(automaton.SetTimer{ID: tmTick, After: a.prm.Heartbeat})
	case tmElection:
		a.onElectionTimeout()
	}
}

// onTick: the leader's any/heartbeat, retransmissions and stuck instances;
// a candidate's retransmitted prepares; proposers' retries and timeouts;
// learners' catch-up.
func (a *FastPaxos) onTick() {
	a.tick++
	switch a.role {
	case leader:
		a.leaderTick()
	case candidate:
		a.p1Ticks++
		if a.p1Ticks > a.ticksOf(a.prm.ElectionTimeout) {
			a.stepDown()
		} else {
			a.broadcast(&message{Kind: kindPrepare, Ballot: a.ballot, From: a.chosenUpTo + 1})
		}
	}
	a.proposerTick()
	a.catchupTick()
}

// Leader implements automaton.LeaderReporter.
func (a *FastPaxos) Leader() automaton.NodeID {
	if a.leaderHint < 0 {
		return ""
	}
	return a.cfg.Nodes[a.leaderHint]
}

// Stats returns the node's counters (package doc, "Statistics").
func (a *FastPaxos) Stats() Stats { return a.stats }

// SessionCounts reports the deduplication table's rows and the ended
// sessions' tombstones (machine.go).
func (a *FastPaxos) SessionCounts() (rows, ended int) { return len(a.sm.clients), len(a.sm.closed) }

// ServiceState implements automaton.StateReporter: instances executed (the
// no-op counts) and the state after them.
func (a *FastPaxos) ServiceState() (uint64, service.State) {
	if a.sm == nil {
		return 0, nil
	}
	return a.executed, a.sm.st
}

func sortU64(s []uint64) { sort.Slice(s, func(i, j int) bool { return s[i] < s[j] }) }
