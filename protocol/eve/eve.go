package eve

import (
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Name is the protocol's registered name.
const Name = "eve"

// Broken variants (package doc, "Broken variants").
const (
	BrokenEarlyReply = Name + "-broken-earlyreply"
	BrokenMinority   = Name + "-broken-minority"
	BrokenOwnState   = Name + "-broken-ownstate"
	BrokenNoRecovery = Name + "-broken-norecovery"
)

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"Eve execute-verify replication (the Eve/Adam thesis §2.2): a primary batches requests, execution replicas run the mixer's parallel batches and send MAC'd (start, end) Merkle tokens to verifiers, which agree to commit, commit with state transfer, or roll back to sequential re-execution with a new primary")})
	automaton.RegisterBroken(Name, protocol{earlyReply: true, Capabilities: capabilities(BrokenEarlyReply,
		"execution replicas answer their clients from their speculative results, before the verifiers decide: a rolled-back or outvoted execution's answers reach clients; the invariant reply-after-commit catches it, linearizability with a diverging service")})
	automaton.RegisterBroken(Name, protocol{minority: true, Capabilities: capabilities(BrokenMinority,
		"the verifier leader commits the first token it receives instead of waiting for r+1 matching ones: a single faulty replica's state is committed and transferred to the correct ones; the invariant commit-quorum catches it, linearizability with a commission fault")})
	automaton.RegisterBroken(Name, protocol{ownState: true, Capabilities: capabilities(BrokenOwnState,
		"a replica applies a commit with its own run whatever its claim, instead of a state transfer when it was outvoted: diverged replicas keep their states; the invariant committed-state-matches-token catches it, the convergence check too")})
	automaton.RegisterBroken(Name, protocol{noRecovery: true, Capabilities: capabilities(BrokenNoRecovery,
		"a new verifier leader skips phase 1's recovery of accepted decisions and decides the slot afresh: a slot decided by the old leader can be decided again differently; the invariant one-decision-per-slot catches it under crashes")})
}

// capabilities is the registration of the protocol or a variant (its
// scenarios, model and invariants are methods: scenarios.go, model.go,
// invariant.go).
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// The duplicate table is part of the replicated state, so a retry
		// at another node applies at most once.
		Idempotent: true,
		// Every replica executes a request with the environment the batch
		// carries (§2.2: the primary gives "a seed to a random number
		// generator and other environment variables").
		Nondeterminism: true,
		Params:         params.Defaults(),
	}
}

// protocol is the registration: its capabilities and the broken variant's
// switch.
type protocol struct {
	automaton.Capabilities
	earlyReply bool // broken: answer before the decision
	minority   bool // broken: commit on one token
	ownState   bool // broken: apply one's own run whatever the committed claim
	noRecovery bool // broken: a new leader ignores the accepted decisions phase 1 reports
}

// Defaults.
const (
	DefaultTimeout  = 100 * time.Millisecond
	DefaultBatchMax = 64
	DefaultMACKey   = "synod-eve-cluster-key"
	// decidedWindow is how many decided slots a verifier keeps (records
	// and memory), for replicas whose Decide was lost.
	decidedWindow = 16
)

var params = proto.NewSpec(
	proto.Param{Name: "verifiers", Kind: proto.Int, Default: "0", Min: "0",
		Doc: "0: every node is an execution replica and a verifier (co-located); k > 0: the last k nodes are verifiers only"},
	proto.Param{Name: "r", Kind: proto.Int, Default: "-1", Min: "-1",
		Doc: "commission failures of execution replicas tolerated: a commit needs r+1 matching tokens (-1: (E-1)/2 for E execution replicas)"},
	proto.Param{Name: "batch_max", Kind: proto.Int, Default: "64", Min: "1",
		Doc: "requests per batch"},
	proto.Param{Name: "cores", Kind: proto.Int, Default: "1", Min: "1", Max: "1024",
		Doc: "execution threads per replica (virtual cores in simulation)"},
	proto.Param{Name: "exec_cost", Kind: proto.Duration, Default: "0s", Min: "0",
		Doc: "execution time of one request (simulated as virtual time; live, that much CPU work: package doc, Request work)"},
	proto.Param{Name: "work_per_ms", Kind: proto.Int, Default: "0", Min: "0",
		Doc: "live: iterations of cpuwork.Work that make a millisecond of exec_cost (0: the node's own calibration, cpuwork.Calibrate)"},
	proto.Param{Name: "hash_cost", Kind: proto.Duration, Default: "0s", Min: "0",
		Doc: "simulated Merkle cost per written key and batch (0: a zero-cost tree)"},
	proto.Param{Name: "timeout", Kind: proto.Duration, Default: DefaultTimeout.String(), Min: "0", MinOpen: true,
		Doc: "tick of retransmissions, the verifiers' wait for tokens and their suspicion of a silent leader"},
	proto.Param{Name: "mac_key", Kind: proto.String, Default: DefaultMACKey,
		Doc: "the cluster's token key (HMAC-SHA256; package doc, Tokens)"},
	proto.Param{Name: "conflicts", Kind: proto.Enum, Default: "service", Choices: []string{"service", "loose"},
		Doc: "service: the service's own conflict keys; loose: shardedkv-loose's incomplete declaration (set declared a read), to make replicas diverge"},
	proto.Param{Name: "observe", Kind: proto.String, Default: "",
		Doc: "the name of a Recorder (NewRecorder) that collects the nodes' counters (experiments, tests)"},
	proto.Param{Name: "commission", Kind: proto.List, Default: "",
		Doc: "nodes whose executions are corrupted (fault injection: a commission failure)"},
)

