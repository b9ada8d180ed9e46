package esds

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// invariantScenario: a and b submitted at n1 and n2 before any gossip, and
// x submitted at both (a retry elsewhere), so both replicas label x; then
// gossip until quiet. The cluster checks the invariants after every step
// and keeps the first violation.
func invariantScenario(t *testing.T, proto string) error {
	t.Helper()
	c := newCluster(t, proto, 3, service.String{}, nil)
	if len(c.Invariants()) == 0 {
		t.Fatalf("%s states no invariants", proto)
	}
	c.tolerateInv = true
	c.request("n1", opts("a", false), "append", "a")
	c.request("n2", opts("b", false), "append", "b")
	c.request("n1", opts("x", true), "append", "x")
	c.request("n2", opts("x", true), "append", "x")
	c.settle(8)
	return c.invErr
}

func TestInvariantsHoldForRealProtocols(t *testing.T) {
	for _, proto := range []string{"esds", "esds-unopt"} {
		if err := invariantScenario(t, proto); err != nil {
			t.Errorf("%s: %v", proto, err)
		}
	}
}

// Each broken variant that breaks a stated invariant trips it, in the
// scenario the real protocols pass; the invariant names the first wrong
// state (the history checker would see only its consequences).
func TestInvariantsCatchBrokenVariants(t *testing.T) {
	for proto, inv := range map[string]string{
		// n1 labels x (2,0), n2 labels x (2,1); the maximum moves n1's up.
		"esds-broken-maxlabel": invLabelsDecrease,
		// n1 labels a (1,0) and n2 labels b (1,0): one label, two operations.
		"esds-broken-duplabel": invLabelsUnique,
	} {
		err := invariantScenario(t, proto)
		if err == nil {
			t.Errorf("%s: no invariant violated", proto)
			continue
		}
		if !strings.Contains(err.Error(), `"`+inv+`"`) {
			t.Errorf("%s: violated %v, want %q", proto, err, inv)
		}
	}
}

// The checker catches a replica forgetting what it revealed across a
// restart (stable implies done everywhere): n2 learns that n1 did x, then n1 restarts
// from a disk that lost x's record.
func TestInvariantKnowledgeSurvivesRestart(t *testing.T) {
	c := newCluster(t, "esds", 2, service.Counter{}, nil)
	c.tolerateInv = true
	c.request("n1", opts("x", false), "add", "1")
	c.settle(1)
	if c.invErr != nil {
		t.Fatal(c.invErr)
	}
	c.Crash("n1")
	c.SetRecord("n1", recOp+"x", nil)
	c.Boot("n1")
	// n2 has done x too, so it knows x is stable: the claim it makes about
	// n1 is the stable one.
	if c.invErr == nil || !strings.Contains(c.invErr.Error(), invStableDone) {
		t.Fatalf("n1 forgot x, which n2 knows it did: %v", c.invErr)
	}
}

// Every registered variant says what it is; broken ones are registered
// apart, each with its description.
func TestRegistration(t *testing.T) {
	for _, name := range []string{"esds", "esds-unopt"} {
		if _, err := automaton.Lookup(name); err != nil {
			t.Errorf("%s: %v", name, err)
		}
	}
	for _, name := range []string{"esds-broken-earlystrict", "esds-broken-maxlabel", "esds-broken-duplabel", "esds-broken-localread"} {
		if _, err := automaton.Lookup(name); err == nil {
			t.Errorf("%s is offered as a real protocol", name)
		}
		if !automaton.IsBroken(name) || automaton.BrokenOf(name) != "esds" {
			t.Errorf("%s is not registered as a broken variant of esds", name)
		}
		if c, err := automaton.CapabilitiesOf(name); err != nil || c.Doc == "" {
			t.Errorf("%s does not describe itself", name)
		}
	}
	// The default parameters are accepted as they are spelled.
	for _, name := range []string{"esds", "esds-unopt"} {
		params := automaton.DefaultParams(name)
		if len(params) != 17 {
			t.Errorf("%s: default params %v", name, params)
		}
		p, _ := automaton.Lookup(name)
		if _, err := p.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1", "n2"}, Service: service.Counter{}, Params: params}); err != nil {
			t.Errorf("%s refuses its own defaults %v: %v", name, params, err)
		}
	}
	if automaton.DefaultParams("esds-unopt")["variant"] != "unopt" {
		t.Error("esds-unopt's default variant is not unopt")
	}
}

// Groups and transaction steps are refused with the contract's errors, and
// nothing is applied.
func TestRefusesGroupsAndTransactions(t *testing.T) {
	c := newCluster(t, "esds", 1, service.Counter{}, nil)
	add := service.Op{Kind: "add", Args: [][]byte{[]byte("5")}}
	g := automaton.RequestID{Client: 1, Seq: 1}
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: g, Ops: []service.Op{add, add}}})
	tx := automaton.RequestID{Client: 1, Seq: 2}
	c.Step("n1", automaton.ClientRequest{Req: automaton.Request{ID: tx, Op: add, Txn: &automaton.TxnStep{Txn: tx, Action: automaton.TxnOp}}})
	if got := c.mustAnswer(g); !got.IsErr() || !strings.Contains(got.String(), "atomically") {
		t.Errorf("group answered %v", got)
	}
	if got := c.mustAnswer(tx); !got.IsErr() || !strings.Contains(got.String(), "interactive") {
		t.Errorf("transaction step answered %v", got)
	}
	if n := len(c.esds("n1").ops); n != 0 {
		t.Errorf("%d operations received from refused requests", n)
	}
	r := c.request("n1", opts("", true), "read")
	if got := c.mustAnswer(r); !got.Equal(service.Int(0)) {
		t.Errorf("counter reads %v after refused requests", got)
	}
}
