package sim

import (
	"container/heap"
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"fmt"
	"hash"
	"io"
	"math/rand"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Namespace and ServiceName are the one namespace every simulated run serves.
const (
	Namespace   = "default"
	ServiceName = "kv"
)

// Defaults for the zero values of Config.
const (
	DefaultLatency        = "uniform:1ms:5ms"
	DefaultClientLatency  = "uniform:50us:300us"
	DefaultFsync          = "uniform:100us:1ms"
	DefaultThink          = "uniform:0s:1ms"
	DefaultReorderDelay   = "uniform:0s:20ms"
	DefaultMix            = "get:4,set:4,del:1,exists:1"
	DefaultKeys           = 5
	DefaultRequestTimeout = time.Second
	DefaultMaxAttempts    = 10
	DefaultMaxTime        = 10 * time.Minute
	DefaultDrainTime      = time.Minute
	DefaultMaxEvents      = 50_000_000
	DefaultCheckTimeout   = 30 * time.Second
)

// Config describes one simulated run. Zero values take the defaults above.
type Config struct {
	// Protocol is a registered automaton.Protocol name, or a broken variant's.
	Protocol string
	// Nodes, Clients: cluster size and number of closed-loop clients.
	Nodes, Clients int
	// Ops is the total number of operations the clients issue.
	Ops int
	// Seed determines everything else about the run.
	Seed int64
	// Faults is "none" (or ""), "all", or a comma list of crash, partition,
	// loss, dup, pause, slow and reorder.
	Faults string
	// Latency is the one-way node-to-node latency distribution (ParseDist),
	// the same for every directed link. Default DefaultLatency.
	Latency string
	// LinkLatency overrides Latency on individual directed links, keyed
	// "n1->n2" (node names are n1..nN), for asymmetric or slow links.
	LinkLatency map[string]string
	// ReadMode is the read option clients put on reads.
	ReadMode automaton.ReadMode
	// Liveness, when positive, is the virtual time T at which every fault
	// heals for good while clients keep issuing operations; progress must
	// then resume within LivenessBound (see liveness.go).
	Liveness, LivenessBound time.Duration
	// PowerLoss lists virtual times at which the whole cluster loses
	// power: every node crashes at once, losing its unsynced records, and
	// restarts after PowerOff (a distribution, default DefaultPowerOff;
	// powerloss.go).
	PowerLoss []time.Duration
	PowerOff  string
	// StickyClients makes every client send all its requests, retries
	// included, to one node (client i uses node i mod Nodes); a client whose
	// node is down waits for it to restart. Sequential consistency is promised
	// to clients that stay with one server, so it is turned on automatically
	// for protocols whose consistency model is automaton.Sequential.
	StickyClients bool
	// NoFanout: for protocols whose clients send each request to every
	// replica (automaton.FanoutProtocol), send to one node instead, as a
	// client that reaches one node (redis-cli) does.
	NoFanout bool
	// ClientDriven: each client runs the protocol's client-side coordinator
	// (automaton.ClientCoordinator; clientdriven.go) against every node,
	// instead of sending the operation to one node that coordinates it.
	ClientDriven bool
	// BatchWindow, when positive, delivers the client requests that reach
	// a node within this much virtual time as one automaton.ClientBatch
	// (batch.go), for protocols that declare automaton.BatchStepper, as
	// the live node steps what it finds in its inbox together. Zero steps
	// each request on arrival.
	BatchWindow time.Duration
	// Service is the namespace's data type: kv (default), counter or string.
	Service string
	// StrictFrac and PrevProb shape the ESDS request options of
	// eventually-serializable protocols (see esds.go): the fraction of strict
	// operations, and the probability that an operation names an earlier
	// completed one in its prev set.
	StrictFrac, PrevProb float64
	// Groups is the fraction of client operations sent as atomic groups of
	// GroupSize (default 3) operations (automaton.Request.Ops), for
	// protocols that apply groups atomically; the history then records
	// them as groups and is checked for strict serializability.
	Groups    float64
	GroupSize int
	// Txns is the fraction of client operations that run an interactive
	// transaction (automaton.Request.Txn, txn.go): a begin, TxnSize
	// operations drawn from the mix, each answered before the next, then a
	// commit, or an abort with probability TxnAbort. For protocols that
	// serve interactive transactions; the history is then checked for
	// strict serializability.
	Txns     float64
	TxnSize  int
	TxnAbort float64
	// NoInvariants skips the protocol's invariant checks.
	NoInvariants bool
	// ConvergeEvery thins the convergence check during the run
	// (converge.go): a replica's state is hashed when its applied count
	// passes a multiple of it. 0 or 1: at every change.
	ConvergeEvery int
	// SettleTime bounds the quiescence phase of eventually-serializable
	// protocols (default DefaultSettleTime).
	SettleTime time.Duration

	// ClientLatency is the one-way client<->node latency (default DefaultClientLatency).
	ClientLatency string
	// Fsync is the fsync duration distribution (default DefaultFsync).
	Fsync string
	// Think is a client's pause between operations (default DefaultThink).
	Think string
	// Keys is the number of distinct keys ("k0".."k<Keys-1>"); few keys force
	// contention. Default DefaultKeys.
	Keys int
	// Mix weighs the operation kinds, e.g. "get:4,set:4,del:1,exists:1".
	Mix string
	// Loss and Dup are the base probabilities that a message is dropped or
	// delivered twice, on every link, all run long (faults add windows on top).
	Loss, Dup float64
	// ReorderFrac is the base fraction of messages that get an extra delay drawn
	// from ReorderDelay (default DefaultReorderDelay), on top of the reordering
	// that latency variance already causes.
	ReorderFrac  float64
	ReorderDelay string
	// RequestTimeout is how long a client waits for an answer before retrying
	// or giving up (default DefaultRequestTimeout).
	RequestTimeout time.Duration
	// MaxAttempts bounds the attempts per operation (default DefaultMaxAttempts).
	MaxAttempts int
	// MaxTime: no operation is issued after this virtual time (default DefaultMaxTime).
	MaxTime time.Duration
	// DrainTime bounds the virtual time, after the final heal, given to
	// outstanding operations; those still open are recorded as unknown.
	DrainTime time.Duration
	// MaxEvents bounds the events of a run; exceeding it is an error (a
	// protocol that reschedules zero-length timers forever, for example).
	MaxEvents int
	// Params are protocol parameters passed to every automaton.
	Params map[string]string
	// CheckTimeout bounds the linearizability check (default DefaultCheckTimeout).
	CheckTimeout time.Duration
	// NoCheck skips the history check.
	NoCheck bool
	// Trace, when set, receives a human-readable line per event.
	Trace io.Writer
	// Membership schedules membership changes (membership.go).
	Membership []MemberChange

	// OpCost, ApplyCost and MsgCost (distributions, ParseDist) turn on the
	// CPU model of cpu.go: processing time per client request, per service
	// Apply and per peer message, inputs queueing while a node's processor
	// is busy. CPUs, when positive, is the number of processors the nodes
	// share (node i on processor i mod CPUs).
	OpCost, ApplyCost, MsgCost string
	CPUs                       int
	// EffectCPU charges an effect's Cost (automaton.CostedResult) to its
	// node's processor instead of running it beside the node: the CPU
	// model is on, the effect waits for the processor and holds it for its
	// cost (effect.go, onEffectCPU). Eve's execution so costs what Paxos's
	// Apply calls cost under ApplyCost (seed003-eve-vs-paxos).
	EffectCPU bool
	// Rate, when positive, makes the clients open-loop (openloop.go): Ops
	// operations arrive at Rate per second in total, at fixed intervals or,
	// with PoissonArrivals, exponential ones.
	Rate            float64
	PoissonArrivals bool
	// ClockSkew, when positive, gives every node a clock of its own
	// (clock.go): a fixed offset in [-ClockSkew, +ClockSkew] added to the
	// time it stamps on arriving requests (Request.Env.Time).
	ClockSkew time.Duration

	// Nested requests (callee.go; package doc, "Nested requests"). Callee,
	// when set, simulates a second namespace, CalleeNamespace (default
	// DefaultCalleeNamespace), beside this one: its own protocol, nodes,
	// network, faults, invariants and checker, and no workload of its own;
	// the main namespace's automata call it with effects of kind
	// automaton.CallKind. Fields of Callee left zero take this Config's
	// latencies, timeouts and limits. CalleeDelay (a distribution,
	// ParseDist; default none) is extra virtual time every answer of the
	// callee takes to come back: remote computation done at the callee in
	// parallel with everything else (the Eve/Adam thesis §1.4's remote time slice).
	Callee          *Config
	CalleeNamespace string
	CalleeDelay     string
	// Nested makes the clients' requests nested (automaton.Request.Nested)
	// and sends, some time after each answer, one more copy of the request
	// to a random node, as another replica of a caller would: every answer
	// to one id must be the same (check (b) of callee.go) for the protocol
	// under test as a callee (automaton.NestedCallee).
	Nested bool

	// releaseFlaw makes every node's interpreter deliberately wrong
	// (release.Flaw), for the test that shows the run's checks catch it
	// (release_flaw_test.go).
	releaseFlaw release.Flaw
}

// Stats counts what happened during a run.
type Stats struct {
	Events        int
	Steps         int
	MsgsSent      int // Send outputs released to the network
	MsgsDropped   int // lost, cut by a partition, or sent to a dead incarnation
	MsgsDuped     int
	Persists      int
	Effects       int // Effect outputs carried out (effect.go)
	Calls         int // nested calls made (callee.go), among Effects
	Fsyncs        int
	Crashes       int
	PowerLosses   int
	Pauses        int
	Partitions    int
	Windows       int // loss, dup, reorder and slow windows
	Retries       int // client attempts after the first
	ErrorReplies  int // responses carrying an error result
	LateReplies   int // responses to given-up or already answered requests
	Silent        int // Silent answers to fanned-out requests (automaton.FanoutProtocol)
	UnknownWrites int
	UnknownReads  int
	MemberChanges int // scheduled membership changes that completed
	Transfers     int // scheduled leadership transfers answered OK (membership.go)
	ClientBatches int // ClientBatch inputs stepped (Config.BatchWindow, batch.go)
	// CPU model and open loop (cpu.go, openloop.go): inputs that waited for a
	// busy processor, the longest such queue, and arrivals that found every
	// client busy.
	CPUQueued, CPUMaxQueue, Backlogged int
	// Interactive transactions (txn.go): committed; aborted by the
	// client's choice; aborted by the protocol (ErrTxnAborted: a conflict);
	// failed otherwise before a commit (ErrNoSuchTxn, a timeout or an error
	// on an earlier step); commit outcome unknown.
	TxnCommitted, TxnAborted, TxnConflicts, TxnFailed, TxnUnknown int
}

// TxnString summarizes the transactions ("" when there were none).
func (s Stats) TxnString() string {
	if s.TxnCommitted+s.TxnAborted+s.TxnConflicts+s.TxnFailed+s.TxnUnknown == 0 {
		return ""
	}
	return fmt.Sprintf("txns committed=%d aborted=%d conflicts=%d failed=%d unknown=%d",
		s.TxnCommitted, s.TxnAborted, s.TxnConflicts, s.TxnFailed, s.TxnUnknown)
}

func (s Stats) String() string {
	return fmt.Sprintf("events=%d steps=%d msgs=%d dropped=%d duped=%d persists=%d fsyncs=%d crashes=%d pauses=%d partitions=%d windows=%d retries=%d errors=%d late=%d unknown-writes=%d unknown-reads=%d",
		s.Events, s.Steps, s.MsgsSent, s.MsgsDropped, s.MsgsDuped, s.Persists, s.Fsyncs, s.Crashes, s.Pauses, s.Partitions, s.Windows, s.Retries, s.ErrorReplies, s.LateReplies, s.UnknownWrites, s.UnknownReads) + s.txnSuffix()
}

func (s Stats) txnSuffix() string {
	out := ""
	if s.Silent > 0 {
		out += fmt.Sprintf(" silent=%d", s.Silent)
	}
	if t := s.TxnString(); t != "" {
		out += " " + t
	}
	return out
}

// faultSet says which fault kinds the nemesis may inject.
type faultSet struct {
	crash, partition, loss, dup, pause, slow, reorder bool
}

// FaultKinds lists the individual fault kinds accepted in Config.Faults.
var FaultKinds = []string{"crash", "partition", "loss", "dup", "pause", "slow", "reorder"}

// ParseFaults parses Config.Faults.
func ParseFaults(s string) (faultSet, error) {
	on, err := ParseFaultKinds(s, FaultKinds)
	if err != nil {
		return faultSet{}, err
	}
	return faultSet{on["crash"], on["partition"], on["loss"], on["dup"], on["pause"], on["slow"], on["reorder"]}, nil
}

// ParseFaultKinds parses a list of fault kinds over the kinds a simulator
// knows (FaultKinds here, ShardFaultKinds in the sharded world): "" or
// "none" (no faults), "all" (every kind), or a comma list of their names.
func ParseFaultKinds(s string, kinds []string) (map[string]bool, error) {
	on := map[string]bool{}
	switch s {
	case "", "none":
		return on, nil
	case "all":
		for _, k := range kinds {
			on[k] = true
		}
		return on, nil
	}
	for _, k := range strings.Split(s, ",") {
		k = strings.TrimSpace(k)
		known := false
		for _, x := range kinds {
			known = known || x == k
		}
		if !known {
			return nil, fmt.Errorf("unknown fault %q in %q (want none, all, or a comma list of %s)", k, s, strings.Join(kinds, ","))
		}
		on[k] = true
	}
	return on, nil
}

func (f faultSet) kinds() []string {
	var out []string
	for i, on := range []bool{f.crash, f.partition, f.loss, f.dup, f.pause, f.slow, f.reorder} {
		if on {
			out = append(out, FaultKinds[i])
		}
	}
	return out
}

type mixEntry struct {
	kind   string
	weight int
}

// parseMix parses a KV operation mix.
func parseMix(s string) ([]mixEntry, int, error) { return parseMixKinds(s, serviceMixes["kv"].kinds) }

// parseMixKinds parses an operation mix over the given kinds.
func parseMixKinds(s string, kinds []string) ([]mixEntry, int, error) {
	var out []mixEntry
	total := 0
	seen := map[string]bool{}
	for _, part := range strings.Split(s, ",") {
		k, w, ok := strings.Cut(strings.TrimSpace(part), ":")
		if !ok {
			return nil, 0, fmt.Errorf("mix %q: %q is not kind:weight", s, part)
		}
		known := false
		for _, x := range kinds {
			known = known || x == k
		}
		if !known {
			return nil, 0, fmt.Errorf("mix %q: unsupported operation %q (want %s)", s, k, strings.Join(kinds, ", "))
		}
		if seen[k] {
			return nil, 0, fmt.Errorf("mix %q: %s listed twice", s, k)
		}
		seen[k] = true
		n, err := strconv.Atoi(w)
		if err != nil || n < 0 {
			return nil, 0, fmt.Errorf("mix %q: weight %q is not a non-negative integer", s, w)
		}
		out = append(out, mixEntry{k, n})
		total += n
	}
	if total == 0 {
		return nil, 0, fmt.Errorf("mix %q: weights sum to zero", s)
	}
	return out, total, nil
}

// simulator is one run's whole world. It is used by one goroutine only.
type simulator struct {
	cfg         Config
	proto       automaton.Protocol
	consistency automaton.Consistency
	// fanout: clients send each request to every live node (client.go).
	fanout bool
	// batcher: the protocol steps client batches (batch.go).
	batcher bool
	svc     service.Service
	ids     []automaton.NodeID
	nodes   []*node
	faults  faultSet

	clients    []*client
	clientByID map[uint64]*client

	now time.Duration
	seq uint64
	q   eventQueue

	// Independent streams, all derived from the seed, so that (for example)
	// the workload does not change when only the fault schedule does.
	rngNode, rngNet, rngDisk, rngClient, rngFault *rand.Rand
	// rngEnv draws the environments of requests (service.Env): a stream of
	// its own, so that adding it changed no other stream.
	rngEnv *rand.Rand
	// rngGroup decides which operations are sent as atomic groups.
	rngGroup *rand.Rand
	// rngTxn decides which operations run interactive transactions and
	// which of those the client aborts; drawn only when Config.Txns > 0.
	rngTxn *rand.Rand
	// runID names this run for effect executors (effect.go, ExecEnv.Run).
	runID string
	// inv checks the protocol's invariants after every step (nil when it
	// states none); invErr is the first violation.
	inv        automaton.InvariantChecker
	invNames   []string
	invErr     string
	invChecked int
	// conv checks that replicas at the same applied count hold equal
	// states (converge.go).
	conv convergence
	// optSpecs are the protocol's request options (automaton.OptionSpec).
	optSpecs []automaton.OptionSpec

	lat, clientLat, fsyncLat, think, reorderDelay Dist
	linkLat                                       [][]Dist // [from][to]
	mix                                           []mixEntry
	mixTotal                                      int

	net netState

	issued   int  // operations invoked so far
	busy     int  // clients with an operation outstanding
	stopping bool // no more operations will be issued
	healed   bool // the final heal has happened
	finished bool // the run is over

	// CPU model and open loop (cpu.go, openloop.go).
	cpuOn        bool
	cpu          cpuModel
	replicaT     []map[automaton.RequestID]time.Duration // per node: when a request's step began
	replicaTimes []time.Duration
	nextClient   int
	backlog      int

	// ESDS: the protocol is eventually serializable; ids of completed operations.
	esds         bool
	sessions     bool // the protocol reads Request.Unanswered (automaton.SupportsSessions)
	completedIDs []string

	mem *membership // nil without Config.Membership

	// Whole-cluster faults (powerloss.go): nil without Config.PowerLoss.
	power    *powerState
	rngPower *rand.Rand

	// Nested requests (callee.go). ns is this simulator's namespace;
	// callee the co-simulated callee of a main run, caller the main run
	// of a callee. calls are the callee's calls (byID by request id);
	// nested the nested ids seen (both sides). rngEcho draws --nested's
	// echo copies.
	ns          string
	callee      *simulator
	caller      *simulator
	calleeDelay Dist
	calls       []*call
	byID        map[automaton.RequestID][]*call
	nested      map[automaton.RequestID]*nestedOp
	rngEcho     *rand.Rand

	rec     *history.Recorder
	digest  hash.Hash
	scratch wire.Encoder
	err     error
	stats   Stats
}

// fail records the first fatal error; the run stops at the next event.
func (s *simulator) fail(format string, a ...any) {
	if s.err == nil {
		s.err = fmt.Errorf("sim seed %d at %v: %s", s.cfg.Seed, s.now, fmt.Sprintf(format, a...))
	}
}

func (s *simulator) tracef(format string, a ...any) {
	if s.cfg.Trace != nil {
		fmt.Fprintf(s.cfg.Trace, "%12v %s\n", s.now, fmt.Sprintf(format, a...))
	}
}

// withDefaults fills zero fields and validates cfg.
func (cfg Config) withDefaults() (Config, error) {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&cfg.Latency, DefaultLatency)
	def(&cfg.ClientLatency, DefaultClientLatency)
	def(&cfg.Fsync, DefaultFsync)
	def(&cfg.Think, DefaultThink)
	def(&cfg.ReorderDelay, DefaultReorderDelay)
	def(&cfg.Service, ServiceName)
	if m, ok := mixOf(cfg.Service); ok {
		def(&cfg.Mix, m.def)
	}
	if cfg.SettleTime == 0 {
		cfg.SettleTime = DefaultSettleTime
	}
	if cfg.TxnSize == 0 {
		cfg.TxnSize = 3
	}
	if cfg.GroupSize == 0 {
		cfg.GroupSize = 3
	}
	if cfg.Faults == "" {
		cfg.Faults = "none"
	}
	if cfg.Keys == 0 {
		cfg.Keys = DefaultKeys
	}
	if cfg.RequestTimeout == 0 {
		cfg.RequestTimeout = DefaultRequestTimeout
	}
	if cfg.MaxAttempts == 0 {
		cfg.MaxAttempts = DefaultMaxAttempts
	}
	if cfg.MaxTime == 0 {
		cfg.MaxTime = DefaultMaxTime
	}
	if cfg.DrainTime == 0 {
		cfg.DrainTime = DefaultDrainTime
	}
	if cfg.MaxEvents == 0 {
		cfg.MaxEvents = DefaultMaxEvents
	}
	if cfg.CheckTimeout == 0 {
		cfg.CheckTimeout = DefaultCheckTimeout
	}
	switch {
	case cfg.Protocol == "":
		return cfg, fmt.Errorf("sim: no protocol given (known: %v)", automaton.Names())
	case cfg.Nodes < 1:
		return cfg, fmt.Errorf("sim: need at least 1 node, got %d", cfg.Nodes)
	case cfg.Clients < 1:
		return cfg, fmt.Errorf("sim: need at least 1 client, got %d", cfg.Clients)
	case cfg.Ops < 0:
		return cfg, fmt.Errorf("sim: negative operation count %d", cfg.Ops)
	case cfg.Keys < 1:
		return cfg, fmt.Errorf("sim: need at least 1 key, got %d", cfg.Keys)
	case mixKinds(cfg.Service) == nil:
		return cfg, fmt.Errorf("sim: service %q cannot be simulated (want kv, counter, string, matchmaker, gridmatchmaker or a service that implements service.Simulated)", cfg.Service)
	case cfg.StrictFrac < 0 || cfg.StrictFrac > 1 || cfg.PrevProb < 0 || cfg.PrevProb > 1 || cfg.SettleTime < 0:
		return cfg, fmt.Errorf("sim: strict fraction and prev probability must be within [0, 1], settle time non-negative")
	case cfg.BatchWindow < 0:
		return cfg, fmt.Errorf("sim: negative batch window %v", cfg.BatchWindow)
	case cfg.ConvergeEvery < 0:
		return cfg, fmt.Errorf("sim: negative convergence sampling interval %d", cfg.ConvergeEvery)
	case cfg.Groups < 0 || cfg.Groups > 1 || cfg.GroupSize < 1:
		return cfg, fmt.Errorf("sim: the group fraction must be within [0, 1] and the group size at least 1")
	case cfg.Txns < 0 || cfg.Txns > 1 || cfg.TxnSize < 1 || cfg.TxnAbort < 0 || cfg.TxnAbort > 1:
		return cfg, fmt.Errorf("sim: the transaction fraction and abort probability must be within [0, 1] and the transaction size at least 1")
	case cfg.Loss < 0 || cfg.Loss > 1 || cfg.Dup < 0 || cfg.Dup > 1 || cfg.ReorderFrac < 0 || cfg.ReorderFrac > 1:
		return cfg, fmt.Errorf("sim: loss, dup and reorder fractions must be within [0, 1]")
	case cfg.RequestTimeout < 0 || cfg.MaxTime < 0 || cfg.DrainTime < 0 || cfg.MaxAttempts < 0 || cfg.MaxEvents < 0 || cfg.CheckTimeout < 0:
		return cfg, fmt.Errorf("sim: negative timeout or limit")
	}
	return cfg, nil
}

