package sim

import (
	"fmt"
	"math/rand"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The CPU model: processing time for the inputs a node handles.
//
// Off by default (every step takes no virtual time). It is on when any of
// Config.OpCost, ApplyCost or MsgCost is set, or EffectCPU (a costed
// effect then holds its node's processor for its cost, effect.go). Then every step of an automaton
// other than Start takes virtual CPU time on its node's processor:
//
//	OpCost                  per client request (ClientRequest input)
//	MsgCost                 per peer message (PeerMessage input)
//	ApplyCost × applies     per service Apply call the step made (counted
//	                        through a wrapper around the namespace's service,
//	                        so re-applying operations costs what it does)
//
// each cost a distribution (ParseDist) sampled per item from a stream of its
// own, derived from the seed after every other stream (so that turning the
// model on changes no other random choice). The step runs when the processor
// takes the input, and its outputs (sends, responses, persists, timers) are
// carried out when its CPU time is over; inputs that arrive meanwhile — client
// requests, peer messages, timers — wait in the processor's FIFO queue, like
// messages in an MPI queue waiting for the process to receive them (the ESDS thesis
// §5.3). Config.CPUs, when positive, is the number of processors: node i runs
// on processor i mod CPUs, so nodes beyond CPUs share one (the ESDS thesis §5.4's
// virtual replicas; the queue is shared, first come first served). A crash
// loses the step's outputs (the event carries the incarnation) but the
// processor stays busy until the step's time is over; a pause does not stop a
// step already running. Everything is driven by the event queue, so runs stay
// deterministic.
//
// The simulator also records, for every answered client request, the replica
// response time (Result.ReplicaTimes): from the start of the step that took
// the request off the queue to the release of its response. That is seed
// 000's T_r (§5.3), without the queueing that T_fe includes.

const (
	evCPUDone evKind = 201 // a processor finished its step
	evArrival evKind = 202 // open loop: the next operation arrives (openloop.go)
)

type cpuState struct {
	busy bool
	q    []*event
	// The running step: its node, the incarnation, and its outputs.
	node int
	inc  uint64
	outs []automaton.Output
}

type cpuModel struct {
	on               bool
	op, apply, msg   Dist
	hasOp, hasApply  bool
	hasMsg           bool
	cpus             []*cpuState
	rng              *rand.Rand
	queued, maxQueue int
}

// initCPU parses the CPU model of cfg; it runs after every other random
// stream is derived.
func (s *simulator) initCPU(next func() int64) error {
	c := &s.cpu
	for _, d := range []struct {
		name, src string
		dst       *Dist
		has       *bool
	}{
		{"op cost", s.cfg.OpCost, &c.op, &c.hasOp},
		{"apply cost", s.cfg.ApplyCost, &c.apply, &c.hasApply},
		{"message cost", s.cfg.MsgCost, &c.msg, &c.hasMsg},
	} {
		if d.src == "" {
			continue
		}
		v, err := ParseDist(d.src)
		if err != nil {
			return fmt.Errorf("sim: %s: %w", d.name, err)
		}
		*d.dst, *d.has = v, true
	}
	if s.cfg.CPUs < 0 {
		return fmt.Errorf("sim: CPUs %d is negative", s.cfg.CPUs)
	}
	c.on = c.hasOp || c.hasApply || c.hasMsg || s.cfg.EffectCPU
	if !c.on {
		if s.cfg.CPUs > 0 {
			return fmt.Errorf("sim: CPUs set without a cost (OpCost, ApplyCost, MsgCost or EffectCPU)")
		}
		return nil
	}
	s.cpuOn = true
	n := s.cfg.CPUs
	if n == 0 || n > s.cfg.Nodes {
		n = s.cfg.Nodes
	}
	for i := 0; i < n; i++ {
		c.cpus = append(c.cpus, &cpuState{})
	}
	c.rng = rand.New(rand.NewSource(next()))
	return nil
}

func (s *simulator) cpuOf(n *node) *cpuState { return s.cpu.cpus[n.idx%len(s.cpu.cpus)] }

// cpuDefer queues e when n's processor is busy (or others wait before it).
func (s *simulator) cpuDefer(n *node, e *event) bool {
	if !s.cpuOn {
		return false
	}
	c := s.cpuOf(n)
	if !c.busy {
		return false
	}
	e.arrived = true // past the network: a partition no longer drops it
	c.q = append(c.q, e)
	s.cpu.queued++
	s.cpu.maxQueue = max(s.cpu.maxQueue, len(c.q))
	return true
}

// cpuRun charges the step that just ran on n and defers its outputs.
func (s *simulator) cpuRun(n *node, in automaton.Input, outs []automaton.Output) {
	m := &s.cpu
	var d time.Duration
	switch in := in.(type) {
	case automaton.ClientRequest:
		if m.hasOp {
			d += m.op.Sample(m.rng)
		}
	case automaton.ClientBatch:
		if m.hasOp {
			for range in.Reqs {
				d += m.op.Sample(m.rng)
			}
		}
	case automaton.PeerMessage:
		if m.hasMsg {
			d += m.msg.Sample(m.rng)
		}
	}
	if m.hasApply {
		for i := 0; i < n.applies; i++ {
			d += m.apply.Sample(m.rng)
		}
	}
	c := s.cpuOf(n)
	c.busy, c.node, c.inc, c.outs = true, n.idx, n.inc, outs
	s.after(d, &event{kind: evCPUDone, node: n.idx})
}

// onCPUDone carries out the finished step's outputs and gives the processor
// to the next queued input.
func (s *simulator) onCPUDone(e *event) {
	n := s.nodes[e.node]
	c := s.cpuOf(n)
	outs := c.outs
	node := s.nodes[c.node]
	c.busy, c.outs = false, nil
	if node.up && node.inc == c.inc && node.a != nil {
		s.carryOut(node, outs)
	}
	for !c.busy && len(c.q) > 0 && s.err == nil {
		next := c.q[0]
		c.q = c.q[1:]
		s.handle(next)
	}
}

// nodeService is the service n's automata get: s.svc, wrapped to count Apply
// calls when the CPU model charges for them.
func (s *simulator) nodeService(n *node) service.Service {
	if !s.cpu.hasApply {
		return s.svc
	}
	return countingService{s.svc, n}
}

type countingService struct {
	service.Service
	n *node
}

func (c countingService) NewState() service.State { return countingState{c.Service.NewState(), c.n} }

type countingState struct {
	service.State
	n *node
}

func (c countingState) Apply(op service.Op) service.Result {
	c.n.applies++
	return c.State.Apply(op)
}

// Nondeterministic forwards the wrapped service's declaration, so that a
// protocol asking service.IsNondeterministic gets the same answer.
func (c countingService) Nondeterministic() bool { return service.IsNondeterministic(c.Service) }

// ApplyEnv counts and forwards to the wrapped state's ApplyEnv, so that a
// nondeterministic service still reads the agreed environment.
func (c countingState) ApplyEnv(op service.Op, env service.Env) service.Result {
	c.n.applies++
	return service.ApplyEnv(c.State, op, env)
}

// noteReplicaTime records the replica response time of a request answered
// by n (see the doc above).
func (s *simulator) noteReplicaTime(n *node, id automaton.RequestID) {
	if s.replicaT == nil {
		return
	}
	if t0, ok := s.replicaT[n.idx][id]; ok {
		s.replicaTimes = append(s.replicaTimes, s.now-t0)
		delete(s.replicaT[n.idx], id)
	}
}
