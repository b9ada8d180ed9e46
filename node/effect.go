package node

import (
	"math/rand"
	"sync"
	"time"

	crand "crypto/rand"
	"encoding/binary"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/automaton/cpuwork"
)

// Effects (automaton/effect.go) in the live runtime. An Effect is released
// like a Send, in emission order, once every Persist emitted before it is
// durable (release1, under rmu); each runs on a goroutine of its own
// through the loop's executor of its kind, and its EffectDone enters the
// inbox like any input. Executors are created on first use, one per
// (namespace loop, kind), and closed when the loop ends, after every
// running effect has returned; an EffectDone that finds the node stopping
// is dropped, as a crash would lose it.

// effects is a loop's executor set and running effects.
type effects struct {
	execs *automaton.Executors // under nsLoop.rmu (release1 holds it)
	wg    sync.WaitGroup
}

// runEffect starts a released Effect. Called with l.rmu held.
func (l *nsLoop) runEffect(o automaton.Effect) {
	if o.Kind == automaton.CallKind {
		l.runCall(o) // a nested request (call.go)
		return
	}
	if l.eff.execs == nil {
		dir, run := "", ""
		if l.n.cfg != nil {
			run = l.n.cfg.Cluster
			if l.n.cfg.DataDir != "" {
				dir = l.n.cfg.NodeDataDir(string(l.n.id))
			}
		}
		params := make(map[string]string, len(l.ns.Params))
		for k, v := range l.ns.Params {
			params[k] = v
		}
		l.eff.execs = automaton.NewExecutors(automaton.ExecEnv{
			Self: l.n.id, Namespace: l.ns.Name, Params: params, DataDir: dir, Run: run,
			WorkPerMs: cpuwork.Calibrate(),
		}, func(string) *rand.Rand {
			var seed [8]byte
			_, _ = crand.Read(seed[:])
			return rand.New(rand.NewSource(int64(binary.LittleEndian.Uint64(seed[:]))))
		})
	}
	x, err := l.eff.execs.For(o.Kind)
	l.eff.wg.Add(1)
	go func() {
		defer l.eff.wg.Done()
		var res any
		if err != nil {
			l.log.Error("effect of an unknown or failing executor kind (protocol bug or configuration error)", "kind", o.Kind, "err", err)
		} else {
			// Timed here, around the executor, so protocol code stays
			// clock-free (synod_effect_duration_seconds).
			start := time.Now()
			res, err = x.Execute(o.Payload)
			l.n.m.effects.WithLabelValues(l.ns.Name, o.Kind).Observe(time.Since(start).Seconds())
		}
		l.push(event{in: automaton.EffectDone{ID: o.ID, Result: res, Err: err}})
	}()
}

// closeEffects waits for the running effects and closes the executors. The
// loop calls it when it ends, after the committer has released its last
// outputs (so no effect starts after it).
func (l *nsLoop) closeEffects() {
	l.eff.wg.Wait()
	l.rmu.Lock()
	defer l.rmu.Unlock()
	if l.eff.execs != nil {
		if err := l.eff.execs.Close(); err != nil {
			l.log.Error("closing effect executors", "err", err)
		}
		l.eff.execs = nil
	}
}