func newSimulator(cfg Config) (*simulator, error) {
	cfg, err := cfg.withDefaults()
	if err != nil {
		return nil, err
	}
	s := &simulator{cfg: cfg, clientByID: map[uint64]*client{}, digest: sha256.New(), ns: Namespace}
	if s.proto, err = automaton.LookupAny(cfg.Protocol); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if s.consistency, err = automaton.ConsistencyOf(cfg.Protocol); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if automaton.NeedsStickyClients(cfg.Protocol) {
		s.cfg.StickyClients = true
	}
	s.fanout = automaton.ClientFanoutOf(cfg.Protocol) && !cfg.NoFanout
	s.esds = esdsMode(cfg.Protocol)
	s.sessions = automaton.SupportsSessions(cfg.Protocol)
	if s.svc, err = service.Lookup(cfg.Service); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if err := automaton.CheckService(cfg.Protocol, s.svc); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	if cfg.Groups > 0 && service.IsNondeterministic(s.svc) {
		return nil, fmt.Errorf("sim: --groups: the %s check does not judge atomic groups", cfg.Service)
	}
	s.batcher = automaton.StepsClientBatches(cfg.Protocol)
	if cfg.BatchWindow > 0 && !s.batcher {
		return nil, fmt.Errorf("sim: --batch-window: protocol %s does not step client batches (automaton.BatchStepper)", cfg.Protocol)
	}
	if cfg.Groups > 0 && !automaton.TransactionsOf(cfg.Protocol).Atomic {
		return nil, fmt.Errorf("sim: --groups: protocol %s cannot apply a group of operations atomically", cfg.Protocol)
	}
	if cfg.Txns > 0 && service.IsNondeterministic(s.svc) {
		return nil, fmt.Errorf("sim: --txns: the %s check does not judge transactions", cfg.Service)
	}
	if cfg.Txns > 0 && !automaton.TransactionsOf(cfg.Protocol).Interactive {
		return nil, fmt.Errorf("sim: --txns: protocol %s has no interactive transactions", cfg.Protocol)
	}
	s.optSpecs = automaton.RequestOptions(cfg.Protocol)
	if !cfg.NoInvariants {
		s.inv, s.invNames = automaton.NewInvariantChecker(cfg.Protocol)
	}
	s.rngEnv = labeledRand(cfg.Seed, "env")
	s.rngGroup = labeledRand(cfg.Seed, "group")
	s.rngTxn = labeledRand(cfg.Seed, "txn")
	if s.faults, err = ParseFaults(cfg.Faults); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}
	for _, d := range []struct {
		name string
		src  string
		dst  *Dist
	}{
		{"latency", cfg.Latency, &s.lat},
		{"client latency", cfg.ClientLatency, &s.clientLat},
		{"fsync", cfg.Fsync, &s.fsyncLat},
		{"think time", cfg.Think, &s.think},
		{"reorder delay", cfg.ReorderDelay, &s.reorderDelay},
	} {
		if *d.dst, err = ParseDist(d.src); err != nil {
			return nil, fmt.Errorf("sim: %s: %w", d.name, err)
		}
	}
	if s.mix, s.mixTotal, err = parseMixKinds(cfg.Mix, mixKinds(cfg.Service)); err != nil {
		return nil, fmt.Errorf("sim: %w", err)
	}

	master := rand.New(rand.NewSource(cfg.Seed))
	sub := func() *rand.Rand { return rand.New(rand.NewSource(master.Int63())) }
	s.rngNode, s.rngNet, s.rngDisk, s.rngClient, s.rngFault = sub(), sub(), sub(), sub(), sub()
	if err := s.initCPU(master.Int63); err != nil {
		return nil, err
	}
	if err := s.initOpenLoop(); err != nil {
		return nil, err
	}
	s.replicaT = make([]map[automaton.RequestID]time.Duration, cfg.Nodes+cfg.spareNodes())
	for i := range s.replicaT {
		s.replicaT[i] = map[automaton.RequestID]time.Duration{}
	}

	s.rec = history.NewRecorder(func() int64 { return int64(s.now) })
	for i := 0; i < cfg.Nodes+cfg.spareNodes(); i++ {
		s.ids = append(s.ids, automaton.NodeID("n"+strconv.Itoa(i+1)))
	}
	s.net.init(len(s.ids))
	if err := s.initLinks(); err != nil {
		return nil, err
	}
	for i := range s.ids {
		n := &node{idx: i, id: s.ids[i], durable: map[string][]byte{}, rel: s.newRelease(s.ids[i])}
		n.io = nodeIO{s, n}
		s.nodes = append(s.nodes, n)
	}
	if err := s.initMembership(); err != nil {
		return nil, err
	}
	s.conv.init(len(s.nodes), cfg.ConvergeEvery)
	if err := s.initCallee(); err != nil {
		return nil, err
	}
	for i := 0; i < cfg.Clients; i++ {
		c := &client{idx: i}
		for {
			c.id = s.rngClient.Uint64()
			if _, dup := s.clientByID[c.id]; c.id != 0 && !dup {
				break
			}
		}
		s.clients = append(s.clients, c)
		s.clientByID[c.id] = c
	}
	return s, nil
}

