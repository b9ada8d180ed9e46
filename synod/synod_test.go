package synod_test

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synod"
)

type echo struct{ name string }

func (e echo) Name() string          { return e.name }
func (echo) Validate(synod.Op) error { return nil }
func (echo) IsRead(op synod.Op) bool { return op.Kind == "get" }
func (echo) NewState() synod.State   { return &echoState{} }

type echoState struct{ last []byte }

func (s *echoState) Apply(op synod.Op) synod.Result {
	if op.Kind == "set" {
		s.last = op.Args[0]
		return synod.OK()
	}
	return synod.Bytes(s.last)
}
func (s *echoState) Snapshot() []byte       { return s.last }
func (s *echoState) Restore(b []byte) error { s.last = b; return nil }

// freshName is base with a number no earlier run in this process used:
// the registries are the process's, and go test -count=N runs each test N
// times in one process.
func freshName(base string) string { return fmt.Sprintf("%s-%d", base, runs.Add(1)) }

var runs atomic.Int64

// A registered service is the one Synod's registry hands out (aliases, not
// copies); a taken or empty name is refused.
func TestRegisterService(t *testing.T) {
	name := freshName("synodtest-echo")
	if err := synod.RegisterService(echo{name}); err != nil {
		t.Fatal(err)
	}
	svc, err := service.Lookup(name)
	if err != nil {
		t.Fatal(err)
	}
	var st service.State = svc.NewState()
	st.Apply(service.Op{Kind: "set", Args: [][]byte{[]byte("x")}})
	if r := st.Apply(synod.Op{Kind: "get"}); string(r.Bytes) != "x" {
		t.Fatalf("get = %v", r)
	}
	for _, bad := range []synod.Service{echo{name}, echo{"kv"}, echo{""}} {
		if err := synod.RegisterService(bad); err == nil {
			t.Errorf("RegisterService(%q) accepted", bad.Name())
		}
	}
	if err := synod.RegisterObjectType(orca.IntType); err == nil {
		t.Error("RegisterObjectType(int) accepted a built-in name")
	}
	if err := synod.RegisterProgram(synod.Program{Name: "tsp", Worker: func(synod.Process, int, int) error { return nil }}); err == nil {
		t.Error("RegisterProgram(tsp) accepted a built-in name")
	}
}

// A registered nested program is the one adam namespaces look up; the
// built-in trail's name and an empty name are refused.
func TestRegisterNestedProgram(t *testing.T) {
	named := func(n string) synod.NestedProgram { return renamed{service.Trail, n} }
	name := freshName("synodtest-trail")
	if err := synod.RegisterNestedProgram(named(name)); err != nil {
		t.Fatal(err)
	}
	if p, err := service.LookupNestedProgram(name); err != nil || p.Name() != name {
		t.Fatalf("lookup = %v, %v", p, err)
	}
	for _, bad := range []string{name, "trail", ""} {
		if err := synod.RegisterNestedProgram(named(bad)); err == nil {
			t.Errorf("RegisterNestedProgram(%q) accepted", bad)
		}
	}
}

type renamed struct {
	synod.NestedProgram
	name string
}

func (r renamed) Name() string { return r.name }
