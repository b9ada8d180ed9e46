package sim

import (
	"fmt"
	"os"
	"runtime"
	"strings"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
)

// Flags are `synod-lab sim`'s command-line flags. They live here, beside Config,
// so that the CLI only wires them and so that a protocol can state a
// simulation it wants run (automaton.Scenario) in the same words a person
// would type.
type Flags struct {
	Cfg                                 Config
	Seeds, ReadMode, SaveDir, TraceFile string
	Params, Links                       []string
	MembershipSpec                      string
	PowerLossSpec                       string
	Workers                             int
	Verbose                             bool
	// The callee namespace (Config.Callee; callee.go): set when
	// CalleeProtocol is not empty.
	CalleeProtocol, CalleeFaults, CalleeService string
	CalleeNodes                                 int
	CalleeParams                                []string
}

// Register defines the flags on f with their defaults.
func (v *Flags) Register(f *pflag.FlagSet) {
	cfg := &v.Cfg
	f.StringVar(&cfg.Protocol, "protocol", automaton.DefaultProtocol, "protocol to simulate (known: "+strings.Join(automaton.Names(), ", ")+"; or a broken variant)")
	f.IntVar(&cfg.Nodes, "nodes", 5, "number of nodes")
	f.IntVar(&cfg.Clients, "clients", 8, "number of closed-loop clients")
	f.IntVar(&cfg.Ops, "ops", 2000, "operations per seed (all clients together)")
	f.StringVar(&v.Seeds, "seeds", "1", `seeds to run: "N", "A-B", or a comma list of those`)
	f.StringVar(&cfg.Faults, "faults", "all", "faults to inject: all, none, or a comma list of "+strings.Join(FaultKinds, ","))
	f.StringVar(&cfg.Latency, "latency", DefaultLatency, "node-to-node one-way latency distribution")
	f.StringVar(&v.ReadMode, "read-mode", "linearizable", "read mode clients request: linearizable, regular or local (the checker still demands linearizability)")
	f.IntVar(&cfg.Keys, "keys", DefaultKeys, "number of distinct keys (few keys force contention)")
	f.StringVar(&cfg.Mix, "mix", "", "operation mix as kind:weight (kv: get, set, del, exists; counter: read, add; string: read, append; matchmaker: advertise, submit, cancel, withdraw, job, machines, queue; gridmatchmaker: advertise, submit, balance, available); default per service")
	f.StringVar(&cfg.Service, "service", ServiceName, "data type of the namespace: kv, counter, string, matchmaker (nondeterministic: protocols that replicate its environment or state) or gridmatchmaker (seed 002 chapter IV's deterministic Matchmaker, for pbdurable's mappings)")
	f.Float64Var(&cfg.StrictFrac, "strict", 0, "eventually-serializable protocols: fraction of strict operations")
	f.Float64Var(&cfg.PrevProb, "prev", 0, "eventually-serializable protocols: probability that an operation names an earlier completed one in its prev set")
	f.Float64Var(&cfg.Groups, "groups", 0, "fraction of operations sent as atomic groups (protocols that apply groups atomically; the history is then checked for strict serializability)")
	f.IntVar(&cfg.GroupSize, "group-size", 3, "operations per atomic group")
	f.Float64Var(&cfg.Txns, "txns", 0, "fraction of operations that run an interactive transaction: a begin, --txn-size operations each answered before the next, then a commit or abort (protocols with interactive transactions; the history is then checked for strict serializability)")
	f.IntVar(&cfg.TxnSize, "txn-size", 3, "operations per interactive transaction")
	f.Float64Var(&cfg.TxnAbort, "txn-abort", 0.1, "probability that a client aborts its transaction instead of committing it")
	f.IntVar(&cfg.ConvergeEvery, "converge-every", 0, "protocols whose replicas report their state: hash a replica's state whenever its applied count passes a multiple of this (0: at every change) and compare replicas at equal counts; above 1, replicas whose counts jump differently may rarely meet at one count, and the end-of-run comparison is what remains")
	f.BoolVar(&cfg.NoInvariants, "no-invariants", false, "do not check the protocol's invariants after every step")
	f.BoolVar(&cfg.ClientDriven, "client-driven", false, "protocols whose clients can coordinate (ABD: seed 001's client runs both phases against every replica): each client runs the operation's phases itself against every node, waiting for a majority, instead of sending it to one node that coordinates")
	f.DurationVar(&cfg.BatchWindow, "batch-window", 0, "protocols that step client batches (ABD, ESDS): deliver the client requests that reach a node within this virtual time as one batch, as a live node steps what it finds in its inbox together (0: each on arrival)")
	f.BoolVar(&cfg.NoFanout, "no-fanout", false, "protocols whose clients send each request to every replica (Fast Paxos, PB-Paxos): send to one node instead, which proposes or forwards on the client's behalf, as a RESP client's node does")
	f.Float64Var(&cfg.Loss, "loss", 0, "base message loss probability on every link")
	f.Float64Var(&cfg.Dup, "dup", 0, "base message duplication probability on every link")
	f.Float64Var(&cfg.ReorderFrac, "reorder", 0, "base fraction of messages delayed by an extra "+DefaultReorderDelay)
	f.StringVar(&cfg.Fsync, "fsync", DefaultFsync, "fsync duration distribution")
	f.StringVar(&cfg.ClientLatency, "client-latency", DefaultClientLatency, "client-to-node one-way latency distribution")
	f.StringVar(&cfg.Think, "think", DefaultThink, "client think time between operations")
	f.DurationVar(&cfg.ClockSkew, "clock-skew", 0, "give each node a clock offset in [-d, +d] (and a wall-clock epoch) for the time it stamps on requests (expiry)")
	f.DurationVar(&cfg.RequestTimeout, "timeout", DefaultRequestTimeout, "client request timeout (virtual time)")
	f.StringArrayVar(&v.Links, "link", nil, "latency of one directed link, e.g. n1->n2=pareto:5ms:1.5 (repeatable)")
	f.StringArrayVar(&v.Params, "param", nil, "protocol parameter key=value (repeatable)")
	f.DurationVar(&cfg.Liveness, "liveness", 0, "liveness mode: heal every fault at this virtual time while clients continue, then require every operation invoked after it plus --liveness-bound to complete within the bound")
	f.DurationVar(&cfg.LivenessBound, "liveness-bound", DefaultLivenessBound, "liveness mode: the time progress may take to resume, and the latency bound after it")
	f.DurationVar(&cfg.CheckTimeout, "check-timeout", DefaultCheckTimeout, "time limit of each linearizability check (real time; the matchmaker check is bounded by specification steps instead: check.DefaultMatchmakerSteps)")
	f.StringVar(&v.SaveDir, "save-failing", "sim-failures", "directory for the histories and HTML views of failing seeds")
	f.IntVar(&v.Workers, "workers", runtime.GOMAXPROCS(0), "seeds simulated in parallel")
	f.StringVar(&v.MembershipSpec, "membership", "", `membership changes (protocols that support them), e.g. "add@2s,remove:n1@4s": add a fresh node / remove a node at that virtual time`)
	f.StringVar(&v.PowerLossSpec, "power-loss", "", `whole-cluster power loss at these virtual times (comma list, e.g. "300ms,2s"): every node crashes at once, losing the records it had not synced, and restarts after --power-off`)
	f.StringVar(&cfg.PowerOff, "power-off", DefaultPowerOff, "how long the power stays off after a --power-loss (a distribution); each node restarts at a random offset of up to a quarter of it after that")
	f.StringVar(&v.TraceFile, "trace", "", "write a per-event trace of the (single) seed to this file")
	f.StringVar(&v.CalleeProtocol, "callee-protocol", "", "simulate a second namespace running this protocol, called by the first one's automata with nested requests (automaton.CallKind effects; seed 003 Adam); it must serve nested requests")
	f.IntVar(&v.CalleeNodes, "callee-nodes", 3, "number of nodes of the callee namespace")
	f.StringVar(&v.CalleeFaults, "callee-faults", "none", "faults injected into the callee namespace's nodes: all, none, or a comma list of "+strings.Join(FaultKinds, ","))
	f.StringVar(&v.CalleeService, "callee-service", ServiceName, "data type of the callee namespace")
	f.StringArrayVar(&v.CalleeParams, "callee-param", nil, "callee protocol parameter key=value (repeatable)")
	f.StringVar(&cfg.CalleeNamespace, "callee-namespace", DefaultCalleeNamespace, "name of the callee namespace (what Call.Namespace names)")
	f.StringVar(&cfg.CalleeDelay, "callee-delay", "", "extra virtual time every callee answer takes to come back: remote computation done at the callee in parallel (a distribution, e.g. constant:10ms)")
	f.BoolVar(&cfg.Nested, "nested", false, "mark every client request nested and send one more copy of each answered request to a random node later, as another caller replica would; every answer to one id must be equal (checks a protocol as a callee of nested requests)")
	f.BoolVarP(&v.Verbose, "verbose", "v", false, "print one line per seed (verdict, ops, times, digest); always on for a single seed")
}

