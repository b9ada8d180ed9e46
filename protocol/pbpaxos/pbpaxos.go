package pbpaxos

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Name is the protocol's registered name.
const Name = "pbpaxos"

// Broken variants (package doc, "Broken variants").
const (
	BrokenNoConfirm = Name + "-broken-noconfirm"
	BrokenEarly     = Name + "-broken-earlyserve"
	BrokenReplay    = Name + "-broken-replayorder"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"primary-backup Paxos for nondeterministic services (the Grid Services thesis chapter VI): the leader executes, then agrees on <request, state>; X-Paxos reads with confirms, T-Paxos transactions coordinated at commit")})
	automaton.RegisterBroken(Name, protocol{noConfirm: true, Capabilities: capabilities(BrokenNoConfirm,
		"the leader answers X-Paxos reads as soon as it executed them, without a majority of confirms: a deposed leader answers stale reads; the invariant reads-confirmed catches it, and the linearizability checker under partitions")})
	automaton.RegisterBroken(Name, protocol{earlyServe: true, Capabilities: capabilities(BrokenEarly,
		"a new leader executes and answers new requests after its prepare phase, before its batched accept is chosen (the Grid Services thesis VI.B Protocol 1 forbids it); the invariant serve-after-takeover catches it")})
	automaton.RegisterBroken(Name, protocol{replayShuffle: true, Capabilities: capabilities(BrokenReplay,
		"backups execute a replayed instance's commands in an order they draw at random (a nondeterministic apply, replay.go); the simulator's state comparison catches the divergence")})
}

// protocol is the registered value: its capabilities, and the variant (its
// invariants and scenarios are methods).
type protocol struct {
	automaton.Capabilities
	noConfirm  bool // the leader answers X-Paxos reads without confirms
	earlyServe bool // a new leader serves before its accept phase completes
	// replayShuffle: backups execute a replayed instance's commands in
	// a random order (replay.go)
	replayShuffle bool
}

var (
	_ automaton.InvariantStater  = protocol{}
	_ automaton.ScenarioDeclarer = protocol{}
)

// capabilities is the registration of the protocol or a variant.
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// The duplicate table is part of the replicated state.
		Idempotent: true,
		// Clients send every request to every replica and only the leader
		// replies (the Grid Services thesis VI.A.1).
		ClientFanout: true,
		// The leader executes, the others install its state (or replay its
		// environment).
		Nondeterminism: true,
		// Atomic groups are one command; interactive transactions are
		// T-Paxos (txn.go).
		Transactions: automaton.TxnSupport{Atomic: true, Interactive: true},
		Params:       params.Defaults(),
		// Nested requests are ordered and cached like writes (nested.go).
		NestedWindow: nestedWindow,
	}
}

// Defaults.
const (
	DefaultHeartbeat       = 50 * time.Millisecond
	DefaultElectionTimeout = 500 * time.Millisecond
	DefaultOpTimeout       = 5 * time.Second
	DefaultSnapshotEvery   = 1000
	DefaultExpiryPeriod    = 100 * time.Millisecond
	maxOpenTxns            = 1024
	maxConfirms            = 1 << 14
)

