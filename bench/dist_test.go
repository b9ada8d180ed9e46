package bench

import (
	"math"
	"math/rand"
	"strings"
	"testing"
	"time"
)

func draw(t *testing.T, dist string, keys, n int) []int {
	t.Helper()
	spec, err := ParseDist(dist, keys)
	if err != nil {
		t.Fatal(err)
	}
	r := rand.New(rand.NewSource(42))
	k := newKeyChooser(spec, keys, r)
	counts := make([]int, keys)
	for i := 0; i < n; i++ {
		j := k.next(r)
		if j < 0 || j >= keys {
			t.Fatalf("key index %d out of [0,%d)", j, keys)
		}
		counts[j]++
	}
	return counts
}

func TestZipfSeed001Concentration(t *testing.T) {
	const keys, n, s = 1000, 200000, 1.345675
	counts := draw(t, "zipf:1.345675", keys, n)
	top := 0
	for _, c := range counts[:keys/10] {
		top += c
	}
	got := float64(top) / n
	// Expected from the distribution math/rand.Zipf samples: P(k) ∝ (1+k)^-s.
	var num, den float64
	for k := 0; k < keys; k++ {
		w := math.Pow(1+float64(k), -s)
		den += w
		if k < keys/10 {
			num += w
		}
	}
	want := num / den
	if math.Abs(want-0.90) > 0.01 {
		t.Fatalf("analytic top-10%% share %v, the seed's premise is ~0.90", want)
	}
	if math.Abs(got-want) > 0.01 {
		t.Fatalf("top 10%% of keys got %.4f of operations, want %.4f ± 0.01", got, want)
	}
	if counts[0] <= counts[1] || counts[1] <= counts[10] {
		t.Fatalf("key popularity not decreasing: %d %d %d", counts[0], counts[1], counts[10])
	}
}

func TestHotspotProportions(t *testing.T) {
	const keys, n = 1000, 200000
	counts := draw(t, "hotspot:0.2:0.8", keys, n)
	hot := 0
	for _, c := range counts[:200] {
		hot += c
	}
	if got := float64(hot) / n; math.Abs(got-0.8) > 0.01 {
		t.Fatalf("hot 20%% of keys got %.4f of operations, want 0.80 ± 0.01", got)
	}
	// Within each set keys are uniform: hot key mean 800, cold key mean 50.
	for i, c := range counts {
		mean := 800.0
		if i >= 200 {
			mean = 50
		}
		if math.Abs(float64(c)-mean) > 6*math.Sqrt(mean) {
			t.Fatalf("key %d drawn %d times, want about %.0f", i, c, mean)
		}
	}
}

func TestUniformCoverage(t *testing.T) {
	const keys, n = 100, 100000
	counts := draw(t, "uniform", keys, n)
	chi := 0.0
	for i, c := range counts {
		if c == 0 {
			t.Fatalf("key %d never drawn", i)
		}
		d := float64(c) - n/keys
		chi += d * d / (n / keys)
	}
	// 99 degrees of freedom: mean 99, sd 14; 170 is about 5 sd out.
	if chi > 170 {
		t.Fatalf("chi-square %.1f: not uniform", chi)
	}
}

func TestParseDistErrors(t *testing.T) {
	for _, s := range []string{"", "zipf", "zipf:1", "zipf:0.5", "zipf:x", "zipf:2:3", "uniform:1",
		"hotspot:0.1", "hotspot:0:0.5", "hotspot:1:0.5", "hotspot:0.1:1.5", "hotspot:0.001:0.5", "pareto:2"} {
		if _, err := ParseDist(s, 100); err == nil {
			t.Errorf("ParseDist(%q) accepted", s)
		} else if !strings.Contains(err.Error(), "key distribution") {
			t.Errorf("ParseDist(%q): unhelpful error %v", s, err)
		}
	}
	d, err := ParseDist("hotspot:0.1:0.9", 1000)
	if err != nil || d.String() != "hotspot:0.1:0.9" {
		t.Fatalf("round trip: %v %v", d, err)
	}
}

func TestPoissonSchedule(t *testing.T) {
	const rate, n = 1000.0, 200000
	p := newPoisson(rate, rand.New(rand.NewSource(7)))
	var prev time.Duration
	var sum, sumSq float64
	longer := 0
	const window = 10 * time.Millisecond
	perWindow := map[int64]int{}
	var last time.Duration
	for i := 0; i < n; i++ {
		at := p.next()
		if at < prev {
			t.Fatalf("arrival %d at %v before previous %v", i, at, prev)
		}
		gap := (at - prev).Seconds()
		prev = at
		sum += gap
		sumSq += gap * gap
		if gap > 1/rate {
			longer++
		}
		perWindow[int64(at/window)]++
		last = at
	}
	mean := sum / n
	if math.Abs(mean*rate-1) > 0.01 {
		t.Fatalf("mean gap %v s, want %v ± 1%%", mean, 1/rate)
	}
	cv := math.Sqrt(sumSq/n-mean*mean) / mean
	if math.Abs(cv-1) > 0.02 {
		t.Fatalf("gap coefficient of variation %.3f, want 1 (exponential)", cv)
	}
	if f := float64(longer) / n; math.Abs(f-math.Exp(-1)) > 0.01 {
		t.Fatalf("P(gap > mean) = %.4f, want e^-1", f)
	}
	// Counts per window: Poisson with mean 10, so variance/mean ≈ 1.
	windows := int64(last / window)
	var cs, cs2 float64
	for w := int64(0); w < windows; w++ {
		c := float64(perWindow[w])
		cs += c
		cs2 += c * c
	}
	cm := cs / float64(windows)
	if ratio := (cs2/float64(windows) - cm*cm) / cm; math.Abs(ratio-1) > 0.05 {
		t.Fatalf("window count variance/mean %.3f, want 1", ratio)
	}
}

func TestKeyNamesAndValues(t *testing.T) {
	n := newKeyNamer("key:", 1000)
	if got := n.name(42); got != "key:000042" {
		t.Fatalf("name(42) = %q", got)
	}
	if got := newKeyNamer("k", 12345678).name(7); got != "k00000007" {
		t.Fatalf("wide name = %q", got)
	}
	seen := map[string]bool{}
	for c := 0; c < 3; c++ {
		v := newValueMaker(c*1000, MinValueSize, rand.New(rand.NewSource(int64(c))))
		for i := 0; i < 2000; i++ {
			b := v.next()
			if len(b) != MinValueSize {
				t.Fatalf("value length %d, want %d", len(b), MinValueSize)
			}
			for _, ch := range b {
				if ch < 0x21 || ch > 0x7e {
					t.Fatalf("unprintable byte %q in %q", ch, b)
				}
			}
			if seen[string(b)] {
				t.Fatalf("value %q repeated", b)
			}
			seen[string(b)] = true
		}
	}
}
