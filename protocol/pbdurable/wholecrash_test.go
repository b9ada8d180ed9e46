package pbdurable

import (
	"testing"

	"github.com/synod-dev/synod/harness"
)

// TestWholeClusterCrash (issue 29, "durable means durable"): under the db
// mapping every node crashes at once after acknowledged writes, in random
// interleavings, and all restart; a restarted node is a synced backup of
// its durable view, the old primary takes over first and recovers every
// object from the database (fenced by the view table), and every
// acknowledged write reads back.
func TestWholeClusterCrash(t *testing.T) {
	total := 0
	for seed := int64(1); seed <= 10; seed++ {
		total += harness.WholeCrash(t, harness.Options{Protocol: Name, Nodes: 3, Seed: seed,
			Params: map[string]string{"mapping": "db"}}, seed, 3, 8)
	}
	if total < 40 {
		t.Fatalf("only %d writes acknowledged in 10 seeds: the check is nearly vacuous", total)
	}
	t.Logf("%d acknowledged writes read back after whole-cluster crashes", total)
}