var params = proto.NewSpec(
	proto.Param{Name: "heartbeat", Kind: proto.Duration, Default: DefaultHeartbeat.String(), Min: "0", MinOpen: true,
		Doc: "leader heartbeat and retransmission interval"},
	proto.Param{Name: "election_timeout", Kind: proto.Duration, Default: DefaultElectionTimeout.String(), Min: "0", MinOpen: true,
		Doc: "silence before an election; at least 3 heartbeats"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a request's time limit at a node"},
	proto.Param{Name: "state", Kind: proto.Enum, Default: "delta", Choices: []string{"delta", "full", "replay"},
		Doc: "what an instance carries besides its requests (package doc)"},
	proto.Param{Name: "pipeline", Kind: proto.Int, Default: "1", Min: "1",
		Doc: "proposals outstanding at once; 1 is the seed's"},
	proto.Param{Name: "batch", Kind: proto.Int, Default: "1", Min: "1",
		Doc: "requests per instance (at most)"},
	proto.Param{Name: "read", Kind: proto.Enum, Default: "xpaxos", Choices: []string{"xpaxos", "log"},
		Doc: "what a linearizable read is"},
	proto.Param{Name: "snapshot_every", Kind: proto.Int, Default: strconv.Itoa(DefaultSnapshotEvery), Min: "1",
		Doc: "applied instances between snapshots"},
	proto.Param{Name: "expiry_period", Kind: proto.Duration, Default: DefaultExpiryPeriod.String(), Min: "0", MinOpen: true,
		Doc: "leader proposes removing expired keys (expiry.go)"},
)

type prm struct {
	heartbeat, electionTimeout, opTimeout time.Duration
	expiryPeriod                          time.Duration
	state                                 byte // updDelta, updFull or updReplay
	pipeline, batch, snapshotEvery        int
	logReads                              bool
	hybrid                                bool // state=delta: replay an instance whose update outweighs its commands (replay.go)
}

func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%s: namespace %q has no service", p.Protocol, cfg.Namespace)
	}
	if cfg.Rand == nil {
		return nil, fmt.Errorf("%s: no Config.Rand", p.Protocol)
	}
	pos, me, err := proto.Positions(p.Protocol, cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	if len(cfg.Nodes) > maxBallotNode {
		return nil, fmt.Errorf("%s: too many nodes", p.Protocol)
	}
	v, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	r := prm{heartbeat: v.Duration("heartbeat"), electionTimeout: v.Duration("election_timeout"), opTimeout: v.Duration("op_timeout"),
		pipeline: v.Int("pipeline"), batch: v.Int("batch"), snapshotEvery: v.Int("snapshot_every"), logReads: v.String("read") == "log",
		expiryPeriod: v.Duration("expiry_period")}
	if r.electionTimeout < 3*r.heartbeat {
		return nil, fmt.Errorf("%s: election_timeout %v must be at least 3 heartbeats (%v)", p.Protocol, r.electionTimeout, 3*r.heartbeat)
	}
	switch v.String("state") {
	case "delta":
		r.state, r.hybrid = updDelta, true
		if _, ok := cfg.Service.NewState().(service.DeltaState); !ok {
			r.state = updFull // the service has no deltas: whole states
		}
	case "full":
		r.state = updFull
	case "replay":
		r.state = updReplay
	}
	a := &PBPaxos{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, prm: r, pos: pos, selfNum: uint32(me + 1)}
	a.reset()
	return a, nil
}

// Roles.
const (
	follower = iota
	candidate
	leader
)

// Timers.
const (
	tmTick     automaton.TimerID = 1
	tmElection automaton.TimerID = 2
	tmAlive    automaton.TimerID = 3
)

// slot is one instance at an acceptor: the proposal number's ballot, the
// requests, and the state update until the instance is applied (the Grid Services thesis
// VI.A.2: "remember all the requests ... only keep the state of the latest
// proposal").
type slot struct {
	bal    Ballot
	known  bool // the requests are known (false: jumped over, see gaps)
	cmds   []byte
	kind   byte
	upd    []byte
	chosen bool
}

// flight is the leader's count of acceptances of one instance.
type flight struct {
	acks map[automaton.NodeID]bool
	sent uint64
}

// Request states at the node that holds a request.
const (
	pWaiting  = iota // forwarded to the leader, or waiting for one
	pQueued          // leader: waiting to be executed and proposed
	pProposed        // leader: in an instance not yet chosen
	pRead            // leader: an X-Paxos read waiting for confirms
	pRelayed         // a relayed X-Paxos read waiting for the leader's answer
)

// pend is a request this node must answer: to its own client and/or to
// the nodes that forwarded or relayed it.
type pend struct {
	req    automaton.Request
	local  bool
	remote []automaton.NodeID
	state  int
	age    int
	fwdAge int
	fwdTo  automaton.NodeID
	// An X-Paxos read at the leader: its result, once executed.
	executed bool
	res      service.Result
	results  []service.Result
	relayed  bool // reached the leader as a relayed read: the others have it
	asked    bool // the leader asked the others to confirm it
	txnCmd   *cmd // a T-Paxos commit's command, built when the commit is led
}

