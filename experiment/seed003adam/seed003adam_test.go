package seed003adam

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

func runQuick(t *testing.T, e experiment.Experiment) (*experiment.Results, string) {
	t.Helper()
	out := t.TempDir()
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{
		Options: experiment.Options{Quick: true}, Out: out, Work: t.TempDir(), Stdout: &stdout,
	})
	if err != nil {
		t.Fatalf("%v\n%s", err, stdout.String())
	}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK {
			t.Errorf("%s: %s %s", c.Key, c.Status, c.Reason)
		}
	}
	for _, p := range e.Report().Plots {
		if _, err := os.Stat(filepath.Join(out, p.File+".png")); err != nil {
			t.Error(err)
		}
	}
	return res, stdout.String()
}

// The unit-slice experiment prints the seed's four figures as holding and
// the 16-thread speedups the notes derive.
func TestSlicesQuick(t *testing.T) {
	_, text := runQuick(t, &Slices{})
	for _, want := range []string{
		"Fig 3.2 naive: 24 slices, 0 checkpoints (seed: 24, 0) => HOLDS",
		"Fig 3.3 walls: 12 slices, 7 checkpoints (seed: 12, 7) => HOLDS",
		"Fig 3.4 spm: 13 slices, 0 checkpoints (seed: 13, 0) => HOLDS",
		"Fig 4.1 ppm: 7 slices, 7 checkpoints (seed: 7, 7) => HOLDS",
		"N=12: speedup 12.0x", "N=48: speedup 24.0x", "N=480: speedup 31.0x",
	} {
		if !strings.Contains(text, want) {
			t.Errorf("output lacks %q:\n%s", want, text)
		}
	}
}

// The overhead model: every claim it judges holds with the default costs,
// pipelining nearly doubles the walls' throughput, and the zero-cost tree
// beats the real one on 16 threads per group.
func TestModelQuick(t *testing.T) {
	m := &Model{Batch: 960, HashPerRequest: gapHashPerRequest, Verify: 2}
	res, text := runQuick(t, m)
	if strings.Contains(text, "DOES NOT HOLD") || strings.Count(text, "=> HOLDS") != 3 {
		t.Errorf("claims:\n%s", text)
	}
	figs := experiment.Figures{}
	for _, c := range res.Cells {
		figs[c.Key] = c.Metrics
	}
	get := func(metric string, nv ...string) float64 {
		v, _ := figs.Get(experiment.NewCell(nv...).Key, metric)
		return v
	}
	if n := get(mTput, "fig", "6.1", "strategy", "naive"); n != 50 {
		t.Errorf("naive 20 ms requests: %g req/s, want 50", n)
	}
	real, fake := get(mTput, "fig", "6.3", "tree", "real", "threads", "16"), get(mTput, "fig", "6.3", "tree", "fake", "threads", "16")
	if !(real < fake && fake < 1600) {
		t.Errorf("Fig 6.3: real %g, fake %g (fake below the 1600 ceiling, above real)", real, fake)
	}
	if !strings.Contains(text, "0.299 ms per request hashed, 4.79 ms per checkpoint of 16 requests") {
		t.Errorf("the gap's checkpoint cost is not stated:\n%s", text)
	}
}

// Bad flags are refused before any cell runs.
func TestModelFlags(t *testing.T) {
	if _, err := (&Model{Batch: 0}).Cells(experiment.Options{}); err == nil {
		t.Error("--batch 0 accepted")
	}
}

// Fig 6.1 in the simulator (quick: 48 clients, 150 SETs per strategy):
// every strategy runs protocol/adam against a paxos callee, and the
// multi-threaded ones beat naive by more than 2x.
func TestFig61Quick(t *testing.T) {
	res, text := runQuick(t, &Fig61{Ops: 600, Clients: 96, Batch: 96, SimSeed: 1})
	tput := map[string]float64{}
	for _, c := range res.Cells {
		tput[c.Get("strategy")] = c.Metrics[mTput]
	}
	if !(tput["spm"] > tput["naive"] && tput["walls"] > 2*tput["naive"] && tput["ppm"] > 2*tput["naive"]) {
		t.Errorf("req/s %v:\n%s", tput, text)
	}
}
