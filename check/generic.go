package check

import (
	"hash/fnv"
	"strconv"
	"strings"
	"sync"

	"github.com/anishathalye/porcupine"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// The generic model: linearizability for any deterministic service.
//
// KV and Counter have hand-written models (model.go) that Linearizable
// keeps: their partitioning (one object per KV key), speed and reports do
// not change. Any other registered service that does not declare itself
// nondeterministic (service.IsNondeterministic) is checked by running the
// service itself as its sequential specification:
//
//   - the state is the service's Snapshot bytes (genState); the initial
//     state is nil, meaning NewState;
//   - a step restores the snapshot into a fresh State, applies the
//     operation and snapshots the result; the reply is compared with the
//     recorded one (history.FromResult);
//   - equality and hashing use the snapshot bytes. Two equivalent states
//     with different encodings (an empty list encoded as null and as [])
//     only cost Porcupine a cache miss: Equal prunes the search, it does not
//     decide it.
//
// The whole namespace is one object (one Porcupine partition), as for the
// Counter: the model knows nothing of the service's objects, so it cannot
// split them. That keeps it correct for services whose operations read
// several keys (a Matchmaker submit reads every machine) and bounds it to
// histories of a few hundred operations with a handful of clients.
//
// The nondeterministic Matchmaker has its own check (matchmaker.go);
// gridmatchmaker (the Grid Services thesis IV.D.2, deterministic: the first suitable
// machine) is the first service checked this way.

// genState is the state of a generic partition: the service's snapshot.
type genState string

// genericService reports whether a service name is checked by the generic
// model, and returns the service.
func genericService(name string) (service.Service, bool) {
	if name == "kv" || name == "counter" {
		return nil, false
	}
	svc, err := service.Lookup(name)
	if err != nil || service.IsNondeterministic(svc) {
		return nil, false
	}
	return svc, true
}

// applyGeneric runs in on state s of svc.
func applyGeneric(svc service.Service, s interface{}, in input) (history.Result, genState, bool) {
	st := svc.NewState()
	if g, ok := s.(genState); ok {
		if err := st.Restore([]byte(g)); err != nil {
			return history.Result{}, "", false
		}
	}
	op := service.Op{Kind: in.kind, Key: in.key}
	for _, a := range in.args {
		op.Args = append(op.Args, []byte(a))
	}
	res := st.Apply(op)
	return history.FromResult(res), genState(st.Snapshot()), true
}

// specFor returns the porcupine model of a check: newSpec's, extended by
// the generic model when a namespace runs a service other than kv or
// counter (otherwise newSpec's unchanged, so kv and counter checks cost
// what they did).
func specFor(opt Options) porcupine.Model {
	gens := map[string]service.Service{}
	for _, name := range opt.Services {
		if svc, ok := genericService(name); ok {
			gens[name] = svc
		}
	}
	m := newSpec(opt)
	if len(gens) == 0 {
		return m
	}
	step, equal, hash, descState := m.Step, m.Equal, m.Hash, m.DescribeState
	memo := &genMemo{m: map[genKey]genStep{}}
	m.Step = func(state, in, out interface{}) (bool, interface{}) {
		i := in.(input)
		svc, ok := gens[i.service]
		if !ok {
			return step(state, in, out)
		}
		want, next, ok := memo.apply(svc, state, i)
		if !ok {
			return false, state
		}
		o := out.(output)
		return o.unknown || want.Equal(o.res), next
	}
	m.Equal = func(a, b interface{}) bool {
		ga, aok := a.(genState)
		gb, bok := b.(genState)
		if aok || bok {
			return aok && bok && ga == gb
		}
		return equal(a, b)
	}
	m.Hash = func(state interface{}) uint64 {
		g, ok := state.(genState)
		if !ok {
			return hash(state)
		}
		h := fnv.New64a()
		h.Write([]byte(g))
		return h.Sum64()
	}
	m.DescribeState = func(state interface{}) string {
		if g, ok := state.(genState); ok {
			return quote(string(g))
		}
		return descState(state)
	}
	return m
}

// genMemo remembers generic steps. Porcupine backtracks and tries the same
// operation on the same state many times; restoring and snapshotting a
// service state costs microseconds, so each (state, operation) pair is run
// once. The memo is shared by the partitions checked in parallel, hence the
// lock, and is emptied when it holds genMemoMax steps.
type genMemo struct {
	mu sync.Mutex
	m  map[genKey]genStep
}

const genMemoMax = 1 << 18

type genKey struct {
	state genState
	nilSt bool // the initial state (nil)
	svc   string
	op    string
}

type genStep struct {
	res  history.Result
	next genState
	ok   bool
}

// opKey writes an input's operation as a memo key: each part length-
// prefixed, so that arguments holding any bytes (a NUL included) cannot
// make two different operations one key.
func opKey(in input) string {
	var b strings.Builder
	for _, part := range append([]string{in.kind, in.key}, in.args...) {
		b.WriteString(strconv.Itoa(len(part)))
		b.WriteByte(':')
		b.WriteString(part)
	}
	return b.String()
}

func (g *genMemo) apply(svc service.Service, s interface{}, in input) (history.Result, genState, bool) {
	st, _ := s.(genState)
	k := genKey{state: st, nilSt: s == nil, svc: in.service, op: opKey(in)}
	g.mu.Lock()
	v, hit := g.m[k]
	g.mu.Unlock()
	if hit {
		return v.res, v.next, v.ok
	}
	v.res, v.next, v.ok = applyGeneric(svc, s, in)
	g.mu.Lock()
	if len(g.m) >= genMemoMax {
		clear(g.m)
	}
	g.m[k] = v
	g.mu.Unlock()
	return v.res, v.next, v.ok
}
