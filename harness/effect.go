package harness

import (
	"fmt"
	"math/rand"

	"github.com/synod-dev/synod/automaton"
)

// Effects (automaton/effect.go) in the hand-driven cluster: an Effect output
// waits in its node's effect queue until the test completes it
// (CompleteEffect, CompleteEffects); then the node's executor of that kind
// runs it synchronously and the node steps EffectDone. A crash empties the
// node's queue and closes its executors. Executors get the harness seed's
// deterministic random source, as in simulation.

// PendingEffect is an Effect waiting for the test to complete it.
type PendingEffect struct {
	Node   automaton.NodeID
	Effect automaton.Effect
}

// Effects returns the pending effects, oldest first.
func (c *Cluster) Effects() []PendingEffect { return append([]PendingEffect(nil), c.effects...) }

// CompleteEffect carries out the i-th pending effect and delivers its
// EffectDone; it returns the step's outputs.
func (c *Cluster) CompleteEffect(i int) []automaton.Output {
	c.t.Helper()
	if i < 0 || i >= len(c.effects) {
		c.t.Fatalf("harness: no pending effect %d (%d pending)", i, len(c.effects))
		return nil
	}
	p := c.effects[i]
	c.effects = append(c.effects[:i], c.effects[i+1:]...)
	x, err := c.executors(p.Node).For(p.Effect.Kind)
	if err != nil {
		c.t.Fatalf("harness: %s: effect %d: %v", p.Node, p.Effect.ID, err)
		return nil
	}
	res, err := x.Execute(p.Effect.Payload)
	return c.Step(p.Node, automaton.EffectDone{ID: p.Effect.ID, Result: res, Err: err})
}

// CompleteEffects completes pending effects, oldest first, including those
// the completions produce, until none is left; it returns how many ran.
func (c *Cluster) CompleteEffects() int {
	c.t.Helper()
	n := 0
	for len(c.effects) > 0 {
		c.CompleteEffect(0)
		n++
		if n > c.opts.MaxSteps {
			c.t.Fatalf("harness: effect storm: %d effects without quiet", n)
		}
	}
	return n
}

func (c *Cluster) executors(id automaton.NodeID) *automaton.Executors {
	if c.execs[id] == nil {
		boot := c.boots[id]
		c.execs[id] = automaton.NewExecutors(automaton.ExecEnv{
			Self: id, Namespace: c.opts.Namespace, Params: c.opts.Params, Simulated: true,
			Run: c.run,
		}, func(kind string) *rand.Rand {
			return rand.New(rand.NewSource(c.opts.Seed*7_000_003 + int64(c.index[id])*1013 + int64(boot)*17 + int64(len(kind))))
		})
	}
	return c.execs[id]
}

// dropEffects forgets node id's pending effects and closes its executors.
func (c *Cluster) dropEffects(id automaton.NodeID) {
	k := 0
	for _, p := range c.effects {
		if p.Node != id {
			c.effects[k] = p
			k++
		}
	}
	c.effects = c.effects[:k]
	if x := c.execs[id]; x != nil {
		if err := x.Close(); err != nil {
			c.t.Fatalf("harness: %s: closing executors: %v", id, err)
		}
		delete(c.execs, id)
	}
}

func (p PendingEffect) String() string {
	return fmt.Sprintf("%s effect %d %s", p.Node, p.Effect.ID, p.Effect.Kind)
}
