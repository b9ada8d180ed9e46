package node

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

type fixedLeader struct{ id automaton.NodeID }

func (f *fixedLeader) Leader() automaton.NodeID { return f.id }

func closed(ch <-chan struct{}) bool {
	select {
	case <-ch:
		return true
	default:
		return false
	}
}

// noteLeader wakes watchers exactly when the hint changes, and a watcher
// that took its channel before a change reads the new hint after it.
func TestLeaderWatchWakesOnChange(t *testing.T) {
	lr := &fixedLeader{}
	l := &nsLoop{lr: lr}
	ch := l.leaderChanged()
	l.noteLeader() // the first hint ("") is a change from none
	if !closed(ch) {
		t.Fatal("first hint did not wake the watcher")
	}
	ch = l.leaderChanged()
	l.noteLeader()
	if closed(ch) {
		t.Fatal("an unchanged hint woke the watcher")
	}
	lr.id = "n2"
	l.noteLeader()
	if !closed(ch) {
		t.Fatal("a new leader did not wake the watcher")
	}
	if got := *l.leader.Load(); got != "n2" {
		t.Fatalf("hint after the change: %q", got)
	}
	// Many watchers on one channel all wake.
	a, b := l.leaderChanged(), l.leaderChanged()
	lr.id = ""
	l.noteLeader()
	if !closed(a) || !closed(b) {
		t.Fatal("not every watcher woke")
	}
	// Each loop has its own channel.
	other := &nsLoop{lr: &fixedLeader{}}
	oc := other.leaderChanged()
	lr.id = "n3"
	l.noteLeader()
	if closed(oc) {
		t.Fatal("another loop's watcher woke")
	}
}
