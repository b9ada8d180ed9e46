package paxos

import (
	"fmt"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities("paxos",
		"Multi-Paxos state machine replication (the Grid Services thesis chapters V-VI): stable leader, batched and pipelined phase 2, ReadIndex and lease reads, single-node membership changes")})
	// Deliberately broken variants (see the package doc). Never use them for
	// data: the simulator and the conformance suite run them to show that a
	// checker or an invariant catches them.
	automaton.RegisterBroken("paxos", protocol{skipPhase1Values: true, Capabilities: capabilities("paxos-broken-skipphase1values",
		"a new leader ignores the values reported in phase 1 and fills them with no-ops, losing chosen writes; the invariant \"one value chosen per instance\" and the linearizability checker catch it")})
	automaton.RegisterBroken("paxos", protocol{stickyLeader: true, Capabilities: capabilities("paxos-broken-stickyleader",
		"followers never give up on the first leader they heard, so a dead leader is never replaced; safe, but the simulator's liveness mode catches the stall")})
	automaton.RegisterBroken("paxos", protocol{bootQuorum: true, Capabilities: capabilities("paxos-broken-bootquorum",
		"phase 2 counts majorities of the bootstrap configuration instead of the instance's; after membership changes acknowledged writes are lost, caught by the linearizability checker (--membership add@1s,add@2s)")})
	automaton.RegisterBroken("paxos", brokenTransfer{protocol{transferSkipsPhase1: true, Capabilities: capabilities(BrokenTransfer,
		"a leadership transfer's target leads under the old leader's ballot without running phase 1; caught by the invariant \"one leader per ballot\" (--membership transfer:n2@300ms,...)")}})
	automaton.RegisterBroken("paxos", protocol{splitGroups: true, Capabilities: capabilities("paxos-broken-splitgroup",
		"an atomic group's operations are ordered as separate commands that the other commands of its batch interleave with; the serializability checker catches the half-applied groups under load (--groups 0.5 --param window=1)")})
}

// capabilities is the registration of the protocol or a variant (its
// scenarios, model and invariants are methods: scenarios.go, model.go,
// invariant.go).
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// A client's table of outcomes is replicated state (machine.go):
		// a write retried at another node applies at most once.
		Idempotent: true,
		Membership: true,
		// Atomic groups are one command in one instance; interactive
		// transactions (T-Paxos, the Grid Services thesis VI.A.4) are not done (issue 13).
		Transactions: automaton.TxnSupport{Atomic: true, Interactive: false},
		// The leader puts the request's environment into the log entry
		// beside the command, and every replica executes with it (package
		// doc).
		Nondeterminism: true,
		// Every parameter ParseParams accepts, with its default, as a
		// cluster file spells it ("members" has no default: it is
		// Config.Nodes).
		Params: params.Defaults(),
		// Nested requests are answered from the table of outcomes, which
		// keeps dedupWindow per client id (nested.go).
		NestedWindow: dedupWindow,
		// Requests carry the client's lowest unanswered id and a closed
		// connection's session is ended through the log (machine.go).
		Sessions: true,
	}
}

// protocol is the registration: its capabilities and the broken variants'
// switches.
type protocol struct {
	automaton.Capabilities
	skipPhase1Values    bool // a new leader ignores the values reported in phase 1
	stickyLeader        bool // a follower never gives up on the first leader it heard of
	bootQuorum          bool // phase 2 counts majorities of the bootstrap configuration
	splitGroups         bool // an atomic group's operations become separate commands
	nestedRead          bool // a nested read is served as a plain read, not cached (nested.go)
	transferSkipsPhase1 bool // a transfer's target leads under the old ballot, without phase 1 (broken_transfer.go)
	dropEarly           bool // the table drops the lowest unanswered request's outcome too (broken_dropearly.go)
}

// Defaults of the parameters (see the package doc).
const (
	DefaultHeartbeat       = 50 * time.Millisecond
	DefaultElectionTimeout = 500 * time.Millisecond
	DefaultOpTimeout       = 5 * time.Second
	DefaultWindow          = 8
	DefaultBatch           = 256
	DefaultSnapshotEvery   = 20000
	DefaultSnapshotBytes   = 8 << 20
	DefaultLeaseDrift      = 0.1
	DefaultDedupClients    = 100000
	DefaultExpiryPeriod    = 100 * time.Millisecond
	maxNodes               = 63
	catchupBudget          = 1 << 20 // bytes of values per catch-up message
	catchupMaxEntries      = 512
)

