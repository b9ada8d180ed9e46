package esds

import (
	"fmt"
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities("esds", optParams,
		"ESDSOptAlg (the ESDS thesis Fig. 4.5): incremental gossip over reliable streams, memoised stable state, garbage collection")})
	automaton.Register(protocol{unopt: true, Capabilities: capabilities("esds-unopt", unoptParams,
		"ESDSAlg (the ESDS thesis Figs. 4.1, 4.2): full-state gossip, values recomputed from the initial state")})
	// Deliberately broken variants, kept so that the ESDS checker and the
	// invariants can be shown to catch them (see the package doc). Never use
	// them for data.
	automaton.RegisterBroken("esds", protocol{earlyStrict: true, Capabilities: capabilities("esds-broken-earlystrict", optParams,
		"answers strict operations once done locally, before they are stable everywhere (send_{r,f} precondition, the ESDS thesis Fig. 4.2); the ESDS checker catches a strict answer that differs from the operation's value in the eventual order")})
	automaton.RegisterBroken("esds", protocol{maxLabel: true, Capabilities: capabilities("esds-broken-maxlabel", optParams,
		"merges labels by maximum instead of minimum (receive gossip, Fig. 4.2); the invariant \"labels only decrease\" catches it at the first merge, the ESDS checker later (replicas disagree, strict answers differ)")})
	automaton.RegisterBroken("esds", protocol{dupLabel: true, Capabilities: capabilities("esds-broken-duplabel", optParams,
		"labels operations (counter, 0) whatever the replica, so two replicas give one label to different operations (§4.2.3); the invariant \"labels unique\" catches it at the second do_it")})
	automaton.RegisterBroken("esds", protocol{readNoPrev: true, Capabilities: capabilities("esds-broken-localread", optParams,
		"runs reads=local and answers a non-strict read from the replica's view even when its prev ids are not done there (the ESDS spec's valset needs every prev operation in the set the value is computed from); the ESDS checker catches a read whose value no set containing its prev can give")})
	automaton.RegisterBroken("esds", protocol{doubleReserve: true, Capabilities: capabilities("esds-broken-doublereserve", optParams,
		"runs impl=simple (SimpleESDSImpl) and grants a reservation request while reserved for another replica, dropping the first reservation (reservation system, the ESDS thesis §3.3.5); the invariant \"reservation 3.3.1\" catches a replica holding a reservation its grantor no longer keeps")})
}

// capabilities is the registration of the protocol or a variant, whose
// parameter table is spec (its request options, deployment check,
// scenarios, model and invariants are methods: options.go, deploy.go,
// scenarios.go, model.go, invariant.go).
func capabilities(name string, spec *proto.Spec, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// An operation is identified by its id, so a retry of the same
		// request (same RequestID, hence the same assigned id, or the
		// same client-chosen op id) at any node joins the one operation;
		// it appears once in the eventual total order.
		Idempotent:  true,
		Consistency: automaton.EventuallySerializable,
		// Every parameter New accepts, with its default, as a cluster
		// file spells it.
		Params: spec.Defaults(),
	}
}

// protocol is the registration: its capabilities and the variants'
// switches.
type protocol struct {
	automaton.Capabilities
	unopt       bool // ESDSAlg instead of ESDSOptAlg by default
	earlyStrict bool // broken: strict operations answered once done locally
	maxLabel    bool // broken: gossip merges labels by maximum
	dupLabel    bool // broken: labels leave out the replica id
	// broken (reads=local forced): a non-strict read is answered locally
	// even when its prev ids are not done here.
	readNoPrev bool
	// broken (impl=simple): a reserved replica grants another request,
	// forgetting the reservation it holds for the first requester.
	doubleReserve bool
}

// StepsClientBatches implements automaton.BatchStepper: a ClientBatch's
// requests are submitted one after the other in one step (each request_c
// as alone), and the step's messages to one peer leave as one batch
// message (msg.go, kindBatch).
func (p protocol) StepsClientBatches() bool { return true }

// params is the parameter table; the variant's default is the registered
// name's (esds: opt, esds-unopt: unopt).
func (p protocol) params() *proto.Spec {
	if p.unopt {
		return unoptParams
	}
	return optParams
}

var optParams, unoptParams = paramSpec("opt"), paramSpec("unopt")

