package mc

import (
	"fmt"
	"hash/maphash"
	"math/rand"
	"reflect"
	"slices"
	"sync/atomic"

	"github.com/synod-dev/synod/automaton"
)

// Effects (automaton/effect.go) in the checker. An Effect output waits in
// its node's list of pending effects; completing one is an enabled event
// (EvEffect, any pending effect in any order): the checker runs the effect's
// executor and steps the node with its EffectDone, in the same event, as
// harness.CompleteEffect does. A crash loses the node's pending effects, as
// in every runtime. The pending payloads are part of the state: they are
// copied with their node's automaton by one copier (a payload may share
// memory with the automaton: Eve hands its batch state to the executor) and
// hashed into the fingerprint.
//
// Executors are made fresh for each completion, with a random source seeded
// by (node, boot, effect id, kind), so that a path replays exactly. An
// executor whose state outlives one effect (the durability proxies' SQL
// database, which outlives node crashes: another machine) is declared in
// ModelConfig.StatefulEffects: the world then keeps the log of those
// effects carried out on its path (part of the state and of the
// fingerprint), and each completion first re-applies the log to a fresh
// executor of a run of its own, so that sibling states never share a
// database.

// runs numbers executor runs (ExecEnv.Run), unique in the process.
var runs atomic.Uint64

type pendingEffect struct {
	id      automaton.EffectID
	kind    string
	payload any
	// fp hashes the payload when emitted: the automaton may not touch it
	// until its EffectDone, so it stays valid (and copies share it).
	fp uint64
}

// loggedEffect is an effect a stateful executor carried out on the path;
// payload is a private deep copy taken before it ran.
type loggedEffect struct {
	kind    string
	payload any
	fp      uint64
}

// completeEffect carries out node i's k-th pending effect and steps the node
// with its EffectDone.
func (w *world) completeEffect(i, k int) error {
	n := &w.nodes[i]
	if n.a == nil || k < 0 || k >= len(n.effects) {
		return fmt.Errorf("no pending effect %d at %s", k, w.ids[i])
	}
	w.own(i) // the payload is executed on in place: this world's own copy
	e := n.effects[k]
	n.effects = slices.Delete(slices.Clone(n.effects), k, k+1)
	stateful := slices.Contains(w.cfg.Model.StatefulEffects, e.kind)
	var ran []loggedEffect
	if stateful {
		for _, l := range w.ext {
			if l.kind == e.kind {
				ran = append(ran, l)
			}
		}
	}
	env := automaton.ExecEnv{Self: w.ids[i], Namespace: "default", Params: w.cfg.Model.Params, Simulated: true,
		Run:  fmt.Sprintf("mc-%d", runs.Add(1)),
		Rand: rand.New(rand.NewSource(int64(i+1)*1_000_003 + int64(n.boots)*10_007 + int64(e.id)*101 + int64(len(e.kind))))}
	f, err := automaton.LookupExecutor(e.kind)
	if err != nil {
		w.fail(fmt.Sprintf("contract: %s emitted an effect of kind %q: %v", w.ids[i], e.kind, err))
		return nil
	}
	x, err := f(env)
	if err != nil {
		return fmt.Errorf("%s: executor %s: %w", w.ids[i], e.kind, err)
	}
	defer x.Close()
	for _, l := range ran {
		if _, err := x.Execute(newCopier().copyAny(l.payload)); err != nil {
			return fmt.Errorf("%s: re-applying a logged %s effect: %w", w.ids[i], e.kind, err)
		}
	}
	if stateful {
		cp := newCopier().copyAny(e.payload)
		w.ext = append(w.ext[:len(w.ext):len(w.ext)], loggedEffect{kind: e.kind, payload: cp, fp: valueHash(cp)})
	}
	res, err := x.Execute(e.payload)
	w.step(i, automaton.EffectDone{ID: e.id, Result: res, Err: err})
	return nil
}

// effectsHash hashes a node's pending effects (ids, kinds, payloads).
func effectsHash(effs []pendingEffect) uint64 {
	if len(effs) == 0 {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	for _, e := range effs {
		hs.u64(&h, uint64(e.id))
		h.WriteString(e.kind)
		hs.u64(&h, e.fp)
	}
	return h.Sum64()
}

// extHash hashes the stateful executors' log.
func extHash(log []loggedEffect) uint64 {
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{}
	for _, l := range log {
		h.WriteString(l.kind)
		hs.u64(&h, l.fp)
	}
	return h.Sum64()
}

func valueHash(x any) uint64 {
	if x == nil {
		return 0
	}
	var h maphash.Hash
	h.SetSeed(seed)
	hs := &hasher{stack: map[uintptr]bool{}, roots: map[uintptr]int{}}
	hs.value(&h, reflect.ValueOf(x))
	return h.Sum64()
}
