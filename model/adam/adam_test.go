package adam

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"testing"
)

func run(t *testing.T, c Config) Result {
	t.Helper()
	r, err := Run(c)
	if err != nil {
		t.Fatalf("%+v: %v", c.Strategy, err)
	}
	return r
}

// The seed's figures: 12 requests of one local and one remote slice take 24
// slices naively (Fig 3.2), 12 slices and 7 checkpoints with walls on two
// threads (Fig 3.3), 13 with the SPM on two threads (Fig 3.4) and 7 with the
// PPM on two groups of two (Fig 4.1), with as many checkpoints as the walls.
func TestSeedFigures(t *testing.T) {
	for _, tc := range []struct {
		c           Config
		slices      float64
		checkpoints int
	}{
		{Config{Strategy: Naive}, 24, 0},
		{Config{Strategy: Walls, Threads: 2}, 12, 7},
		{Config{Strategy: SPM, Threads: 2}, 13, 0},
		{Config{Strategy: PPM, Groups: 2, Threads: 2}, 7, 7},
		{Config{Strategy: PPM, Groups: 2, Threads: 2, SendAtYield: true}, 7, 7},
	} {
		tc.c.Requests = Uniform(12, 1, 1)
		r := run(t, tc.c)
		if r.Makespan != tc.slices || r.Checkpoints != tc.checkpoints {
			t.Errorf("%s: %g slices, %d checkpoints; the seed: %g, %d", tc.c.Strategy, r.Makespan, r.Checkpoints, tc.slices, tc.checkpoints)
		}
	}
	// §4.2: 24/7 ≈ 3.43.
	if s, _ := Speedup(Config{Strategy: PPM, Groups: 2, Threads: 2, Requests: Uniform(12, 1, 1)}); fmt.Sprintf("%.2f", s) != "3.43" {
		t.Errorf("speedup %.3f, the seed 24/7 ≈ 3.43", s)
	}
}

// The notes' closed forms hold for every batch size, thread and group count,
// and G = 3, k = 16 gives 12x at 12 requests, 24x at 48 and ≈31x at 480.
func TestClosedForms(t *testing.T) {
	for n := 1; n <= 40; n++ {
		u := Uniform(n, 1, 1)
		if r := run(t, Config{Strategy: Naive, Requests: u}); r.Makespan != float64(NaiveSlices(n)) {
			t.Errorf("naive n=%d: %g", n, r.Makespan)
		}
		for k := 1; k <= 6; k++ {
			if r := run(t, Config{Strategy: Walls, Threads: k, Requests: u}); r.Makespan != float64(WallsSlices(n, k)) || r.Checkpoints != WallsCheckpoints(n, k) {
				t.Errorf("walls n=%d k=%d: %g slices %d checkpoints", n, k, r.Makespan, r.Checkpoints)
			}
			if r := run(t, Config{Strategy: SPM, Threads: k, Requests: u}); r.Makespan != float64(SPMSlices(n, k)) || r.Checkpoints != 0 {
				t.Errorf("spm n=%d k=%d: %g slices", n, k, r.Makespan)
			}
			for g := 1; g <= 4; g++ {
				if r := run(t, Config{Strategy: PPM, Groups: g, Threads: k, Requests: u}); r.Makespan != float64(PPMSlices(n, g, k)) || r.Checkpoints != PPMCheckpoints(n, k) {
					t.Errorf("ppm n=%d g=%d k=%d: %g slices %d checkpoints, want %d, %d", n, g, k, r.Makespan, r.Checkpoints, PPMSlices(n, g, k), PPMCheckpoints(n, k))
				}
			}
		}
	}
	for n, want := range map[int]string{12: "12.0", 48: "24.0", 480: "31.0"} {
		s, err := Speedup(Config{Strategy: PPM, Groups: 3, Threads: 16, Requests: Uniform(n, 1, 1)})
		if err != nil || fmt.Sprintf("%.1f", s) != want {
			t.Errorf("G=3 k=16 N=%d: speedup %.2f (%v), want %s", n, s, err, want)
		}
	}
}

