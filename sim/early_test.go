package sim

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	_ "github.com/synod-dev/synod/protocol/paxos"
)

// An Early Send waits only for what the last output before it that is not
// Early waits for: it leaves before its own step's records are synced, a
// Send that is not Early waits for them, and a crash in between loses the
// records but not the message that left (automaton.Send.Early).
func TestEarlySendReleaseAndCrash(t *testing.T) {
	s, err := newSimulator(Config{Protocol: "paxos", Nodes: 3, Clients: 1, Ops: 1, Seed: 1, Faults: "none"})
	if err != nil {
		t.Fatal(err)
	}
	n := s.nodes[0]
	n.up = true
	msg := func(b byte) []byte { return []byte{b} }
	// Nothing unsynced: a plain Send leaves; the step's record, then an
	// Early Send, which does not wait for it, and a plain one, which does.
	s.carryOut(n, []automaton.Output{
		automaton.Send{To: "n2", Msg: msg(1)},
		automaton.Persist{Key: "a", Value: msg(2)},
		automaton.Send{To: "n2", Msg: msg(3), Early: true},
		automaton.Send{To: "n3", Msg: msg(4)},
	})
	if s.stats.MsgsSent != 2 || n.rel.Held() != 1 {
		t.Fatalf("sent %d, held %d; want the plain and the Early Send sent, the last held", s.stats.MsgsSent, n.rel.Held())
	}
	// A later step: its Early Send waits for what the held Send waits for.
	s.carryOut(n, []automaton.Output{
		automaton.Persist{Key: "b", Value: msg(5)},
		automaton.Send{To: "n2", Msg: msg(6), Early: true},
	})
	if s.stats.MsgsSent != 2 || n.rel.Held() != 2 || n.rel.Pending()[1].Need != 1 {
		t.Fatalf("sent %d, held %v; want the Early Send held behind record 1", s.stats.MsgsSent, n.rel.Pending())
	}
	// The crash loses both records and the held Sends; what left stays
	// in flight to n2.
	inFlight := s.q.Len()
	s.crash(n)
	if len(n.durable) != 0 || n.rel.Held() != 0 {
		t.Fatalf("after the crash: durable %v, held %v", n.durable, n.rel.Pending())
	}
	if s.q.Len() != inFlight {
		t.Fatalf("the crash took sent messages out of flight: %d events, were %d", s.q.Len(), inFlight)
	}
}
