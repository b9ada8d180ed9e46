package mc

import (
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/all"
)

// replaySaved saves v to a file and loads it back, and fails the test
// unless the loaded trace replays from fresh automata to v's violation. It
// returns the loaded trace.
func replaySaved(t *testing.T, v *Trace) *Trace {
	t.Helper()
	p := filepath.Join(t.TempDir(), "cex.json")
	if err := v.Save(p); err != nil {
		t.Fatal(err)
	}
	tr, err := LoadTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	if why, err := tr.Replay(); err != nil || why != v.Violation {
		t.Fatalf("the saved trace replays to %q (%v), want %q", why, err, v.Violation)
	}
	return tr
}

// TestCounterexampleFile: a counterexample saved to a file loads and
// replays from fresh automata to the same violation.
func TestCounterexampleFile(t *testing.T) {
	r, err := Check(NewConfig("abd-broken-nowriterid"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil {
		t.Fatalf("no violation in %d states", r.States)
	}
	tr := replaySaved(t, r.Violation)
	if !strings.Contains(tr.String(), "client 1 sends set x") {
		t.Errorf("trace text lacks the first event:\n%s", tr)
	}
}

// TestCopyMatchesReplay: expanding states by the generic copier visits
// exactly the states that replaying every path from fresh automata visits
// (the copier neither loses nor invents state).
func TestCopyMatchesReplay(t *testing.T) {
	for _, name := range []string{"abd", "paxos", "pb"} {
		cfg := NewConfig(name)
		cfg.Depth = 5
		a, err := Check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		cfg.Replay = true
		b, err := Check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if a.States != b.States || a.Transitions != b.Transitions {
			t.Errorf("%s: copying found %d states (%d transitions), replaying %d (%d)", name, a.States, a.Transitions, b.States, b.Transitions)
		}
		t.Logf("%s depth 5: %d states; copy %.0f states/s, replay %.0f states/s", name, a.States, a.StatesPerSecond(), b.StatesPerSecond())
	}
}

// TestDFSFindsWhatBFSFinds: depth-first search finds the same broken
// variant (not necessarily by the shortest path).
func TestDFSFindsWhatBFSFinds(t *testing.T) {
	cfg := NewConfig("abd-broken-nowriterid")
	cfg.DFS = true
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil {
		t.Fatalf("DFS: no violation in %d states", r.States)
	}
	if why, err := r.Violation.Replay(); err != nil || why == "" {
		t.Fatalf("DFS counterexample does not replay: %q %v", why, err)
	}
}

// TestEffectsPendingAndLost: an Effect output is a pending effect, an
// enabled event that carries it out; a crash loses it (pbdurable's database
// commit is a durability.sql Effect).
func TestEffectsPendingAndLost(t *testing.T) {
	cfg := NewConfig("pbdurable")
	cfg.Crashes = 1
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	if err := w.apply(Event{Kind: EvInvoke, Client: 0, Node: 0}); err != nil {
		t.Fatal(err)
	}
	effectAt := func(w *world) int {
		for _, ev := range w.enabled() {
			if ev.Kind == EvEffect {
				return ev.Node
			}
		}
		return -1
	}
	i := effectAt(w)
	if i < 0 {
		t.Fatalf("no pending effect after a write to the primary: %v", w.enabled())
	}
	done := w.clone()
	if err := done.apply(Event{Kind: EvEffect, Node: i, Msg: 0}); err != nil {
		t.Fatal(err)
	}
	if len(done.ext) != 1 {
		t.Fatalf("after completion: %d database effects logged, want 1", len(done.ext))
	}
	if len(w.nodes[i].effects) != 1 || len(w.ext) != 0 {
		t.Fatalf("completing in a copy changed the original: %d pending, %d logged", len(w.nodes[i].effects), len(w.ext))
	}
	if done.fingerprint() == w.fingerprint() {
		t.Fatal("completing an effect left the fingerprint unchanged")
	}
	if err := w.apply(Event{Kind: EvCrash, Node: i}); err != nil {
		t.Fatal(err)
	}
	if err := w.apply(Event{Kind: EvRestart, Node: i}); err != nil {
		t.Fatal(err)
	}
	if j := effectAt(w); j == i {
		t.Fatal("a crash kept the node's pending effect")
	}
}