// Scenarios implements automaton.ScenarioDeclarer.
func (p protocol) Scenarios() []automaton.Scenario { return scenarios(p) }

// New implements automaton.Protocol.
func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%s: namespace %q has no service", p.Protocol, cfg.Namespace)
	}
	prm, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	e := Engine{
		Verifiers: prm.Int("verifiers"), R: prm.Int("r"),
		BatchMax: prm.Int("batch_max"), Cores: prm.Int("cores"),
		ExecCost: prm.Duration("exec_cost"), HashCost: prm.Duration("hash_cost"), WorkPerMs: prm.Int("work_per_ms"),
		Timeout: prm.Duration("timeout"), MACKey: prm.String("mac_key"),
		Commission: prm.List("commission"),
	}
	// A kv namespace executes on the sharded KV (same operations, same
	// answers), which runs non-conflicting requests concurrently.
	e.StateSvc, e.ConfSvc = cfg.Service, cfg.Service
	if cfg.Service.Name() == "kv" {
		e.StateSvc, _ = service.Lookup(service.ShardedKVName)
		e.ConfSvc = e.StateSvc
	}
	if prm.String("conflicts") == "loose" {
		if _, ok := e.StateSvc.NewState().(*service.ShardedState); !ok {
			return nil, fmt.Errorf("%s: conflicts=loose needs a kv or shardedkv namespace, not %s", p.Protocol, cfg.Service.Name())
		}
		e.ConfSvc, _ = service.Lookup(service.ShardedKVLooseName)
	}
	if name := prm.String("observe"); name != "" {
		rec, ok := recorders.Load(name)
		if !ok {
			return nil, fmt.Errorf("%s: observe=%s names no recorder", p.Protocol, name)
		}
		e.Recorder = rec.(*Recorder)
	}
	return p.newEve(cfg, e)
}

// Engine configures eve's machinery (roles, batches, execution through an
// Effect, tokens, verifier agreement, commit, rollback, state transfer)
// for eve itself and for a protocol built on it (protocol/adam, the Eve/Adam thesis
// §3.2: "Adam is a modification of Eve"). Ext, when set, is that
// protocol's part.
type Engine struct {
	Verifiers, R       int // as eve's parameters verifiers and r
	BatchMax, Cores    int
	ExecCost, HashCost time.Duration
	// WorkPerMs (parameter work_per_ms), when positive, fixes how many
	// cpuwork.Work iterations a millisecond of modelled cost is live.
	WorkPerMs         int
	Timeout           time.Duration
	MACKey            string
	Commission        []string        // nodes whose executions are corrupted
	StateSvc, ConfSvc service.Service // the replicas' states; the mixer's conflict keys
	// Cost, when set, is the execution time of one operation (else
	// ExecCost for every one).
	Cost     func(service.Op) time.Duration
	Recorder *Recorder
	Ext      Ext
}

// Ext is what a protocol built on eve's engine changes (protocol/adam).
// Every hook runs inside the engine's step, and may Emit.
type Ext interface {
	// NextBatch chooses the primary's next batch from its queue of
	// forwarded requests: the entries to send now (none: no batch yet)
	// and the queue that remains.
	NextBatch(a *Eve, queue []Entry) (take, rest []Entry)
	// Deferred reports a result that answers no client yet (a request
	// that continues in a later slot): it is neither answered nor kept in
	// the duplicate table.
	Deferred(res service.Result) bool
	// Applied runs after a slot was applied at this execution replica
	// (commit, rollback, noop, state transfer) and after recovery.
	Applied(a *Eve)
	// Executed runs after a speculative run of a slot finished, before
	// its decision, with the speculative state.
	Executed(a *Eve, spec service.State)
	// Other handles an input the engine does not know; true if it did.
	Other(a *Eve, in automaton.Input) bool
}

