package pbdurable

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// The pb-stall checks (protocol/pb/stall_test.go, session 44) against
// pbdurable: can a primary end up with no member backup, for good, while
// every node lives? Messages and timers are driven by hand (harness).

func stallCluster(t *testing.T, mapping string) *harness.Cluster {
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3, Params: map[string]string{"mapping": mapping}})
	c.CompleteEffects() // the first primary's recovery
	c.DeliverAll()
	return c
}

func kindOf(t *testing.T, m harness.Message) byte {
	d, err := decode(m.Msg)
	if err != nil {
		t.Fatal(err)
	}
	return d.kind
}

// healthy runs the cluster for periods check periods: every message
// delivered, n1's heartbeat every round, every node's check every 12
// rounds (250 ms against 20 ms), effects completed. It returns how many
// join messages were sent meanwhile.
func healthy(t *testing.T, c *harness.Cluster, periods int) (joins int) {
	for round := 1; round <= 12*periods; round++ {
		for {
			m, ok := c.Pop()
			if !ok {
				break
			}
			if kindOf(t, m) == kindJoin {
				joins++
			}
			c.DeliverMessage(m)
			c.CompleteEffects()
		}
		c.FireTimer("n1", timerHeartbeat)
		if round%12 == 0 {
			for _, id := range c.IDs() {
				c.FireTimer(id, timerCheck)
			}
		}
		c.CompleteEffects()
	}
	return joins
}

func pbd(c *harness.Cluster, id automaton.NodeID) *PBD { return c.Node(id).(*PBD) }

// members lists the primary's members that hold its state.
func syncedMembers(a *PBD) []automaton.NodeID {
	var out []automaton.NodeID
	for _, id := range a.memberIDs() {
		if !a.members[id].needsState {
			out = append(out, id)
		}
	}
	return out
}

// TestIdleBackupsKeptPBD (pb-stall's first defect): a healthy idle
// cluster keeps its backups. pbdurable's backups acknowledge every
// heartbeat (onHeartbeat), so, unlike pb at 791d499, it never had
// this defect: the test passes on 0a0a1ee.
func TestIdleBackupsKeptPBD(t *testing.T) {
	for _, mapping := range []string{"db", "pb", "pbdb"} {
		c := stallCluster(t, mapping)
		joins := healthy(t, c, 20)
		n1 := pbd(c, "n1")
		if !n1.primary || len(syncedMembers(n1)) != 2 || joins != 0 {
			t.Errorf("mapping %s: 20 idle check periods: n1 primary %v, synced members %v, %d joins", mapping, n1.primary, syncedMembers(n1), joins)
		}
	}
}

// writeAnswered submits a write at n1 and runs healthy periods; it
// reports whether the write was answered.
func writeAnswered(t *testing.T, c *harness.Cluster, periods int) bool {
	id := c.Request("n1", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}, automaton.Options{})
	healthy(t, c, periods)
	_, ok := c.Response(id)
	return ok
}

// TestDroppedBackupsStall (pb-stall's third defect, in pbdurable's
// form): n1's check runs three times while no acknowledgement reaches it
// (a loaded machine delays them by a check period or two), so it drops
// both live backups. They stay synced backups of its view (its
// heartbeats keep coming) and acknowledge every heartbeat, which a
// primary ignored from a node that is not a member; nothing else ever
// made them members again. Under mapping pb a write then waits for a
// backup to hold it (takeover.go rule 1), for ever: on 0a0a1ee the write
// below is unanswered after 20 healthy check periods. Under pbdb the
// primary commits alone and the dropped backups fall behind for good (the
// state a take-over would start from). A primary now takes an
// acknowledgement of its view from a node that is not a member as a join
// (primary.go onAck).
func TestDroppedBackupsStall(t *testing.T) {
	for _, mapping := range []string{"pb", "pbdb", "db"} {
		c := stallCluster(t, mapping)
		for i := 0; i < 3; i++ {
			c.Drop(harness.Match("", "n1"))
			c.FireTimer("n1", timerCheck)
		}
		if n1 := pbd(c, "n1"); len(n1.members) != 0 {
			t.Fatalf("mapping %s: n1 kept members %v after three silent checks", mapping, n1.memberIDs())
		}
		answered := writeAnswered(t, c, 20)
		n1 := pbd(c, "n1")
		if !answered || !n1.primary || len(syncedMembers(n1)) != 2 {
			t.Errorf("mapping %s: after 20 healthy check periods n1 (primary %v, synced members %v) answered the write: %v",
				mapping, n1.primary, syncedMembers(n1), answered)
		}
	}
}

