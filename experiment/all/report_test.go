package all

import (
	"context"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

// quickSubset are the experiments CI runs through `synod-lab experiment run all
// --quick`'s code path: every seed, each in a cell of seconds (simulated or
// model-only where the seed's experiment has such a variant, small sizes
// through quickArgs), one per kind of judgement at least. The full quick
// pass of every experiment is the command (docs/REPRODUCTION.md).
var quickSubset = []string{
	"seed000-response-vs-n", "seed000-simple-vs-optimised",
	"seed001-abd-vs-blocking",
	"seed002-fast-vs-classic-model",
	"seed003-adam-slices", "seed003-eve-vs-paxos",
	"seed004-asp", "seed004-tsp", "seed004-micro",
}

// quickArgs shrink the cells below --quick's sizes. Seed 001 has no
// simulated variant: its live cell runs the judged pair (client-driven ABD
// and blocking) at N = 1 and 3, closed loop, 4 clients, 300 ms, durability
// memory (~10 s with the cluster starts).
var quickArgs = map[string][]string{
	"seed000-response-vs-n":         {"--mode", "sim"},
	"seed001-abd-vs-blocking":       {"--nodes", "1,3", "--get-ratios", "0.9", "--protocols", "abd-client,blocking", "--clients", "4", "--duration", "300ms", "--open-rates", "none", "--durability", "memory"},
	"seed002-fast-vs-classic-model": {"--points", "512", "--panels", "256"},
}

// A quick pass of the report runs, writes one Markdown report with its
// plots, and every claim in it has one of the verdicts, decided by
// statistics it prints.
func TestQuickReport(t *testing.T) {
	dir := t.TempDir()
	doc := filepath.Join(dir, "REPRODUCTION.md")
	names := quickSubset
	bin := ""
	if testing.Short() {
		names = slices.DeleteFunc(slices.Clone(names), func(n string) bool { return strings.HasPrefix(n, "seed001") })
		t.Log("-short: no live cell (seed 001)")
	} else {
		var err error
		if bin, err = cluster.BuildSynod(t.TempDir()); err != nil {
			t.Fatal(err)
		}
	}
	runs, err := experiment.RunAll(context.Background(), experiment.ReportOptions{
		RunOptions: experiment.RunOptions{Options: experiment.Options{Quick: true, Reps: 2}, Out: filepath.Join(dir, "runs"), Binary: bin},
		Names:      names, Doc: doc, PlotDir: filepath.Join(dir, "reproduction"), Command: "test", Args: quickArgs,
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
	seeds := map[string]bool{}
	for _, r := range runs {
		name := r.Results.Experiment
		seeds[name[:7]] = true
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
	// Every claim line of the written report: a verdict of the set with its
	// statistics, counted in the header; every plot link resolves.
	for _, e := range experiment.CheckReport(report, dir) {
		t.Error(e)
	}
	for _, s := range []string{"seed000", "seed001", "seed002", "seed003", "seed004"} {
		if !seeds[s] && !(testing.Short() && s == "seed001") {
			t.Errorf("no experiment of %s in the quick pass", s)
		}
	}
	for _, l := range strings.Split(report, "\n") {
		if strings.HasPrefix(l, "**") && strings.Contains(l, " claims: ") {
			t.Logf("%d claims judged; report: %s", total, l)
		}
	}
}
