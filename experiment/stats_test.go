package experiment

import (
	"context"
	"math"
	"strings"
	"testing"
)

func TestSampleMeanSDCI(t *testing.T) {
	s := Sample{2, 4, 4, 4, 5, 5, 7, 9}
	if s.Mean() != 5 {
		t.Fatalf("mean %v", s.Mean())
	}
	if sd := s.SD(); math.Abs(sd-2.138) > 0.001 {
		t.Fatalf("sd %v, want 2.138", sd)
	}
	lo, hi := s.MeanCI(0.95)
	// t(0.975, 7) = 2.365; half width 2.365*2.138/sqrt(8) = 1.788.
	if math.Abs(lo-3.212) > 0.002 || math.Abs(hi-6.788) > 0.002 {
		t.Fatalf("CI [%v, %v], want [3.212, 6.788]", lo, hi)
	}
	if lo, hi := (Sample{3}).MeanCI(0.95); !math.IsInf(lo, -1) || !math.IsInf(hi, 1) {
		t.Fatalf("one value: CI [%v, %v], want unbounded", lo, hi)
	}
}

func TestTQuantile(t *testing.T) {
	for _, c := range []struct {
		p    float64
		df   int
		want float64
	}{{0.975, 1, 12.706}, {0.975, 30, 2.042}, {0.975, 40, 2.021}, {0.975, 120, 1.980}, {0.995, 60, 2.660}, {0.975, 100000, 1.960}} {
		if got := TQuantile(c.p, c.df); math.Abs(got-c.want) > 0.002 {
			t.Errorf("t(%v, %d) = %v, want %v", c.p, c.df, got, c.want)
		}
	}
}

// The case: 6.91x against 6.90x with run-to-run noise of a few
// percent is inside the noise, so neither "holds" nor "does not hold".
func TestWithinNoiseIsInconclusive(t *testing.T) {
	bcast := Sample{6.95, 6.71, 7.12, 6.88, 6.89}
	update := Sample{6.80, 7.05, 6.86, 6.99, 6.80}
	j := RatioAbove("bcast/update speedup", bcast, update, 1)
	if j.Verdict != Inconclusive {
		t.Fatalf("verdict %q (%s), want inconclusive", j.Verdict, j.Stats)
	}
	if !strings.Contains(j.Stats, "n=5/5") || !strings.Contains(j.Stats, "bootstrap") || !strings.Contains(j.Stats, "delta-method t") {
		t.Fatalf("stats %q do not name the test and the sample sizes", j.Stats)
	}
	if j := DiffAbove("bcast-update", bcast, update, 0); j.Verdict != Inconclusive {
		t.Fatalf("Welch: %q (%s), want inconclusive", j.Verdict, j.Stats)
	}
	if j := MeanAbove("speedup", Sample{0.9, 1.2, 1.05}, 1); j.Verdict != Inconclusive {
		t.Fatalf("mean straddling 1: %q (%s)", j.Verdict, j.Stats)
	}
}

// A clear difference is decided, both ways.
func TestClearDifferenceIsDecided(t *testing.T) {
	fast := Sample{7.0, 7.2, 6.9, 7.1}
	slow := Sample{1.0, 1.1, 0.95, 1.05}
	if j := RatioAbove("fast/slow", fast, slow, 1); j.Verdict != Holds {
		t.Fatalf("7x above 1: %q (%s)", j.Verdict, j.Stats)
	}
	if j := RatioAbove("slow/fast", slow, fast, 1); j.Verdict != DoesNotHold {
		t.Fatalf("1/7 above 1: %q (%s)", j.Verdict, j.Stats)
	}
	if j := RatioBelow("slow/fast", slow, fast, 0.5); j.Verdict != Holds {
		t.Fatalf("1/7 below 0.5: %q (%s)", j.Verdict, j.Stats)
	}
	if j := RatioAbove("fast/slow", fast, slow, 10); j.Verdict != DoesNotHold {
		t.Fatalf("7x above 10: %q (%s)", j.Verdict, j.Stats)
	}
	if j := DiffAbove("fast-slow", fast, slow, 0); j.Verdict != Holds {
		t.Fatalf("Welch: %q (%s)", j.Verdict, j.Stats)
	}
	if j := MeanBelow("speedup", Sample{0.67, 0.59, 0.63}, 1); j.Verdict != Holds {
		t.Fatalf("speedups under 1: %q (%s)", j.Verdict, j.Stats)
	}
}

func TestOneRunIsInconclusive(t *testing.T) {
	j := RatioAbove("a/b", Sample{10}, Sample{1}, 1)
	if j.Verdict != Inconclusive || !strings.Contains(j.Stats, "one run") {
		t.Fatalf("one run each: %q (%s), want inconclusive naming the single run", j.Verdict, j.Stats)
	}
	if j := RatioAbove("a/b", nil, Sample{1, 2}, 1); j.Verdict != NotMeasured {
		t.Fatalf("no runs: %q", j.Verdict)
	}
}

