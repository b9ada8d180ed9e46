package paxos

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// The leader's Accept is an Early Send, the acceptors' Accepted is not
// (paxos-broken-earlyack's is), and an Early Accept's commit notice names
// only instances chosen in earlier steps: the one-client pattern of
// issue 18, where each put's Accept carries the previous put's choice.
func TestLeaderAcceptEarly(t *testing.T) {
	for _, name := range []string{"paxos", BrokenEarlyAck} {
		c := newClusterOf(t, name, 3, "kv", nil)
		c.elect("n1")
		var early, sends int
		var ackEarly bool
		var commits []uint64
		c.Observe(func(id automaton.NodeID, o automaton.Output) {
			s, ok := o.(automaton.Send)
			if !ok {
				return
			}
			m, err := unmarshal(s.Msg)
			if err != nil {
				t.Fatal(err)
			}
			switch {
			case id == "n1" && m.Kind == kindAccept:
				sends++
				if s.Early {
					early++
				}
				if s.To == "n2" {
					commits = append(commits, m.Commit)
				}
			case id != "n1" && m.Kind == kindAccepted:
				ackEarly = ackEarly || s.Early
			}
		})
		for seq := uint64(1); seq <= 3; seq++ {
			if _, ok := c.do("n1", automaton.RequestID{Client: 1, Seq: seq}, set("k", "v"), 0); !ok {
				t.Fatalf("%s: put %d not answered", name, seq)
			}
		}
		if sends == 0 || early != sends {
			t.Errorf("%s: %d of the leader's %d Accepts were Early, want all", name, early, sends)
		}
		if want := name == BrokenEarlyAck; ackEarly != want {
			t.Errorf("%s: an acceptor's Accepted was Early: %v, want %v", name, ackEarly, want)
		}
		// Elected with a no-op at instance 1 or not, each put's Accept
		// names the instance before its own as chosen.
		for k := 1; k < len(commits); k++ {
			if commits[k] != commits[k-1]+1 {
				t.Errorf("%s: Early Accepts carried commit notices %v, want one more each put", name, commits)
				break
			}
		}
	}
}

// An Early Accept carries no choice that rests on a record of its own step
// emitted after its last waiting output: with such a record for instance 3,
// the notice stops at 2; a promise persisted there makes it wait.
func TestEarlyAcceptCommitNotice(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	a := c.node("n1")
	a.chosenUpTo = 5
	a.Out = []automaton.Output{
		automaton.Persist{Key: slotKey(2)},
		automaton.Respond{},
		automaton.Persist{Key: slotKey(3)},
		automaton.Persist{Key: recCommit},
	}
	if commit, early := a.earlyAccept(); !early || commit != 2 {
		t.Errorf("commit %d early %v, want 2 true", commit, early)
	}
	a.Out = append(a.Out, automaton.Persist{Key: recPromised})
	if _, early := a.earlyAccept(); early {
		t.Error("Early after a promise persisted in the step")
	}
	a.Out = []automaton.Output{automaton.Persist{Key: slotKey(9)}}
	if commit, early := a.earlyAccept(); !early || commit != 5 {
		t.Errorf("commit %d early %v, want 5 true", commit, early)
	}
	a.Out = nil
}
