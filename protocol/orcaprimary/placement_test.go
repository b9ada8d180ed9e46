package orcaprimary_test

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/protocol/orcaprimary"
)

// Placement: the primary reports the copy set the reads built, a secondary
// its copy and where the primary is; after migrate_after remote writes
// from n2, n2 reports the primary with one migration.
func TestPlacement(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: orcaprimary.Name, Nodes: 3,
		Service: &orca.Service{Types: orca.Builtin},
		Params:  map[string]string{"replicate_after": "1", "migrate_after": "2"}})
	place := func(n automaton.NodeID) map[string]string {
		return c.Node(n).(automaton.PlacementReporter).Placement()
	}
	prim := orcaprimary.InitialPrimary([]automaton.NodeID{"n1", "n2", "n3"}, "x")
	other := automaton.NodeID("n1")
	if prim == "n1" {
		other = "n2"
	}
	do(t, c, prim, orca.New("int", "x"))
	do(t, c, other, orca.Call("int", "x", "value")) // other fetches a copy
	if got := place(prim)["x"]; !strings.HasPrefix(got, "primary="+string(prim)+" copies=") || !strings.Contains(got, string(other)) {
		t.Fatalf("at the primary %s: x = %q, want its copy set with %s", prim, got, other)
	}
	if got := place(other)["x"]; !strings.HasPrefix(got, "secondary primary="+string(prim)+" version=") {
		t.Fatalf("at %s: x = %q", other, got)
	}
	for i := 0; i < 4; i++ {
		do(t, c, other, orca.Call("int", "x", "inc", orca.Int(1)))
	}
	if got := place(other)["x"]; !strings.HasPrefix(got, "primary="+string(other)) || !strings.HasSuffix(got, "migrations=1") {
		t.Fatalf("after remote writes from %s: x = %q there, want the migrated primary", other, got)
	}
}