func TestDeterministicSamplesAreExact(t *testing.T) {
	j := RatioAbove("a/b", Sample{2, 2, 2}, Sample{1, 1, 1}, 1)
	if j.Verdict != Holds || !strings.Contains(j.Stats, "deterministic") {
		t.Fatalf("%q (%s)", j.Verdict, j.Stats)
	}
}

func TestSlope(t *testing.T) {
	xs := []float64{2, 4, 6}
	grows := []Sample{{10, 11, 9}, {20, 21, 19}, {30, 29, 31}}
	if j := SlopeAbove("latency vs N", xs, grows, 0); j.Verdict != Holds {
		t.Fatalf("growing: %q (%s)", j.Verdict, j.Stats)
	}
	// The Series 3 case: N=4 and N=6 identical within noise, one
	// step up from N=2 only by noise.
	flat := []Sample{{10, 12, 9}, {11, 10, 12}, {10, 11, 12}}
	if j := SlopeAbove("latency vs N", xs, flat, 0); j.Verdict != Inconclusive {
		t.Fatalf("flat: %q (%s)", j.Verdict, j.Stats)
	}
	falls := []Sample{{30, 31}, {20, 21}, {10, 9}}
	if j := SlopeAbove("latency vs N", xs, falls, 0); j.Verdict != DoesNotHold {
		t.Fatalf("falling: %q (%s)", j.Verdict, j.Stats)
	}
}

func TestAllOfAndSweep(t *testing.T) {
	h := Judgement{Holds, "a", "sa"}
	n := Judgement{DoesNotHold, "b", "sb"}
	i := Judgement{Inconclusive, "c", "sc"}
	if v := AllOf(h, h).Verdict; v != Holds {
		t.Fatal(v)
	}
	if v := AllOf(h, i).Verdict; v != Inconclusive {
		t.Fatal(v)
	}
	if v := AllOf(i, n, h).Verdict; v != DoesNotHold {
		t.Fatal(v)
	}
	j, rng := Sweep("gossip", []SweepPoint{{"20ms", n}, {"100ms", i}, {"1s", h}})
	if j.Verdict != Holds || !strings.Contains(rng, "holds at gossip = {1s}") || !strings.Contains(rng, "does not hold at {20ms}") {
		t.Fatalf("%q, range %q", j.Verdict, rng)
	}
	if j, _ := Sweep("gossip", []SweepPoint{{"20ms", n}, {"1s", i}}); j.Verdict != DoesNotHold {
		t.Fatal(j.Verdict)
	}
	if j, _ := Sweep("gossip", []SweepPoint{{"20ms", i}}); j.Verdict != Inconclusive {
		t.Fatal(j.Verdict)
	}
	if c := Constructed("972 vs 1371", "hash cost from the seed's gap"); c.Verdict != ByConstruction {
		t.Fatal(c.Verdict)
	}
}

// claimFake is the fake experiment with claims: its speed grows by the run
// number, so repeated runs differ and the claims are judged on samples.
type claimFake struct{ fake }

func (f *claimFake) RunCell(ctx context.Context, env *Env, c Cell) (Outcome, error) {
	out, err := f.fake.RunCell(ctx, env, c)
	if err == nil {
		out.Metrics["speed"] += float64(env.Rep) * 0.5
	}
	return out, err
}

func (f *claimFake) Claims(d Data) []Claim {
	var cs []Claim
	if c, ok := d.NotRun("b/x=3 is fast", "-", "kind=b,x=3"); ok {
		cs = append(cs, c)
	}
	cs = append(cs, Claim{Text: "a/x=3 is faster than a/x=1", Paper: "3x",
		Judgement: RatioAbove("speed ratio", d.Sample("kind=a,x=3", "speed"), d.Sample("kind=a,x=1", "speed"), 1)})
	cs = append(cs, Claim{Text: "a/x=2's rel is 2", Paper: "2",
		Judgement: MeanAbove("rel", d.Sample("kind=a,x=2", "rel"), 1.5)})
	return cs
}

