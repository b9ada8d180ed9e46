package seed002durability

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
)

// The live Counter, --quick on SQLite: every cell runs on a real cluster
// (the counter ends at exactly the adds answered, checked in the cell),
// states its fsync and where it ran, and the summary gives a verdict per
// seed claim.
func TestCounterLiveQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	bin, err := cluster.BuildSynod(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := &Counter{adds: 2000, clients: "1,2,4,8,12,16", databases: "sqlite", beds: "live,process"}
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Quick: true},
		Out: t.TempDir(), Binary: bin, Work: t.TempDir(), Stdout: &stdout})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	if len(res.Cells) != 16 {
		t.Fatalf("%d cells, want 2 beds x 2 client counts x 4 configurations", len(res.Cells))
	}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK || c.Metrics[mLatency] <= 0 || c.Metrics[mThrough] <= 0 || c.Labels["adds"] != "100" {
			t.Errorf("cell %s: %+v", c.Key, c)
		}
		want := c.Params[3].Value // fsync
		if want == "-" {
			want = "- (no database)"
		}
		if c.Labels["state fsync"] != want {
			t.Errorf("cell %s states fsync %q", c.Key, c.Labels["state fsync"])
		}
		if live := strings.Contains(c.Key, "bed=live"); live != strings.Contains(c.Labels["runs on"], "synod node") {
			t.Errorf("cell %s runs on %q", c.Key, c.Labels["runs on"])
		}
	}
	sum := strings.Join(res.Summary, "\n")
	for _, claim := range []string{"live: PB RTT", "live: DB on sqlite, state fsync on: RTT", "process: DB on sqlite, state fsync off: throughput lower"} {
		if !strings.Contains(sum, claim) {
			t.Errorf("summary lacks %q:\n%s", claim, sum)
		}
	}
	if !strings.Contains(sum, "holds") {
		t.Errorf("summary gives no verdict:\n%s", sum)
	}
}
