package pbpaxos_test

import (
	"testing"

	"github.com/synod-dev/synod/harness"
)

// TestInteractions runs the golden interaction scripts under testdata/
// (regenerate with -rewrite and read the diff before keeping it).
func TestInteractions(t *testing.T) { harness.RunDataDriven(t, "testdata") }
