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
	n := &Node{m: newMetrics("n1")}
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
	a.p["y"] = "secondary primary=n3 version=2"
	n.place.seen["objs"] = time.Now().Add(-placementEvery)
	l.notePlacement()
	for role, want := range map[string]float64{"primary": 1, "secondary": 1} {
		if got := copiesMetric(t, n, "objs", role); got != want {
			t.Errorf("synod_orca_copies{role=%s} = %v, want %v", role, got, want)
		}
	}
}

// copiesMetric reads synod_orca_copies{namespace=ns, role=role}.
func copiesMetric(t *testing.T, n *Node, ns, role string) float64 {
	t.Helper()
	mfs, err := n.m.reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "synod_orca_copies" {
			continue
		}
		for _, m := range mf.GetMetric() {
			labels := map[string]string{}
			for _, l := range m.GetLabel() {
				labels[l.GetName()] = l.GetValue()
			}
			if labels["namespace"] == ns && labels["role"] == role {
				return m.GetGauge().GetValue()
			}
		}
	}
	t.Fatalf("no synod_orca_copies{namespace=%s,role=%s}", ns, role)
	return 0
}
