package pb

import (
	"testing"

	"github.com/synod-dev/synod/harness"
)

// TestInteractions runs the golden scripts under testdata (failover, the
// duplicate table across a fail-over, a join by chunked state transfer,
// the nondeterministic Matchmaker replicated by state).
func TestInteractions(t *testing.T) { harness.RunDataDriven(t, "testdata") }
