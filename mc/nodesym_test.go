package mc

import (
	"bytes"
	"math/rand"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// nodeSymABD is ABD with every client at n1 ("first"): n2..nN coordinate
// nothing and are interchangeable (protocol/abd/modelsym.go).
func nodeSymABD(protocol string, nodes int, sym bool) Config {
	cfg := NewConfig(protocol)
	cfg.Model.Nodes, cfg.Model.Target, cfg.Model.SymmetricNodes = nodes, "first", sym
	cfg.Model.SymmetricClients = false
	cfg.Timers = "none"
	return cfg
}

// TestNodeSymmetryReduces: with interchangeable replicas, the search of
// every state within a depth visits fewer states, reaches the same
// verdict and the same sometimes properties, and the reduced search still
// finds each broken variant's bug.
func TestNodeSymmetryReduces(t *testing.T) {
	for _, tc := range []struct {
		nodes, depth int
		min          float64 // the least reduction expected
	}{{3, 9, 1.5}, {4, 9, 3}} {
		var states [2]int64
		var took [2]time.Duration
		for k, sym := range []bool{false, true} {
			cfg := nodeSymABD("abd", tc.nodes, sym)
			cfg.Depth = tc.depth
			r, err := Check(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Violation != nil || !r.Complete || r.Depth != tc.depth || !r.Sometimes[0].Reached {
				t.Fatalf("%d nodes, symmetry %v: violation %v, complete %v, depth %d, sometimes %+v", tc.nodes, sym, r.Violation, r.Complete, r.Depth, r.Sometimes)
			}
			states[k], took[k] = r.States, r.Elapsed
		}
		ratio := float64(states[0]) / float64(states[1])
		t.Logf("abd, %d nodes, clients at n1, every state within %d events: %d states (%v), %d with node symmetry (%v; %.2fx fewer)", tc.nodes, tc.depth, states[0], took[0].Round(time.Millisecond), states[1], took[1].Round(time.Millisecond), ratio)
		if ratio < tc.min {
			t.Fatalf("%d nodes: %d states without node symmetry, %d with: want at least %.1fx fewer", tc.nodes, states[0], states[1], tc.min)
		}
	}
	for _, v := range []string{"abd-broken-nowriteback", "abd-broken-nowriterid"} {
		var n [2]int64
		for k, sym := range []bool{false, true} {
			cfg := nodeSymABD(v, 3, sym)
			cfg.Depth, cfg.MaxStates = 14, 100000
			r, err := Check(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Violation == nil {
				t.Fatalf("%s (node symmetry %v) not found in %d states", v, sym, r.States)
			}
			if _, err := r.Violation.Replay(); err != nil {
				t.Fatal(err)
			}
			n[k] = r.States
			t.Logf("%s, node symmetry %v: %d states, %d events: %s", v, sym, r.States, len(r.Violation.Events), r.Violation.Violation)
		}
	}
}

// TestNodeSymmetryGroups: ABD's coordinators are not interchangeable
// (tags order writers by name), the nodes no client uses are.
func TestNodeSymmetryGroups(t *testing.T) {
	for _, tc := range []struct {
		target string
		nodes  int
		want   int // nodes in the one group (0: none)
	}{{"first", 3, 2}, {"first", 5, 4}, {"any", 3, 0}, {"", 3, 0}, {"", 4, 2}} {
		cfg := nodeSymABD("abd", tc.nodes, true)
		cfg.Model.Target = tc.target
		w, err := newWorld(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		got := 0
		if len(w.nodeGroups) == 1 {
			got = len(w.nodeGroups[0])
		} else if len(w.nodeGroups) > 1 {
			t.Fatalf("%+v: groups %v", tc, w.nodeGroups)
		}
		if got != tc.want {
			t.Fatalf("target %q, %d nodes: group %v, want %d nodes", tc.target, tc.nodes, w.nodeGroups, tc.want)
		}
	}
}

// randomWalks returns n random paths of up to maxLen events from cfg's
// initial state.
func randomWalks(t *testing.T, cfg *Config, n, maxLen int, seed int64) [][]Event {
	rng := rand.New(rand.NewSource(seed))
	var out [][]Event
	for k := 0; k < n; k++ {
		w, err := newWorld(cfg)
		if err != nil {
			t.Fatal(err)
		}
		var p []Event
		for len(p) < 1+rng.Intn(maxLen) {
			evs := w.enabled()
			if len(evs) == 0 {
				break
			}
			ev := evs[rng.Intn(len(evs))]
			w = w.clone()
			if err := w.apply(ev); err != nil {
				t.Fatal(err)
			}
			p = append(p, ev)
		}
		out = append(out, p)
	}
	return out
}

// replayRenamed replays evs with the nodes renamed by perm (perm[old] =
// new): the protocol's own run of the renamed events, not mc's renaming
// of a state. A message is found by its renamed sender, receiver and
// content (the renamed run sends in another order).
func replayRenamed(t *testing.T, cfg *Config, evs []Event, perm []int) *world {
	w, err := newWorld(cfg)
	if err != nil {
		t.Fatal(err)
	}
	orig, err := newWorld(cfg)
	if err != nil {
		t.Fatal(err)
	}
	r := &automaton.NodeRenaming{IDs: w.ids, Perm: perm}
	for c := range w.clients {
		if !w.fanout && cfg.Model.Target != "any" { // "any": targets are not used
			w.clients[c].target = perm[w.clients[c].target]
		}
	}
	rn := orig.nodes[0].a.(automaton.ModelMessageRenamer)
	for _, ev := range evs {
		re := ev
		re.Node = perm[ev.Node]
		switch ev.Kind {
		case EvDeliver, EvDup, EvDrop:
			m := orig.flight[ev.Msg]
			re.Msg = -1
			for k, x := range w.flight {
				if x.to == perm[m.to] && (m.from < 0 && x.from == m.from || m.from >= 0 && x.from == perm[m.from]) &&
					(m.req != nil && x.req != nil && x.req.ID == m.req.ID || m.req == nil && bytes.Equal(x.data, rn.RenameModelMessage(m.data, r))) {
					re.Msg = k
					break
				}
			}
			if re.Msg < 0 {
				t.Fatalf("renamed run has no message matching %s", orig.describeMsg(m))
			}
		case EvEffect:
			re.Msg = ev.Msg
		}
		if ev.Kind == EvInvoke && !w.fanout && cfg.Model.Target != "any" {
			re.Node = w.clients[ev.Client].target
		}
		if err := orig.apply(ev); err != nil {
			t.Fatal(err)
		}
		if err := w.apply(re); err != nil {
			t.Fatalf("renamed %s: %v", w.describe(re), err)
		}
	}
	return w
}

// TestNodeSymmetrySound: a state and each of its renamings (built by
// replaying the renamed path) get the same canonical fingerprint, and two
// states get the same canonical fingerprint only if one is a renaming of
// the other: by brute force, each state's renamings' reflective
// fingerprints (no reduction) are computed, and two states are renamings
// of each other iff those sets meet.
func TestNodeSymmetrySound(t *testing.T) {
	for _, tc := range []struct {
		protocol              string
		nodes, crashes, walks int
		timers                string
	}{{"abd", 3, 0, 60, "quiet"}, {"abd", 4, 0, 60, "none"}, {"abd", 3, 1, 40, "quiet"},
		{"unreplicated", 4, 0, 60, "quiet"}, {"unreplicated", 4, 1, 40, "quiet"}} {
		cfg := nodeSymABD(tc.protocol, tc.nodes, true)
		if tc.protocol == "unreplicated" {
			cfg = nodeSymUnreplicated(tc.protocol, tc.nodes, true)
		}
		cfg.Timers, cfg.Crashes = tc.timers, tc.crashes
		refl := cfg
		refl.Reflective = true
		w0, err := newWorld(&cfg)
		if err != nil {
			t.Fatal(err)
		}
		if len(w0.nodeGroups) != 1 {
			t.Fatalf("groups %v", w0.nodeGroups)
		}
		var perms [][]int
		forEachPerm(tc.nodes, w0.nodeGroups, func(p []int) { perms = append(perms, append([]int(nil), p...)) })
		walks := randomWalks(t, &cfg, tc.walks, 14, int64(tc.nodes*10+tc.crashes))
		canon := make([]uint64, len(walks))
		plain := make([]uint64, len(walks)) // the state itself, reflectively
		images := make([]map[uint64]bool, len(walks))
		for k, p := range walks {
			images[k] = map[uint64]bool{}
			for pi, perm := range perms {
				w := replayRenamed(t, &cfg, p, perm)
				fp := w.fingerprint()
				if pi == 0 {
					canon[k] = fp
				} else if fp != canon[k] {
					t.Fatalf("%d nodes: walk %d renamed by %v: canonical fingerprint %x, unrenamed %x", tc.nodes, k, perm, fp, canon[k])
				}
				rf := replayRenamed(t, &refl, p, perm).fingerprint()
				images[k][rf] = true
				if pi == 0 {
					plain[k] = rf
				}
			}
		}
		if tc.crashes > 0 && tc.protocol == "abd" {
			// abd's fast path encodes a crashed incarnation's reference
			// as "not up" where the reflective walk hashes its content
			// (mc/doc.go): the reflective partition is finer there.
			continue
		}
		merged := 0
		for a := range walks {
			for b := a + 1; b < len(walks); b++ {
				meet := false
				for fp := range images[a] {
					meet = meet || images[b][fp]
				}
				if meet != (canon[a] == canon[b]) {
					t.Fatalf("%d nodes: walks %d and %d: renamings of each other %v, same canonical fingerprint %v", tc.nodes, a, b, meet, canon[a] == canon[b])
				}
				if meet && plain[a] != plain[b] {
					merged++
				}
			}
		}
		t.Logf("%s, %d nodes, %d crashes: %d walks, %d pairs of different states that are renamings of each other", tc.protocol, tc.nodes, tc.crashes, len(walks), merged)
	}
}

// nodeSymUnreplicated is unreplicated with clients at any node: the
// forwarders n2..nN are interchangeable (protocol/unreplicated/modelsym.go).
func nodeSymUnreplicated(protocol string, nodes int, sym bool) Config {
	cfg := NewConfig(protocol)
	cfg.Model.Nodes, cfg.Model.Target, cfg.Model.SymmetricNodes = nodes, "any", sym
	return cfg
}

// TestNodeSymmetryUnreplicated: unreplicated declares its forwarders
// interchangeable; with node symmetry the search of its model visits
// fewer states, reaches the same verdict, and still finds each broken
// variant's bug (the same violation, replayed).
func TestNodeSymmetryUnreplicated(t *testing.T) {
	var states [2]int64
	for k, sym := range []bool{false, true} {
		cfg := nodeSymUnreplicated("unreplicated", 4, sym)
		cfg.Depth = 8
		r, err := Check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation != nil || !r.Complete {
			t.Fatalf("unreplicated, node symmetry %v: violation %v, complete %v", sym, r.Violation, r.Complete)
		}
		states[k] = r.States
	}
	ratio := float64(states[0]) / float64(states[1])
	t.Logf("unreplicated, 4 nodes, clients at any node, every state within 8 events: %d states, %d with node symmetry (%.2fx fewer)", states[0], states[1], ratio)
	if ratio < 2 {
		t.Fatalf("%d states without node symmetry, %d with: want at least 2x fewer", states[0], states[1])
	}
	for _, v := range []string{"unreplicated-broken-answerfirst", "unreplicated-broken-dirtytxn"} {
		var found [2]string
		for k, sym := range []bool{false, true} {
			cfg := NewConfig(v)
			cfg.Model.SymmetricNodes = sym
			w, err := newWorld(&cfg)
			if err != nil {
				t.Fatal(err)
			}
			r, err := Check(cfg)
			if err != nil {
				t.Fatal(err)
			}
			if r.Violation == nil {
				t.Fatalf("%s (node symmetry %v, groups %v) not found in %d states", v, sym, w.nodeGroups, r.States)
			}
			if _, err := r.Violation.Replay(); err != nil {
				t.Fatal(err)
			}
			found[k] = r.Violation.Violation
			t.Logf("%s, node symmetry %v (groups %v): %d states, %d events: %s", v, sym, w.nodeGroups, r.States, len(r.Violation.Events), r.Violation.Violation)
		}
		if found[0] != found[1] {
			t.Fatalf("%s: %q without node symmetry, %q with", v, found[0], found[1])
		}
	}
}
