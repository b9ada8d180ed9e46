package pbdurable_test

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/protocol/pbdurable"
)

// crashAfterPrepare runs the seed's Matchmaker under PB+DB: a submit's
// update buffer reaches both backups, then the primary crashes before
// their acknowledgements arrive (so its transaction never runs), and n2
// takes over. It returns the first invariant violation, if any, and the
// cluster.
func crashAfterPrepare(t *testing.T, protocol string) (string, *harness.Cluster) {
	var violation string
	c := harness.New(t, harness.Options{Protocol: protocol, Nodes: 3, Service: matchmaker.Synod{},
		Params: map[string]string{"mapping": "pbdb"},
		OnViolation: func(_ int, _ automaton.NodeID, err error) {
			if violation == "" {
				violation = err.Error()
			}
		}})
	drive(c)
	answer(t, c, "n1", op("advertise", "m1", "2000", "1024"))
	c.Request("n1", op("submit", "alice", "1500", "1000"), automaton.Options{})
	if n := c.Deliver(func(m harness.Message) bool { return m.To != "n1" }, -1); n != 2 {
		t.Fatalf("delivered %d update buffers, want 2", n)
	}
	c.Crash("n1")
	settle(c, 4)
	return violation, c
}

// TestAllOrNothing: the new primary discards the prepared buffer of a
// request whose transaction never ran (presumed abort): the machine is
// still free and alice has no bill; the broken variant noprepare, whose
// backups applied the buffer on arrival, is caught by the invariant
// all-or-nothing.
func TestAllOrNothing(t *testing.T) {
	v, c := crashAfterPrepare(t, pbdurable.Name)
	if v != "" {
		t.Fatalf("pbdurable: %s", v)
	}
	if r := answer(t, c, "n2", op("available", "")); r.Int != 1 {
		t.Errorf("machines after the fail-over: %v, want 1 (the uncommitted submit discarded)", r)
	}
	if r := answer(t, c, "n2", op("balance", "alice")); r.Int != 0 {
		t.Errorf("alice's balance: %v, want 0", r)
	}
	v, _ = crashAfterPrepare(t, pbdurable.BrokenNoPrepare)
	if !strings.HasPrefix(v, "all-or-nothing:") {
		t.Fatalf("%s: violation %q, want all-or-nothing", pbdurable.BrokenNoPrepare, v)
	}
}

// TestRetryAtMostOnce: a client's retry of a write that executed is
// answered from Replies, also by a new primary, instead of executing it
// again (a second submit would take a second machine).
func TestRetryAtMostOnce(t *testing.T) {
	for _, mapping := range []string{"pb", "pbdb", "db"} {
		t.Run(mapping, func(t *testing.T) {
			c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Service: matchmaker.Synod{},
				Params: map[string]string{"mapping": mapping}})
			drive(c)
			answer(t, c, "n1", op("advertise", "m1", "2000", "1024"))
			answer(t, c, "n1", op("advertise", "m2", "2000", "1024"))
			id := c.Request("n1", op("submit", "alice", "1", "1"), automaton.Options{})
			drive(c)
			first, ok := c.Response(id)
			if !ok || string(first.Bytes) != "m1" {
				t.Fatalf("submit: %v %v, want m1", first, ok)
			}
			c.Crash("n1")
			settle(c, 6) // n2 takes over at its fourth check (suspect_checks 3), then recovers
			c.ForgetResponses(id)
			c.Submit("n2", automaton.Request{ID: id, Op: op("submit", "alice", "1", "1")})
			settle(c, 2)
			if r, ok := c.Response(id); !ok || !r.Equal(first) {
				t.Fatalf("retry at the new primary: %v %v, want %v", r, ok, first)
			}
			if r := answer(t, c, "n2", op("available", "")); r.Int != 1 {
				t.Errorf("machines: %v, want 1 (the retry executed again)", r)
			}
			if r := answer(t, c, "n2", op("balance", "alice")); r.Int != 1 {
				t.Errorf("alice's balance: %v, want 1", r)
			}
		})
	}
}
