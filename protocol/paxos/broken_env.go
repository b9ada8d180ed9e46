package paxos

import (
	"math/rand"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// BrokenLocalEnv is the name of the broken variant that forgets to agree on
// the environment of a nondeterministic service.
const BrokenLocalEnv = "paxos-broken-localenv"

func init() {
	automaton.RegisterBroken("paxos", brokenLocalEnv{protocol{name: BrokenLocalEnv}})
}

// brokenLocalEnv is Multi-Paxos that orders commands but not their
// environment: the leader logs no Env beside a command (seed 002 chapter
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
// given by one drawn from the replica's own random source.
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
// the convergence check catches the divergence (`synod sim --protocol
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
		cfg.Service = localEnvService{cfg.Service, rand.New(rand.NewSource(cfg.Rand.Int63()))}
	}
	return p.protocol.New(cfg)
}

// localEnvService hides the service's nondeterminism from the protocol.
type localEnvService struct {
	service.Service
	rnd *rand.Rand
}

// Nondeterministic is the bug: the service claims to be deterministic.
func (localEnvService) Nondeterministic() bool { return false }

func (s localEnvService) NewState() service.State {
	return localEnvState{s.Service.NewState(), s.rnd}
}

// localEnvState applies every operation with an environment drawn from the
// replica's own random source.
type localEnvState struct {
	service.State
	rnd *rand.Rand
}

func (s localEnvState) Apply(op service.Op) service.Result {
	return s.ApplyEnv(op, service.Env{})
}

func (s localEnvState) ApplyEnv(op service.Op, _ service.Env) service.Result {
	return service.ApplyEnv(s.State, op, service.Env{Seed: s.rnd.Uint64()})
}
