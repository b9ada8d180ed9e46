package mc

import (
	"reflect"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/service"
)

// fastPathModels are the checks each fast-path protocol (and each of its
// broken variants) runs both ways: its model within a depth, ABD with
// interchangeable clients (the renaming goes through AppendModelState),
// and the paxos variants mc catches in their own models, whole (a leader
// change, and a crash before an fsync).
func fastPathModels(t *testing.T, base string) []Config {
	names := []string{base}
	for _, b := range automaton.BrokenNames() {
		if automaton.BrokenOf(b) == base {
			names = append(names, b)
		}
	}
	var cfgs []Config
	for _, n := range names {
		cfg := NewConfig(n)
		if !wholeModel[n] {
			cfg.Depth, cfg.MaxStates = 9, 2500
		}
		cfgs = append(cfgs, cfg)
	}
	if base == "abd" {
		cfgs = append(cfgs, symmetricABD("abd", 3, true), symmetricABD("abd-broken-nowriterid", 3, true))
		cfgs[len(cfgs)-1].Depth, cfgs[len(cfgs)-2].Depth = 7, 7
	}
	for k := range cfgs {
		// Node symmetry reduces only on the fast path (nodesym.go): the
		// two paths are compared without it, whatever a model declares.
		cfgs[k].Model.SymmetricNodes = false
	}
	return cfgs
}

// wholeModel: the broken variants checked in their declared models to
// their counterexamples.
var wholeModel = map[string]bool{"paxos-broken-skipphase1values": true, paxos.BrokenEarlyAck: true}

// TestFastPathMatchesReflective: a protocol that encodes and copies its
// own state (automaton.ModelStater, and its checker's
// ModelCheckerStater) visits exactly the states the reflective fingerprint
// and copier visit, with the same transitions, and finds the same
// counterexample, for the protocol and each of its broken variants.
func TestFastPathMatchesReflective(t *testing.T) {
	for _, base := range []string{"abd", "paxos"} {
		for _, cfg := range fastPathModels(t, base) {
			// The fast path is taken: otherwise both runs are reflective.
			c := cfg
			w, err := newWorld(&c)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok := w.nodes[0].a.(automaton.ModelStater); !ok {
				t.Fatalf("%s: the automaton is no automaton.ModelStater", cfg.Protocol)
			}
			if _, ok := w.checker.(automaton.ModelCheckerStater); !ok {
				t.Fatalf("%s: the invariant checker is no automaton.ModelCheckerStater", cfg.Protocol)
			}
			var rs [2]*Result
			for k, refl := range []bool{true, false} {
				c := cfg
				c.Reflective = refl
				r, err := Check(c)
				if err != nil {
					t.Fatal(err)
				}
				rs[k] = r
			}
			a, b := rs[0], rs[1]
			name := cfg.Protocol
			if base == "abd" && cfg.Model.Scripts != nil {
				name += " (3 interchangeable clients)"
			}
			if a.States != b.States || a.Transitions != b.Transitions || a.Depth != b.Depth {
				t.Errorf("%s: reflective %d states (%d transitions, depth %d), fast path %d (%d, %d)",
					name, a.States, a.Transitions, a.Depth, b.States, b.Transitions, b.Depth)
			}
			av, bv := "", ""
			if a.Violation != nil {
				av = a.Violation.Violation
			}
			if b.Violation != nil {
				bv = b.Violation.Violation
			}
			if av != bv || (a.Violation != nil && !reflect.DeepEqual(a.Violation.Events, b.Violation.Events)) {
				t.Errorf("%s: reflective found %q, fast path %q", name, av, bv)
			}
			t.Logf("%s: %d states, violation %q; reflective %.0f states/s, fast path %.0f states/s",
				name, b.States, bv, a.StatesPerSecond(), b.StatesPerSecond())
		}
	}
}