func paramSpec(variant string) *proto.Spec {
	return proto.NewSpec(
		proto.Param{Name: "gossip", Kind: proto.Duration, Default: DefaultGossip.String(), Min: "0", MinOpen: true, Words: []string{"off"},
			Doc: "gossip interval; off: replicas learn only through front ends (experiments.go)"},
		proto.Param{Name: "retransmit", Kind: proto.Duration, Default: DefaultRetransmit.String(), Min: "0", MinOpen: true,
			Doc: "stream resend interval, rounded up to gossip intervals"},
		proto.Param{Name: "batch", Kind: proto.Int, Default: strconv.Itoa(DefaultBatch), Min: "1",
			Doc: "operations per stream message"},
		proto.Param{Name: "drain", Kind: proto.Duration, Default: "5ms", Min: "0", MinOpen: true, Words: []string{"off"},
			Doc: "off: a stream sends at gossip ticks only; a duration (5ms, the default since session 45): a stream with min(batch, 128) positions unsent sends its next message this soon instead of at the next tick, while at most 2 batches are unacknowledged (stream.go onDrain; package doc, Stream cadence)"},
		proto.Param{Name: "stability", Kind: proto.Enum, Default: "prefix", Choices: []string{"prefix", "positions"},
			Doc: "how a replica tells its peers what is stable here: prefix, one label per stream message (every operation up to it is stable here; stable_prefix.go), or positions, a stream position per operation that becomes stable here (before session 45)"},
		proto.Param{Name: "widen", Kind: proto.Bool, Default: "false",
			Doc: "under a backlog of more than 4 batches, one stream message carries the whole backlog up to 32 batches (stream.go streamWindow): bounds rebuilds, costs put throughput (package doc, Gossip backlog)"},
		proto.Param{Name: "variant", Kind: proto.Enum, Default: variant, Choices: []string{"opt", "unopt"},
			Doc: "ESDSOptAlg (Fig. 4.5) or ESDSAlg (Figs. 4.1, 4.2)"},
		proto.Param{Name: "values", Kind: proto.Enum, Default: "memo", Choices: []string{"memo", "recompute"},
			Doc: "memoise the stable state, or recompute values from the initial state"},
		proto.Param{Name: "removed", Kind: proto.List, Default: "",
			Doc: "replicas removed from the membership (node ids)"},
		proto.Param{Name: "send", Kind: proto.Enum, Default: "1", Choices: []string{"1", "2", "all"},
			Doc: "front end: replicas each operation is sent to, from its own around the ring (frontend.go)"},
		proto.Param{Name: "resend", Kind: proto.Duration, Default: "off", Min: "0", MinOpen: true, Words: []string{"off"},
			Doc: "front end: resend a waiting operation to the next replica this often, rounded up to gossip intervals"},
		proto.Param{Name: "maxsends", Kind: proto.Int, Default: "2", Min: "1",
			Doc: "front end: cap on sends of one operation to one replica"},
		proto.Param{Name: "replicas", Kind: proto.List, Default: "",
			Doc: "nodes holding a replica (node ids; empty: every node); the others run front ends only (frontend_only.go)"},
		proto.Param{Name: "prev_timeout", Kind: proto.Duration, Default: DefaultPrevTimeout.String(), Min: "0", MinOpen: true,
			Doc: "front end: an operation whose prev set is not all done here after this long is answered an error (frontend.go expirePrevWaits)"},
		proto.Param{Name: "volatile", Kind: proto.Bool, Default: "false",
			Doc: "accept durability memory with more than one replica (refused otherwise: package doc, Durability memory); for runs without restarts, as the ESDS thesis's"},
		proto.Param{Name: "reads", Kind: proto.Enum, Default: "ordered", Choices: []string{"ordered", "local"},
			Doc: "non-strict reads: labelled, persisted and gossiped like every operation (Fig. 4.2), or answered from the replica's view when their prev ids are done there, without a label, record or gossip (frontend.go localRead; package doc, Local reads)"},
		proto.Param{Name: "impl", Kind: proto.Enum, Default: "optimised", Choices: []string{"optimised", "simple"},
			Doc: "gossip over asynchronous channels (ESDSImpl, §3.3.6) or I/O combinations with reservations (SimpleESDSImpl, §3.3.4-5; reserve.go)"},
	)
}

