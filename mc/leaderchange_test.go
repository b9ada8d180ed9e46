package mc

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/protocol/paxos"
)

// TestLeaderChangeModel: in the leader-change model (one write, a timer
// budget of 4, inboxes drained from the highest node) the checker finds
// paxos-broken-skipphase1values' lost write, while paxos itself, checked
// in the same model (as many states as the broken variant needed), finds
// no violation.
func TestLeaderChangeModel(t *testing.T) {
	r, err := Check(NewConfig("paxos-broken-skipphase1values"))
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil || !strings.Contains(r.Violation.Violation, "chosen with a value other") {
		t.Fatalf("skipphase1values: not caught in %d states: %v", r.States, r.Violation)
	}
	cfg := NewConfig("paxos")
	cfg.Model = paxos.LeaderChangeModel()
	cfg.Net, _ = ParseNetwork(cfg.Model.Network)
	cfg.Timers, cfg.Depth, cfg.MaxStates = cfg.Model.Timers, len(r.Violation.Events), 15000
	ok, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if ok.Violation != nil || !ok.Sometimes[0].Reached {
		t.Fatalf("paxos in the leader-change model: violation %v, write completes %v", ok.Violation, ok.Sometimes[0].Reached)
	}
	t.Logf("skipphase1values: %d states, %d events; paxos to depth %d: %d states", r.States, len(r.Violation.Events), cfg.Depth, ok.States)
}

// TestTimerBudget: with "quiet:N" no path fires more than N timers, and
// the budget is what makes a timer-driven model finite.
func TestTimerBudget(t *testing.T) {
	cfg := NewConfig("paxos")
	cfg.Model = paxos.LeaderChangeModel()
	cfg.Timers, cfg.Depth = "quiet:1", 40
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil || r.Frontier != 0 || !r.Complete {
		t.Fatalf("paxos with one timer: violation %v, frontier %d, complete %v (%d states)", r.Violation, r.Frontier, r.Complete, r.States)
	}
	if !r.Sometimes[0].Reached {
		t.Errorf("one election should let a write complete")
	}
	w, _ := newWorld(&cfg)
	for _, ev := range r.Sometimes[0].Witness {
		if err := w.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range w.enabled() {
		if ev.Kind == EvTimer {
			t.Errorf("a timer is enabled after the budget is spent: %+v", ev)
		}
	}
}

// TestByNode: on a bynode network only messages to the highest-numbered
// node with mail are deliverable.
func TestByNode(t *testing.T) {
	cfg := NewConfig("paxos")
	cfg.Net, _ = ParseNetwork("bynode")
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.flight = []message{{from: 0, to: 1}, {from: 0, to: 2}, {from: 1, to: 2, data: []byte{1}}, {from: 2, to: 0}}
	var got []int
	for _, ev := range w.enabled() {
		if ev.Kind == EvDeliver {
			got = append(got, w.flight[ev.Msg].to)
		}
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("deliverable destinations %v, want [2 2]", got)
	}
}