// TestFastPathNodeEncoding is the fine-grained check of a fast path: the
// whole-state comparison above cannot see a field left out of an
// encoding when the state repeats it elsewhere (paxos's log is also in
// its records and messages), so here every automaton (per node) and every
// checker of the first few thousand states of a breadth-first walk is
// hashed both ways, and the two must partition them alike: equal encodings
// iff equal reflective hashes. The service states inside are compared by
// their snapshots (canonical), which is how a fast path encodes and
// copies them (the reflective walk would also tell apart the bookkeeping
// a snapshot leaves out, a KV journal, which no protocol with a fast path
// reads). The walk copies by the fast path, so a
// CloneModel that shares mutable memory shows too (a copy's step changes
// its parent's hash).
func TestFastPathNodeEncoding(t *testing.T) {
	for _, cfg := range []Config{NewConfig("paxos"), NewConfig(paxos.BrokenEarlyAck), NewConfig("abd")} {
		cfg.Reflective = false
		root, err := newWorld(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		for _, d := range cfg.Model.Prefix {
			ev, err := root.enabledEvent(d)
			if err != nil {
				t.Fatal(err)
			}
			if err := root.apply(ev); err != nil {
				t.Fatal(err)
			}
		}
		type key struct {
			node int
			h    uint64
		}
		r2f, f2r := map[key]uint64{}, map[key]uint64{}
		pair := func(node int, refl, fast uint64, what string) {
			if f, ok := r2f[key{node, refl}]; ok && f != fast {
				t.Fatalf("%s: %s: reflectively equal states encode differently", cfg.Protocol, what)
			}
			if r, ok := f2r[key{node, fast}]; ok && r != refl {
				t.Fatalf("%s: %s: states the reflective walk tells apart encode alike (a field left out?)", cfg.Protocol, what)
			}
			r2f[key{node, refl}], f2r[key{node, fast}] = fast, refl
		}
		// encodings returns the fast encodings of w's automata and checker
		// (and checks them against the reflective hashes).
		encodings := func(w *world) []string {
			hs := &hasher{stack: map[uintptr]bool{}, roots: map[uintptr]int{}}
			for i, n := range w.nodes {
				if n.a != nil {
					hs.roots[reflect.ValueOf(n.a).Pointer()] = i
				}
			}
			var encs []string
			for i, n := range w.nodes {
				if n.a == nil {
					continue
				}
				ms := n.a.(automaton.ModelStater)
				enc := ms.AppendModelState(nil, nil)
				pair(i, hs.sum(w.canonical(n.a, i), i), encodedHash(func(b []byte) []byte { return append(b, enc...) }), string(w.ids[i])+"'s automaton")
				encs = append(encs, string(enc))
			}
			if cs, ok := w.checker.(automaton.ModelCheckerStater); ok {
				enc := cs.AppendModelState(nil, w.ref, nil)
				refl := hs.sum(w.canonical(w.checker, -1), -1)
				pair(-1, refl, encodedHash(func(b []byte) []byte { return append(b, enc...) }), "the checker")
				encs = append(encs, string(enc))
				if ps, ok := w.checker.(automaton.ModelCheckerPartStater); ok {
					// In parts (each node's, then the rest), as
					// checkerPartsHash hashes it.
					var parts []byte
					for _, id := range w.ids {
						parts = automaton.AppendModelBytes(parts, ps.AppendModelNodePart(nil, id, w.ref, nil))
					}
					parts = automaton.AppendModelBytes(parts, ps.AppendModelRestPart(nil, w.ref, nil))
					pair(-2, refl, encodedHash(func(b []byte) []byte { return append(b, parts...) }), "the checker in parts")
				}
			}
			return encs
		}
		level, seen, visited := []*world{root}, 0, map[uint64]bool{}
		for len(level) > 0 && seen < 1500 {
			var next []*world
			for _, w := range level {
				before := encodings(w)
				seen++
				if w.violation != "" {
					continue
				}
				for _, ev := range w.enabled() {
					c := w.clone()
					if err := c.apply(ev); err != nil {
						t.Fatal(err)
					}
					if fp := c.fingerprintAs(nil, nil, nil); !visited[fp] {
						visited[fp] = true
						next = append(next, c)
					}
				}
				if !reflect.DeepEqual(before, encodings(w)) {
					t.Fatalf("%s: a successor's step changed its parent's state (a copy shares mutable memory)", cfg.Protocol)
				}
			}
			level = next
		}
		t.Logf("%s: %d states, %d distinct automata and checkers", cfg.Protocol, seen, len(r2f))
	}
}

// canonical returns a copy of x (node i's automaton, or with i < 0 the
// checker) in which every service state is replaced by one restored from
// its snapshot; references to the world's automata stay as they are.
func (w *world) canonical(x any, i int) any {
	cp := w.sharingCopier(i)
	if i < 0 {
		cp = w.sharingCopier(-1)
	}
	c := cp.copyAny(x)
	stateType := reflect.TypeOf((*service.State)(nil)).Elem()
	roots := map[uintptr]bool{}
	for _, n := range w.nodes {
		if n.a != nil {
			roots[reflect.ValueOf(n.a).Pointer()] = true
		}
	}
	seen := map[uintptr]bool{}
	var walk func(v reflect.Value)
	walk = func(v reflect.Value) {
		switch v.Kind() {
		case reflect.Pointer:
			if v.IsNil() || seen[v.Pointer()] || roots[v.Pointer()] {
				return
			}
			seen[v.Pointer()] = true
			walk(v.Elem())
		case reflect.Struct:
			for k := 0; k < v.NumField(); k++ {
				f := unlock(v.Field(k))
				if f.Type() == stateType && !f.IsNil() && f.CanSet() {
					st := f.Interface().(service.State)
					n := w.svc.NewState()
					if err := n.Restore(st.Snapshot()); err != nil {
						panic(err)
					}
					f.Set(reflect.ValueOf(n))
					continue
				}
				walk(f)
			}
		case reflect.Map:
			it := v.MapRange()
			for it.Next() {
				if it.Value().Kind() == reflect.Pointer {
					walk(it.Value())
				}
			}
		case reflect.Slice:
			for k := 0; k < v.Len(); k++ {
				walk(v.Index(k))
			}
		}
	}
	walk(reflect.ValueOf(c))
	return c
}