// Entry is one request of a batch and the node that answers its client.
type Entry = entry

// NewEngine returns one node's automaton running eve's engine under the
// protocol name (its broken-variant switches all off).
func NewEngine(name string, cfg automaton.Config, e Engine) (*Eve, error) {
	return protocol{Capabilities: capabilities(name, "")}.newEve(cfg, e)
}

func (p protocol) newEve(cfg automaton.Config, e Engine) (*Eve, error) {
	pos, _, err := proto.Positions(p.Protocol, cfg.Nodes, cfg.Self)
	if err != nil {
		return nil, err
	}
	a := &Eve{Outbox: proto.Outbox{Self: cfg.Self}, proto: p, cfg: cfg, pos: pos,
		batchMax:  e.BatchMax,
		timeout:   e.Timeout,
		macKey:    []byte(e.MACKey),
		cores:     e.Cores,
		execCost:  e.ExecCost,
		workPerMs: e.WorkPerMs,
		hashCost:  e.HashCost,
		cost:      e.Cost,
		stateSvc:  e.StateSvc,
		confSvc:   e.ConfSvc,
		rec:       e.Recorder,
		ext:       e.Ext,
		isExecSet: map[automaton.NodeID]bool{},
		isVerSet:  map[automaton.NodeID]bool{},
	}
	k := e.Verifiers
	switch {
	case k == 0:
		a.execs, a.vers = cfg.Nodes, cfg.Nodes
	case k < len(cfg.Nodes):
		a.execs, a.vers = cfg.Nodes[:len(cfg.Nodes)-k], cfg.Nodes[len(cfg.Nodes)-k:]
	default:
		return nil, fmt.Errorf("%s: verifiers=%d leaves no execution replica among %d nodes", p.Protocol, k, len(cfg.Nodes))
	}
	for _, n := range a.execs {
		a.isExecSet[n] = true
	}
	for _, n := range a.vers {
		a.isVerSet[n] = true
	}
	r := e.R
	if r < 0 {
		r = (len(a.execs) - 1) / 2
	}
	if r+1 > len(a.execs) {
		return nil, fmt.Errorf("%s: r=%d needs %d matching tokens from %d execution replicas", p.Protocol, r, r+1, len(a.execs))
	}
	a.quorum = r + 1
	for _, n := range e.Commission {
		if n == string(cfg.Self) {
			a.corrupt = true
		}
	}
	return a, nil
}

// Eve is one node's automaton: an execution replica, a verifier, or both,
// and the origin of the requests its clients send.
type Eve struct {
	proto protocol
	cfg   automaton.Config
	pos   map[automaton.NodeID]int
	ext   Ext // a protocol built on the engine (Engine.Ext), nil for eve

	execs, vers         []automaton.NodeID
	isExecSet, isVerSet map[automaton.NodeID]bool
	quorum              int // matching tokens for a commit (r+1)
	batchMax, cores     int
	timeout             time.Duration
	execCost, hashCost  time.Duration
	workPerMs           int
	cost                func(service.Op) time.Duration // Engine.Cost
	macKey              []byte
	stateSvc            service.Service // whose states replicas keep
	confSvc             service.Service // whose conflict keys the mixer reads
	corrupt             bool            // commission fault injected here

	effects uint64 // the last effect id of this incarnation

	proto.Outbox            // Emit adds an output (for Ext's hooks too)
	self         []*message // messages to this node, handled after the current one

	orig origin   // clients.go
	ex   *replica // execute.go, commit.go (nil on verifier-only nodes)
	ver  *verifier

	stats Stats
	rec   *Recorder // parameter observe

	// stepAnswers records, for the invariant reply-after-commit, the
	// requests answered in this step with the slot that applied them.
	stepAnswers []answerNote
}

// answerNote is one answer of a step: its request and the slot whose
// decision it depends on (0: answered from the duplicate table).
type answerNote struct {
	id   automaton.RequestID
	slot uint64
	ok   bool // the slot was applied (decided) when the answer left
}