// initLinks builds the per-link latency table from Latency and LinkLatency.
func (s *simulator) initLinks() error {
	s.linkLat = make([][]Dist, len(s.ids))
	for i := range s.linkLat {
		s.linkLat[i] = make([]Dist, len(s.ids))
		for j := range s.linkLat[i] {
			s.linkLat[i][j] = s.lat
		}
	}
	for link, spec := range s.cfg.LinkLatency {
		a, b, ok := strings.Cut(link, "->")
		from, to := s.nodeIndex(automaton.NodeID(a)), s.nodeIndex(automaton.NodeID(b))
		if !ok || from < 0 || to < 0 || from == to {
			return fmt.Errorf("sim: link %q: want FROM->TO between two of the nodes n1..n%d", link, len(s.ids))
		}
		d, err := ParseDist(spec)
		if err != nil {
			return fmt.Errorf("sim: link %s: %w", link, err)
		}
		s.linkLat[from][to] = d
	}
	return nil
}

// run executes the simulation until every operation has finished.
func (s *simulator) run() error {
	for _, n := range s.nodes {
		if n.out {
			continue
		}
		s.boot(n)
		if s.err != nil {
			return s.err
		}
	}
	if s.openLoop() {
		s.schedule(0, &event{kind: evArrival})
	} else {
		for _, c := range s.clients {
			s.after(s.think.Sample(s.rngClient), &event{kind: evClientNext, client: c.idx})
		}
	}
	if s.faults != (faultSet{}) {
		s.after(s.nemesisGap(), &event{kind: evNemesis})
	}
	s.schedule(s.cfg.MaxTime, &event{kind: evDeadline})
	s.scheduleLiveness()
	s.schedulePowerLoss()
	if s.callee != nil {
		s.callee.startCallee()
	}
	if s.cfg.Ops == 0 {
		s.stopIssuing()
	}
	// With a callee, one merged loop: always the earlier of the two
	// queues' heads (callee.go).
	for !s.finished && !s.broken() && (s.callee == nil || !s.callee.broken()) {
		if s.stopping && s.busy == 0 {
			break
		}
		if s.calleeFirst() {
			s.callee.next()
			continue
		}
		if len(s.q) == 0 {
			// Cannot happen while a client waits (it has a timeout queued).
			s.fail("event queue empty with %d clients waiting", s.busy)
			break
		}
		if !s.next() {
			break
		}
	}
	s.drainCallee()
	if s.err == nil && s.callee != nil && s.callee.err != nil {
		s.err = fmt.Errorf("callee namespace %s: %w", s.callee.ns, s.callee.err)
	}
	return s.err
}

