package adam

import (
	"fmt"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// Name is the protocol's registered name.
const Name = "adam"

// BrokenCallFirst emits nested calls before the wall is verified.
const BrokenCallFirst = Name + "-broken-callfirst"

func init() {
	automaton.Register(protocol{Capabilities: capabilities(Name,
		"Adam (the Eve/Adam thesis §3-5): Eve's execute-verify replication for a service that calls another replicated service; requests run as resumable steps, every nested call leaves only after its wall is verified, with naive, walls, spm and ppm execution strategies")})
	automaton.RegisterBroken(Name, protocol{callFirst: true, Capabilities: capabilities(BrokenCallFirst,
		"replicas send their nested requests as soon as their own speculative run reaches the wall, before the verifiers commit it (no output commit, the Eve/Adam thesis §3): diverged replicas send different bytes under one nested id; the invariant call-after-commit catches it, the simulator's same-bytes-per-nested-id check too")})
}

// capabilities is the registration of the protocol or its variant (its
// scenarios and invariants are methods: scenarios.go, invariant.go).
func capabilities(name, doc string) automaton.Capabilities {
	return automaton.Capabilities{Protocol: name, Doc: doc,
		// The duplicate table is replicated state (eve's), so a retry at
		// another node applies at most once.
		Idempotent: true,
		Params:     params.Defaults(),
		// The namespace named by the callee parameter. A cluster file
		// whose adam namespace calls a namespace the cluster lacks (or
		// one that does not serve nested requests) is refused at
		// configuration time, before any SET could be answered.
		Callees: func(prm map[string]string) []string {
			if c, ok := prm["callee"]; ok {
				return []string{c}
			}
			return []string{params.Defaults()["callee"]}
		},
		// Every write of the default service calls the callee namespace,
		// so the conformance suite's standard scenarios run a paxos callee
		// beside adam (without one every write failed and only reads were
		// judged; scenarios.go).
		StandardCallee: callee,
	}
}

// protocol is the registration: its capabilities and the broken variant's
// switch.
type protocol struct {
	automaton.Capabilities
	callFirst bool // broken: calls leave from speculative states
}

// Scenarios implements automaton.ScenarioDeclarer.
func (p protocol) Scenarios() []automaton.Scenario { return scenarios(p) }

// Strategies (the Eve/Adam thesis §3.2, package doc).
const (
	Naive = "naive"
	Walls = "walls"
	SPM   = "spm"
	PPM   = "ppm"
)

var params = proto.NewSpec(
	proto.Param{Name: "callee", Kind: proto.String, Default: "remote",
		Doc: "the namespace the program's nested requests call: a namespace of this cluster that serves nested requests (paxos, pbpaxos), or CLUSTER/NAMESPACE, a namespace of another Synod cluster listed under the cluster file's remotes"},
	proto.Param{Name: "program", Kind: proto.String, Default: "trail",
		Doc: "the requests that call the callee (service.NestedProgram, registered by name): trail, the seed's microbenchmark (SET k v appends to trail:k at the callee), or a user's"},
	proto.Param{Name: "strategy", Kind: proto.Enum, Default: PPM, Choices: []string{Naive, Walls, SPM, PPM},
		Doc: "naive: one thread, one core; walls: one group of `threads` threads (Eve modified, §3.2.2); spm: `threads` single-thread groups on one core (§3.2.3, §5.1.2); ppm: `groups` groups of `threads` threads (§4.1, §5.2)"},
	proto.Param{Name: "groups", Kind: proto.Int, Default: "3", Min: "1", Max: "64",
		Doc: "G, thread groups taking turns on the pipeline (ppm)"},
	proto.Param{Name: "threads", Kind: proto.Int, Default: "8", Min: "1", Max: "256",
		Doc: "k, threads per group (ppm, walls), or the SPM's lightweight threads (spm)"},
	proto.Param{Name: "cores", Kind: proto.Int, Default: "8", Min: "1", Max: "1024",
		Doc: "virtual cores per replica in simulation (naive and spm run on one)"},
	proto.Param{Name: "local_cost", Kind: proto.Duration, Default: "1ms", Min: "0",
		Doc: "virtual time of one request's local step"},
	proto.Param{Name: "hash_cost", Kind: proto.Duration, Default: "0s", Min: "0",
		Doc: "simulated Merkle cost per hashed (written) object"},
	proto.Param{Name: "merkle", Kind: proto.Enum, Default: "real", Choices: []string{"real", "fake"},
		Doc: "fake: hashing and versioning cost nothing (seed Fig 6.3's zero-cost tree)"},
	proto.Param{Name: "batch", Kind: proto.Int, Default: "48", Min: "1",
		Doc: "max client requests per batch (assigned to the threads at its start)"},
	proto.Param{Name: "verifiers", Kind: proto.Int, Default: "0", Min: "0",
		Doc: "as eve's: 0 co-located, k > 0 the last k nodes verify only"},
	proto.Param{Name: "r", Kind: proto.Int, Default: "-1", Min: "-1",
		Doc: "as eve's: commission failures tolerated, a commit needs r+1 matching tokens (-1: (E-1)/2)"},
	proto.Param{Name: "timeout", Kind: proto.Duration, Default: eve.DefaultTimeout.String(), Min: "0", MinOpen: true,
		Doc: "as eve's: retransmissions, the verifiers' wait for tokens, suspicion of a silent leader"},
	proto.Param{Name: "mac_key", Kind: proto.String, Default: eve.DefaultMACKey,
		Doc: "as eve's: the cluster's token key"},
	proto.Param{Name: "conflicts", Kind: proto.Enum, Default: "service", Choices: []string{"service", "loose"},
		Doc: "loose: nestedkv-loose's incomplete declaration (a SET's second step declared a read of its key), to make replicas diverge"},
	proto.Param{Name: "commission", Kind: proto.List, Default: "",
		Doc: "as eve's: nodes whose executions are corrupted"},
	proto.Param{Name: "observe", Kind: proto.String, Default: "",
		Doc: "as eve's: the name of an eve.Recorder collecting the nodes' counters"},
)

// New implements automaton.Protocol: eve's engine with Adam's extension.
func (p protocol) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service == nil {
		return nil, fmt.Errorf("%s: namespace %q has no service", p.Protocol, cfg.Namespace)
	}
	if err := service.CheckNestedService(cfg.Service); err != nil {
		return nil, fmt.Errorf("%s: namespace %q: %w", p.Protocol, cfg.Namespace, err)
	}
	prm, err := params.Parse(p.Protocol, cfg.Params)
	if err != nil {
		return nil, err
	}
	x := &ext{proto: p, ns: cfg.Namespace, callee: prm.String("callee"),
		answers: map[string]service.Result{}, issued: map[string]bool{}, calls: map[automaton.EffectID]string{}}
	if x.callee == cfg.Namespace {
		return nil, fmt.Errorf("%s: namespace %q calls itself", p.Protocol, cfg.Namespace)
	}
	groups, threads, cores := prm.Int("groups"), prm.Int("threads"), prm.Int("cores")
	switch prm.String("strategy") {
	case Naive:
		groups, threads, cores = 1, 1, 1
	case Walls:
		groups = 1
	case SPM:
		groups, threads, cores = threads, 1, 1
	}
	prog, err := service.LookupNestedProgram(prm.String("program"))
	if err != nil {
		return nil, fmt.Errorf("%s: namespace %q: program: %w", p.Protocol, cfg.Namespace, err)
	}
	x.ppm = newPPM(groups, threads, prm.Int("batch"))
	x.ppm.prog = prog
	localCost := prm.Duration("local_cost")
	hashCost := prm.Duration("hash_cost")
	if prm.String("merkle") == "fake" {
		hashCost = 0
	}
	e := eve.Engine{
		Verifiers: prm.Int("verifiers"), R: prm.Int("r"),
		BatchMax: 1 << 20, Cores: cores, HashCost: hashCost,
		Timeout: prm.Duration("timeout"), MACKey: prm.String("mac_key"),
		Commission: prm.List("commission"),
		Cost:       stepCost(localCost),
		Ext:        x,
	}
	// The program's state: the namespace's own service (the sharded KV
	// for kv), with the suspended requests beside it.
	nkv, _ := service.Lookup(service.NestedKVName)
	e.StateSvc = nkv.(service.NestedKV).WithProgram(prog).WithService(cfg.Service)
	e.ConfSvc = e.StateSvc
	if prm.String("conflicts") == "loose" {
		if n := cfg.Service.Name(); n != "kv" && n != service.ShardedKVName {
			return nil, fmt.Errorf("%s: conflicts=loose needs a kv namespace, not %s", p.Protocol, cfg.Service.Name())
		}
		loose, _ := service.Lookup(service.NestedKVLooseName)
		e.ConfSvc = loose.(service.NestedKV).WithProgram(prog)
	}
	if name := prm.String("observe"); name != "" {
		if e.Recorder = eve.LookupRecorder(name); e.Recorder == nil {
			return nil, fmt.Errorf("%s: observe=%s names no recorder", p.Protocol, name)
		}
	}
	return eve.NewEngine(p.Protocol, cfg, e)
}

