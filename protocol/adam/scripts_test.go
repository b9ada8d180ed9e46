package adam

import (
	"testing"

	"github.com/synod-dev/synod/harness"
)

// The interaction scripts under testdata (harness.RunDataDriven): one
// batch with a wall, a rollback in the middle of a request. Rewrite them
// with `go test -run TestScripts ./protocol/adam -rewrite` and read the
// diff before keeping it.
func TestScripts(t *testing.T) {
	callee0.reset()
	harness.RunDataDriven(t, "testdata")
}
