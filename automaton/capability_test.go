package automaton

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/service"
)

type fakeProto struct {
	name   string
	nondet bool
	txn    TxnSupport
	opts   []OptionSpec
}

func (p fakeProto) Name() string                  { return p.name }
func (p fakeProto) New(Config) (Automaton, error) { return nil, nil }
func (p fakeProto) IdempotentRetry() bool         { return false }
func (p fakeProto) SupportsNondeterminism() bool  { return p.nondet }
func (p fakeProto) Transactions() TxnSupport      { return p.txn }
func (p fakeProto) RequestOptions() []OptionSpec  { return p.opts }
func (p fakeProto) SupportsMembership() bool      { return p.nondet }

func init() {
	Register(fakeProto{name: "test-real", nondet: true, txn: TxnSupport{Atomic: true}, opts: []OptionSpec{
		{Name: "tag", Type: OptString, PerOperation: true, Assign: func(id RequestID) []string { return []string{id.String()} }},
		{Name: "deps", Type: OptList, MaxItems: 2},
		{Name: "fast", Type: OptBool, Sticky: true},
	}})
	RegisterBroken("test-real", fakeProto{name: "test-real-broken"})
}

func TestBrokenVariantsApart(t *testing.T) {
	for _, n := range Names() {
		if n == "test-real-broken" {
			t.Fatal("a broken variant is listed among the known protocols")
		}
	}
	if _, err := Lookup("test-real-broken"); err == nil || !strings.Contains(err.Error(), "allow_broken") {
		t.Fatalf("Lookup of a broken variant: %v, want a refusal naming allow_broken", err)
	}
	if _, err := Lookup("nosuch"); err == nil || strings.Contains(err.Error(), "test-real-broken") {
		t.Fatalf("unknown-protocol error offers a broken variant: %v", err)
	}
	if p, err := LookupAny("test-real-broken"); err != nil || p.Name() != "test-real-broken" {
		t.Fatalf("LookupAny: %v %v", p, err)
	}
	if !IsBroken("test-real-broken") || IsBroken("test-real") || BrokenOf("test-real-broken") != "test-real" {
		t.Fatal("IsBroken/BrokenOf wrong")
	}
	if !strings.Contains(DescribeBroken(), "test-real-broken (of test-real)") {
		t.Fatalf("DescribeBroken: %q", DescribeBroken())
	}
}

type ndService struct{ service.Service }

func (ndService) Name() string           { return "nd" }
func (ndService) Nondeterministic() bool { return true }

func TestCheckServiceRefusesDivergence(t *testing.T) {
	kv, err := service.Lookup("kv")
	if err != nil {
		t.Fatal(err)
	}
	if err := CheckService("test-real-broken", kv); err != nil {
		t.Fatalf("deterministic service refused: %v", err)
	}
	if err := CheckService("test-real-broken", ndService{}); err == nil || !strings.Contains(err.Error(), "diverge") {
		t.Fatalf("nondeterministic service accepted by a protocol without support: %v", err)
	}
	if err := CheckService("test-real", ndService{}); err != nil {
		t.Fatalf("nondeterministic service refused by a protocol that supports it: %v", err)
	}
}

func TestRefuseUnsupported(t *testing.T) {
	group := Request{Ops: []service.Op{{Kind: "get", Key: "a"}}}
	if _, refused := RefuseUnsupported("test-real", group); refused {
		t.Fatal("atomic group refused by a protocol that applies groups")
	}
	if r, refused := RefuseUnsupported("test-real-broken", group); !refused || !strings.Contains(r.Err, "atomically") {
		t.Fatalf("group: %v %v", r, refused)
	}
	step := Request{Txn: &TxnStep{Action: TxnBegin}}
	if r, refused := RefuseUnsupported("test-real", step); !refused || !strings.Contains(r.Err, "interactive") {
		t.Fatalf("txn step: %v %v", r, refused)
	}
}

func TestOptionParsing(t *testing.T) {
	id := RequestID{Client: 1, Seq: 2}
	o, err := ValidateOptions("test-real", id, Options{Ext: map[string][]string{"fast": {"on"}, "deps": {"a", "b"}}})
	if err != nil {
		t.Fatal(err)
	}
	if !o.Bool("fast") || len(o.Get("deps")) != 2 || o.String("tag") != id.String() {
		t.Fatalf("normalised options %+v", o.Ext)
	}
	for _, bad := range []map[string][]string{
		{"deps": {"a", "b", "c"}},
		{"fast": {"maybe"}},
		{"tag": {"a", "b"}},
		{"nosuch": {"1"}},
	} {
		if _, err := ValidateOptions("test-real", id, Options{Ext: bad}); err == nil {
			t.Errorf("accepted %v", bad)
		}
	}
	off, err := ValidateOptions("test-real", id, Options{Ext: map[string][]string{"fast": {"off"}}})
	if err != nil || off.Bool("fast") || off.Get("fast") != nil {
		t.Fatalf("off: %+v %v", off.Ext, err)
	}
	// Set copies the map: the original stays unchanged.
	orig := Options{Ext: map[string][]string{"deps": {"x"}}}
	c := orig
	c.Set("deps", nil)
	if orig.Get("deps") == nil {
		t.Fatal("Set changed the original options' map")
	}
}

// envRecorder is a state that records the operations and environments it
// is applied with.
type envRecorder struct {
	service.State
	ops  []string
	envs []service.Env
}

func (r *envRecorder) ApplyEnv(op service.Op, env service.Env) service.Result {
	r.ops = append(r.ops, op.Key)
	r.envs = append(r.envs, env)
	return service.Int(int64(len(r.ops)))
}

func TestApplyGroupUsesDistinctEnvs(t *testing.T) {
	e := service.Env{Time: 5, Seed: 9}
	if e.For(0) != e || e.For(1) == e.For(2) || e.For(1) == e {
		t.Fatal("group members share an environment")
	}
	if e.Rand().Uint64() != e.Rand().Uint64() {
		t.Fatal("the same Env gives different draws")
	}
	st := &envRecorder{}
	ops := []service.Op{{Kind: "x", Key: "a"}, {Kind: "x", Key: "b"}, {Kind: "x", Key: "c"}}
	res := ApplyGroup(st, ops, e)
	if strings.Join(st.ops, "") != "abc" || len(res) != 3 || res[2].Int != 3 {
		t.Fatalf("ApplyGroup applied %v, answered %v", st.ops, res)
	}
	for i, env := range st.envs {
		if env != e.For(i) {
			t.Fatalf("operation %d applied with %+v, want %+v", i, env, e.For(i))
		}
	}
}
