package mc

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/paxos"
)

// TestTxnWorkload: interactive transactions in the workload (txn-begin,
// operations, txn-abort / txn-commit; unreplicated.TxnModel). The history
// holds each transaction as one entry, so the serializability checker
// finds unreplicated-broken-dirtytxn's read of an aborted write, while
// unreplicated itself exhausts the model and commits a transaction (a
// write completes).
func TestTxnWorkload(t *testing.T) {
	bad := caught(t, "unreplicated-broken-dirtytxn", "not strict-serializable")
	if s := bad.Violation.String(); !strings.Contains(s, "sends txn-begin") || !strings.Contains(s, "sends txn-abort") {
		t.Fatalf("the counterexample does not show the transaction's steps:\n%s", s)
	}
	ok := clean(t, "unreplicated", "unreplicated-broken-dirtytxn", 16, 0)
	if !ok.Complete || !ok.Sometimes[0].Reached {
		t.Fatalf("unreplicated in the transaction model: complete %v, a write (commit) completes %v", ok.Complete, ok.Sometimes[0].Reached)
	}
}

// TestTxnHistory: the history groups a transaction's steps into one
// TxnKind entry with the outcome of its end, and leaves copies out.
func TestTxnHistory(t *testing.T) {
	cfg := NewConfig("unreplicated-broken-dirtytxn")
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, ev := range []Event{{Kind: EvInvoke, Client: 0}, {Kind: EvInvoke, Client: 0}, {Kind: EvInvoke, Client: 1}, {Kind: EvInvoke, Client: 0}} {
		if err := w.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	h := w.history()
	if len(h.Ops) != 2 {
		t.Fatalf("want 2 entries (client 1's aborted transaction, client 2's open one), got %+v", h.Ops)
	}
	a, b := h.Ops[0], h.Ops[1]
	if a.Kind != "txn" || a.Outcome != "failed" || len(a.Txn) != 1 || a.Txn[0].Kind != "set" || a.Txn[0].Outcome != "ok" {
		t.Fatalf("client 1's transaction: %+v", a)
	}
	if b.Kind != "txn" || b.Outcome != "unknown" || len(b.Txn) != 0 {
		t.Fatalf("client 2's transaction (begun only): %+v", b)
	}
}

// TestNestedReadWorkload: resent copies of a request in the workload
// (paxos.NestedReadModel: a nested read and, later, its copy "resend 1";
// another client's write between them). The nested-answer check finds
// paxos-broken-nestedread's fresh answer to the copy; paxos answers the
// copy from its table and exhausts the model, with a write completed and
// a read returning a value.
func TestNestedReadWorkload(t *testing.T) {
	model := paxos.NestedReadModel()
	bad := checkIn(t, "paxos-broken-nestedread", model, 0)
	if bad.Violation == nil || !strings.Contains(bad.Violation.Violation, NestedAnswer) {
		t.Fatalf("paxos-broken-nestedread not caught in %d states: %v", bad.States, bad.Violation)
	}
	if why, err := bad.Violation.Replay(); err != nil || !strings.Contains(why, NestedAnswer) {
		t.Fatalf("the counterexample does not replay: %q %v", why, err)
	}
	if s := bad.Violation.String(); !strings.Contains(s, "client 1 sends resend 1") {
		t.Fatalf("the counterexample does not show the copy:\n%s", s)
	}
	ok := checkIn(t, "paxos", model, 0)
	if ok.Violation != nil || !ok.Complete || !ok.Sometimes[0].Reached || !ok.Sometimes[1].Reached {
		t.Fatalf("paxos in the nested-read model: complete %v, sometimes %+v, violation %v", ok.Complete, ok.Sometimes, ok.Violation)
	}
}

// TestMatchmakerConvergence: the convergence check with the matchmaker
// (paxos-broken-localenv's declared paxos.MatchmakerModel): the broken
// variant's replicas pick different machines for one submit; paxos's
// agree, and paxos exhausts the model with its writes completed. Both
// copy paths (paxos's fast path and the reflective walk) find the same
// counterexample in the same number of states: the variant's environment
// is a function of the replica and the operation
// (protocol/paxos/broken_env.go), so the copies of a node share nothing
// mutable (it was a shared random stream, which made a fast-path search's
// draws depend on its other branches).
func TestMatchmakerConvergence(t *testing.T) {
	m := automaton.ModelOf("paxos-broken-localenv")
	states := map[bool]int64{}
	for _, reflective := range []bool{false, true} {
		set := func(c *Config) { c.Reflective = reflective }
		bad := checkWith(t, "paxos-broken-localenv", m, set)
		if bad.Violation == nil || !strings.Contains(bad.Violation.Violation, Converged) {
			t.Fatalf("reflective %v: paxos-broken-localenv not caught in %d states: %v", reflective, bad.States, bad.Violation)
		}
		if why, err := bad.Violation.Replay(); err != nil || !strings.Contains(why, Converged) {
			t.Fatalf("reflective %v: the counterexample does not replay: %q %v\n%s", reflective, why, err, bad.Violation)
		}
		states[reflective] = bad.States
		ok := checkWith(t, "paxos", m, set)
		if ok.Violation != nil || !ok.Complete || !ok.Sometimes[0].Reached {
			t.Fatalf("reflective %v: paxos in the matchmaker model: complete %v, a write completes %v, %v", reflective, ok.Complete, ok.Sometimes[0].Reached, ok.Violation)
		}
	}
	if states[false] != states[true] {
		t.Fatalf("the fast path found the divergence in %d states, the reflective walk in %d", states[false], states[true])
	}
}

// checkIn checks protocol in model m (its network, timers and depth), up
// to maxStates states (0: no bound).
func checkIn(t *testing.T, protocol string, m automaton.ModelConfig, maxStates int) *Result {
	t.Helper()
	return checkWith(t, protocol, m, func(c *Config) { c.MaxStates = maxStates })
}

// checkWith checks protocol in model m, with set applied to the
// configuration.
func checkWith(t *testing.T, protocol string, m automaton.ModelConfig, set func(*Config)) *Result {
	t.Helper()
	cfg := NewConfig(protocol)
	cfg.Model = m
	cfg.Net, _ = ParseNetwork(m.Network)
	cfg.Timers, cfg.Depth, cfg.Crashes = m.Timers, m.Depth, m.Crashes
	set(&cfg)
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil {
		t.Logf("%s: %d states, counterexample %d events (%d of them the prefix), %v", protocol, r.States, len(r.Violation.Events), r.Violation.Prefix, r.Elapsed.Round(1e6))
		return r
	}
	t.Logf("%s: %d states, depth %d, complete %v, %v", protocol, r.States, r.Depth, r.Complete, r.Elapsed.Round(1e6))
	return r
}

// TestStrictWorkload: strict operations in the workload (esds.StrictModel:
// a write at n1, a strict read at n2). The strict check finds
// esds-broken-earlystrict's answer given before the read was stable;
// esds answers the read only once stable, with its value in the order, and
// the search reaches that answer.
func TestStrictWorkload(t *testing.T) {
	caught(t, "esds-broken-earlystrict", ESDSOrder)
	ok := clean(t, "esds", "esds-broken-earlystrict", automaton.ModelOf("esds-broken-earlystrict").Depth, 0)
	if !ok.Sometimes[1].Reached {
		t.Fatalf("esds in the strict model: the strict read is never answered")
	}
}

// TestGroupWorkload: atomic groups in the workload (paxos.GroupModel: two
// groups in n1's first batch). The history holds each group with one
// result per operation, so the serializability checker finds
// paxos-broken-splitgroup's half-applied group; paxos exhausts the model
// with both groups answered.
func TestGroupWorkload(t *testing.T) {
	m := paxos.GroupModel()
	bad := checkIn(t, "paxos-broken-splitgroup", m, 0)
	if bad.Violation == nil || !strings.Contains(bad.Violation.Violation, "serializable") {
		t.Fatalf("paxos-broken-splitgroup not caught in %d states: %v", bad.States, bad.Violation)
	}
	if why, err := bad.Violation.Replay(); err != nil || why == "" {
		t.Fatalf("the counterexample does not replay: %q %v", why, err)
	}
	if s := bad.Violation.String(); !strings.Contains(s, `sends group "set+x+A" "get+x"`) {
		t.Fatalf("the counterexample does not show the group:\n%s", s)
	}
	ok := checkIn(t, "paxos", m, 0)
	if ok.Violation != nil || !ok.Sometimes[0].Reached {
		t.Fatalf("paxos in the group model: a write completes %v, violation %v", ok.Sometimes[0].Reached, ok.Violation)
	}
}

// TestWorkloadTraceFile: a counterexample whose workload steps are in the
// scripts (nested, resend, group) is saved, loaded and replayed from the
// file alone (no Requests function: the variants' explicit models), and
// prints the steps.
func TestWorkloadTraceFile(t *testing.T) {
	for _, c := range []struct {
		broken string
		model  automaton.ModelConfig
		shows  string
	}{
		{"paxos-broken-nestedread", paxos.NestedReadModel(), "client 1 sends nested get \"x\" to n1"},
		{"paxos-broken-splitgroup", paxos.GroupModel(), `client 2 sends group "set+x+A" "get+x" to n1`},
	} {
		r := checkIn(t, c.broken, c.model, 0)
		if r.Violation == nil {
			t.Fatalf("%s: not caught", c.broken)
		}
		if s := replaySaved(t, r.Violation).String(); !strings.Contains(s, c.shows) {
			t.Fatalf("%s: the loaded trace does not show %q:\n%s", c.broken, c.shows, s)
		}
	}
}
