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
//
// Under the mappings with replicated objects (pb, pbdb) the restarted
// nodes report their durable views; once all did, the node whose durable
// state is of the latest view takes over, decides its held buffers
// against the database's commit index (pbdb), and every acknowledged
// write reads back too.
func TestWholeClusterCrash(t *testing.T) {
	for _, m := range []string{"db", "pb", "pbdb"} {
		t.Run(m, func(t *testing.T) {
			total := 0
			for seed := int64(1); seed <= 10; seed++ {
				total += harness.WholeCrash(t, harness.Options{Protocol: Name, Nodes: 3, Seed: seed,
					Params: map[string]string{"mapping": m}}, seed, 3, 8)
			}
			if total < 40 {
				t.Fatalf("only %d writes acknowledged in 10 seeds: the check is nearly vacuous", total)
			}
			// Past snapEvery: the image replaces the buffers (compact).
			total += harness.WholeCrash(t, harness.Options{Protocol: Name, Nodes: 3, Seed: 99,
				Params: map[string]string{"mapping": m}}, 99, 1, snapEvery+40)
			t.Logf("%d acknowledged writes read back after whole-cluster crashes", total)
		})
	}
}
