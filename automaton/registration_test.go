package automaton

import (
	"slices"
	"strings"
	"testing"
)

// declared states itself in one embedded Capabilities value; its Describe
// method wins over the embedded Doc.
type declared struct{ Capabilities }

func (declared) New(Config) (Automaton, error) { return nil, nil }
func (declared) Describe() string              { return "from the method" }

func init() {
	Register(declared{Capabilities{
		Protocol:       "test-declared",
		Doc:            "from the field",
		Idempotent:     true,
		Consistency:    Sequential,
		Membership:     true,
		Params:         map[string]string{"k": "1"},
		SafeFaults:     []string{"crash", PowerLoss},
		Transactions:   TxnSupport{Atomic: true},
		NestedWindow:   8,
		Scenarios:      []Scenario{{Name: "s", Seeds: "1"}},
		Callees:        func(map[string]string) []string { return []string{"callee"} },
		Model:          func() ModelConfig { return ModelConfig{Nodes: 5} },
		ClientFanout:   true,
		StandardCallee: []string{"--callee-protocol", "x"},
	}})
}

// The helpers answer from the declared value, the optional interfaces a
// registered value implements win over its fields, and what a protocol
// declares by interfaces alone reads the same through CapabilitiesOf.
func TestCapabilitiesDeclared(t *testing.T) {
	p, err := LookupAny("test-declared")
	if err != nil || p.Name() != "test-declared" || !p.IdempotentRetry() {
		t.Fatalf("registered value: %v %v", p, err)
	}
	if c, _ := ConsistencyOf("test-declared"); c != Sequential {
		t.Fatalf("consistency %q", c)
	}
	if !NeedsStickyClients("test-declared") || !SupportsMembership("test-declared") || !ServesNested("test-declared") || !ClientFanoutOf("test-declared") {
		t.Fatal("a declared flag is not read")
	}
	if SafeFaultsOf("test-declared") != "crash" || !SurvivesPowerLoss("test-declared") {
		t.Fatalf("safe faults %q", SafeFaultsOf("test-declared"))
	}
	if !TransactionsOf("test-declared").Atomic || ModelOf("test-declared").Nodes != 5 {
		t.Fatal("transactions or model not read")
	}
	if got := Callees("test-declared", nil); !slices.Equal(got, []string{"callee"}) {
		t.Fatalf("callees %v", got)
	}
	c, err := CapabilitiesOf("test-declared")
	if err != nil || c.Doc != "from the method" {
		t.Fatalf("doc %q %v: the method must win over the field", c.Doc, err)
	}
	c.Params["k"] = "changed"
	c.Scenarios[0].Name = "changed"
	if DefaultParams("test-declared")["k"] != "1" || ScenariosOf("test-declared")[0].Name != "s" {
		t.Fatal("a caller's change to CapabilitiesOf's value reached the registry")
	}
	f, err := CapabilitiesOf("test-real")
	if err != nil || !f.Nondeterminism || !f.Transactions.Atomic || len(f.Options) != 3 || f.Consistency != Linearizable || f.Idempotent {
		t.Fatalf("interface-declared protocol read as %+v %v", f, err)
	}
	if _, err := CapabilitiesOf("nosuch"); err == nil || !strings.Contains(err.Error(), "nosuch") {
		t.Fatalf("unknown protocol: %v", err)
	}
}