// PBPaxos is one node's replica: acceptor, learner, and leader when elected.
type PBPaxos struct {
	proto   protocol
	cfg     automaton.Config
	prm     prm
	pos     map[automaton.NodeID]int
	selfNum uint32

	// Acceptor (durable: promised, log).
	promised Ballot
	accBal   Ballot // the highest ballot this node accepted a proposal of
	log      map[uint64]*slot
	maxInst  uint64

	// Learner.
	sm        *machine
	applied   uint64 // instances applied to sm (every one chosen)
	appliedPN pn     // the proposal number of the applied state
	chosenTo  uint64 // the highest instance known chosen
	snapAt    uint64
	savedC    uint64
	// gaps: instances <= applied whose requests this node never had (a
	// whole state installed past them: the seed's "knows requests 1-87
	// and 90").
	gaps map[uint64]bool

	// Election.
	role        int
	ballot      Ballot
	leaderAlive bool
	aliveLeader automaton.NodeID
	leaderHint  automaton.NodeID
	maxRound    uint64
	promises    map[automaton.NodeID]*message
	p1Ticks     int
	failures    int
	restored    bool // started from records: honour a leader for one timeout

	// Leader.
	ready    bool   // both takeover phases complete (Protocol 1)
	batchTop uint64 // the takeover batch's last instance
	tent     *machine
	tentGen  uint64 // counts executions on tent (transaction workspaces compare it)
	next     uint64
	inflight map[uint64]*flight
	queue    []automaton.RequestID
	tick     uint64
	hbAck    map[automaton.NodeID]uint64
	quorumAt uint64

	// Requests.
	pending  map[automaton.RequestID]*pend
	confirms map[automaton.RequestID]*confirmSet
	txns     map[automaton.RequestID]*txn
	txnOrder []automaton.RequestID
	locks    *service.LockTable[automaton.RequestID]

	// catch-up
	catchupAge int

	// Active expiry and the leader's time (expiry.go).
	exp expiry

	proto.Outbox
	// justApplied lists the instances this step applied, for the
	// invariant checker.
	justApplied []appliedRec
	// served records, for the invariants, what this step executed or
	// answered as leader.
	served []served
}

// served is one request a leader executed or answered in a step.
type served struct {
	read     bool // an X-Paxos read answered
	confirms int  // its confirms, the leader's own included
	newReq   bool // a new request executed or answered
	early    bool // ... before the takeover batch was applied
}

// appliedRec is one instance a step applied: its requests' digest.
type appliedRec struct {
	i      uint64
	known  bool
	digest uint64
}

func (a *PBPaxos) reset() {
	a.promised, a.accBal = Ballot{}, Ballot{}
	a.log = map[uint64]*slot{}
	a.maxInst = 0
	a.sm = newMachine(a.cfg.Service)
	a.applied, a.appliedPN, a.chosenTo, a.snapAt, a.savedC = 0, pn{}, 0, 0, 0
	a.gaps = map[uint64]bool{}
	a.role = follower
	a.leaderHint, a.aliveLeader = "", ""
	a.pending = map[automaton.RequestID]*pend{}
	a.confirms = map[automaton.RequestID]*confirmSet{}
	a.clearLeader()
}

// clearLeader forgets every piece of leadership: phase 2 bookkeeping, the
// tentative state, transactions and their locks (the Grid Services thesis VI.A.5: a leader
// switch aborts the transactions in flight).
func (a *PBPaxos) clearLeader() {
	a.ready = false
	a.batchTop = 0
	a.tent = nil
	a.inflight = map[uint64]*flight{}
	a.queue = nil
	a.hbAck = map[automaton.NodeID]uint64{}
	a.promises = nil
	a.txns = map[automaton.RequestID]*txn{}
	a.txnOrder = nil
	a.locks = service.NewLockTable[automaton.RequestID]()
}

func (a *PBPaxos) send(to automaton.NodeID, m *message) {
	if to == a.cfg.Self || to == "" {
		return
	}
	a.Emit(automaton.Send{To: to, Msg: m.marshal()})
}
func (a *PBPaxos) broadcast(m *message) {
	var b []byte
	for _, n := range a.cfg.Nodes {
		if n == a.cfg.Self {
			continue
		}
		if b == nil {
			b = m.marshal()
		}
		a.Emit(automaton.Send{To: n, Msg: b})
	}
}
func (a *PBPaxos) persist(k string, v []byte) { a.Emit(automaton.Persist{Key: k, Value: v}) }
func (a *PBPaxos) majority() int              { return automaton.Majority(len(a.cfg.Nodes)) }

