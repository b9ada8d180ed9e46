package mc

import (
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/all"
)

func TestABDCorrect(t *testing.T) {
	cfg := NewConfig("abd")
	cfg.Depth = 10
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%s: %d states, %d transitions, depth %d, frontier %d, %v, %.0f states/s", cfg.Describe(), r.States, r.Transitions, r.Depth, r.Frontier, r.Elapsed, r.StatesPerSecond())
	if r.Violation != nil {
		t.Fatalf("abd violated: %s", r.Violation)
	}
}

func TestABDBrokenFound(t *testing.T) {
	for _, name := range []string{"abd-broken-nowriteback", "abd-broken-nowriterid"} {
		cfg := NewConfig(name)
		cfg.Depth = 14
		r, err := Check(cfg)
		if err != nil {
			t.Fatal(err)
		}
		if r.Violation == nil {
			t.Fatalf("%s: no violation in %d states", name, r.States)
		}
		t.Logf("%s: %d states, %v\n%s", name, r.States, r.Elapsed, r.Violation)
		p := filepath.Join(t.TempDir(), "cex.json")
		if err := r.Violation.Save(p); err != nil {
			t.Fatal(err)
		}
		tr, err := LoadTrace(p)
		if err != nil {
			t.Fatal(err)
		}
		why, err := tr.Replay()
		if err != nil || why == "" {
			t.Fatalf("replay of the saved counterexample: %q, %v", why, err)
		}
		if !strings.HasPrefix(why, strings.SplitN(r.Violation.Violation, ":", 2)[0]) {
			t.Errorf("replay found %q, the search %q", why, r.Violation.Violation)
		}
	}
}
