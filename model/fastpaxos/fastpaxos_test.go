package fastpaxos

import (
	"math"
	"math/rand/v2"
	"strings"
	"testing"
)

func near(a, b, tol float64) bool { return math.Abs(a-b) <= tol }

func TestParetoCDFQuantile(t *testing.T) {
	p, err := NewPareto(1.2, 100)
	if err != nil {
		t.Fatal(err)
	}
	if p.CDF(100) != 0 || p.CDF(50) != 0 {
		t.Fatalf("CDF below b: %v %v", p.CDF(100), p.CDF(50))
	}
	// P{X ≤ 200} = 1 − 2^−1.2.
	if want := 1 - math.Pow(0.5, 1.2); !near(p.CDF(200), want, 1e-15) {
		t.Fatalf("CDF(200) = %v, want %v", p.CDF(200), want)
	}
	for _, u := range []float64{0.01, 0.5, 0.9, 0.999} {
		if got := p.CDF(p.Quantile(u)); !near(got, u, 1e-12) {
			t.Errorf("CDF(Quantile(%v)) = %v", u, got)
		}
	}
	if !math.IsInf(p.Quantile(1), 1) || p.Quantile(0) != 100 {
		t.Errorf("Quantile ends: %v %v", p.Quantile(0), p.Quantile(1))
	}
	for _, bad := range [][2]float64{{1, 100}, {0.5, 1}, {2, 0}, {math.Inf(1), 1}} {
		if _, err := NewPareto(bad[0], bad[1]); err == nil {
			t.Errorf("NewPareto(%v) accepted", bad)
		}
	}
}

func TestEmpirical(t *testing.T) {
	samples, err := ReadTrace(strings.NewReader("# ms\n1\n2\n\n2\n4\n"))
	if err != nil {
		t.Fatal(err)
	}
	e, err := NewEmpirical("x", samples)
	if err != nil {
		t.Fatal(err)
	}
	// Distinct values 1, 2, 4 with F = 0, 3/4, 1 (the mass of 1 goes with 2's).
	for _, c := range []struct{ x, f float64 }{{0.5, 0}, {1, 0}, {1.5, 0.375}, {2, 0.75}, {3, 0.875}, {4, 1}, {9, 1}} {
		if got := e.CDF(c.x); !near(got, c.f, 1e-15) {
			t.Errorf("CDF(%v) = %v, want %v", c.x, got, c.f)
		}
	}
	for _, u := range []float64{0.1, 0.375, 0.75, 0.9} {
		if got := e.CDF(e.Quantile(u)); !near(got, u, 1e-12) {
			t.Errorf("CDF(Quantile(%v)) = %v", u, got)
		}
	}
	if e.Len() != 4 || e.Min() != 1 || e.Max() != 4 {
		t.Errorf("len %d min %v max %v", e.Len(), e.Min(), e.Max())
	}
	if _, err := ReadTrace(strings.NewReader("1\nx\n")); err == nil || !strings.Contains(err.Error(), "line 2") {
		t.Errorf("bad line: %v", err)
	}
	if _, err := NewEmpirical("y", []float64{3, 3, 3}); err == nil {
		t.Error("a constant trace was accepted")
	}
	if _, err := NewEmpirical("y", []float64{3, -1}); err == nil {
		t.Error("a negative latency was accepted")
	}
}

func TestConvolveFFTMatchesDirect(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for _, n := range []int{1, 5, 64, 1000} {
		a, b := make([]float64, n), make([]float64, n)
		for i := range a {
			a[i], b[i] = r.Float64()/float64(n), r.Float64()/float64(n)
		}
		got, want := convolve(a, b), convolveDirect(a, b)
		for i := range want {
			if !near(got[i], want[i], 1e-14) {
				t.Fatalf("n=%d: entry %d: fft %v, direct %v", n, i, got[i], want[i])
			}
		}
	}
}