// owner is the node whose ballot b is.
func (a *PBPaxos) owner(b Ballot) automaton.NodeID {
	if b.Node == 0 || int(b.Node) > len(a.cfg.Nodes) {
		return ""
	}
	return a.cfg.Nodes[b.Node-1]
}

func (a *PBPaxos) ticksOf(d time.Duration) int {
	return proto.Ticks(d, a.prm.heartbeat)
}

// Step implements automaton.Automaton.
func (a *PBPaxos) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.served = a.served[:0]
	a.justApplied = a.justApplied[:0]
	proto.Dispatch(a, in)
	return a.Out
}

func (a *PBPaxos) OnTimer(id automaton.TimerID) {
	switch id {
	case tmTick:
		a.onTick()
		a.Emit(automaton.SetTimer{ID: tmTick, After: a.prm.heartbeat})
	case tmAlive:
		a.leaderAlive = false
	case tmElection:
		a.onElectionTimeout()
	}
}

func (a *PBPaxos) OnMessage(from automaton.NodeID, b []byte) {
	if from == a.cfg.Self {
		return
	}
	if _, ok := a.pos[from]; !ok {
		return
	}
	m, err := unmarshal(b)
	if err != nil {
		return // corrupt: dropped; senders retransmit
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
	case kindSnapshot:
		a.onSnapshot(from, m)
	case kindForward:
		a.onForward(from, m)
	case kindForwardReply:
		a.onForwardReply(m)
	case kindRead:
		a.onRead(from, m)
	case kindConfirm:
		a.onConfirm(from, m)
	case kindReadReply:
		a.onReadReply(m)
	}
}

// onTick runs every heartbeat: leader heartbeats, retransmissions and check
// quorum; candidate retransmissions; request timeouts and forwarding.
func (a *PBPaxos) onTick() {
	a.tick++
	a.expiryTick()
	switch a.role {
	case leader:
		a.broadcast(&message{Kind: kindHeartbeat, Ballot: a.ballot, Commit: a.applied})
		a.retransmit()
		a.hbAck[a.cfg.Self] = a.tick
		if a.quorumAge() > a.ticksOf(a.prm.electionTimeout) {
			a.stepDown() // check quorum: cut off from a majority
		}
	case candidate:
		a.p1Ticks++
		if a.p1Ticks > a.ticksOf(a.prm.electionTimeout) {
			a.failures++
			a.stepDown()
		} else {
			a.sendPrepares()
		}
	}
	opTicks := a.ticksOf(a.prm.opTimeout)
	expired := proto.Expired(a.pending, opTicks, func(p *pend) int {
		p.age++
		p.fwdAge++
		return p.age
	})
	for _, id := range expired {
		a.answer(id, service.Fail(synoderr.TryAgain, "pbpaxos: request %v not done within %v (no leader?); a write's outcome is unknown", id, a.prm.opTimeout), nil)
	}
	if a.role != leader {
		a.forwardPending(true)
	}
	for id, c := range a.confirms {
		c.age++
		if c.age > opTicks {
			delete(a.confirms, id)
		}
	}
	if a.catchupAge > 0 {
		a.catchupAge--
	}
	if a.chosenTo > a.applied && a.catchupAge == 0 && a.leaderHint != "" && a.leaderHint != a.cfg.Self {
		a.requestCatchup(a.leaderHint)
	}
}

// quorumAge is the number of ticks since a majority (the leader included)
// last acknowledged a heartbeat.
func (a *PBPaxos) quorumAge() int {
	ts := make([]uint64, 0, len(a.cfg.Nodes))
	for _, n := range a.cfg.Nodes {
		ts = append(ts, a.hbAck[n])
	}
	sort.Slice(ts, func(i, j int) bool { return ts[i] > ts[j] })
	t := ts[a.majority()-1]
	if t < a.quorumAt {
		t = a.quorumAt
	}
	return int(a.tick - t)
}

// Leader implements automaton.LeaderReporter.
func (a *PBPaxos) Leader() automaton.NodeID { return a.leaderHint }

// ServiceState implements automaton.StateReporter: the applied instance
// and the service state after it.
func (a *PBPaxos) ServiceState() (uint64, service.State) {
	if a.sm == nil {
		return 0, nil
	}
	return a.applied, a.sm.st
}
