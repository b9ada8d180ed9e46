package pb

import (
	"fmt"
	"sort"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Name is the protocol's registered name.
const Name = "pb"

// Names of the broken variants (broken.go).
const (
	BrokenReplyFirst = Name + "-broken-replyfirst"
	BrokenNoDedup    = Name + "-broken-nodedup"
	BrokenTakeOver   = Name + "-broken-takeover"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name, true,
		"primary-backup (the Grid Services thesis ch. III): the primary executes, ships the state change to every backup and replies after all acknowledge; heartbeats, a senior backup that takes over; safe only with a perfect failure detector (crash-stop, bounded delays)")})
	automaton.RegisterBroken(Name, protocol{replyFirst: true, Capabilities: capabilities(BrokenReplyFirst, true,
		"the primary replies as soon as it has executed a write, before every backup acknowledged the update: a crash of the primary can lose an acknowledged write; the invariant reply-after-acks catches it at the first write")})
	automaton.RegisterBroken(Name, protocol{noDedup: true, Capabilities: capabilities(BrokenNoDedup, false,
		"the primary runs every request it receives, without its duplicate table: a resubmitted or duplicated write is executed twice; the invariant exactly-once catches it under duplicated messages")})
	automaton.RegisterBroken(Name, protocol{soloTakeOver: true, Capabilities: capabilities(BrokenTakeOver, true,
		"the Grid Services thesis's take-over as is: a backup takes over with the state it has, and a primary that dropped its backups answers alone; under slow fsyncs the primary lives on, and the writes it answered alone are lost (takeover.go)")})
}

// capabilities is the registration of the protocol or a variant (its
// scenarios, model and invariants are methods: scenarios.go, model.go,
// invariant.go).
func capabilities(name string, dedup bool, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// The duplicate table is part of the replicated state, so a write
		// resubmitted at another node (and forwarded to the primary of the
		// moment) takes effect once.
		Idempotent: dedup,
		// Client sessions (machine.go, package doc): a request's bound
		// drops its client's outcomes, SessionEnd removes a closed
		// client's row (the variant without the table keeps none).
		Sessions: dedup,
		Params:   params.Defaults(),
		// Only the primary executes, with the request's Env, and the
		// backups install the resulting state change.
		Nondeterminism: true,
		// A group runs at the primary in one step and ships as one update.
		Transactions: automaton.TxnSupport{Atomic: true},
		// The failure model (package doc, "Failure model"). Power loss of
		// the whole cluster is survived since views and state are durable
		// (1387d64): the conformance suite's "power loss" scenario passes
		// (seeds 1-30 of it too).
		SafeFaults: []string{"crash", "dup", "reorder", "slow", automaton.PowerLoss},
	}
}

// Defaults of the parameters.
const (
	DefaultRateSending  = 20 * time.Millisecond
	DefaultRateChecking = 250 * time.Millisecond
	DefaultOpTimeout    = 5 * time.Second
	DefaultChunkBytes   = 64 << 10
	// chunkWindow is how many chunks of a state transfer may be
	// unacknowledged at once.
	chunkWindow = 4
	// maxAhead bounds the updates a backup holds beyond a gap.
	maxAhead = 4096
	// maxResend bounds the entries resent to one peer per check.
	maxResend = 1024
	// backupMisses is how many consecutive check periods without an
	// acknowledgement make the primary drop a backup.
	backupMisses = 2
	// joinPatience is how many check periods a joiner that installed the
	// state asks to become a member before it rejoins (package doc,
	// "Joining").
	joinPatience = 4
)

var params = proto.NewSpec(
	proto.Param{Name: "rate_sending", Kind: proto.Duration, Default: DefaultRateSending.String(), Min: "0", MinOpen: true,
		Doc: "the primary's heartbeat interval (Fig. III.2)"},
	proto.Param{Name: "rate_checking", Kind: proto.Duration, Default: DefaultRateChecking.String(), Min: "0", MinOpen: true,
		Doc: "the failure detector's check period (Fig. III.3); at least 2 rate_sending"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: DefaultOpTimeout.String(), Min: "0", MinOpen: true,
		Doc: "a forwarded request's time limit at the node the client reached"},
	proto.Param{Name: "chunk_bytes", Kind: proto.Int, Default: strconv.Itoa(DefaultChunkBytes), Min: "1",
		Doc: "bytes of state per state-transfer message to a joining backup"},
)

