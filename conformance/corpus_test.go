package conformance

import (
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
)

// TestCorpusVerdicts judges again every saved history of
// testdata/corpus/ (histories of the bugs of docs/ROBUSTNESS.md, saved by
// the simulator with their replay command in meta "replay") with today's
// checker for the protocol's model, and requires the verdict the file
// name records: NAME.ok.json (no violation: a checker's false alarm, or a
// liveness bug whose history was safe) or NAME.illegal.json (a violation).
// When a checker changes, a changed verdict fails here and names the file.
func TestCorpusVerdicts(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "corpus", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no saved histories in testdata/corpus")
	}
	for _, f := range files {
		base := filepath.Base(f)
		var want string
		switch {
		case strings.HasSuffix(base, ".ok.json"):
			want = check.Ok
		case strings.HasSuffix(base, ".illegal.json"):
			want = check.Illegal
		default:
			t.Errorf("%s: name it NAME.ok.json or NAME.illegal.json", f)
			continue
		}
		h, err := history.Load(f)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		proto := h.Meta["protocol"]
		model, err := automaton.ConsistencyOf(proto)
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		rep, err := check.ForHistory(model, h)(h, check.Options{})
		if err != nil {
			t.Fatalf("%s: %v", f, err)
		}
		if rep.Result != want {
			t.Errorf("%s (%s, saved by `%s`): verdict %s, recorded %s: %s", f, proto, h.Meta["replay"], rep.Result, want, rep)
		}
	}
}
