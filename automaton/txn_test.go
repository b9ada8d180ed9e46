package automaton

import (
	"testing"

	"github.com/synod-dev/synod/service"
)

// regState is a tiny state for ApplyGroup: "set k v" writes, "guard k v"
// passes when k holds v.
type regState map[string]string

func (s regState) Apply(op service.Op) service.Result {
	switch op.Kind {
	case "set":
		s[op.Key] = string(op.Args[0])
		return service.OK()
	case service.GuardKind:
		if s[op.Key] != string(op.Args[0]) {
			return service.GuardFailure(op.Key + " changed")
		}
		return service.OK()
	}
	return service.Errorf("ERR unknown")
}
func (s regState) Snapshot() []byte          { return nil }
func (s regState) Restore(snap []byte) error { return nil }

func op(kind, key, arg string) service.Op {
	return service.Op{Kind: kind, Key: key, Args: [][]byte{[]byte(arg)}}
}

func TestApplyGroupGuards(t *testing.T) {
	st := regState{"a": "1"}
	ops := []service.Op{op(service.GuardKind, "a", "1"), op(service.GuardKind, "b", ""), op("set", "a", "2"), op("set", "b", "3")}
	res := ApplyGroup(st, ops, service.Env{})
	if _, aborted := GroupAborted(ops, res); aborted || st["a"] != "2" || st["b"] != "3" {
		t.Fatalf("passing guards: aborted=%v state=%v", aborted, st)
	}
	// A failed leading guard stops the group: nothing applied, the others Nil.
	ops[0] = op(service.GuardKind, "a", "2")
	ops[1] = op(service.GuardKind, "b", "stale")
	ops[2] = op("set", "a", "9")
	res = ApplyGroup(st, ops, service.Env{})
	i, aborted := GroupAborted(ops, res)
	if !aborted || i != 1 || st["a"] != "2" || res[0].Type != service.ResultNil || res[2].Type != service.ResultNil {
		t.Fatalf("failed guard: i=%d aborted=%v res=%v state=%v", i, aborted, res, st)
	}
	// A guard after a write is an ordinary operation: its failure stops nothing.
	ops = []service.Op{op("set", "a", "5"), op(service.GuardKind, "a", "x"), op("set", "b", "6")}
	res = ApplyGroup(st, ops, service.Env{})
	if _, aborted := GroupAborted(ops, res); aborted || st["b"] != "6" || !service.IsGuardFailure(res[1]) {
		t.Fatalf("late guard: res=%v state=%v", res, st)
	}
}