// Stats counts what one node's roles did (experiments and tests read it).
type Stats struct {
	Commits, Rollbacks, Noops int // decisions this node applied, as an execution replica
	Transfers, ShardsSent     int // state transfers it installed; shards it sent to others
	ParallelBatches, Requests int // mixer batches and requests it executed speculatively
	Executions                int // speculative runs (one per batch it executed in parallel)
	// ExecTime sums the speculative runs' makespans as the executor
	// reported them (simulation: modelled virtual time; live: the
	// runtime's measurement), for experiments' breakdowns.
	ExecTime time.Duration
}

// Stats returns the node's counters.
func (a *Eve) Stats() Stats { return a.stats }

// Timer ids.
const timerTick automaton.TimerID = 1

// Step implements automaton.Automaton.
func (a *Eve) Step(in automaton.Input) []automaton.Output {
	a.Begin()
	a.stepAnswers = a.stepAnswers[:0]
	proto.Dispatch(a, in)
	for len(a.self) > 0 {
		m := a.self[0]
		a.self = a.self[1:]
		a.receive(a.cfg.Self, m)
	}
	if a.rec != nil {
		a.rec.record(a.cfg.Self, a.stats)
	}
	return a.Out
}

// OnMessage: a peer's message, decoded (receive).
func (a *Eve) OnMessage(from automaton.NodeID, raw []byte) {
	if m, err := unmarshal(raw); err == nil {
		a.receive(from, m)
	}
}

// OnTimer: the tick.
func (a *Eve) OnTimer(id automaton.TimerID) {
	if id == timerTick {
		a.onTick()
	}
}

// OnOther: the extension's inputs, then the executor's completions
// (executor.go onOther).
func (a *Eve) OnOther(in automaton.Input) {
	if a.ext == nil || !a.ext.Other(a, in) {
		a.onOther(in)
	}
}

func (a *Eve) nextEffect() uint64 {
	a.effects++
	return a.effects
}

// Self is this node.
func (a *Eve) Self() automaton.NodeID { return a.cfg.Self }

// Config is the node's configuration.
func (a *Eve) Config() automaton.Config { return a.cfg }

// IsPrimary reports whether this node is the primary execution replica of
// its current epoch.
func (a *Eve) IsPrimary() bool { return a.isPrimary() }

// CutBatch lets the primary send its next batch if it may (for Ext's
// hooks: an awaited input arrived).
func (a *Eve) CutBatch() {
	if a.ex != nil {
		a.cutBatch()
	}
}

// Seen reports whether this execution replica's duplicate table holds id
// or a later request of its client (applied already).
func (a *Eve) Seen(id automaton.RequestID) bool { return a.ex != nil && a.ex.seen(id) }

// Ext is the engine's extension (nil for eve).
func (a *Eve) Ext() Ext { return a.ext }

// send sends m to one node; to self it is handled after the current
// handler (never sent: the contract forbids it).
func (a *Eve) send(to automaton.NodeID, m *message) {
	if to == a.cfg.Self {
		a.self = append(a.self, m)
		return
	}
	a.Emit(automaton.Send{To: to, Msg: m.marshal()})
}

// sendAll sends m to every node of to.
func (a *Eve) sendAll(to []automaton.NodeID, m *message) {
	var b []byte
	for _, n := range to {
		if n == a.cfg.Self {
			a.self = append(a.self, m)
			continue
		}
		if b == nil {
			b = m.marshal()
		}
		a.Emit(automaton.Send{To: n, Msg: b})
	}
}

// receive handles a message, a peer's or this node's own.
func (a *Eve) receive(from automaton.NodeID, m *message) {
	switch m.Kind {
	case kindForward:
		a.onForward(m)
	case kindReply:
		a.onReply(m)
	case kindBatch:
		a.onBatch(m.Batch)
	case kindToken:
		a.onToken(m.Token)
	case kindPrepare:
		a.onPrepare(from, m)
	case kindPromise:
		a.onPromise(from, m)
	case kindAccept:
		a.onAccept(from, m)
	case kindAccepted:
		a.onAccepted(from, m)
	case kindDecide:
		a.onDecide(from, m.Dec)
	case kindComplain:
		a.onComplain(from, m)
	case kindFetch:
		a.onFetch(from, m)
	case kindTransfer:
		a.onTransfer(from, m)
	}
}