// protocol is the registered value: its capabilities, and the variant.
type protocol struct {
	automaton.Capabilities
	replyFirst bool // broken: reply before the backups acknowledged
	noDedup    bool // broken: no duplicate detection
	// broken: the seed's take-over (no promises; answers without a backup)
	soloTakeOver bool
}

// New implements automaton.Protocol.
func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%s: namespace %q has no service", p.Protocol, cfg.Namespace)
	}
	pos, me, err := proto.Positions(p.Protocol, cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	prm, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	a := &PB{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, pos: pos, me: me,
		sending:    prm.Duration("rate_sending"),
		checking:   prm.Duration("rate_checking"),
		opTimeout:  prm.Duration("op_timeout"),
		chunkBytes: prm.Int("chunk_bytes"),
	}
	if a.checking < 2*a.sending {
		return nil, fmt.Errorf("%s: rate_checking %v must be at least twice rate_sending %v, or a live primary looks failed", p.Protocol, a.checking, a.sending)
	}
	return a, nil
}

type role int

const (
	roleBackup role = iota
	rolePrimary
	roleJoining
	// roleRecovering: restarted with a durable view, waiting for a live
	// primary or for the whole cluster's election (durable.go).
	roleRecovering
)

func (r role) String() string {
	return [...]string{"backup", "primary", "joining", "recovering"}[r]
}

// Timers.
const (
	timerHeartbeat automaton.TimerID = 1 // primary: HEARTBEAT_GENERATOR
	timerCheck     automaton.TimerID = 2 // everyone: FAILURE_DETECTOR
)

// PB is one node's automaton: primary, backup or joining backup, and the
// forwarder of the clients that reach it.
type PB struct {
	proto protocol
	cfg   automaton.Config
	pos   map[automaton.NodeID]int
	me    int

	sending, checking, opTimeout time.Duration
	chunkBytes                   int

	proto.Outbox

	role role
	// The view: its ballot (round, primary's position + 1), the view the
	// primary was a backup in before it took over, the primary's applied
	// count when it began, and its member list (primary first, then the
	// backups by seniority) at version epoch.
	view, prev  proto.Ballot
	base, epoch uint64
	members     []automaton.NodeID

	m      *machine // nil while joining
	stable uint64   // every member holds the entries up to stable
	// log holds the entries after logStart up to m.applied (every role
	// with a state): the primary resends from it, and a backup that takes
	// over brings the others level from it.
	log      []entry
	logStart uint64

	// Backup.
	heard     bool // a notification from the primary since the last check
	misses    int  // consecutive checks without one
	ahead     map[uint64]entry
	awaiting  bool   // installed a transferred state, not yet a member
	joinNonce uint64 // the transfer it installed
	awaited   int    // checks spent awaiting membership

	// Primary.
	peers     map[automaton.NodeID]*peer
	committed uint64
	waiters   []*waiter // by index
	inflight  map[automaton.RequestID]*waiter
	lastCheck uint64 // m.applied at the previous check

	// Joining.
	join *joining

	// Forwarding.
	fwds map[automaton.RequestID]*fwd

	// Per step, for the invariants.
	stepReplies []stepReply
	stepExec    []automaton.RequestID
	fresh       bool // this incarnation booted with no records

	// Durability (durable.go): the last view record persisted, the
	// image's applied count and the last entry persisted after it, and
	// while recovering the durable views the nodes reported.
	savedView           []byte
	snapAt, persistedTo uint64
	reports             map[automaton.NodeID]viewRecord

	// Take-overs (takeover.go): the view of the primary whose stream
	// this node's state follows; a new primary's collection of promises
	// and its suspected predecessor; a node that adopted a collecting
	// view waits (keeps its state, acknowledges nothing) and promised in
	// this check period.
	sv          proto.Ballot
	collecting  bool
	promises    map[automaton.NodeID]message
	suspect     automaton.NodeID
	waiting     bool
	promiseSent bool

	// Batch messages (batch.go): handling one; the primary its update
	// entries came from, owed one acknowledgement at its end ("" when
	// none), and the view they were acknowledged in.
	batching bool
	ackTo    automaton.NodeID
	ackView  proto.Ballot
}