// The PPM's speedup grows with the batch (over batches that fill every
// thread), never reaches 2k and comes within 1% of it for large batches.
func TestSpeedupTowardsTwoK(t *testing.T) {
	for _, k := range []int{1, 2, 8, 16} {
		prev := 0.0
		for m := 1; m <= 64; m *= 2 {
			s, err := Speedup(Config{Strategy: PPM, Groups: 3, Threads: k, Requests: Uniform(m*k, 1, 1)})
			if err != nil {
				t.Fatal(err)
			}
			if s <= prev || s >= float64(2*k) {
				t.Errorf("k=%d N=%d: speedup %.3f (previous %.3f, limit %d)", k, m*k, s, prev, 2*k)
			}
			prev = s
		}
		if s := PPMSpeedup(200*k, 3, k); s < 0.99*float64(2*k) {
			t.Errorf("k=%d: %.3f at N=%d, not near 2k", k, s, 200*k)
		}
	}
}

// randomConfig is a batch of requests with unequal local and remote costs.
func randomConfig(rng *rand.Rand, s Strategy) Config {
	c := Config{Strategy: s, Groups: 1 + rng.IntN(4), Threads: 1 + rng.IntN(4)}
	for i := 0; i < 1+rng.IntN(30); i++ {
		c.Requests = append(c.Requests, Request{Local: float64(1 + rng.IntN(5)), Remote: float64(rng.IntN(12))})
	}
	if rng.IntN(2) == 0 {
		c.HashFixed, c.HashPerRequest, c.Verify = float64(rng.IntN(2)), float64(rng.IntN(2)), float64(rng.IntN(3))
	}
	return c
}

// scaleRemote returns c with every remote cost multiplied by f.
func scaleRemote(c Config, f float64) Config {
	c.Requests = slices.Clone(c.Requests)
	for i := range c.Requests {
		c.Requests[i].Remote *= f
	}
	return c
}

// turnSets prints each turn's group and the set of requests it ran (threads
// of a group compute in parallel: the order they start in is not fixed).
func turnSets(ts []Turn) string {
	out := ""
	for _, t := range ts {
		out += fmt.Sprint(t.Group, slices.Sorted(slices.Values(t.Requests)))
	}
	return out
}

// properties checks what every correct run of c satisfies: it finishes;
// each request computes exactly once; only one group (for the SPM, one
// thread) computes at a time; and the turns, the requests each runs, do not
// depend on how long remote computations take.
func properties(c Config) error {
	r, err := Run(c)
	if err != nil {
		return err
	}
	seen := make([]int, len(c.Requests))
	for _, iv := range r.Compute {
		seen[iv.Request]++
	}
	for i, n := range seen {
		if n != 1 {
			return fmt.Errorf("request %d computed %d times", i, n)
		}
	}
	if c.Strategy == PPM || c.Strategy == SPM {
		for _, a := range r.Compute {
			for _, b := range r.Compute {
				same := a.Group == b.Group
				if c.Strategy == SPM {
					same = a.Request == b.Request
				}
				if !same && a.Start < b.End && b.Start < a.End {
					return fmt.Errorf("requests %d (group %d) and %d (group %d) compute at once", a.Request, a.Group, b.Request, b.Group)
				}
			}
		}
		for _, f := range []float64{0, 0.5, 3} {
			o, err := Run(scaleRemote(c, f))
			if err != nil {
				return fmt.Errorf("remote ×%g: %w", f, err)
			}
			if turnSets(o.Turns) != turnSets(r.Turns) {
				return fmt.Errorf("turn order depends on remote time: %v, with remote ×%g: %v", r.Turns, f, o.Turns)
			}
		}
	}
	return nil
}

// Every strategy satisfies the properties on random batches with unequal
// costs and overheads, whether nested requests leave at the yield or at the
// wall.
func TestProperties(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for i := 0; i < 400; i++ {
		for _, s := range Strategies {
			c := randomConfig(rng, s)
			c.SendAtYield = i%2 == 0
			if err := properties(c); err != nil {
				t.Fatalf("%s %+v: %v", s, c, err)
			}
		}
	}
}