// Params are the parsed protocol parameters.
type Params struct {
	Heartbeat, ElectionTimeout, OpTimeout, LeaseMargin time.Duration
	Window, Batch, SnapshotEvery, DedupClients         int
	LeaseDrift                                         float64
	// SnapshotBytes: a snapshot is also taken once the values of the
	// instances executed since the last one reach max(SnapshotBytes,
	// snapshotBytesFactor x that snapshot's size) (execute.go).
	SnapshotBytes int
	// Read is the mode a request asking for the default linearizable read
	// gets: ReadQuorum (the default), ReadLog or ReadLease.
	Read automaton.ReadMode
	// ExpiryPeriod is how often the leader checks for expired keys
	// (expiry.go).
	ExpiryPeriod time.Duration
	// Observe names a Recorder (observe.go); "" for none.
	Observe string
	// ReadRoundMajority sends quorum and lease reads' confirmation rounds
	// only to the followers a majority needs (read_round=majority;
	// reads.go, readTargets); by default they go to every peer.
	ReadRoundMajority bool
}

// Lease is the lease a leader assumes after a majority acknowledged a
// heartbeat: ElectionTimeout/(1+LeaseDrift) - LeaseMargin.
func (p Params) Lease() time.Duration {
	return time.Duration(float64(p.ElectionTimeout)/(1+p.LeaseDrift)) - p.LeaseMargin
}

