package node

import (
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

type placer struct {
	automaton.Automaton
	p map[string]string
}

func (p *placer) Placement() map[string]string { return p.p }

// A namespace whose automaton reports placement shows it in INFO's
// Placement section, refreshed at most every placementEvery.
func TestPlacementInfo(t *testing.T) {
	n := &Node{}
	a := &placer{p: map[string]string{"x": "primary=n1 copies=n1,n2"}}
	l := &nsLoop{n: n, a: a, ns: config.Namespace{Name: "objs"}}
	l.notePlacement()
	if got := n.placementInfo()["objs.x"]; got != "primary=n1 copies=n1,n2" {
		t.Fatalf("placement objs.x = %q", got)
	}
	a.p = map[string]string{"x": "primary=n2 copies=n2"}
	l.notePlacement() // within placementEvery: not recomputed
	if got := n.placementInfo()["objs.x"]; got != "primary=n1 copies=n1,n2" {
		t.Fatalf("refreshed too early: %q", got)
	}
	n.place.seen["objs"] = time.Now().Add(-placementEvery)
	l.notePlacement()
	if got := n.placementInfo()["objs.x"]; got != "primary=n2 copies=n2" {
		t.Fatalf("not refreshed when due: %q", got)
	}
}
