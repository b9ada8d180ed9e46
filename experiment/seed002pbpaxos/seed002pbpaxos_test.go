package seed002pbpaxos

import (
	"bytes"
	"context"
	"math"
	"strings"
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

func TestTxnOpsFollowTheSeedMix(t *testing.T) {
	count := func(mode string, n int) (r, w int) {
		for _, op := range txnOps(mode, n, []string{"a", "b"}, "x") {
			if op.Kind == "get" {
				r++
			} else {
				w++
			}
		}
		return
	}
	for _, c := range []struct {
		mode       string
		n, rd, wrt int
	}{{"read/write", 3, 2, 1}, {"read/write", 5, 3, 2}, {"optimized", 3, 2, 1}, {"write-only", 3, 0, 3}, {"write-only", 5, 0, 5}} {
		if r, w := count(c.mode, c.n); r != c.rd || w != c.wrt {
			t.Errorf("%s %d: %d reads %d writes, want %d and %d", c.mode, c.n, r, w, c.rd, c.wrt)
		}
	}
}

func TestCI99(t *testing.T) {
	m, h := ci99([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(h-2.576*math.Sqrt(5.0/3)/2) > 1e-12 {
		t.Errorf("ci99(1..4) = %v ± %v", m, h)
	}
}

func TestTxnSummaryOnSeedFigures(t *testing.T) {
	e := NewTxn()
	got := strings.Join(e.Summary(experiment.Figures{}, e.Seed().Values), "\n")
	for _, want := range []string{"3-req vs read/write -27%", "3-req vs write-only -34%", "5-req vs read/write -31%", "5-req vs write-only -39%"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// Live: the original and Multi-Paxos kinds on real clusters; the WAN rows
// are skipped with a reason, never failed.
func TestLiveRRTQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	bin, err := cluster.BuildSynod(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := NewRRT()
	e.Kinds, e.Samples, e.PerSample = []string{"original", "paxos-quorum-read"}, 3, 5
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Out: t.TempDir(), Binary: bin, Work: t.TempDir(), Stdout: &stdout})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	for _, c := range res.Cells {
		local := strings.Contains(c.Key, "config=local")
		switch {
		case local && (c.Status != experiment.StatusOK || c.Metrics[mRRT] <= 0 || c.Metrics[mRRTCI] < 0):
			t.Errorf("cell %s: %+v", c.Key, c)
		case !local && c.Status != experiment.StatusUnavailable:
			t.Errorf("WAN cell %s: %s %s", c.Key, c.Status, c.Reason)
		}
	}
	if !strings.Contains(stdout.String(), "memory") {
		t.Errorf("the table does not state the durability:\n%s", stdout.String())
	}
}
