package seed000simple

import (
	"context"
	"strings"
	"testing"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/esds"
)

// TestQuick runs the experiment's CI pass (--quick: N = 2, 3, 40
// operations, one run per cell) and checks what it must show: every cell
// completes every operation and counts its messages, and strict operations
// (which wait for gossip) are slower with reservations. (Messages per
// operation need not grow: slower gossip carries more per message.)
func TestQuick(t *testing.T) {
	e := New()
	fs := pflag.NewFlagSet(e.Name(), pflag.ContinueOnError)
	e.Flags(fs)
	if err := fs.Parse(nil); err != nil {
		t.Fatal(err)
	}
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Quick: true, Reps: 1}, Out: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Cells) != 8 {
		t.Fatalf("%d cells, want 2 strict shares x N=2,3 x 2 impls", len(res.Cells))
	}
	f := experiment.Figures{}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK {
			t.Fatalf("cell %s: %s %s", c.Key, c.Status, c.Reason)
		}
		if c.Metrics[mUnknown] != 0 {
			t.Errorf("cell %s: %v operations unanswered", c.Key, c.Metrics[mUnknown])
		}
		for k, v := range c.Metrics {
			f.Set(c.Key, k, v)
		}
	}
	get := func(cell, m string) float64 {
		v, ok := f.Get(cell, m)
		if !ok {
			t.Fatalf("%s has no %s", cell, m)
		}
		return v
	}
	for _, n := range []string{"2", "3"} {
		for _, p := range []string{"0", "100"} {
			for _, impl := range impls {
				if m := get("strict="+p+",N="+n+",impl="+impl, mMsgs); m <= 0 {
					t.Errorf("N=%s strict=%s %s: %.1f messages per operation", n, p, impl, m)
				}
			}
		}
		// Strict operations wait for gossip, which waits for reservations.
		k := "strict=100,N=" + n + ",impl="
		if s, o := get(k+"simple", mLat), get(k+"optimised", mLat); s <= o {
			t.Errorf("%s: strict latency simple %.1f ms, optimised %.1f ms", k, s, o)
		}
	}
	if len(res.Summary) < 3 || !strings.Contains(strings.Join(res.Summary, "\n"), "messages/op x") {
		t.Errorf("summary %q", res.Summary)
	}
}
