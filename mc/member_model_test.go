package mc

import (
	"slices"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestMemberModel: paxos's membership model (protocol/paxos.MemberModel:
// members=n1,n2,n3 of five nodes, the adds of n4 and n5, client 1's
// write and the crashes of n3, n4 and n5 that lose its accepts, all as
// the scripted prefix) catches paxos-broken-bootquorum: n1 counted n1+n2
// (a bootstrap majority) and answered "1", and n3, elected by n3, n4 and
// n5, chooses client 3's "2" at the same instance ("one value chosen per
// instance"). paxos in the same model, every state within the model's
// depth, shows no violation, has not answered client 1's write when the
// prefix ends (two of five is no quorum), and a write completes after
// the prefix.
func TestMemberModel(t *testing.T) {
	bad := caught(t, "paxos-broken-bootquorum", "chosen with a value other")
	pre := bad.Violation.Prefix
	m := automaton.ModelOf("paxos-broken-bootquorum")
	if pre != len(m.Prefix) {
		t.Fatalf("the counterexample holds %d prefix events, the model %d", pre, len(m.Prefix))
	}
	// The prefix ends past n2's vote for client 1's write: the broken
	// variant has answered it, paxos has not.
	for _, c := range []struct {
		name     string
		answered bool
	}{{"paxos-broken-bootquorum", true}, {"paxos", false}} {
		cfg := NewConfig(c.name)
		cfg.Model = m
		cfg.Net, _ = ParseNetwork(m.Network)
		cfg.Timers, cfg.Crashes = m.Timers, m.Crashes
		tr, err := StartTrace(cfg)
		if err != nil {
			t.Fatal(err)
		}
		v, err := tr.ViewAt(tr.Prefix)
		if err != nil {
			t.Fatal(err)
		}
		if got := slices.Contains(v.History, `client 1 <- set x "1" = OK`); got != c.answered {
			t.Fatalf("%s after the prefix: client 1's write answered %v (history %q)", c.name, got, v.History)
		}
	}
	ok := clean(t, "paxos", "paxos-broken-bootquorum", m.Depth, 0)
	w := ok.Sometimes[0]
	if !ok.Complete || !w.Reached || len(w.Witness) <= pre {
		t.Fatalf("paxos in the membership model: complete %v, write completes %v after %d events (prefix %d)",
			ok.Complete, w.Reached, len(w.Witness), pre)
	}
}
