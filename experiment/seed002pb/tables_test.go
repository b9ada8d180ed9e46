package seed002pb

import (
	"math"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/experiment"
)

// Table III.3 as printed in the seed: the ratios our Derive must reproduce
// from Tables III.2 and the baseline, to the seed's rounding.
var tableIII3 = map[string][2][5]float64{
	"Notification": {{5.5, 5.5, 5.5, 5.4, 5.3}, {4.6, 4.6, 4.6, 5.5, 4.4}},
	"Call":         {{1.5, 1.6, 1.7, 1.7, 5.9}, {1.3, 1.4, 1.7, 1.5, 6.5}},
	"Socket":       {{1.0, 1.1, 1.1, 1.3, 4.1}, {1.0, 1.0, 1.0, 1.2, 3.6}},
}

func TestDeriveReproducesTableIII3(t *testing.T) {
	figs := rttSeedFigures()
	NewRTT().Derive(figs)
	for _, tr := range transports {
		for i, size := range sizes {
			k := rttCell("pb", tr.name, size).Key
			for j, m := range []string{mRatioMedian, mRatioMean} {
				got, ok := figs.Get(k, m)
				want := tableIII3[tr.seed][j][i]
				if !ok || math.Abs(got-want) > 0.051 {
					t.Errorf("%s %d B %s: derived %.3f, the seed prints %.1f", tr.seed, size, m, got, want)
				}
			}
		}
	}
}

func TestSeedClaimsOnSeedFigures(t *testing.T) {
	figs := rttSeedFigures()
	NewRTT().Derive(figs)
	got := strings.Join(rttClaims("seed", figs), "\n")
	for _, want := range []string{"192.5x at 10 B, 1.4x at 100 kB", "at most 26% (seed: 30% or less): holds"} {
		if !strings.Contains(got, want) {
			t.Errorf("claims lack %q:\n%s", want, got)
		}
	}
	// A socket overhead above 30% is reported as not holding.
	figs.Set(rttCell("pb", "tcp", 1000).Key, mRatioMedian, 1.8)
	if got := strings.Join(rttClaims("x", figs), "\n"); !strings.Contains(got, "at most 80%") || !strings.Contains(got, "does not hold") {
		t.Errorf("claims on a 1.8 ratio:\n%s", got)
	}
}

func TestSummarize(t *testing.T) {
	ms := func(v ...float64) []time.Duration {
		var out []time.Duration
		for _, x := range v {
			out = append(out, time.Duration(x*float64(time.Millisecond)))
		}
		return out
	}
	s := summarize(ms(1, 2, 3, 10))
	if s.median != 2.5 || s.mean != 4 || math.Abs(s.sd-math.Sqrt(50.0/3)) > 1e-9 {
		t.Errorf("summarize(1,2,3,10) = %+v", s)
	}
	if s := summarize(ms(7)); s.median != 7 || s.mean != 7 || s.sd != 0 {
		t.Errorf("summarize(7) = %+v", s)
	}
}

func TestFailoverSummarySlope(t *testing.T) {
	f := NewFailover()
	ours := experiment.Figures{}
	for _, n := range f.Clients {
		ours.Set(experiment.NewCell("clients", strconv.Itoa(n)).Key, mSpread, float64(n)*2)
	}
	got := strings.Join(f.Summary(ours, f.Seed().Values), "\n")
	for _, want := range []string{"seed : notify_all_ms grows by 120.00 ms per extra client", "synod: notify_spread_ms grows by 2.00 ms per extra client"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
