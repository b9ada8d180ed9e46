package paxos

import (
	"os"
	"reflect"
	"sort"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// The real protocol is registered as such, the broken variants apart (not
// offered by Lookup, each described), and the capabilities are declared.
func TestRegistration(t *testing.T) {
	if _, err := automaton.Lookup("paxos"); err != nil {
		t.Fatal(err)
	}
	for _, n := range []string{"paxos-broken-skipphase1values", "paxos-broken-stickyleader", "paxos-broken-bootquorum", "paxos-broken-splitgroup"} {
		if _, err := automaton.Lookup(n); err == nil {
			t.Errorf("%s: Lookup accepts a broken variant", n)
		}
		c, err := automaton.CapabilitiesOf(n)
		if err != nil {
			t.Fatalf("%s: %v", n, err)
		}
		if automaton.BrokenOf(n) != "paxos" {
			t.Errorf("%s breaks %q, want paxos", n, automaton.BrokenOf(n))
		}
		if c.Doc == "" || strings.Contains(c.Doc, "\n") {
			t.Errorf("%s: no one-line description", n)
		}
	}
	for _, n := range automaton.Names() {
		if strings.HasPrefix(n, "paxos-broken") {
			t.Errorf("broken variant %s listed as a known protocol", n)
		}
	}
	if !automaton.SupportsMembership("paxos") {
		t.Error("membership not declared")
	}
	if got := automaton.TransactionsOf("paxos"); got != (automaton.TxnSupport{Atomic: true}) {
		t.Errorf("transactions %+v", got)
	}
	if err := automaton.CheckService("paxos", randService{}); err != nil {
		t.Errorf("nondeterministic service refused: %v", err)
	}
	if c, names := automaton.NewInvariantChecker("paxos"); c == nil || len(names) < 3 {
		t.Errorf("invariants: %v %v", c, names)
	}
}

// DefaultParams names every parameter ParseParams accepts (except members
// and observe, whose absence means none), with values that parse to the
// defaults.
func TestDefaultParams(t *testing.T) {
	d := automaton.DefaultParams("paxos")
	var got []string
	for k := range d {
		got = append(got, k)
	}
	sort.Strings(got)
	var want []string
	for _, n := range params.Names() {
		if n != "members" && n != "observe" {
			want = append(want, n)
		}
	}
	sort.Strings(want)
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("default params %v, want %v", got, want)
	}
	p, err := ParseParams(d)
	if err != nil {
		t.Fatal(err)
	}
	def, _ := ParseParams(nil)
	if p != def {
		t.Fatalf("DefaultParams parse to %+v, the defaults are %+v", p, def)
	}
	if d["heartbeat"] != "50ms" || d["read"] != "quorum" {
		t.Errorf("spelling: %v", d)
	}
}

// A step of an interactive transaction is refused before anything is
// applied or logged.
func TestInteractiveTxnRefused(t *testing.T) {
	c := newCluster(t, 3, "kv", nil)
	c.elect("n1")
	before := c.node("n1").Status().MaxLog
	for _, at := range []automaton.NodeID{"n1", "n2"} {
		req := automaton.Request{ID: automaton.RequestID{Client: 3, Seq: 1}, Op: set("a", "1"),
			Txn: &automaton.TxnStep{Txn: automaton.RequestID{Client: 3, Seq: 1}, Action: automaton.TxnOp}}
		r, ok := c.doReq(at, req)
		if !ok || !r.Result.IsErr() || !strings.Contains(r.Result.Err, "no interactive transactions") {
			t.Fatalf("at %s: %+v %v", at, r, ok)
		}
	}
	if got := c.node("n1").Status().MaxLog; got != before {
		t.Fatalf("a refused transaction step reached the log (%d -> %d)", before, got)
	}
}

// TestParamDoc: the package doc's parameter table is the parser's own
// (proto.Spec.Doc), so a parameter cannot be added, renamed or re-defaulted
// without the doc following.
func TestParamDoc(t *testing.T) {
	src, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	if err := params.CheckDoc(string(src)); err != nil {
		t.Fatal(err)
	}
}