func TestRepeatedRunsFeedClaims(t *testing.T) {
	f := &claimFake{}
	var stdout strings.Builder
	res, _ := Run(context.Background(), f, RunOptions{Options: Options{Reps: 3}, Out: t.TempDir(), Stdout: &stdout})
	if res.Reps != 3 {
		t.Fatalf("reps %d", res.Reps)
	}
	var a1 *CellResult
	for i := range res.Cells {
		if res.Cells[i].Key == "kind=a,x=1" {
			a1 = &res.Cells[i]
		}
	}
	if got := a1.Samples["speed"]; len(got) != 3 || got[0] != 10 || got[2] != 11 {
		t.Fatalf("samples of a/x=1 %v, want [10 10.5 11]", got)
	}
	if a1.Metrics["speed"] != 10.5 {
		t.Fatalf("mean %v, want 10.5", a1.Metrics["speed"])
	}
	// Derived metrics are computed run by run: rel of a/x=2 is (20+r/2)/(10+r/2).
	var a2 CellResult
	for _, c := range res.Cells {
		if c.Key == "kind=a,x=2" {
			a2 = c
		}
	}
	if rel := a2.Samples["rel"]; len(rel) != 3 || rel[0] != 2 || math.Abs(rel[2]-21.0/11) > 1e-9 {
		t.Fatalf("derived samples %v", rel)
	}
	if len(res.Claims) != 3 {
		t.Fatalf("claims %+v", res.Claims)
	}
	if res.Claims[0].Verdict != NotMeasured || !strings.Contains(res.Claims[0].Cause, "boom") {
		t.Fatalf("failed cell's claim: %+v", res.Claims[0])
	}
	if res.Claims[1].Verdict != Holds || res.Claims[2].Verdict != Holds {
		t.Fatalf("claims %+v", res.Claims)
	}
	if !strings.Contains(stdout.String(), "claims (2 holds, 1 not measured)") || !strings.Contains(stdout.String(), "3 run(s) per cell") {
		t.Fatalf("output:\n%s", stdout.String())
	}
}

func TestExact(t *testing.T) {
	same := Sample{3, 3, 3}
	if j := Exact(true, "3 readers", "readers", same); j.Verdict != Holds {
		t.Fatal(j)
	}
	if j := Exact(false, "4 readers", "readers", same); j.Verdict != DoesNotHold {
		t.Fatal(j)
	}
	if j := Exact(true, "3 readers", "readers", same, Sample{3, 3.5, 3}); j.Verdict != Inconclusive {
		t.Fatal(j)
	}
	if j := Exact(true, "3 readers", "readers", Sample{3}); j.Verdict != Inconclusive {
		t.Fatal(j)
	}
}

// sampleFake reports its own repetitions in Outcome.Samples and runs once
// per cell by CellReps; run r's repetitions start at 10r.
type sampleFake struct {
	fake
	runs int
}

func (f *sampleFake) CellReps(c Cell, _ Options) int {
	if c.Get("kind") == "a" {
		return 2
	}
	return 1
}

func (f *sampleFake) RunCell(ctx context.Context, env *Env, c Cell) (Outcome, error) {
	out, err := f.fake.RunCell(ctx, env, c)
	if err == nil {
		base := float64(10 * env.Rep)
		out.Samples = map[string][]float64{"speed": {base + 1, base + 2, base + 3}}
	}
	return out, err
}

func TestOutcomeSamplesAndCellReps(t *testing.T) {
	f := &sampleFake{}
	res, _ := Run(context.Background(), f, RunOptions{Out: t.TempDir()})
	for _, c := range res.Cells {
		switch c.Key {
		case "kind=a,x=1":
			// Two runs by CellReps, each with its three repetitions.
			if got := c.Samples["speed"]; len(got) != 6 || got[0] != 1 || got[3] != 11 || c.Reps != 2 {
				t.Fatalf("a/x=1: reps %d samples %v", c.Reps, got)
			}
			// The table shows the mean of the runs' metrics, the sample holds
			// every repetition.
			if c.Metrics["speed"] != 10 {
				t.Fatalf("a/x=1 mean %v", c.Metrics["speed"])
			}
		case "kind=b,x=1":
			if got := c.Samples["speed"]; len(got) != 3 || c.Reps != 1 {
				t.Fatalf("b/x=1: reps %d samples %v", c.Reps, got)
			}
		}
	}
}

// Three live runs under a shifting load (seed003-adam-live, two passes of
// the quick report): the percentile bootstrap alone gave [1.05, 1.94] for
// ppm/naive, "holds", where the next pass said "does not hold"; with the
// delta-method t interval beside it the ratio is inconclusive.
func TestFewNoisyRunsAreInconclusive(t *testing.T) {
	naive := Sample{30.08, 40.87, 56.67}
	ppm := Sample{65.39, 58.81, 54.94}
	j := RatioAbove("ppm/naive throughput", ppm, naive, 1)
	if j.Verdict != Inconclusive {
		t.Fatalf("%q (%s), want inconclusive", j.Verdict, j.Stats)
	}
	iv := RatioCI(ppm, naive, Confidence)
	if iv.Lo > 0.5 || iv.Hi < 2.2 {
		t.Fatalf("interval %v: want the t interval's width (about [0.3, 2.5])", iv)
	}
}