// TestJoinDroppedStallPBD (pb-stall's third defect as pb had it): n2
// restarts (a joiner); n1 sends it the state and then drops it (silent
// for three checks) while the state is on its way. n2 installs it, is a
// synced backup of n1's view, and on 0a0a1ee never asks to join again:
// with n3 dropped too, n1 has no member and (mapping pb) answers no
// write.
func TestJoinDroppedStallPBD(t *testing.T) {
	c := stallCluster(t, "pb")
	c.Crash("n2")
	c.Restart("n2")
	c.CompleteEffects()
	// n2's reports reach n1, whose heartbeat makes n2 join; n1 sends the
	// state, which stays on its way.
	held := func(m harness.Message) bool {
		return m.To == "n3" || (m.From == "n1" && m.To == "n2" && kindOf(t, m) == kindState)
	}
	c.Deliver(func(m harness.Message) bool { return !held(m) }, 0)
	c.FireTimer("n1", timerHeartbeat)
	c.Deliver(func(m harness.Message) bool { return !held(m) }, 0)
	if mb := pbd(c, "n1").members["n2"]; mb == nil || !mb.needsState {
		t.Fatalf("n1 did not take n2's join (members %v)", pbd(c, "n1").memberIDs())
	}
	states := 0
	for _, m := range c.Queue() {
		if m.From == "n1" && m.To == "n2" && kindOf(t, m) == kindState {
			states++
		}
	}
	if states == 0 {
		t.Fatal("no state on its way to n2")
	}
	// Three checks at n1 with nothing from n2 or n3: both dropped; the
	// state to n2 stays in flight.
	for i := 0; i < 3; i++ {
		c.Drop(harness.Match("", "n1"))
		c.Drop(func(m harness.Message) bool { return m.To == "n3" })
		c.FireTimer("n1", timerCheck)
	}
	if n1 := pbd(c, "n1"); len(n1.members) != 0 {
		t.Fatalf("n1 kept members %v", n1.memberIDs())
	}
	answered := writeAnswered(t, c, 20)
	n1 := pbd(c, "n1")
	if !answered || len(syncedMembers(n1)) != 2 {
		t.Errorf("after 20 healthy check periods n1 (synced members %v) answered the write: %v; n2 synced %v", syncedMembers(n1), answered, pbd(c, "n2").synced)
	}
}

// TestJoinRepeatedStallPBD (pb-stall's second defect): n2 (restarted,
// joining) asks to join again before n1's state reaches it, and n1's
// check runs in between. pbdurable has no transfer nonce: a repeated
// join marks the member as needing the state again and the state is
// sent again; the first state's acknowledgement, or any later one,
// makes it a member. Passes on 0a0a1ee.
func TestJoinRepeatedStallPBD(t *testing.T) {
	c := stallCluster(t, "pb")
	c.Crash("n2")
	c.Restart("n2")
	c.CompleteEffects()
	c.Deliver(func(m harness.Message) bool { return m.To == "n1" || m.To == "n2" }, 0)
	c.FireTimer("n1", timerHeartbeat)
	late := func(m harness.Message) bool { return m.From == "n1" && m.To == "n2" && kindOf(t, m) == kindState }
	c.Deliver(func(m harness.Message) bool { return !late(m) }, 0)
	c.FireTimer("n2", timerCheck) // no state yet: n2 asks again
	c.FireTimer("n1", timerCheck)
	c.Deliver(func(m harness.Message) bool { return !late(m) }, 0)
	if !writeAnswered(t, c, 20) || len(syncedMembers(pbd(c, "n1"))) != 2 {
		t.Errorf("a repeated join: n1's synced members %v", syncedMembers(pbd(c, "n1")))
	}
}

// TestStaleStateAckPBD: an acknowledgement of a state counts for no
// update executed after that state. n3 is cut off (dropped by n1); n2
// acknowledges a state (a copy of that acknowledgement is kept, as a
// duplicating network would), then crashes before holding the write w
// that n1 executes next; restarted, n2 asks to join and n1's new state
// (which holds w) is lost. The old copy of the acknowledgement then
// arrives. On 0a0a1ee (and pbd45's first commits) n1 took it as n2
// holding everything n1 executed (acked = its index) and answered w
// although no backup held it (mapping pb, takeover.go rule 1); an
// acknowledgement of a state now counts for nothing until the member's
// next acknowledgement names its index.
func TestStaleStateAckPBD(t *testing.T) {
	c := stallCluster(t, "pb")
	c.Isolate("n3")
	for i := 0; i < 3; i++ {
		c.Drop(harness.Match("", "n1"))
		c.FireTimer("n1", timerCheck)
	}
	c.DeliverAll() // n2's acknowledgements: it is a member again, by a state
	c.FireTimer("n1", timerHeartbeat)
	var stale *harness.Message
	for i := 0; i < 50 && c.Pending() > 0; i++ {
		m, _ := c.Pop()
		if d, err := decode(m.Msg); err == nil && d.kind == kindAck && d.index == stateAck && m.From == "n2" {
			mm := m
			stale = &mm
		}
		c.DeliverMessage(m)
	}
	if stale == nil {
		t.Fatal("n2 acknowledged no state")
	}
	if mb := pbd(c, "n1").members["n2"]; mb == nil || mb.needsState {
		t.Fatalf("n2 is not a synced member of n1")
	}
	c.Crash("n2")
	id := c.Request("n1", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("w")}}, automaton.Options{})
	c.Restart("n2")
	c.CompleteEffects()
	c.FireTimer("n1", timerHeartbeat)
	// n2's reports and join reach n1; n1's state to n2 is lost.
	for i := 0; i < 50 && c.Pending() > 0; i++ {
		m, _ := c.Pop()
		if m.To == "n2" && kindOf(t, m) == kindState {
			continue
		}
		c.DeliverMessage(m)
	}
	if mb := pbd(c, "n1").members["n2"]; mb == nil || !mb.needsState {
		t.Fatalf("n1 did not take the restarted n2's join")
	}
	c.Heal()
	c.Drop(nil)
	c.DeliverMessage(*stale)
	c.FireTimer("n1", timerCheck) // its next check releases what is durable
	if _, ok := c.Response(id); ok {
		t.Fatalf("n1 answered the write while no backup holds it (n2 restarted empty, n3 cut off): a stale acknowledgement of a state counted for it")
	}
	healthy(t, c, 20)
	if _, ok := c.Response(id); !ok {
		t.Fatalf("the write is unanswered after 20 healthy check periods (n1's members %v)", syncedMembers(pbd(c, "n1")))
	}
}
