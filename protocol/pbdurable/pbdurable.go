package pbdurable

import (
	"fmt"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Names of the protocol and its broken variant.
const (
	Name                = "pbdurable"
	BrokenReplyBeforeDB = "pbdurable-broken-replybeforedb"
	BrokenNoPrepare     = "pbdurable-broken-noprepare"
	BrokenTakeOver      = "pbdurable-broken-takeover"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"primary-backup whose state objects are replicated, in a database or reconstructible, per the mapping (the Grid Services thesis ch. IV)")})
	automaton.RegisterBroken(Name, protocol{replyBeforeDB: true, Capabilities: capabilities(BrokenReplyBeforeDB,
		"answers before the request's database transaction committed; caught by the invariant reply-after-durable")})
	automaton.RegisterBroken(Name, protocol{noPrepare: true, Capabilities: capabilities(BrokenNoPrepare,
		"backups apply an update buffer on arrival, before the request's database transaction committed; caught by the invariant all-or-nothing")})
	automaton.RegisterBroken(Name, protocol{soloTakeOver: true, Capabilities: capabilities(BrokenTakeOver,
		"the seed's switch_to_primary as is (earlier versions): a new primary serves with its own state, without its peers' promises, and a primary answers with no backup holding the write; with a slow disk the old primary drops its backups and answers alone while a backup takes over: acknowledged writes are lost, caught by the linearizability checker (TestTakeOverSlowDisk)")})
}

// capabilities is the registration of the protocol or a variant.
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// A retried write is answered from Replies (replies.go).
		Idempotent: true,
		// Primary-backup's perfect failure detector (package doc). A power
		// loss of the whole cluster is survived since its state is durable
		// (issue 29): the conformance suite's "power loss" scenario passes
		// (seeds 1-12 of it too).
		SafeFaults: []string{"crash", "dup", "reorder", "slow", automaton.PowerLoss},
		Params:     params.Defaults(),
	}
}

var params = proto.NewSpec(
	proto.Param{Name: "mapping", Kind: proto.String, Default: "db",
		Doc: "the durability mapping of the service's state objects (counter: durability/examples/counter/<mapping>.yaml; other services: the State object's mapping in service.go)"},
	proto.Param{Name: "rate_sending", Kind: proto.Duration, Default: "20ms", Min: "0", MinOpen: true, Doc: "the primary's heartbeat interval"},
	proto.Param{Name: "rate_checking", Kind: proto.Duration, Default: "250ms", Min: "0", MinOpen: true, Doc: "the failure detector's check period; at least 2 rate_sending"},
	proto.Param{Name: "suspect_checks", Kind: proto.Int, Default: "3", Min: "1",
		Doc: "consecutive silent check periods after which the senior backup takes over (the next ranks 3 periods later each); a pause or a starved process silent for less than suspect_checks x rate_checking causes no take-over (package doc, \"Failure detection\")"},
	proto.Param{Name: "op_timeout", Kind: proto.Duration, Default: "2s", Min: "0", MinOpen: true, Doc: "a forwarded request's time limit at the node the client reached"},
	proto.Param{Name: sqlstore.ParamDriver, Kind: proto.String, Default: "sqlite", Doc: "the database driver: sqlite or pgx (read by the durability.sql executor)"},
	proto.Param{Name: sqlstore.ParamDSN, Kind: proto.String, Default: "", Doc: "the database every node uses (shared: a new primary recovers from it); empty: <data dir>/durability-<namespace>.db"},
	proto.Param{Name: sqlstore.ParamSync, Kind: proto.Bool, Default: "true", Doc: "state fsync: a commit is durable before it returns"},
	proto.Param{Name: paramUnsafeTakeOver, Kind: proto.Bool, Default: "false", Doc: "ignored since session 45 (it accepted mapping pbdb on several nodes with durability fsync, refused before pbdb's take-overs kept all-or-nothing: package doc)"},
)

// protocol is the registered value: its capabilities, and the variant.
type protocol struct {
	automaton.Capabilities
	replyBeforeDB bool
	// noPrepare: a backup applies an update buffer when it arrives, before
	// the request's database transaction committed (caught by the
	// invariant all-or-nothing).
	noPrepare bool
	// soloTakeOver: take-overs collect no promises and answers need no
	// backup (takeover.go's rules off: the seed's protocol as is).
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
	svc, err := newDurable(cfg.Service, prm.String("mapping"))
	if err != nil {
		return nil, fmt.Errorf("%s: %v", p.Protocol, err)
	}
	a := &PBD{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, pos: pos, me: me, svc: svc,
		sending:       prm.Duration("rate_sending"),
		checking:      prm.Duration("rate_checking"),
		opTimeout:     prm.Duration("op_timeout"),
		mapping:       prm.String("mapping"),
		suspectChecks: prm.Int("suspect_checks"),
	}
	if a.checking < 2*a.sending {
		return nil, fmt.Errorf("%s: rate_checking %v must be at least twice rate_sending %v", p.Protocol, a.checking, a.sending)
	}
	return a, nil
}

