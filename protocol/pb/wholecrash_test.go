package pb

import (
	"testing"

	"github.com/synod-dev/synod/harness"
)

// TestWholeClusterCrash (issue 29, "durable means durable"): every node
// crashes at once after acknowledged writes, in random interleavings, and
// all restart; the restarted cluster elects the primary of the latest
// durable view (durable.go) and every acknowledged write reads back.
func TestWholeClusterCrash(t *testing.T) {
	total := 0
	for seed := int64(1); seed <= 20; seed++ {
		total += harness.WholeCrash(t, harness.Options{Protocol: Name, Nodes: 3, Seed: seed}, seed, 4, 10)
	}
	// Past snapEvery: a new image replaces the entry records.
	total += harness.WholeCrash(t, harness.Options{Protocol: Name, Nodes: 3, Seed: 99}, 99, 1, snapEvery+40)
	if total < 100 {
		t.Fatalf("only %d writes acknowledged in 20 seeds: the check is nearly vacuous", total)
	}
	t.Logf("%d acknowledged writes read back after whole-cluster crashes", total)
}
