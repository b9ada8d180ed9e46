package paxos

import (
	"hash/fnv"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// BrokenLocalEnv is the name of the broken variant that forgets to agree on
// the environment of a nondeterministic service.
const BrokenLocalEnv = "paxos-broken-localenv"

func init() {
	automaton.RegisterBroken("paxos", brokenLocalEnv{protocol{Capabilities: capabilities(BrokenLocalEnv, "")}})
}

// brokenLocalEnv is Multi-Paxos that orders commands but not their
// environment: the leader logs no Env beside a command (the Grid Services thesis chapter
// I: a nondeterministic request must be made deterministic before it is
// replicated, which this variant fails to do), and each replica, executing
// the command, observes an environment of its own. Every replica agrees on
// the order and none on the Matchmaker's choice of a machine, so their
// states part at the first submit that two machines suit. Clients do not
// see it at once (each answer comes from one replica's valid choice); the
// simulator's convergence check does, comparing the state hashes of
// replicas at the same instance.
//
// It breaks paxos from outside the algorithm: the service handed to the
// replica declares itself deterministic (so the leader neither forwards
// nor logs the Env: phase2.go and clients.go ask
// service.IsNondeterministic), and its states replace whatever Env they are
// given by one of the replica's own: a hash of a seed the replica draws
// once at start (from Config.Rand) and the operation. The environment is a
// function of the replica and the operation, not a random stream, so a
// replica's state holds nothing mutable beyond the service state: the
// model checker's copies of a node (paxos's fast path shares the service
// wrapper between copies) stay independent and replay alike.
type brokenLocalEnv struct{ protocol }

var (
	_ automaton.Describer        = brokenLocalEnv{}
	_ automaton.ScenarioDeclarer = brokenLocalEnv{}
)

// Describe implements automaton.Describer.
func (brokenLocalEnv) Describe() string {
	return "the leader logs no environment beside a nondeterministic command and each replica applies it with an environment of its own; replicas diverge at the first matchmaker submit with two suitable machines, caught by the simulator's convergence check (--service matchmaker)"
}

// Scenarios implements automaton.ScenarioDeclarer: pinned seeds on which
// the convergence check catches the divergence (`synod-lab sim --protocol
// paxos-broken-localenv --service matchmaker --nodes 3 --clients 4 --ops 200
// --faults none --seeds 1-20` fails all 20; paxos passes them).
func (brokenLocalEnv) Scenarios() []automaton.Scenario {
	return []automaton.Scenario{{Name: "matchmaker, caught by the convergence check",
		Args:  []string{"--service", "matchmaker", "--nodes", "3", "--clients", "4", "--ops", "200", "--faults", "none"},
		Seeds: "1-2"}}
}

// New implements automaton.Protocol: paxos over the service with its
// environment made local to the replica.
func (p brokenLocalEnv) New(cfg automaton.Config) (automaton.Automaton, error) {
	if cfg.Service != nil && cfg.Rand != nil && service.IsNondeterministic(cfg.Service) {
		cfg.Service = localEnvService{cfg.Service, cfg.Rand.Uint64()}
	}
	return p.protocol.New(cfg)
}

// localEnvService hides the service's nondeterminism from the protocol.
type localEnvService struct {
	service.Service
	seed uint64 // the replica's own, drawn once
}

// Nondeterministic is the bug: the service claims to be deterministic.
func (localEnvService) Nondeterministic() bool { return false }

func (s localEnvService) NewState() service.State {
	return localEnvState{s.Service.NewState(), s.seed}
}

// localEnvState applies every operation with an environment of the
// replica's own: its seed mixed with the operation.
type localEnvState struct {
	service.State
	seed uint64
}

func (s localEnvState) Apply(op service.Op) service.Result {
	return s.ApplyEnv(op, service.Env{})
}

func (s localEnvState) ApplyEnv(op service.Op, _ service.Env) service.Result {
	return service.ApplyEnv(s.State, op, service.Env{Seed: localEnvSeed(s.seed, op)})
}

// localEnvSeed mixes the replica's seed with the operation (FNV-1a: the
// same in every process, so runs replay).
func localEnvSeed(seed uint64, op service.Op) uint64 {
	h := fnv.New64a()
	var b [8]byte
	for i := range b {
		b[i] = byte(seed >> (8 * i))
	}
	h.Write(b[:])
	h.Write([]byte(op.Kind))
	h.Write([]byte(op.Key))
	for _, a := range op.Args {
		h.Write(a)
	}
	return h.Sum64()
}