// The order-statistic formula against enumerating every outcome of n coins.
func TestKthSmallestCDF(t *testing.T) {
	for _, n := range []int{1, 3, 4, 7} {
		for k := 1; k <= n; k++ {
			for _, g := range []float64{0, 0.2, 0.5, 0.9, 1} {
				want := 0.0
				for mask := 0; mask < 1<<n; mask++ {
					below, p := 0, 1.0
					for i := 0; i < n; i++ {
						if mask&(1<<i) != 0 {
							below++
							p *= g
						} else {
							p *= 1 - g
						}
					}
					if below >= k {
						want += p
					}
				}
				if got := KthSmallestCDF(g, k, n); !near(got, want, 1e-12) {
					t.Errorf("k=%d n=%d g=%v: %v, want %v", k, n, g, got, want)
				}
			}
		}
	}
}

func wanSetting(alpha float64, tt int) Setting {
	return Setting{WAN: Pareto{alpha, 100}, LAN: Pareto{2, 3}, T: tt}
}

// The numerical brackets and the message-by-message Monte Carlo agree: the
// empirical CDF lies in the bracket widened by the DKW bound at every point.
func TestTimeToLearnMatchesMonteCarlo(t *testing.T) {
	lanOnly := Setting{WAN: Pareto{2, 3}, LAN: Pareto{2, 3}, T: 3}
	loop, err := NewEmpirical("synthetic", func() []float64 {
		r := rand.New(rand.NewPCG(7, 7))
		out := make([]float64, 5000)
		for i := range out {
			out[i] = 0.05 + r.ExpFloat64()*0.02
		}
		return out
	}())
	if err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct {
		s    Setting
		xmax float64
	}{
		{wanSetting(1.2, 1), 1500},
		{lanOnly, 60},
		{Setting{WAN: Pareto{1.8, 100}, LAN: loop, T: 1}, 1000},
	} {
		g, _ := NewGrid(c.xmax, 4096)
		curves, err := TimeToLearn(c.s, g)
		if err != nil {
			t.Fatal(err)
		}
		const n = 100000
		lc, lf, err := SampleLearn(c.s, n, 42)
		if err != nil {
			t.Fatal(err)
		}
		eps := DKW(n, 1e-6)
		for j := 0; j < g.N; j += 7 {
			x := g.X(j)
			for _, v := range []struct {
				name    string
				samples []float64
				b       Bracket
			}{{"classic", lc, curves.Classic}, {"fast", lf, curves.Fast}} {
				f := ECDF(v.samples, x)
				if f < v.b.Lo[j]-eps || f > v.b.Hi[j]+eps {
					t.Fatalf("t=%d %s: at x=%.2f Monte Carlo %.4f outside [%.4f, %.4f] ± %.4f", c.s.T, v.name, x, f, v.b.Lo[j], v.b.Hi[j], eps)
				}
			}
		}
		if curves.Classic.MaxErr() > 0.01 || curves.Fast.MaxErr() > 0.01 {
			t.Errorf("%v: bracket errors %v %v on 4096 points", c.s.WAN, curves.Classic.MaxErr(), curves.Fast.MaxErr())
		}
	}
}

// The bracket is a horizontal shift of at most (links)·H each side, and it
// narrows as the grid gets finer.
func TestBracketWidth(t *testing.T) {
	s := wanSetting(1.8, 1)
	var prev float64 = 1
	for _, n := range []int{1024, 4096, 16384} {
		g, _ := NewGrid(1000, n)
		c, err := TimeToLearn(s, g)
		if err != nil {
			t.Fatal(err)
		}
		for _, v := range []struct {
			b     Bracket
			links int
		}{{c.Classic, ClassicLinks}, {c.Fast, FastLinks}} {
			for j := 0; j+2*v.links < g.N; j++ {
				if v.b.Lo[j] > v.b.Hi[j]+1e-12 {
					t.Fatalf("n=%d: Lo %v > Hi %v at %d", n, v.b.Lo[j], v.b.Hi[j], j)
				}
				if v.b.Hi[j] > v.b.Lo[j+2*v.links]+1e-9 {
					t.Fatalf("n=%d: Hi(x_%d) %v > Lo(x + %d·H) %v", n, j, v.b.Hi[j], 2*v.links, v.b.Lo[j+2*v.links])
				}
			}
		}
		e := c.Classic.MaxErr()
		if e >= prev {
			t.Errorf("n=%d: error %v did not shrink from %v", n, e, prev)
		}
		prev = e
	}
}