// Timers.
const (
	timerHeartbeat automaton.TimerID = 1
	timerCheck     automaton.TimerID = 2
	// timerRecover retries a recovery the database refused, one
	// checking period later (not at once: a database that is down would
	// otherwise be asked again in a loop).
	timerRecover automaton.TimerID = 3
	// timerRetryTx runs again a request's transaction the database
	// refused (primary.go OnEffectDone).
	timerRetryTx automaton.TimerID = 4
)

// recordBooted tells a later incarnation that its memory is gone.
const recordBooted = "pbd/booted"

// PBD is one node's automaton: primary, backup, joiner and forwarder.
type PBD struct {
	proto.Outbox
	proto     protocol
	cfg       automaton.Config
	pos       map[automaton.NodeID]int
	me        int
	svc       durable
	mapping   string
	sending   time.Duration
	checking  time.Duration
	opTimeout time.Duration
	// suspectChecks: consecutive silent check periods before the senior
	// backup takes over (promoteAfter).
	suspectChecks int

	view   proto.Ballot // Node = the primary's position + 1
	synced bool         // holds the view's replicated objects
	index  uint64       // updates executed (primary) or prepared (backup)
	// applied: updates applied (a backup applies a prepared buffer once
	// the primary's commit index reaches it, or at once when the request
	// has no database transaction and every earlier one is applied);
	// dbApplied: the last applied update whose request had a database
	// transaction.
	applied, dbApplied uint64
	// commit: the primary's commit index (every shipped update up to it
	// is answered, its transaction committed); a backup's last known one.
	commit uint64

	// failure detector (backup)
	heard  bool
	misses int

	// primary
	primary    bool
	ready      bool // every state object restored
	members    map[automaton.NodeID]*member
	queue      []*pending                        // answers in execution order
	queued     map[automaton.RequestID]*pending  // queue by request
	waiting    []waitReq                         // requests that arrived before ready
	effects    map[automaton.EffectID][]*pending // a transaction's group (issue)
	recoverFx  automaton.EffectID
	nextEffect automaton.EffectID
	inflight   bool
	// batching: the requests of a client batch (or a batch message) are
	// executing; issue and release wait for the batch's end (batch.go).
	batching bool
	// ackTo: the primary a batch of update buffers came from, owed one
	// acknowledgement at the batch's end ("" when none).
	ackTo automaton.NodeID

	done      map[automaton.RequestID]service.Result
	doneOrder []automaton.RequestID

	// backup: the prepared update buffers, by index
	held map[uint64]prepared

	// recovered is set in the step a new primary finished its recovery,
	// for the invariant all-or-nothing: the database's commit index and
	// whether the mapping has both replicated and database objects.
	recovered *recovery

	// forwarder
	fwd map[automaton.RequestID]*forward

	// for the invariants: answers released in the last step
	released []*pending

	// restarted: this incarnation began from a durable view (durable.go);
	// recoverPayload: the recovery effect, issued again if it fails.
	restarted      bool
	recoverPayload *sqlstore.Payload

	// Durable replicated objects (durable.go): the image's index, the
	// last buffer persisted, the view of the durable state; while
	// recovering, the views the restarted nodes reported.
	snapAt, persistedTo uint64
	stateView           proto.Ballot
	recovering          bool
	reports             map[automaton.NodeID]report

	// Take-overs (takeover.go): the view of the replicated state this
	// node holds in memory (zero: none); a new primary's suspected
	// predecessor, the promises it collects, and its recovery's result
	// while it waits for them.
	memView proto.Ballot
	// Under two mechanisms (pbdb), the primary's durable state kept in
	// memory too: the image at snapAt (persistState) and the buffers it
	// executed since (persistBuffer), from which a primary that steps
	// down reports the decided state and the buffers for the next
	// primary's recovery to decide (takeover.go stepDownState).
	snapImg      []byte
	own          map[uint64]prepared
	suspect      automaton.NodeID
	collecting   bool
	promised     bool // sent a promise in this view
	promises     map[automaton.NodeID]msg
	recoveryDone bool
	recoveryRes  sqlstore.Result
}

// prepared is an update buffer a backup holds until it may apply it.
type prepared struct {
	ups []durability.Update
	db  bool
}