// Defaults for the protocol parameters.
const (
	DefaultGossip     = 20 * time.Millisecond
	DefaultRetransmit = 100 * time.Millisecond
	// DefaultPrevTimeout bounds the wait for an operation's prev set (frontend.go).
	DefaultPrevTimeout = 10 * time.Second
	DefaultBatch       = 512
	resultCacheSize    = 4096
	gcEveryTicks       = 10
	maxReplicas        = 64

	timerGossip automaton.TimerID = 1
	// timerDrain: a backlogged stream's next message (stream.go onDrain).
	timerDrain automaton.TimerID = 3

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
	index, self, err := proto.Positions("esds", cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	prm, err := p.params().Parse("esds", cfg.Params)
	if err != nil {
		return nil, err
	}
	a := &ESDS{
		Outbox:     proto.Outbox{Self: cfg.Self},
		proto:      p,
		cfg:        cfg,
		svc:        cfg.Service,
		index:      index,
		self:       self,
		unopt:      prm.String("variant") == "unopt",
		recompute:  prm.String("values") == "recompute",
		gossipIvl:  prm.Duration("gossip"),
		gossipOff:  prm.Word("gossip") == "off", // experiments.go: replicas learn only through front ends
		retransmit: prm.Duration("retransmit"),
		batch:      prm.Int("batch"),
		widen:      prm.Bool("widen"),
		drainIvl:   prm.Duration("drain"),
		drainOff:   prm.Word("drain") == "off",
		spPrefix:   prm.String("stability") == "prefix",
		readsLocal: prm.String("reads") == "local" || p.readNoPrev,
	}
	if a.gossipOff {
		a.gossipIvl = DefaultGossip
	}
	if a.all, err = replicaSet(cfg, index, prm.List("replicas")); err != nil {
		return nil, err
	}
	a.feOnly = a.all&a.bit() == 0
	for _, s := range prm.List("removed") {
		i, ok := a.index[automaton.NodeID(s)]
		if !ok {
			return nil, fmt.Errorf("esds: parameter removed: %q is not a node", s)
		}
		if a.all&(1<<i) == 0 {
			return nil, fmt.Errorf("esds: parameter removed: %q is not a replica (parameter replicas)", s)
		}
		if i == a.self {
			return nil, fmt.Errorf("esds: parameter removed: %s lists itself", cfg.Self)
		}
		a.removedParam |= 1 << i
	}
	a.retxTicks = int((a.retransmit + a.gossipIvl - 1) / a.gossipIvl)
	switch prm.String("send") {
	case "all":
		a.sendN = 0
	default:
		a.sendN, _ = strconv.Atoi(prm.String("send"))
	}
	if prm.Word("resend") != "off" {
		a.resendTicks = int((prm.Duration("resend") + a.gossipIvl - 1) / a.gossipIvl)
	}
	a.maxSends = prm.Int("maxsends")
	a.prevTicks = int((prm.Duration("prev_timeout") + a.gossipIvl - 1) / a.gossipIvl)
	a.simple = prm.String("impl") == "simple" || p.doubleReserve
	return a, nil
}

// ESDS is one node's replica and front end for one namespace.
type ESDS struct {
	// merging: a gossip message is being merged; newInfo collects the
	// operations to queue in held, queued in label order once the merge
	// is done (gossip.go receiveGossip).
	merging bool
	held    []*op
	proto   protocol
	cfg     automaton.Config
	svc     service.Service
	index   map[automaton.NodeID]int
	self    int
	all     uint64 // a bit per configured replica (parameter replicas)
	// feOnly: this node holds no replica, only a front end
	// (frontend_only.go).
	feOnly bool

	unopt                 bool
	gossipIvl, retransmit time.Duration
	retxTicks, batch      int
	widen                 bool // parameter widen (stream.go streamWindow)
	// Parameter drain (stream.go onDrain): the interval, off, and whether
	// the drain timer is set.
	drainIvl           time.Duration
	drainOff, drainSet bool
	// spPrefix: parameter stability=prefix (stable_prefix.go): stream
	// messages carry the sender's stable prefix, and no position is queued
	// for an operation's becoming stable here; sp is that prefix as last
	// computed (solidPrefix).
	spPrefix bool
	sp       Label
	spOp     *op // the operation labelled sp
	// spRec: the stable prefix last persisted (record "p", store.go
	// flushDirty): every operation done here labelled at most it is
	// stable here, so its record need not say so.
	spRec Label
	// readsLocal: parameter reads=local (frontend.go localRead); reads
	// holds the ids of the reads answered so, for prev sets naming them,
	// and localReads counts them.
	readsLocal           bool
	reads                idSummary
	localReads           int
	removedParam         uint64
	gossipOff, recompute bool // experiments.go
	// simple: impl=simple, gossip through I/O combinations guarded by
	// reservations (reserve.go, combination.go); resv is their state.
	simple bool
	resv   *reservations

	inc     uint64 // this incarnation
	removed uint64 // replicas removed from the membership

	// Replica state (Fig. 4.2 / 4.5). An operation is in rcvd when it is in
	// ops; in done_r[r] when it has a label; done[i], solid[i] are bit masks.
	ops     map[string]*op
	waiting []*op  // rcvd − done_r[r], in arrival order
	counter uint64 // lbl-counter: at least every label counter seen
	// counterDirty: persist counter (recCounter) with this step's records.
	counterDirty bool
	arrival      uint64

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
	// Checkpoints of the tentative state (apply.go): where a recomputation
	// may start instead of the stable state. tentLow is the lowest label
	// placed under tentMax (or whose value was dropped) since the last
	// recomputation; the checkpoints at or above it are stale.
	ckpts    []tentCkpt
	tentLow  Label
	ckptUsed int // rebuilds started from a checkpoint (tests)
	// touch, touchAll: per key, the largest label applied to the tentative
	// state naming it, and the largest of an operation that is not
	// key-local (apply.go tentInsert); commuted: insertions done in place.
	touch    map[string]Label
	touchAll Label
	commuted int
	// pendKeys, pendAll: the keys a stale tentative state may hold
	// wrongly, or all of them (apply.go notePending, staleAppend);
	// staleApplied: operations applied to a stale state (tests).
	pendKeys map[string]bool
	pendAll  bool
	// pendNonLocal: an operation that is not key-local was done or
	// placed since the last rebuild and not applied to the tentative
	// state (apply.go keyValue).
	pendNonLocal bool
	staleApplied int
	// ckptFinalUsed: those started from a checkpoint at the final
	// frontier; ckptFinalStale: such checkpoints a placed label landed
	// under (tests: never, see finalFrontier).
	ckptFinalUsed, ckptFinalStale int
	// replayed, maxReplay: operations applied by rebuilds of the tentative
	// state, in all and at most in one (benchmarks: the event loop's
	// longest blocking work); merged: gossip entries merged.
	replayed, maxReplay, merged int
	// freeAnswers: answers given without the tentative state
	// (service.StateFree, apply.go value); keyAnswers: those computed
	// over their keys alone (apply.go keyValue).
	freeAnswers, keyAnswers int
	// heard[i]: the highest label of origin i (a label (c, i)) received
	// in gossip since the start; the final frontier (apply.go) is their
	// minimum over the other members.
	heard []Label

	// Indexes (index.go).
	dna         []*op
	dnaNew      []*op
	byKey       map[string][]*op
	byKeyFree   [][]*op // emptied byKey lists, for reuse (index.go keyIndex)
	maxSolid    Label
	appliedLive []*op
	// byKeyOn: byKey is kept (built when overKeys first needs it);
	// byKeyUsed: overKeys read it since the last gossip tick, which
	// drops it otherwise (index.go keyIndexOn, keyIndexIdle); the
	// builds and drops so far (tests).
	byKeyOn, byKeyUsed            bool
	keyIndexBuilds, keyIndexDrops int

	gcd idSummary
	// snapLen: the size of the stable state's last snapshot (record "s");
	// gcSkipped: collections put off since, gcLastN: operations they could
	// have collected at the last (collectDue).
	snapLen, gcSkipped, gcLastN int
	// gcCursor: where in appliedLive the next incremental collection
	// starts examining (gc.go collectEveryTick).
	gcCursor int
	// uncompacted: the record keys (recOp+id, op.recKey) and labels of
	// the collected operations whose records are kept for record "g"
	// (gc.go collectDelta) until an "s" whose snapshot holds them;
	// deltaWritten: a "g" was written since the last "s".
	uncompacted []keptRec
	// rw: the rewrite of "s" under way, its snapshot encoded a part a
	// tick from a copy of the stable state (rewrite.go).
	rw *rewrite
	// stale: the records "s" stands for, in segments (queueStale), to
	// delete at most gcPerTick a tick (gc.go dropStale): a large state's
	// collection that rewrites "s" no longer deletes tens of thousands in
	// its step, nor copies their keys into one queue.
	stale [][]keptRec
	// staleN: the records in stale.
	staleN int
	// lockBuf: readLocks's scratch array.
	lockBuf []service.Lock
	// flushBuf: flushDirty's list of the step's dirty operations, kept
	// empty between steps for its capacity.
	flushBuf     []*op
	deltaWritten bool
	// stableOrder keeps the stable state's sorted keys between its
	// snapshots (service.KeyOrder), when the state is a KV.
	stableOrder service.KeyOrder
	// goneQ: collected operations whose "gone" entry some peers (bits) have
	// not acknowledged yet.
	goneQ      map[string]uint64
	results    []resultEntry // values of garbage-collected operations (gc.go keepResult's ring)
	resultHead int           // results' oldest once full

	// pending_r: for each operation, the front ends (a bit per node
	// position) waiting for this replica's response.
	pending map[string]uint64

	// Front end (frontend.go): wait_f, the send policy (rept_f is empty
	// between steps: receiveResponse).
	wait                         map[string]*feOp
	sendN, resendTicks, maxSends int
	prevTicks                    int // prev_timeout in gossip ticks
	feSends                      uint64
	replicaReqs                  uint64 // receive_{f,r}("request") at this replica

	peers []peer
	tick  int

	recording bool
	orderLog  []string

	// dirtyOps: the operations whose durable part (o/<id>) may have
	// changed in this step (those with op.dirty set: markDirty);
	// membersDirty: the removed set did (record "m"). Kept apart: "m" is
	// a valid operation id.
	dirtyOps     []*op
	membersDirty bool
	seen         map[string]bool    // sendStream's scratch
	entBuf       []entry            // sendStream's entries, reused once encoded
	recvBuf      []entry            // onMessage1's decoded entries, reused once merged
	proto.Outbox                    // sends and responses, released after persists
	persists     []automaton.Output // persists of this step
	// spareOp: the replica's operation allocated with the front end's
	// (requestC, feAndOp), for replicaRequest in the same call; nil
	// otherwise.
	spareOp *op
}

// op is one operation object (the ESDS thesis §4.2.2): the descriptor plus this
// replica's bookkeeping.
type op struct {
	id      string
	rkey    string // recOp+id once known (recKey)
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
	touched bool // its keys are in a.touch (apply.go noteTouch)
	inKeys  bool // in a.byKey (index.go keyIndex)
	// What newInfo last queued for gossip (flags without flagAll, label).
	qFlags byte
	qLabel Label
	qOK    bool
	// What the record o/<id> last persisted says (flushDirty skips rewriting
	// an identical record).
	pFlags byte
	pLabel Label
	pOK    bool
	// has: bit j when peer j has acknowledged this operation's descriptor
	// on our current stream to it (later entries go bare, stream.go).
	has uint64
	// gone: collected (gc.go); stream positions queued while it was live
	// point here and now say "gone".
	gone bool
	// dirty: in a.dirtyOps (markDirty), unless collected since.
	dirty bool
	// locks: the keyed service's Locks(sop), once computed (apply.go
	// opLocks): notePending, keyIndex, noteTouch, tentInsert and
	// staleAppend each asked for them, an allocation each.
	locks []service.Lock
	lock0 [1]service.Lock // locks' array for one lock (opLocks)
}

func (a *ESDS) members() uint64 { return a.all &^ a.removed }

func (a *ESDS) bit() uint64 { return 1 << a.self }

// markDirty notes that o's durable part (record o/<id>) may have changed
// in this step (flushDirty). A flag on the operation and a list, not a
// set of ids: a merge marks most of the operations it touches (issue 28).
func (a *ESDS) markDirty(o *op) {
	if !o.dirty {
		o.dirty = true
		a.dirtyOps = append(a.dirtyOps, o)
	}
}

// Step implements automaton.Automaton.
func (a *ESDS) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.persists = nil
	for _, o := range a.dirtyOps {
		o.dirty = false
	}
	clear(a.dirtyOps)
	a.dirtyOps = a.dirtyOps[:0]
	batch := proto.BatchStep(in, kindBatch) // a ClientBatch's requests step one by one (OnRequest)
	proto.Dispatch(a, in)
	if a.ops != nil {
		a.progress()
		if a.resv != nil {
			a.releaseRemoved()
		}
		a.flushDirty()
	}
	// The records first, then the sends and responses. A step without
	// records returns the outbox itself, and flushDirty sized the
	// records' slice for the outbox too: no copy of a grown slice.
	out := a.Out
	if len(a.persists) > 0 {
		out = append(a.persists, a.Out...)
	}
	a.persists, a.Out = nil, nil
	if batch {
		// A batch's messages to one peer leave as one (only in batch
		// steps: other steps' outputs, and the digests pinned for them,
		// stay as they were).
		out = header.Coalesce(out, kindBatch)
	}
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

// OnStart restores the persisted state (see the package doc) and starts the
// gossip timer.
func (a *ESDS) OnStart(s automaton.Start) {
	if a.feOnly {
		a.startFrontEndOnly()
		return
	}
	a.ops = map[string]*op{}
	a.waiting = nil
	a.dna, a.dnaNew, a.maxSolid, a.appliedLive, a.gcCursor = nil, nil, Label{}, nil, 0
	a.sp, a.spOp, a.spRec = Label{}, nil, Label{}
	a.pending = map[string]uint64{}
	a.wait = map[string]*feOp{}
	a.results, a.resultHead = nil, 0
	a.gcd = idSummary{}
	a.reads = idSummary{}
	a.uncompacted, a.deltaWritten, a.stale, a.staleN, a.rw = nil, false, nil, 0, nil
	a.goneQ = map[string]uint64{}
	a.stable = a.svc.NewState()
	a.stableMax = Label{}
	a.orderLog = nil
	a.tentValid = false
	a.ckpts, a.tentLow = nil, Label{}
	a.touch, a.touchAll = nil, Label{}
	a.tent, a.pendKeys, a.pendAll = nil, nil, false
	a.byKey, a.byKeyOn, a.byKeyUsed, a.pendNonLocal = nil, false, false, false
	a.heard = make([]Label, len(a.cfg.Nodes))
	a.removed = a.removedParam
	a.counter = 0
	if err := a.restore(s.Records); err != nil {
		panic(fmt.Sprintf("esds %s: corrupt persisted state: %v", a.cfg.Self, err))
	}
	// The restored operations were never noted (notePending): keyValue
	// waits for the first rebuild.
	a.pendNonLocal = len(a.dna)+len(a.dnaNew) > 0
	a.inc = a.cfg.Rand.Uint64() | 1
	a.peers = make([]peer, len(a.cfg.Nodes))
	a.drainSet = false
	for i := range a.peers {
		if i != a.self {
			a.resetStream(i)
		}
	}
	if a.simple {
		// Replicas started together would tick together and ask one
		// another at the same moment, every interval (reserve.go): the
		// first tick comes at a random phase of the interval.
		a.startReservations()
		a.Emit(automaton.SetTimer{ID: timerGossip, After: time.Duration(a.cfg.Rand.Int63n(int64(a.gossipIvl)) + 1)})
	} else {
		a.Emit(automaton.SetTimer{ID: timerGossip, After: a.gossipIvl})
	}
}

// onTick sends gossip, retransmits, and garbage-collects.
func (a *ESDS) onTick() {
	a.tick++
	a.Emit(automaton.SetTimer{ID: timerGossip, After: a.gossipIvl})
	if a.feOnly {
		a.resendWaiting()
		a.expirePrevWaits()
		return
	}
	for j := range a.peers {
		if j == a.self || a.removed&(1<<j) != 0 || !a.isReplica(j) || a.gossipOff || a.simple {
			continue
		}
		a.sendGossip(j)
	}
	if a.simple && !a.gossipOff {
		a.gossipDue() // by I/O combinations, one reservation at a time (reserve.go)
	}
	a.resendWaiting()
	a.expirePrevWaits()
	a.keyIndexIdle()
	if !a.unopt && (a.tick%gcEveryTicks == 0 || a.collectEveryTick()) {
		a.collect() // gc.go (collectEveryTick: incremental once the state is large)
	}
	a.armDrain()
}

func (a *ESDS) send(j int, b []byte) { a.Emit(automaton.Send{To: a.cfg.Nodes[j], Msg: b}) }

// OnTimer: gossip, and the reservation system's timers (reserve.go).
func (a *ESDS) OnTimer(id automaton.TimerID) {
	switch {
	case id == timerGossip:
		a.onTick()
	case id == timerDrain:
		a.onDrain()
	case a.resv == nil:
	case id == timerResv:
		a.onResvTimer()
	case id >= timerBackoff && id < timerBackoff+maxReplicas:
		a.backoffOver(int(id - timerBackoff))
	}
}
