package all

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

// quickSubset are the experiments CI runs through `synod-lab experiment run all
// --quick`'s code path: simulated or model-only ones, seconds each, one per
// kind of judgement at least. The full quick pass of every experiment is
// the command (docs/REPRODUCTION.md).
var quickSubset = []string{"seed004-asp", "seed004-tsp", "seed004-micro", "seed003-adam-slices", "seed003-eve-vs-paxos"}

// A quick pass of the report runs, writes one Markdown report with its
// plots, and every claim in it has one of the verdicts, decided by
// statistics it prints.
func TestQuickReport(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "REPRODUCTION.md")
	runs, err := experiment.RunAll(context.Background(), experiment.ReportOptions{
		RunOptions: experiment.RunOptions{Options: experiment.Options{Quick: true, Reps: 2}, Out: filepath.Join(dir, "runs")},
		Names:      quickSubset, Doc: doc, PlotDir: filepath.Join(dir, "reproduction"), Command: "test",
	})
	if err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	report := string(b)
	known := map[experiment.Verdict]bool{}
	for _, v := range experiment.Verdicts {
		known[v] = true
	}
	total := 0
	for _, r := range runs {
		name := r.Results.Experiment
		if len(r.Results.Claims) == 0 {
			t.Errorf("%s judged no claim", name)
		}
		if !strings.Contains(report, "### "+name) {
			t.Errorf("report has no section for %s", name)
		}
		for _, c := range r.Results.Claims {
			total++
			if !known[c.Verdict] {
				t.Errorf("%s: claim %q has verdict %q", name, c.Text, c.Verdict)
			}
			if c.Stats == "" || c.Paper == "" || c.Ours == "" {
				t.Errorf("%s: claim %q lacks its statistics, the paper's figure or ours: %+v", name, c.Text, c)
			}
			if c.Verdict == experiment.DoesNotHold && c.Cause == "" {
				t.Errorf("%s: claim %q does not hold and names no cause", name, c.Text)
			}
			if !strings.Contains(report, c.Text) {
				t.Errorf("report lacks claim %q", c.Text)
			}
		}
		if len(r.Plots) == 0 {
			t.Errorf("%s: no plot copied beside the report", name)
		}
		for _, p := range r.Plots {
			if !strings.Contains(report, "reproduction/"+filepath.Base(p)) {
				t.Errorf("report does not link plot %s", p)
			}
		}
	}
	if !strings.Contains(report, "/proc/loadavg") || !strings.Contains(report, "claims: ") {
		t.Errorf("report header lacks the load or the claim count:\n%.600s", report)
	}
	t.Logf("%d claims: %s", total, strings.SplitN(strings.SplitN(report, "**", 3)[1], "**", 2)[0])
}