type recovery struct{ dbCommit uint64 }

// member is a backup of the primary's view.
type member struct {
	acked      uint64
	needsState bool
	silent     int // check periods without an acknowledgement
}

// pending is one request at the primary, from execution to its answer.
type pending struct {
	id       automaton.RequestID
	from     automaton.NodeID // "" for a local client
	res      service.Result
	stmts    []durability.Stmt
	fx       automaton.EffectID // 0 until issued
	dbDone   bool
	ship     uint64 // the update's index, 0 when nothing was shipped
	ups      []durability.Update
	answered bool
}

type waitReq struct {
	from automaton.NodeID
	req  automaton.Request
}

type forward struct {
	view proto.Ballot
	age  int
}

func (a *PBD) send(to automaton.NodeID, m msg) { a.Send(to, m.encode()) }

func (a *PBD) primaryID() automaton.NodeID {
	if a.view.Node == 0 {
		return ""
	}
	return a.cfg.Nodes[a.view.Node-1]
}

// Leader implements automaton.LeaderReporter.
func (a *PBD) Leader() automaton.NodeID { return a.primaryID() }

// Step implements automaton.Automaton.
func (a *PBD) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.released, a.recovered = nil, nil
	proto.Dispatch(a, in)
	if proto.BatchStep(in, kindBatch) {
		// A batch's messages to one peer leave as one (batch.go); other
		// steps' outputs stay as they were.
		a.Out = header.Coalesce(a.Out, kindBatch)
	}
	return a.Out
}

// OnRequest: a client's request (primary.go serve).
func (a *PBD) OnRequest(req automaton.Request) { a.serve("", req) }

// Validator implements proto.Validating: a client's request is validated
// where it arrives, a forwarded one is trusted.
func (a *PBD) Validator(automaton.Request) service.Service { return a.cfg.Service }

// Invalid implements proto.Validating.
func (a *PBD) Invalid(req automaton.Request, r service.Result) { a.answerTo("", req.ID, r) }

// OnStart: the first incarnation of the cluster's first node is the
// primary of view 1: it initialises the database objects (init
// statements, idempotent) and recovers them from what the database holds
// (the Grid Services thesis IV.C.1: a new instance restores its state from the database;
// an existing database is recovered, never emptied), claims the view
// table, and serves; the others are its synced backups. A later
// incarnation whose mapping keeps no replicated object is a synced backup
// of its durable view (durable.go); one with replicated objects lost its
// memory: it joins (package doc).
func (a *PBD) OnStart(in automaton.Start) {
	a.members, a.effects = map[automaton.NodeID]*member{}, map[automaton.EffectID][]*pending{}
	a.queued = map[automaton.RequestID]*pending{}
	a.held, a.fwd = map[uint64]prepared{}, map[automaton.RequestID]*forward{}
	a.Emit(automaton.SetTimer{ID: timerCheck, After: a.checking})
	if a.restartDurable(in) || a.restartReplicated(in) {
		return
	}
	if _, restarted := in.Records[recordBooted]; restarted {
		a.sendJoin()
		return
	}
	a.Emit(automaton.Persist{Key: recordBooted, Value: []byte{1}})
	a.view, a.synced = proto.Ballot{Round: 1, Node: 1}, true
	a.memView = a.view
	a.saveView()
	a.svc.set().SetRole(durability.Backup)
	if a.me != 0 {
		return
	}
	a.primary = true
	for _, n := range a.cfg.Nodes[1:] {
		a.members[n] = &member{}
	}
	a.svc.set().SetRole(durability.Primary)
	// The commit index restarts with this cluster's indexes; the view
	// table is claimed (a fresh cluster owns the database it is given).
	stmts := append([]durability.Stmt{}, a.svc.set().Init().SQL...)
	if a.twoMechanisms() {
		stmts = append(stmts, commitTable, durability.Stmt{Object: commitObject, SQL: commitReset})
	}
	if a.hasDatabase() {
		stmts = append(stmts, viewTable, durability.Stmt{Object: viewObject, SQL: viewEnsure},
			durability.Stmt{Object: viewObject, SQL: viewClaim, Args: []durability.Value{viewNumber(a.view)}})
	}
	a.startRecovery(&sqlstore.Payload{Stmts: stmts, Queries: a.recoveryQueries()})
	a.Emit(automaton.SetTimer{ID: timerHeartbeat, After: a.sending})
}

func (a *PBD) sendJoin() {
	for _, n := range a.cfg.Nodes {
		if n != a.cfg.Self {
			a.send(n, msg{kind: kindJoin, view: a.view})
		}
	}
}