// Build turns the parsed flags into a Config (Trace not set) and the seed
// list.
func (v *Flags) Build() (Config, []int64, error) {
	cfg := v.Cfg
	seeds, err := ParseSeeds(v.Seeds)
	if err != nil {
		return cfg, nil, err
	}
	if cfg.ReadMode, err = automaton.ParseReadMode(v.ReadMode); err != nil {
		return cfg, nil, err
	}
	if len(v.Params) > 0 {
		cfg.Params = map[string]string{}
		for _, p := range v.Params {
			k, val, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return cfg, nil, fmt.Errorf("--param %q: want key=value", p)
			}
			cfg.Params[k] = val
		}
	}
	if len(v.Links) > 0 {
		cfg.LinkLatency = map[string]string{}
		for _, l := range v.Links {
			k, val, ok := strings.Cut(l, "=")
			if !ok {
				return cfg, nil, fmt.Errorf("--link %q: want FROM->TO=DISTRIBUTION", l)
			}
			cfg.LinkLatency[k] = val
		}
	}
	if v.CalleeProtocol != "" {
		cfg.Callee = &Config{Protocol: v.CalleeProtocol, Nodes: v.CalleeNodes, Faults: v.CalleeFaults, Service: v.CalleeService}
		for _, p := range v.CalleeParams {
			k, val, ok := strings.Cut(p, "=")
			if !ok || k == "" {
				return cfg, nil, fmt.Errorf("--callee-param %q: want key=value", p)
			}
			if cfg.Callee.Params == nil {
				cfg.Callee.Params = map[string]string{}
			}
			cfg.Callee.Params[k] = val
		}
	} else if len(v.CalleeParams) > 0 {
		return cfg, nil, fmt.Errorf("--callee-param without --callee-protocol")
	}
	if cfg.CalleeNamespace == DefaultCalleeNamespace {
		cfg.CalleeNamespace = "" // the default, as Config spells it
	}
	if cfg.Membership, err = ParseMembership(v.MembershipSpec); err != nil {
		return cfg, nil, err
	}
	if cfg.PowerLoss, err = ParsePowerLoss(v.PowerLossSpec); err != nil {
		return cfg, nil, err
	}
	if cfg.PowerOff == DefaultPowerOff {
		cfg.PowerOff = "" // the default, as Config spells it
	}
	if v.Workers < 1 {
		return cfg, nil, fmt.Errorf("--workers must be at least 1, got %d", v.Workers)
	}
	return cfg, seeds, nil
}

// ParseArgs parses `synod-lab sim` arguments (without the command name) into a
// Config and seeds, as the CLI would.
func ParseArgs(args []string) (Config, []int64, error) {
	var v Flags
	fs := pflag.NewFlagSet("sim", pflag.ContinueOnError)
	fs.SetOutput(os.Stderr)
	v.Register(fs)
	if err := fs.Parse(args); err != nil {
		return Config{}, nil, err
	}
	if fs.NArg() > 0 {
		return Config{}, nil, fmt.Errorf("unexpected arguments %q", fs.Args())
	}
	return v.Build()
}