func TestSimultaneousCollision(t *testing.T) {
	if got := SimultaneousCollision(1, 2); got != 0.375 {
		t.Errorf("t=1: %v, want 6/16", got)
	}
	if got := SimultaneousCollision(3, 2); !near(got, 672.0/1024, 1e-15) {
		t.Errorf("t=3: %v, want 672/1024", got)
	}
	w := Pareto{1.2, 100}
	for _, tt := range []int{1, 3} {
		prev := 0.0
		for _, c := range []int{2, 4, 6, 8} {
			p, err := Collision(w, tt, Staggered(c, 0), 1<<12)
			if err != nil {
				t.Fatal(err)
			}
			want := SimultaneousCollision(tt, c)
			if want < p.Lo-1e-12 || want > p.Hi+1e-12 {
				t.Errorf("t=%d c=%d: bracket [%v, %v] misses %v", tt, c, p.Lo, p.Hi, want)
			}
			if want <= prev {
				t.Errorf("t=%d: %d clients collide with %v, not more than fewer clients (%v)", tt, c, want, prev)
			}
			prev = want
		}
	}
}

func TestCollisionMatchesMonteCarlo(t *testing.T) {
	w := Pareto{1.2, 100}
	for _, c := range []struct {
		t, clients int
		delta      float64
	}{{1, 2, 50}, {3, 2, 100}, {1, 4, 20}, {3, 6, 5}} {
		p, err := Collision(w, c.t, Staggered(c.clients, c.delta), 0)
		if err != nil {
			t.Fatal(err)
		}
		const n = 40000
		mc := SampleCollision(w, c.t, Staggered(c.clients, c.delta), n, 9)
		se := math.Sqrt(p.Mid() * (1 - p.Mid()) / n)
		if math.Abs(mc-p.Mid()) > 5*se+p.Err() {
			t.Errorf("%+v: Monte Carlo %v, computed %v ± %v (se %v)", c, mc, p.Mid(), p.Err(), se)
		}
	}
}

// Two clients: the collision probability falls as δ grows, and in the seed's
// Pareto setting t = 3 starts higher than t = 1 and falls below it.
func TestCollisionAgainstDelta(t *testing.T) {
	w := Pareto{1.2, 100}
	at := func(tt int, d float64) float64 {
		p, err := Collision(w, tt, Staggered(2, d), 1<<12)
		if err != nil {
			t.Fatal(err)
		}
		return p.Mid()
	}
	for _, tt := range []int{1, 3} {
		prev := 1.0
		for d := 0.0; d <= 500; d += 50 {
			v := at(tt, d)
			if v >= prev {
				t.Errorf("t=%d: P(δ=%v) = %v does not fall (previous %v)", tt, d, v, prev)
			}
			prev = v
		}
	}
	if at(3, 0) <= at(1, 0) || at(3, 200) >= at(1, 200) {
		t.Errorf("t=3 vs t=1: δ=0 %v vs %v, δ=200 %v vs %v", at(3, 0), at(1, 0), at(3, 200), at(1, 200))
	}
	if _, err := Collision(w, 0, Staggered(2, 0), 0); err == nil {
		t.Error("t=0 accepted")
	}
	if _, err := Collision(w, 1, []float64{0}, 0); err == nil {
		t.Error("one client accepted")
	}
}