// peer is the primary's view of a backup or a joining node.
type peer struct {
	member bool
	acked  uint64 // entries acknowledged (a joiner: received in order)
	heard  bool
	misses int
	fresh  bool // no acknowledgement in this view yet
	xfer   *transfer
	// nonce is the transfer a member joined by (0: none): its
	// acknowledgements name it, so a duplicated one from before it was
	// dropped and rejoined is not counted.
	nonce uint64
}

// transfer is a state transfer to a joining node.
type transfer struct {
	nonce     uint64
	index     uint64 // the image's applied count
	image     []byte
	sent, got uint64 // bytes sent, bytes acknowledged
}

// waiter is a request whose answer waits until every member holds the
// entries up to index.
type waiter struct {
	req   automaton.Request // for a local request: to forward if this node steps down
	index uint64
	out   outcome
	write bool
	local bool
	to    []automaton.NodeID // forwarders to reply to
}

// joining is a node's state while it rejoins.
type joining struct {
	asked  bool // sent a join since the last check
	active bool // received a chunk since the last check
	from   automaton.NodeID
	nonce  uint64
	index  uint64
	total  uint64
	buf    []byte
	ahead  map[uint64]entry
}

// fwd is a client request this node forwards to the primary.
type fwd struct {
	req     automaton.Request
	elapsed time.Duration
}

// stepReply records an answer emitted in a step, for the invariants.
type stepReply struct {
	id    automaton.RequestID
	index uint64
	write bool
}

// Step implements automaton.Automaton.
func (a *PB) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.stepReplies = a.stepReplies[:0]
	a.stepExec = a.stepExec[:0]
	proto.Dispatch(a, in)
	a.saveView()
	if proto.BatchStep(in, kindBatch) {
		// A batch's messages to one peer leave as one (batch.go); other
		// steps' outputs stay as they were.
		a.Out = header.Coalesce(a.Out, kindBatch)
	}
	return a.Out
}

// OnTimer: the heartbeat generator and the failure detector's check.
func (a *PB) OnTimer(id automaton.TimerID) {
	switch id {
	case timerHeartbeat:
		a.onHeartbeatTimer()
	case timerCheck:
		a.onCheck()
	}
}

func (a *PB) send(to automaton.NodeID, m message) {
	if to == a.cfg.Self {
		return
	}
	a.Emit(automaton.Send{To: to, Msg: m.marshal()})
}

// others lists every configured node but this one, in configuration order.
func (a *PB) others() []automaton.NodeID {
	out := make([]automaton.NodeID, 0, len(a.cfg.Nodes)-1)
	for _, n := range a.cfg.Nodes {
		if n != a.cfg.Self {
			out = append(out, n)
		}
	}
	return out
}

// primary is the node this one believes is the primary ("" when unknown).
func (a *PB) primary() automaton.NodeID {
	if len(a.members) == 0 {
		return ""
	}
	return a.members[0]
}

// rank is this node's position in the member list (0: primary, 1: senior
// backup), or -1.
func (a *PB) rank() int {
	for i, n := range a.members {
		if n == a.cfg.Self {
			return i
		}
	}
	return -1
}

// Leader implements automaton.LeaderReporter: the primary this node knows.
// The runtime pushes its changes to subscribed clients as the seed's
// fail-over notification (package doc).
func (a *PB) Leader() automaton.NodeID { return a.primary() }

// OnStart begins an incarnation (package doc, "Durability"). A first boot
// persists its view and empty state and takes its place in the initial
// view, the configured order (the Grid Services thesis III.B, find_replicas): the first
// node is the primary, the second the senior backup. A node with a
// durable view recovers (durable.go); one with only the old boot record
// (its state was never kept) rejoins as a backup.
func (a *PB) OnStart(s automaton.Start) {
	a.fwds = map[automaton.RequestID]*fwd{}
	a.Emit(automaton.SetTimer{ID: timerCheck, After: a.checking})
	if vb, ok := s.Records[viewKey]; ok {
		a.recoverFrom(s.Records, vb)
		return
	}
	if b, ok := s.Records[bootKey]; ok {
		if _, err := unmarshalBoot(b); err != nil {
			panic(fmt.Sprintf("pb: corrupt boot record: %v", err))
		}
		a.becomeJoining()
		return
	}
	a.fresh = true
	a.view = proto.Ballot{Round: 1, Node: 1}
	a.sv = a.view
	a.members = append([]automaton.NodeID(nil), a.cfg.Nodes...)
	a.m = newMachine(a.cfg.Service)
	a.persistImage()
	if a.me == 0 {
		a.initPrimary()
		for _, n := range a.members[1:] {
			a.peers[n] = &peer{member: true, heard: true}
		}
		return
	}
	a.role = roleBackup
	a.heard = true
}