// The broken schedulers fail the properties, whether nested requests leave
// at the yield or at the wall: a thread that clears its own yield bit
// (§5.2.1) stalls the pipeline (a finished thread's cleared bit keeps its
// group on the pipeline; with sends at the yield it may also run twice in one
// turn); a thread that computes outside its group's turn (§5.2.2) computes
// beside another group.
func TestBrokenVariantsCaught(t *testing.T) {
	for _, tc := range []struct {
		v    Variant
		want []string // every kind of failure the random batches must show
	}{
		{SelfClear, []string{"stalled"}},
		{Eager, []string{"compute at once"}},
	} {
		for _, atYield := range []bool{true, false} {
			rng := rand.New(rand.NewPCG(1, 2))
			found := map[string]string{}
			for i := 0; i < 400; i++ {
				c := randomConfig(rng, PPM)
				c.Variant, c.SendAtYield = tc.v, atYield
				if err := properties(c); err != nil {
					for _, w := range tc.want {
						if strings.Contains(err.Error(), w) && found[w] == "" {
							found[w] = err.Error()
						}
					}
				}
			}
			for _, w := range tc.want {
				if found[w] == "" {
					t.Errorf("%s (send at yield %v): never %q", tc.v, atYield, w)
				} else {
					t.Logf("%s (send at yield %v): %s", tc.v, atYield, found[w])
				}
			}
		}
	}
}

// §5.2.1's scenario: in a group of two, thread 1 yields and sends its nested
// request while thread 2 is still computing; thread 1's answer returns before
// thread 2 yields. With the seed's rule the group swaps off when thread 2
// yields and group 1 runs; if thread 1 clears its own bit, the group never
// counts as all yielded, nothing computes while thread 2's long remote call
// runs, and group 1 never gets the pipeline: the idle-machine stall.
func TestSelfClearIdleStall(t *testing.T) {
	c := Config{Strategy: PPM, Groups: 2, Threads: 2, SendAtYield: true,
		Requests: []Request{{1, 1}, {3, 5}, {1, 1}, {1, 1}}}
	r := run(t, c)
	if r.Makespan != 8 || len(r.Turns) != 2 || r.Turns[1].Group != 1 {
		t.Errorf("seed's rule: makespan %g, turns %v; want 8, group 1 running at 3", r.Makespan, r.Turns)
	}
	c.Variant = SelfClear
	r, err := Run(c)
	if !errors.Is(err, ErrStalled) || r.StallAt != 8 {
		t.Fatalf("self-clearing thread: %v (stall at %g), want a stall once thread 2's answer is back at 8", err, r.StallAt)
	}
	if last := r.Compute[len(r.Compute)-1]; last.End != 3 {
		t.Errorf("last computation ends at %g, want 3: idle from then on", last.End)
	}
}

// Overheads: each wall costs the hashing of the round's requests and a
// verification round trip before the nested requests leave; the end of the
// batch a fixed hash and a verification. The PPM hands the pipeline on after
// hashing, so with three groups the verification hides behind other turns.
func TestOverheads(t *testing.T) {
	const l, rem, h, v = 10, 10, 0.5, 3
	n, k := 48, 8
	walls := run(t, Config{Strategy: Walls, Threads: k, Requests: Uniform(n, l, rem), HashPerRequest: h, Verify: v, HashFixed: 1})
	rounds := float64(n / k)
	if want := rounds*(l+rem+1+h*float64(k)+v) + 1 + v; walls.Makespan != want {
		t.Errorf("walls: %g, want %g", walls.Makespan, want)
	}
	ppm := run(t, Config{Strategy: PPM, Groups: 3, Threads: k, Requests: Uniform(n, l, rem), HashPerRequest: h, Verify: v})
	turn := l + h*float64(k)
	if want := rounds*turn + v + rem + v; ppm.Makespan != want {
		t.Errorf("ppm: %g, want %g", ppm.Makespan, want)
	}
}

func TestValidate(t *testing.T) {
	for _, c := range []Config{{Strategy: Naive}, {Strategy: PPM, Groups: 0, Threads: 1, Requests: Uniform(1, 1, 1)},
		{Strategy: "x", Requests: Uniform(1, 1, 1)}, {Strategy: Naive, Requests: []Request{{-1, 0}}}} {
		if _, err := Run(c); err == nil {
			t.Errorf("%+v accepted", c)
		}
	}
}