// stepCost is the virtual time of one step: local_cost for a request's
// local step (a SET's first step, any other operation), nothing for the
// step after a nested call (it stores what the local step computed).
func stepCost(local time.Duration) func(service.Op) time.Duration {
	return func(op service.Op) time.Duration {
		if op.Kind == service.NestedResume {
			return 0
		}
		return local
	}
}

// ext is one node's Adam part of eve's engine (eve.Ext).
type ext struct {
	proto  protocol
	ns     string
	callee string

	// Nested calls of this incarnation (calls.go).
	answers map[string]service.Result     // by request identity: the callee's answers received
	issued  map[string]bool               // by request identity: a call left
	calls   map[automaton.EffectID]string // call effect -> request identity
	effects uint64
	emitted []emittedCall // every call sent, for the invariant call-after-commit

	ppm *ppm // the primary's scheduler (ppm.go)
}

// Deferred implements eve.Ext: a request suspended at its nested call
// answers nobody yet.
func (x *ext) Deferred(res service.Result) bool { return service.IsNestedPending(res) }

// NextBatch implements eve.Ext: the PPM's next wall (ppm.go).
func (x *ext) NextBatch(a *eve.Eve, queue []eve.Entry) (take, rest []eve.Entry) {
	return x.ppm.next(a, x, queue)
}

// extOf returns a node's Adam part.
func extOf(a automaton.Automaton) (*eve.Eve, *ext) {
	e, ok := a.(*eve.Eve)
	if !ok {
		return nil, nil
	}
	x, ok := e.Ext().(*ext)
	if !ok {
		return nil, nil
	}
	return e, x
}
