package sim

import (
	"fmt"
	"math/rand"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// Effects (automaton/effect.go): the simulator carries out an Effect when it
// is released (like a Send, after the Persists emitted before it are
// durable), synchronously, through the node incarnation's executor of the
// effect's kind, and delivers EffectDone as an event of its own: at once
// (the next event at the same virtual time) or, when the result implements
// automaton.CostedResult, Cost() later. The event carries the incarnation,
// so a crash loses it; a pause holds it like any input.

const (
	evEffect    evKind = 220 // an effect's EffectDone is due (effect.go)
	evEffectCPU evKind = 221 // Config.EffectCPU: a costed effect takes its node's processor
)

// runs numbers the simulated runs of the process (ExecEnv.Run).
var runs atomic.Uint64

// effectDone is an evEffect event's payload.
type effectDone struct {
	id   automaton.EffectID
	res  any
	err  error
	cost time.Duration // evEffectCPU: the processor time it takes
}

// executors returns n's executor set for its current incarnation.
func (s *simulator) executors(n *node) *automaton.Executors {
	if s.runID == "" {
		s.runID = fmt.Sprintf("sim-%d-seed-%d", runs.Add(1), s.cfg.Seed)
	}
	if n.execs == nil {
		inc := n.inc
		n.execs = automaton.NewExecutors(automaton.ExecEnv{
			Self:      n.id,
			Namespace: s.ns,
			Params:    copyParams(s.cfg.Params),
			Simulated: true,
			Run:       s.runID,
		}, func(kind string) *rand.Rand {
			return labeledRand(s.cfg.Seed, fmt.Sprintf("effect %s %d %s", n.id, inc, kind))
		})
	}
	return n.execs
}

// closeExecutors closes n's executors (its incarnation ended).
func (s *simulator) closeExecutors(n *node) {
	if n.execs == nil {
		return
	}
	if err := n.execs.Close(); err != nil {
		s.fail("%s: closing effect executors: %v", n.id, err)
	}
	n.execs = nil
}

// runEffect carries out a released Effect of n.
func (s *simulator) runEffect(n *node, o automaton.Effect) {
	if o.Kind == automaton.CallKind {
		s.startCall(n, o) // a nested request (callee.go)
		return
	}
	x, err := s.executors(n).For(o.Kind)
	if err != nil {
		s.fail("%s emitted an effect of kind %q: %v", n.id, o.Kind, err)
		return
	}
	s.stats.Effects++
	res, err := x.Execute(o.Payload)
	var d time.Duration
	if c, ok := res.(automaton.CostedResult); ok && err == nil {
		d = c.Cost()
		if d < 0 {
			s.fail("%s: effect %d of kind %q cost %v (negative)", n.id, o.ID, o.Kind, d)
			return
		}
	}
	s.tracef("%s effect %d %s done in %v (err %v)", n.id, o.ID, o.Kind, d, err)
	done := &effectDone{id: o.ID, res: res, err: err, cost: d}
	if s.cfg.EffectCPU && d > 0 {
		s.after(0, &event{kind: evEffectCPU, node: n.idx, inc: n.inc, effect: done})
		return
	}
	s.after(d, &event{kind: evEffect, node: n.idx, inc: n.inc, effect: done})
}

// onEffectCPU runs a costed effect on its node's processor (Config.
// EffectCPU): it waits in the processor's queue like any input, then holds
// the processor for its cost, during which the node's other inputs queue;
// EffectDone follows. So an execution is charged as the CPU model charges
// Apply calls (ApplyCost), not run beside the node for free.
func (s *simulator) onEffectCPU(e *event) {
	n := s.nodes[e.node]
	if !s.deliverable(e) || s.cpuDefer(n, e) {
		return
	}
	c := s.cpuOf(n)
	c.busy, c.node, c.inc, c.outs = true, n.idx, n.inc, nil
	s.after(e.effect.cost, &event{kind: evCPUDone, node: n.idx})
	s.after(e.effect.cost, &event{kind: evEffect, node: n.idx, inc: n.inc, effect: e.effect})
}

// onEffect delivers EffectDone, unless the incarnation is gone.
func (s *simulator) onEffect(e *event) {
	n := s.nodes[e.node]
	if !n.up || n.inc != e.inc {
		return
	}
	if !s.deliverable(e) {
		return // delivered on resume
	}
	if s.cpuDefer(n, e) {
		return
	}
	s.step(n, automaton.EffectDone{ID: e.effect.id, Result: e.effect.res, Err: e.effect.err})
}