// next handles the earliest event; false when the event budget is spent.
func (s *simulator) next() bool {
	e := heap.Pop(&s.q).(*event)
	s.now = e.at
	s.stats.Events++
	if s.stats.Events > s.cfg.MaxEvents {
		s.fail("more than %d events: the protocol may be looping (raise MaxEvents if not)", s.cfg.MaxEvents)
		return false
	}
	s.handle(e)
	return true
}

func (s *simulator) handle(e *event) {
	switch e.kind {
	case evPeer:
		s.onPeer(e)
	case evClientReq:
		s.onClientReq(e)
	case evClientBatch:
		s.onClientBatch(e)
	case evClientResp:
		s.onClientResp(e)
	case evTimer:
		s.onTimer(e)
	case evFsync:
		s.onFsync(e)
	case evClientNext:
		s.onClientNext(s.clients[e.client])
	case evClientRetry, evClientTimeout, evConnLost:
		s.onClientTrouble(e)
	case evNemesis:
		s.onNemesis()
	case evRestart:
		s.onRestart(e)
	case evResume:
		s.onResume(e)
	case evHealPartition:
		s.onHealPartition(e)
	case evWindowEnd:
		s.onWindowEnd(e)
	case evDeadline:
		s.tracef("deadline: no more operations")
		s.stopIssuing()
	case evDrainEnd:
		s.onDrainEnd()
	case evLivenessHeal:
		s.onLivenessHeal()
	case evPowerLoss:
		s.onPowerLoss()
	case evPowerOn:
		s.onPowerOn(e)
	case evMember:
		s.onMember(e)
	case evMemberRetry:
		s.onMemberRetry(e)
	case evMemberStop:
		s.onMemberStop(e)
	case evCPUDone:
		s.onCPUDone(e)
	case evArrival:
		s.onArrival()
	case evEffect:
		s.onEffect(e)
	case evEffectCPU:
		s.onEffectCPU(e)
	case evCallTimeout, evCallRetry:
		s.onCallTrouble(e)
	case evNestedEcho:
		s.onNestedEcho(e)
	default:
		s.fail("unknown event kind %d", e.kind)
	}
}