// OnStart begins an incarnation (recovery.go restores the records).
func (a *Eve) OnStart(s automaton.Start) {
	a.self = nil
	a.orig = origin{pending: map[automaton.RequestID]*pendingReq{}}
	a.ex, a.ver = nil, nil
	if a.isExecSet[a.cfg.Self] {
		a.ex = a.recoverReplica(s.Records)
	}
	if a.isVerSet[a.cfg.Self] {
		a.ver = a.recoverVerifier(s.Records)
	}
	a.Emit(automaton.SetTimer{ID: timerTick, After: a.timeout})
	if a.ex != nil && a.ext != nil {
		a.ext.Applied(a)
	}
	if a.ver != nil && a.vers[0] == a.cfg.Self {
		a.campaign() // the first verifier leads until suspected
	}
}

// onTick drives every retransmission and suspicion (one timer per node).
func (a *Eve) onTick() {
	a.Emit(automaton.SetTimer{ID: timerTick, After: a.timeout})
	a.originTick()
	if a.ex != nil {
		a.replicaTick()
	}
	if a.ver != nil {
		a.verifierTick()
	}
}

// epoch is this node's view of the current epoch: the primary of epoch e
// is execs[e mod E].
func (a *Eve) epoch() uint64 {
	e := a.orig.epoch
	if a.ex != nil && a.ex.epoch > e {
		e = a.ex.epoch
	}
	if a.ver != nil && a.ver.epoch > e {
		e = a.ver.epoch
	}
	return e
}

func (a *Eve) primaryOf(epoch uint64) automaton.NodeID {
	return a.execs[epoch%uint64(len(a.execs))]
}

// Leader implements automaton.LeaderReporter: the primary.
func (a *Eve) Leader() automaton.NodeID { return a.primaryOf(a.epoch()) }

// ServiceState implements automaton.StateReporter: slots applied and the
// committed state (never the speculative one).
func (a *Eve) ServiceState() (uint64, service.State) {
	if a.ex == nil || a.ex.st == nil {
		return 0, nil
	}
	return a.ex.applied, a.ex.st
}

// Dump describes the node for golden scripts.
func (a *Eve) Dump() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s epoch=%d pending=%d", a.cfg.Self, a.epoch(), len(a.orig.pending))
	if a.ex != nil {
		fmt.Fprintf(&b, " applied=%d hash=%x", a.ex.applied, a.ex.hash[:4])
		if a.ex.cur != nil {
			fmt.Fprintf(&b, " executing=%d done=%v seq=%v", a.ex.cur.b.Slot, a.ex.cur.done, a.ex.cur.seq)
		}
		if a.ex.fetching {
			fmt.Fprintf(&b, " fetching from %v", a.ex.fetchFrom)
		}
	}
	if a.ver != nil {
		fmt.Fprintf(&b, " verifier slot=%d ballot=%v leading=%v last=%v", a.ver.slot, a.ver.promised, a.ver.leading, a.ver.decided[a.ver.slot-1])
	}
	return b.String()
}

// Recorder collects the nodes' Stats of the runs whose parameter observe
// names it (experiments and tests; observation only: nothing the automata
// do depends on it). Safe for concurrent runs.
type Recorder struct {
	mu   sync.Mutex
	last map[automaton.NodeID]Stats
}

var recorders sync.Map // name -> *Recorder

// NewRecorder registers a recorder under name (replacing any).
func NewRecorder(name string) *Recorder {
	r := &Recorder{last: map[automaton.NodeID]Stats{}}
	recorders.Store(name, r)
	return r
}

// LookupRecorder returns the recorder of name, or nil.
func LookupRecorder(name string) *Recorder {
	r, _ := recorders.Load(name)
	rec, _ := r.(*Recorder)
	return rec
}

// Epoch is this node's view of the current epoch.
func (a *Eve) Epoch() uint64 { return a.epoch() }

// DropRecorder forgets the recorder of name.
func DropRecorder(name string) { recorders.Delete(name) }

func (r *Recorder) record(n automaton.NodeID, s Stats) {
	r.mu.Lock()
	r.last[n] = s
	r.mu.Unlock()
}

// Total sums the nodes' latest counters (each node's current incarnation).
func (r *Recorder) Total() Stats {
	r.mu.Lock()
	defer r.mu.Unlock()
	var t Stats
	for _, s := range r.last {
		t.Commits += s.Commits
		t.Rollbacks += s.Rollbacks
		t.Noops += s.Noops
		t.Transfers += s.Transfers
		t.ShardsSent += s.ShardsSent
		t.ParallelBatches += s.ParallelBatches
		t.Requests += s.Requests
		t.Executions += s.Executions
		t.ExecTime += s.ExecTime
	}
	return t
}