// OnMessage: a peer's message, decoded and handed to its handler.
func (a *PBD) OnMessage(from automaton.NodeID, raw []byte) {
	if len(raw) > 1 && raw[1] == kindBatch {
		a.onBatchMessage(from, raw)
		return
	}
	m, err := decode(raw)
	if err != nil {
		return
	}
	a.onMsg(from, m)
}

// onMsg hands a decoded message to its handler.
func (a *PBD) onMsg(from automaton.NodeID, m msg) {
	switch m.kind {
	case kindHeartbeat:
		a.onHeartbeat(from, m)
	case kindUpdate:
		a.onUpdate(from, m)
	case kindAck:
		a.onAck(from, m)
	case kindState:
		a.onState(from, m)
	case kindJoin:
		a.onJoin(from, m)
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

// adopt moves to a later view: a primary steps down, everyone waits for
// the new primary's state.
func (a *PBD) adopt(v proto.Ballot) {
	if a.view.Less(v) {
	}
	if !a.view.Less(v) {
		return
	}
	a.view, a.synced, a.heard, a.misses = v, false, true, 0
	a.restarted = false
	a.saveView()
	if a.primary {
		a.stepDownState()
		a.primary, a.ready = false, false
		a.Emit(automaton.CancelTimer{ID: timerHeartbeat})
		for _, p := range a.queue {
			if !p.answered {
				a.answer(p, service.Fail(synoderr.TryAgain, "the primary stepped down (the outcome is unknown)"))
			}
		}
		a.queue, a.waiting = nil, nil
		clear(a.queued)
	}
	a.svc.set().SetRole(durability.Backup)
	a.collecting, a.promised = false, false
	if !a.collects() {
		a.held = map[uint64]prepared{}
	}
	// Otherwise the held buffers stay: they are part of the state this
	// node reports in its promise (takeover.go) until a state replaces
	// them.
	// In request order, not map order: the answers are outputs, and a seed
	// must replay them byte for byte (expireForwards does the same).
	ids := make([]automaton.RequestID, 0, len(a.fwd))
	for id := range a.fwd {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		if f := a.fwd[id]; f.view.Less(v) {
			delete(a.fwd, id)
			a.Respond(id, service.Fail(synoderr.TryAgain, "the primary changed (a write's outcome is unknown)"))
		}
	}
}

// OnTimer: HEARTBEAT_GENERATOR and FAILURE_DETECTOR (the Grid Services thesis Figs.
// III.2, III.3), and forwards that timed out.
func (a *PBD) OnTimer(id automaton.TimerID) {
	switch id {
	case timerHeartbeat:
		if a.primary {
			for _, n := range a.cfg.Nodes {
				if n != a.cfg.Self {
					a.send(n, msg{kind: kindHeartbeat, view: a.view, index: a.index, commit: a.commit})
				}
			}
			a.Emit(automaton.SetTimer{ID: timerHeartbeat, After: a.sending})
		}
	case timerRecover:
		if a.primary && !a.ready {
			a.startRecovery(a.recoverPayload)
		}
	case timerRetryTx:
		if a.primary {
			a.inflight = false
			a.issue()
		}
	case timerCheck:
		a.Emit(automaton.SetTimer{ID: timerCheck, After: a.checking})
		a.expireForwards()
		if a.primary {
			a.checkBackups()
			return
		}
		a.checkPrimary()
	}
}

func (a *PBD) expireForwards() {
	limit := int(a.opTimeout / a.checking)
	ids := make([]automaton.RequestID, 0, len(a.fwd))
	for id := range a.fwd {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		f := a.fwd[id]
		if f.age++; f.age > limit {
			delete(a.fwd, id)
			a.Respond(id, service.Fail(synoderr.TryAgain, "the primary did not answer within %v (a write's outcome is unknown)", a.opTimeout))
		}
	}
}

// checkPrimary is FAILURE_DETECTOR at a backup: rank r (1 is the senior)
// takes over after suspect_checks + 3(r-1) consecutive check periods
// without a word from the primary (promoteAfter; package doc, "Failure
// detection").
func (a *PBD) checkPrimary() {
	if a.recovering {
		a.sendReports(true)
		a.elect()
		return
	}
	if !a.synced {
		a.sendJoin()
		a.sendPromise()
		return
	}
	if a.heard {
		a.heard, a.misses = false, 0
		return
	}
	a.misses++
	n := len(a.cfg.Nodes)
	rank := (a.me - int(a.view.Node-1) + n) % n
	if a.misses >= a.promoteAfter(rank) {
		a.takeOver()
	}
}
