package seed000

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/esds"
)

// runQuick runs e in simulation with --quick and returns our figures by cell.
func runQuick(t *testing.T, e experiment.Experiment, args ...string) (*experiment.Results, experiment.Figures) {
	t.Helper()
	fs := pflag.NewFlagSet(e.Name(), pflag.ContinueOnError)
	e.Flags(fs)
	if err := fs.Parse(append([]string{"--mode", "sim"}, args...)); err != nil {
		t.Fatal(err)
	}
	out := t.TempDir()
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Quick: true, Reps: 1}, Out: out})
	if err != nil {
		t.Fatalf("%s: %v", e.Name(), err)
	}
	if _, err := os.Stat(filepath.Join(out, "results.json")); err != nil {
		t.Fatal(err)
	}
	if len(res.Plots) == 0 || len(res.Summary) < 2 {
		t.Errorf("%s: plots %v, summary %v", e.Name(), res.Plots, res.Summary)
	}
	figs := experiment.Figures{}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK {
			t.Fatalf("cell %s: %s %s", c.Key, c.Status, c.Reason)
		}
		for k, v := range c.Metrics {
			figs.Set(c.Key, k, v)
		}
	}
	return res, figs
}

func must(t *testing.T, f experiment.Figures, cell, metric string) float64 {
	t.Helper()
	v, ok := f.Get(cell, metric)
	if !ok {
		t.Fatalf("cell %s has no %s (%v)", cell, metric, f[cell])
	}
	return v
}

func TestThroughputQuick(t *testing.T) {
	res, f := runQuick(t, NewThroughput())
	if len(res.Cells) != 3 {
		t.Fatalf("%d cells, want N=1,2,3", len(res.Cells))
	}
	t1 := must(t, f, "mode=sim,N=1", mTput)
	t2 := must(t, f, "mode=sim,N=2", mTput)
	t3 := must(t, f, "mode=sim,N=3", mTput)
	// One replica handles ~1/28ms; two double it; a third sharing one of the
	// two processors (--quick: 2) adds nothing and costs gossip.
	if t1 < 30 || t1 > 38 || t2 < 1.6*t1 || t3 > t2 {
		t.Errorf("throughput N=1 %.1f, N=2 %.1f, N=3 %.1f", t1, t2, t3)
	}
}

func TestResponseQuick(t *testing.T) {
	res, f := runQuick(t, NewResponse())
	if len(res.Cells) != 27 {
		t.Fatalf("%d cells, want 3 N x 3 rates x (gossip every 20ms, every 1s, off)", len(res.Cells))
	}
	// The unstated gossip rate is swept: each gossip-on claim names where
	// it holds.
	if len(res.Claims) != 10 {
		t.Fatalf("%d claims, want Figs. 5.2-5.11", len(res.Claims))
	}
	for _, c := range res.Claims {
		if c.Verdict == "" || c.Stats == "" {
			t.Errorf("claim without verdict or statistics: %+v", c)
		}
		if !strings.Contains(c.Text, "gossip off") && !strings.Contains(c.Range, "20ms") {
			t.Errorf("%s: range %q does not name the swept intervals", c.Text, c.Range)
		}
	}
	for _, c := range res.Cells {
		for _, m := range []string{mTput, mATr, mATfe, mP99} {
			must(t, f, c.Key, m)
		}
		if atr, atfe := must(t, f, c.Key, mATr), must(t, f, c.Key, mATfe); atr > atfe || atr < 28 {
			t.Errorf("%s: AT_r %.1f ms, AT_fe %.1f ms: the replica's time is part of the front end's and includes the 28 ms cost", c.Key, atr, atfe)
		}
	}
	if v := must(t, f, "mode=sim,gossip=20ms,N=3,rate=33", mTput); v < 30 || v > 36 {
		t.Errorf("33 ops/s submitted, throughput %.1f", v)
	}
	// At 330 ops/s a single replica is overwhelmed: requests queue.
	if a, b := must(t, f, "mode=sim,gossip=20ms,N=1,rate=330", mATfe), must(t, f, "mode=sim,gossip=20ms,N=3,rate=330", mATfe); a < 2*b {
		t.Errorf("AT_fe at 330 ops/s: N=1 %.1f ms, N=3 %.1f ms: want much higher with one replica", a, b)
	}
}

func TestStrictShareQuick(t *testing.T) {
	res, f := runQuick(t, NewStrict())
	if len(res.Cells) != 6 {
		t.Fatalf("%d cells, want 2 services x strict 0, 50, 100", len(res.Cells))
	}
	for _, svc := range []string{"counter", "string"} {
		key := func(p string) string { return "mode=sim,service=" + svc + ",N=2,strict=" + p }
		if v := must(t, f, key("100"), mIncons); v != 0 {
			t.Errorf("%s: inconsistency %.1f%% with every operation strict", svc, v)
		}
		if _, ok := f.Get(key("100"), mNonStrict); ok {
			t.Errorf("%s: non-strict latency reported with no non-strict operation", svc)
		}
		must(t, f, key("0"), mIncons)
		l0, l50, l100 := must(t, f, key("0"), mATfe), must(t, f, key("50"), mATfe), must(t, f, key("100"), mATfe)
		if !(l0 < l50 && l50 < l100) {
			t.Errorf("%s: latency %.1f, %.1f, %.1f ms at 0, 50, 100%% strict: want growing", svc, l0, l50, l100)
		}
		if s, n := must(t, f, key("50"), mStrict), must(t, f, key("50"), mNonStrict); s <= n {
			t.Errorf("%s: strict %.1f ms <= non-strict %.1f ms", svc, s, n)
		}
	}
}

func TestBadFlags(t *testing.T) {
	for _, args := range [][]string{{"--mode", "both2"}, {"--op-cost", "fast"}, {"--values", "lazy"}, {"--gossip", "-1s"}} {
		e := NewStrict()
		fs := pflag.NewFlagSet("x", pflag.ContinueOnError)
		e.Flags(fs)
		if err := fs.Parse(args); err != nil {
			t.Fatal(err)
		}
		if _, err := e.Cells(experiment.Options{}); err == nil {
			t.Errorf("%v accepted", args)
		}
	}
	if _, err := rateOf("x", 1); err == nil {
		t.Error("rate x accepted")
	}
	if v, _ := rateOf("33N", 4); v != 132 {
		t.Errorf("33N at N=4 = %v", v)
	}
}