// params is the parameter table; the package doc's table is its Doc
// (TestParamDoc).
var params = proto.NewSpec(
	proto.Param{Name: "heartbeat", Kind: proto.Duration, Default: DefaultHeartbeat.String(), Min: "0", MinOpen: true,
		Doc: "leader heartbeat and retransmission interval"},
	proto.Param{Name: "election_timeout", Kind: proto.Duration, Default: DefaultElectionTimeout.String(), Min: "0", MinOpen: true,
		Doc: "silence before an election; at least 3 heartbeats"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a request's time limit at a node"},
	proto.Param{Name: "window", Kind: proto.Int, Default: strconv.Itoa(DefaultWindow), Min: "1",
		Doc: "instances in phase 2 at once"},
	proto.Param{Name: "batch", Kind: proto.Int, Default: strconv.Itoa(DefaultBatch), Min: "1",
		Doc: "commands per instance (at most)"},
	proto.Param{Name: "snapshot_every", Kind: proto.Int, Default: strconv.Itoa(DefaultSnapshotEvery), Min: "1",
		Doc: "executed commands between snapshots"},
	proto.Param{Name: "snapshot_bytes", Kind: proto.Int, Default: strconv.Itoa(DefaultSnapshotBytes), Min: "1",
		Doc: "executed instances' bytes between snapshots (at least 4 x the last snapshot's size)"},
	proto.Param{Name: "lease_drift", Kind: proto.Float, Default: strconv.FormatFloat(DefaultLeaseDrift, 'g', -1, 64), Min: "0", Max: "1", MaxOpen: true,
		Doc: "clock rate bound for leases"},
	proto.Param{Name: "lease_margin", Kind: proto.Duration, Default: DefaultHeartbeat.String(), Min: "0",
		Doc: "subtracted from the lease (absent: the heartbeat)"},
	proto.Param{Name: "dedup_clients", Kind: proto.Int, Default: strconv.Itoa(DefaultDedupClients), Min: "1",
		Doc: "rows of the deduplication table"},
	proto.Param{Name: "expiry_period", Kind: proto.Duration, Default: DefaultExpiryPeriod.String(), Min: "0", MinOpen: true,
		Doc: "leader proposes removing expired keys (expiry.go)"},
	proto.Param{Name: "read", Kind: proto.Enum, Default: "quorum", Choices: []string{"quorum", "log", "lease"},
		Doc: "what the default linearizable read is"},
	proto.Param{Name: "read_round", Kind: proto.Enum, Default: "all", Choices: []string{"all", "majority"},
		Doc: "who a read's confirmation round goes to"},
	proto.Param{Name: "members", Kind: proto.List, NoDefault: true,
		Doc: "bootstrap configuration, in numbering order (absent: Config.Nodes)"},
	proto.Param{Name: "observe", Kind: proto.String, NoDefault: true,
		Doc: "the name of a Recorder (NewRecorder, observe.go) told each instance learned (experiments; absent: none)"},
)

// readModes are the read parameter's values.
var readModes = map[string]automaton.ReadMode{"quorum": automaton.ReadQuorum, "log": automaton.ReadLog, "lease": automaton.ReadLease}

// ParseParams parses the namespace parameters; unknown names are errors.
// "members" is checked here and read by New.
func ParseParams(m map[string]string) (Params, error) {
	p, _, err := parseParams(m)
	return p, err
}

// parseParams parses the parameters and the bootstrap membership (nil:
// Config.Nodes).
func parseParams(m map[string]string) (Params, []automaton.NodeID, error) {
	v, err := params.Parse("paxos", m)
	if err != nil {
		return Params{}, nil, err
	}
	p := Params{
		Heartbeat: v.Duration("heartbeat"), ElectionTimeout: v.Duration("election_timeout"), OpTimeout: v.Duration("op_timeout"),
		Window: v.Int("window"), Batch: v.Int("batch"), SnapshotEvery: v.Int("snapshot_every"),
		LeaseDrift: v.Float("lease_drift"), DedupClients: v.Int("dedup_clients"), LeaseMargin: v.Duration("lease_margin"),
		Read: readModes[v.String("read")], ExpiryPeriod: v.Duration("expiry_period"), Observe: v.String("observe"),
		ReadRoundMajority: v.String("read_round") == "majority", SnapshotBytes: v.Int("snapshot_bytes"),
	}
	if !v.Given("lease_margin") {
		p.LeaseMargin = p.Heartbeat
	}
	var boot []automaton.NodeID
	if v.Given("members") {
		// The bootstrap membership, when the cluster file lists more nodes
		// than the configuration began with (nodes added since).
		if boot, err = parseMembers(m["members"]); err != nil {
			return p, nil, err
		}
	}
	if p.ElectionTimeout < 3*p.Heartbeat {
		return p, nil, fmt.Errorf("paxos: election_timeout %v must be at least 3 heartbeats (%v)", p.ElectionTimeout, 3*p.Heartbeat)
	}
	if p.Lease() <= 0 {
		return p, nil, fmt.Errorf("paxos: lease election_timeout/(1+lease_drift)-lease_margin = %v is not positive", p.Lease())
	}
	return p, boot, nil
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
	prm, boot, err := parseParams(cfg.Params)
	if err != nil {
		return nil, err
	}
	if boot == nil {
		boot = cfg.Nodes
	}
	if len(boot) > maxNodes {
		return nil, fmt.Errorf("paxos: %d nodes (want 1 to %d)", len(boot), maxNodes)
	}
	if _, _, err := proto.Positions("paxos", cfg.Nodes, cfg.Self); err != nil {
		return nil, err
	}
	a := &Paxos{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, prm: prm, index: map[automaton.NodeID]int{}}
	if prm.Observe != "" {
		if a.rec = recorders.Lookup(prm.Observe); a.rec == nil {
			return nil, fmt.Errorf("paxos: observe=%s names no recorder", prm.Observe)
		}
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
	// cmds is val decoded, kept by the leader that proposed it (proposeAt)
	// until it executes the instance, so that it decodes none of its own
	// batches; nil elsewhere (execution decodes val). Derived from val, so
	// never persisted, sent or encoded in a model state; never changed once
	// set (CloneModel's slot copies share it).
	cmds []cmd
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
	pSettling        // leader: a removal executed, its answer held until a majority of the new configuration knows it chosen (settle.go)
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
	// A removal in state pSettling: its outcome, its instance, and the
	// peers whose heartbeat acknowledgements showed a chosen prefix
	// reaching it (settle.go).
	held    outcome
	heldAt  uint64
	knowers nodeSet
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
	answerAt   uint64 // the instance being executed (advance), else 0: what reply positions an answer at
	relaying   bool   // a ForwardReply is being relayed (onForwardReply): reply marks the answer Relayed
	snapIndex  uint64 // instance of the last persisted snapshot
	sinceSnap  int    // commands executed since that snapshot
	sinceBytes int    // bytes of the values of the instances executed since that snapshot
	snapLen    int    // size of that snapshot's record (0: none)
	savedC     uint64 // commit index last persisted
	sm         *machine
	tok        *ownerToken // owns sm when sm.owner is tok (ownMachine)

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
	ownChosen   []ownChoice // instances chosen counting the leader's own vote, ascending (phase2.go, keepOwnChosen)
	queue       []automaton.RequestID
	tick        uint64
	hbRound     uint64
	ackRound    map[int]uint64
	acked       map[int]uint64 // highest instance (or chosen prefix) each peer acknowledged
	quorumRound uint64
	quorumTick  uint64
	leaseFired  uint64    // highest heartbeat round whose lease timer fired
	leaseRounds []uint64  // the rounds above leaseFired that set a lease timer, ascending (timesLease)
	allRound    [2]uint64 // the last two heartbeat rounds sent to every peer, older first (readTargets)
	roundWanted uint64    // within a step: the round its reads wait for (0: none; sendReadRound)
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
	// settling: the requests in state pSettling, in execution order.
	settling []automaton.RequestID

	// Catch-up: the outstanding request's peer, and the highest chosen
	// instance some peer is known to have.
	catchupFrom  int
	catchupTicks int
	behindTo     uint64
	behindPeer   int

	// Active expiry and the leader's time (expiry.go).
	exp expiry

	rec *Recorder // parameter observe (observe.go); nil: none

	proto.Outbox
}

func (a *Paxos) reset() {
	a.promised = Ballot{}
	a.log = map[uint64]*slot{}
	a.logStart, a.maxInst = 1, 0
	a.chosenUpTo, a.executed, a.snapIndex, a.savedC = 0, 0, 0, 0
	a.sinceSnap, a.sinceBytes, a.snapLen = 0, 0, 0
	a.sm = newMachine(a.cfg.Service, a.prm.DedupClients, a.boot)
	a.sm.dropEarly = a.proto.dropEarly
	if a.tok == nil {
		a.tok = new(ownerToken)
	}
	a.sm.owner = a.tok
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
	a.settling = nil
	a.inflight = map[uint64]*flight{}
	a.ownChosen = nil
	a.inLog = map[automaton.RequestID]uint64{}
	a.ackRound = map[int]uint64{}
	a.acked = map[int]uint64{}
}

func (a *Paxos) myNode() uint32 { return a.nums[a.cfg.Self] }
func (a *Paxos) send(to int, m *message) {
	a.Emit(automaton.Send{To: a.nodes[to], Msg: m.marshal()})
}

// broadcast sends m to every peer of the leader (peers), as Early Sends
// when early is set (the Accept: earlyAccept).
func (a *Paxos) broadcast(m *message, early bool) {
	var b []byte
	var pb [8]int
	for _, h := range a.peers(false, pb[:]) {
		if b == nil {
			b = m.marshal()
		}
		a.Emit(automaton.Send{To: a.nodes[h], Msg: b, Early: early})
	}
}
func (a *Paxos) persist(k string, v []byte) { a.Emit(automaton.Persist{Key: k, Value: v}) }

// persistSlot persists instance i's slot record, positioned at i
// (automaton.Persist.Pos): the records the answers of instances from i on
// wait for (package doc, "Positioned answers").
func (a *Paxos) persistSlot(i uint64, s *slot) {
	a.Emit(automaton.Persist{Key: slotKey(i), Value: encodeSlot(s), Pos: i})
}
func (a *Paxos) ticksOf(d time.Duration) int {
	return proto.Ticks(d, a.prm.Heartbeat)
}

// Step implements automaton.Automaton.
func (a *Paxos) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	proto.Dispatch(a, in)
	a.sendReadRound()
	return a.Out
}

// armTick sets the heartbeat tick. It may fire up to a quarter of a
// heartbeat late (SetTimer.Slack): the node's runtime then fires the ticks
// of all its groups together, so their heartbeats and acknowledgements
// leave in one write per peer (coalesced heartbeats, node/loop.go). A late
// tick only delays a heartbeat, a retransmission, a forward or the expiry
// clock (which never runs ahead of time, expiry.go); the lease and election
// timers carry no slack. The election timeout is at least three heartbeats,
// so a follower still hears at least two ticks' heartbeats per timeout.
func (a *Paxos) armTick() {
	a.Emit(automaton.SetTimer{ID: tmTick, After: a.prm.Heartbeat, Slack: a.prm.Heartbeat / 4})
}

func (a *Paxos) OnTimer(id automaton.TimerID) {
	switch {
	case id == tmTick:
		a.onTick()
		a.armTick()
	case id == tmAlive:
		a.onAliveTimeout()
	case id == tmElection:
		a.onElectionTimeout()
	case id >= leaseTimerBase:
		a.leaseFiredAt(uint64(id - leaseTimerBase))
	}
}

// onTick runs every heartbeat interval: leader heartbeats and
// retransmissions, candidate retransmissions, request timeouts, forwarding
// retries and catch-up retries.
func (a *Paxos) onTick() {
	a.tick++
	a.expiryTick()
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
	expired := proto.Expired(a.pending, a.ticksOf(a.prm.OpTimeout), func(p *pend) int {
		p.age++
		p.fwdAge++
		return p.age
	})
	for _, id := range expired {
		if p := a.pending[id]; p != nil && p.state == pSettling {
			a.answer(id, p.held) // executed: its outcome, not a timeout
			continue
		}
		a.finish(id, service.Fail(synoderr.TryAgain, "paxos: request %v not done within %v (leader unavailable?); a write's outcome is unknown", id, a.prm.OpTimeout))
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

func (a *Paxos) OnMessage(fromID automaton.NodeID, b []byte) {
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
	case kindTimeoutNow:
		a.onTimeoutNow(from, m)
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
	// Sessions is the deduplication table's rows, Outcomes the outcomes
	// they hold, Ended the ended sessions' tombstones (machine.go).
	Sessions, Outcomes, Ended int
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
	s.Sessions, s.Ended = len(a.sm.clients), len(a.sm.closed)
	for _, r := range a.sm.clients {
		s.Outcomes += len(r.Seqs)
	}
	return s
}