func (a *PB) OnMessage(from automaton.NodeID, b []byte) {
	if from == a.cfg.Self {
		return
	}
	if len(b) > 1 && b[1] == kindBatch {
		a.onBatchMessage(from, b)
		return
	}
	m, err := unmarshal(b)
	if err != nil {
		return // corrupt: dropped, as a lost message
	}
	a.onMsg(from, m)
}

// onMsg hands a decoded message to its handler.
func (a *PB) onMsg(from automaton.NodeID, m message) {
	switch m.Kind {
	case kindUpdate:
		a.onUpdate(from, m)
	case kindAck:
		a.onAck(from, m)
	case kindHeartbeat, kindNewView, kindStale:
		a.onView(from, m)
	case kindJoin:
		a.onJoin(from)
	case kindChunk:
		a.onChunk(from, m)
	case kindChunkAck:
		a.onChunkAck(from, m)
	case kindForward:
		a.onForward(from, m)
	case kindReply:
		a.onReply(m)
	case kindReport:
		a.onReport(from, m)
	case kindPromise:
		a.onPromise(from, m)
	}
}

// Validator implements proto.Validating: a membership change is refused
// unvalidated (OnRequest).
func (a *PB) Validator(req automaton.Request) service.Service {
	if (automaton.IsMemberOp(req.Op) || automaton.IsSessionEnd(req.Op)) && len(req.Ops) == 0 {
		// a session end (machine.go) is the runtime's, which no service lists
		return nil
	}
	return a.cfg.Service
}

// Invalid implements proto.Validating.
func (a *PB) Invalid(req automaton.Request, r service.Result) {
	a.respond(req.ID, outcome{res: r})
}

// OnRequest serves a client's request, validated (Validator): the primary
// executes it, every other node forwards it (package doc, "Clients").
func (a *PB) OnRequest(req automaton.Request) {
	if automaton.IsMemberOp(req.Op) && len(req.Ops) == 0 {
		a.respond(req.ID, outcome{res: service.Errorf("ERR %s has no membership changes", a.proto.Protocol)})
		return
	}
	if res, refused := automaton.RefuseUnsupported(a.proto.Protocol, req); refused {
		a.respond(req.ID, outcome{res: res})
		return
	}
	if req.Opts.Read > automaton.ReadLease {
		a.respond(req.ID, outcome{res: service.Errorf("ERR %s: unknown read mode %v", a.proto.Protocol, req.Opts.Read)})
		return
	}
	local := req.Opts.Read == automaton.ReadLocal || req.Opts.Read == automaton.ReadRegular
	if local && a.m != nil && !automaton.IsSessionEnd(req.Op) && automaton.IsReadRequest(a.cfg.Service, req) {
		a.respond(req.ID, a.m.read(req))
		return
	}
	if a.role == rolePrimary && !a.collecting {
		a.serve(req, "")
		return
	}
	a.forward(req) // a collecting primary holds it in fwds (serveHeld)
}

func (a *PB) respond(id automaton.RequestID, o outcome) {
	a.Emit(automaton.Respond{Resp: automaton.Response{ID: id, Result: o.res, Results: o.results}})
}

// sortedNodes returns the keys of a peer map in order (outputs must not
// depend on map order: the simulator replays seeds byte for byte).
func sortedNodes[V any](m map[automaton.NodeID]V) []automaton.NodeID {
	out := make([]automaton.NodeID, 0, len(m))
	for n := range m {
		out = append(out, n)
	}
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

func contains(ns []automaton.NodeID, n automaton.NodeID) bool {
	for _, x := range ns {
		if x == n {
			return true
		}
	}
	return false
}
