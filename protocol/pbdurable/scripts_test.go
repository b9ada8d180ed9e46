package pbdurable_test

import (
	"testing"

	"github.com/synod-dev/synod/harness"
	_ "github.com/synod-dev/synod/protocol/pbdurable"
)

// TestScripts runs the interaction scripts under testdata
// (harness.RunDataDriven; regenerate with -rewrite and read the diff): a
// request's database transaction (durability.sql effect) and its update
// buffer to the backups, a primary crash between commitA and the answer,
// and recovery by the mapping's queries.
func TestScripts(t *testing.T) { harness.RunDataDriven(t, "testdata") }
