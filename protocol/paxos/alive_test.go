package paxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestFollowerOneTimerPerMessage: a follower that hears its leader (an
// Accept, a Heartbeat) re-arms one timer, "alive", not the election timer
// too (election.go, armElectionRest): the election timer is not armed while
// the leader is alive, and when "alive" fires after election_timeout of
// silence it runs for the random part of the election delay only, so the
// follower still starts phase 1 election_timeout plus the random part after
// the leader's last message. Before, every message re-armed both (two timer
// outputs per Accept and per heartbeat at each follower: pxget48's count).
func TestFollowerOneTimerPerMessage(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	c.DeliverAll()
	sets := map[automaton.NodeID]map[automaton.TimerID]int{}
	c.Observe(func(id automaton.NodeID, o automaton.Output) {
		if st, ok := o.(automaton.SetTimer); ok {
			if sets[id] == nil {
				sets[id] = map[automaton.TimerID]int{}
			}
			sets[id][st.ID]++
		}
	})
	const puts, beats = 10, 10
	for i := range puts {
		if _, ok := c.do("n1", automaton.RequestID{Client: 9, Seq: uint64(i + 1)}, set("k", "v"), automaton.ReadDefault); !ok {
			t.Fatalf("put %d not answered", i)
		}
	}
	for range beats {
		c.fire("n1", tmTick)
	}
	for _, f := range []automaton.NodeID{"n2", "n3"} {
		if n := sets[f][tmAlive]; n < puts+beats {
			t.Errorf("%s re-armed alive %d times for %d Accepts and %d heartbeats", f, n, puts, beats)
		}
		if n := sets[f][tmElection]; n != 0 {
			t.Errorf("%s re-armed its election timer %d times while it heard the leader (%d Accepts, %d heartbeats), want 0", f, n, puts, beats)
		}
		if c.timerSet(f, tmElection) {
			t.Errorf("%s: election timer armed while the leader is alive", f)
		}
	}
	// The leader falls silent: "alive" fires, then the election timer runs
	// for the random part of the delay only, and its firing starts phase 1.
	c.Crash("n1")
	c.fire("n2", tmAlive)
	d, ok := c.TimerAfter("n2", tmElection)
	et := c.node("n2").prm.ElectionTimeout
	if !ok || d < 0 || d >= et {
		t.Fatalf("after alive fired: election timer armed %v for %v, want armed for the random part, in [0, %v)", ok, d, et)
	}
	c.fire("n2", tmElection)
	if st := c.node("n2").Status(); st.Role != "candidate" && st.Role != "leader" {
		t.Fatalf("n2 after its election timer: %+v, want a candidate or the leader", st)
	}
}