// The seed's Pareto WAN setting: two regions, the crossover where both CDFs
// exceed 0.7 (regression figures from the default grid, see the experiment).
func TestCompareParetoWAN(t *testing.T) {
	g, _ := NewGrid(1500, 8192)
	for _, c := range []struct {
		alpha  float64
		lo, hi float64
	}{{1.2, 320, 355}, {1.8, 210, 240}} {
		curves, err := TimeToLearn(wanSetting(c.alpha, 1), g)
		if err != nil {
			t.Fatal(err)
		}
		r := Compare(curves)
		if !r.TwoRegions || r.Crossover < c.lo || r.Crossover > c.hi || r.ClassicAt < 0.7 || r.FastAt < 0.7 {
			t.Errorf("α=%v: %+v", c.alpha, r)
		}
	}
	// All-LAN: Fast is never below Classic.
	g, _ = NewGrid(80, 8192)
	curves, err := TimeToLearn(Setting{WAN: Pareto{2, 3}, LAN: Pareto{2, 3}, T: 1}, g)
	if err != nil {
		t.Fatal(err)
	}
	if r := Compare(curves); r.ClassicAhead || !r.FastAhead || r.TwoRegions || r.MaxFastLead < 0.3 {
		t.Errorf("all-LAN: %+v", r)
	}
}

// Compare on hand-made curves: one crossing; Fast ahead throughout.
func TestCompareSynthetic(t *testing.T) {
	g, _ := NewGrid(10, 11)
	mk := func(v []float64) Bracket { return Bracket{Lo: v, Hi: v} }
	c := &Curves{Grid: g,
		Classic: mk([]float64{0, 0.3, 0.45, 0.6, 0.7, 0.75, 0.8, 0.85, 0.9, 0.92, 0.95}),
		Fast:    mk([]float64{0, 0.1, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.97, 0.98, 0.99}),
	}
	r := Compare(c)
	if !r.TwoRegions || r.Crossover != 4 || r.ClassicAt != 0.7 || !near(r.MaxClassicLead, 0.2, 1e-12) || r.MaxClassicLeadAt != 1 {
		t.Errorf("crossing: %+v", r)
	}
	c.Classic, c.Fast = c.Fast, c.Classic // now Fast is ahead first, then Classic
	if r := Compare(c); r.TwoRegions || !math.IsNaN(r.Crossover) {
		t.Errorf("reversed: %+v", r)
	}
	x, lo, hi := c.Classic.Quantile(g, 0.5)
	if x != 3 || lo != 3 || hi != 3 { // Fast (now c.Classic) reaches 0.5 at x = 3
		t.Errorf("median %v [%v, %v]", x, lo, hi)
	}
	if x, _, _ := c.Classic.Quantile(g, 0.999); !math.IsInf(x, 1) {
		t.Errorf("quantile beyond the grid: %v", x)
	}
}

func TestSettingChecks(t *testing.T) {
	g, _ := NewGrid(100, 16)
	if _, err := TimeToLearn(Setting{WAN: Pareto{2, 3}, T: 1}, g); err == nil {
		t.Error("missing LAN accepted")
	}
	if _, err := TimeToLearn(Setting{WAN: Pareto{2, 3}, LAN: Pareto{2, 3}, T: 0}, g); err == nil {
		t.Error("t=0 accepted")
	}
	if _, err := NewGrid(0, 10); err == nil {
		t.Error("empty grid accepted")
	}
	if q := TableV1(3); q != (Quorums{7, 4, 10, 7}) {
		t.Errorf("Table V.1 at t=3: %+v", q)
	}
}

func TestCSV(t *testing.T) {
	g, _ := NewGrid(1000, 64)
	c, err := TimeToLearn(wanSetting(1.2, 1), g)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	if err := c.WriteCSV(&b); err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(b.String()), "\n")
	if len(lines) != 65 || !strings.HasPrefix(lines[0], "x_ms,classic,") || !strings.HasPrefix(lines[64], "1000,") {
		t.Fatalf("%d lines: %q … %q", len(lines), lines[0], lines[len(lines)-1])
	}
	pts, err := CollisionCurve(Pareto{1.2, 100}, 1, 2, []float64{0, 100}, 256)
	if err != nil {
		t.Fatal(err)
	}
	b.Reset()
	if err := WriteCollisionCSV(&b, pts); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(b.String(), "\n1,2,0,0.37") {
		t.Fatalf("collision csv:\n%s", b.String())
	}
}