// stopIssuing ends the workload: heal every fault and give outstanding
// operations DrainTime to finish.
func (s *simulator) stopIssuing() {
	if s.stopping {
		return
	}
	s.stopping = true
	s.healAll()
	s.after(s.cfg.DrainTime, &event{kind: evDrainEnd})
	if s.callee != nil {
		s.callee.now = max(s.callee.now, s.now)
		s.callee.stopIssuing()
	}
}

// onDrainEnd records the operations still open as unknown and ends the run.
func (s *simulator) onDrainEnd() {
	s.tracef("drain time over: %d operations still open", s.busy)
	for _, c := range s.clients {
		if c.busy {
			s.giveUp(c)
		}
	}
	s.finished = true
}

// digestSum returns the hex trace digest.
func (s *simulator) digestSum() string { return hex.EncodeToString(s.digest.Sum(nil)) }

// labeledRand returns a random stream of its own for (seed, label): a hash
// of both seeds it, so that streams added after the master's (env, group,
// txn) leave the older ones unchanged and are unrelated across seeds and
// labels (a seed XOR a constant would make seed s's group stream another
// seed's txn stream).
func labeledRand(seed int64, label string) *rand.Rand {
	h := sha256.Sum256([]byte(fmt.Sprintf("synod-sim/%d/%s", seed, label)))
	return rand.New(rand.NewSource(int64(binary.LittleEndian.Uint64(h[:8]))))
}
