package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/orca"
)

var orcaOpt = Options{Services: map[string]string{"": orca.ServiceName}}

func mustSequential(t *testing.T, h *history.History, opt Options) *Report {
	t.Helper()
	r, err := Sequential(h, opt)
	if err != nil {
		t.Fatalf("Sequential: %v", err)
	}
	return r
}

// TestGenericSequentialOrca judges histories of Orca integer objects (a
// service with no hand-written model) for sequential consistency: stale
// reads at a copy are allowed, a process missing its own write, reading
// values backwards, or two readers seeing two writes in opposite orders
// (IRIW: every object alone is fine) are not; guards are honoured.
func TestGenericSequentialOrca(t *testing.T) {
	mk := func(p int, call, ret int64, key string) history.Op {
		return ok(p, call, ret, rOK, orca.KindNew, key, "int")
	}
	val := func(p int, call, ret int64, key string, v int64) history.Op {
		return ok(p, call, ret, rInt(v), "int.value", key)
	}
	assign := func(p int, call, ret int64, key string, v int64) history.Op {
		return ok(p, call, ret, rOK, "int.assign", key, fmt.Sprint(v))
	}
	inc := func(p int, call, ret int64, key string, v int64) history.Op {
		return ok(p, call, ret, rInt(v), "int.inc", key, "1")
	}
	cases := []struct {
		name string
		h    *history.History
		want string
	}{
		{"a read at a stale copy after the write returned (not linearizable, sequentially consistent)",
			hist(mk(0, 0, 1, "x"), assign(0, 2, 3, "x", 1), val(1, 4, 5, "x", 0), val(1, 6, 7, "x", 1)),
			Ok},
		{"a process that misses its own write",
			hist(mk(0, 0, 1, "x"), assign(0, 2, 3, "x", 1), val(0, 4, 5, "x", 0)),
			Illegal},
		{"a reader that sees increments backwards",
			hist(mk(0, 0, 1, "x"), inc(0, 2, 3, "x", 1), inc(0, 4, 5, "x", 2),
				val(1, 6, 7, "x", 2), val(1, 8, 9, "x", 1)),
			Illegal},
		{"IRIW: two readers see two independent writes in opposite orders",
			hist(mk(0, 0, 1, "x"), mk(0, 2, 3, "y"), assign(1, 10, 11, "x", 1), assign(2, 10, 11, "y", 1),
				val(3, 12, 13, "x", 1), val(3, 14, 15, "y", 0),
				val(4, 12, 13, "y", 1), val(4, 14, 15, "x", 0)),
			Illegal},
		{"the same readers seeing the writes in one order",
			hist(mk(0, 0, 1, "x"), mk(0, 2, 3, "y"), assign(1, 10, 11, "x", 1), assign(2, 10, 11, "y", 1),
				val(3, 12, 13, "x", 1), val(3, 14, 15, "y", 0),
				val(4, 12, 13, "y", 1), val(4, 14, 15, "x", 1)),
			Ok},
		{"a guarded await called first returns once the increments reach it",
			hist(mk(0, 0, 1, "x"), ok(1, 2, 20, rInt(3), "int.await", "x", "3"),
				inc(0, 3, 4, "x", 1), inc(0, 5, 6, "x", 2), inc(0, 7, 8, "x", 3)),
			Ok},
		{"a guarded await that returns before its guard could hold",
			hist(mk(0, 0, 1, "x"), ok(1, 2, 20, rInt(2), "int.await", "x", "3"),
				inc(0, 3, 4, "x", 1), inc(0, 5, 6, "x", 2), inc(0, 7, 8, "x", 3)),
			Illegal},
		{"a write of unknown outcome explains a later read",
			hist(mk(0, 0, 1, "x"), unknown(0, 2, "int.assign", "x", "5"), val(1, 10, 11, "x", 5)),
			Ok},
		{"a write of unknown outcome cannot be undone",
			hist(mk(0, 0, 1, "x"), unknown(0, 2, "int.assign", "x", "5"), val(1, 10, 11, "x", 5), val(1, 12, 13, "x", 0)),
			Illegal},
		{"an operation on an object before its creation answers the service's error",
			hist(ok(0, 0, 1, rErr(`orca: no object "x"`), "int.assign", "x", "1"), mk(0, 2, 3, "x"), val(1, 0, 9, "x", 0)),
			Ok},
	}
	for _, c := range cases {
		r := mustSequential(t, c.h, orcaOpt)
		if r.Result != c.want {
			t.Errorf("%s: %s, want %s\n%s", c.name, r.Result, c.want, r.Detail)
		}
		if r.Guarantee != GuaranteeSequential {
			t.Errorf("%s: guarantee %q", c.name, r.Guarantee)
		}
		if r.Result == Illegal && !strings.Contains(r.Detail, "next op") {
			t.Errorf("%s: the report names no stuck operation: %s", c.name, r.Detail)
		}
	}
}

// TestGenericSequentialAcrossNamespaces: a kv namespace beside an orca one
// is judged in the same order (the KV namespace by the kv service's State).
func TestGenericSequentialAcrossNamespaces(t *testing.T) {
	opt := Options{Services: map[string]string{"o": orca.ServiceName, "k": "kv"}}
	good := hist(in("o", ok(0, 0, 1, rOK, orca.KindNew, "x", "int")),
		in("k", ok(0, 2, 3, rOK, "set", "a", "1")), in("o", ok(0, 4, 5, rOK, "int.assign", "x", "1")),
		in("o", ok(1, 6, 7, rInt(1), "int.value", "x")), in("k", ok(1, 8, 9, rBytes("1"), "get", "a")))
	if r := mustSequential(t, good, opt); r.Result != Ok {
		t.Fatalf("good history: %s %s", r.Result, r.Detail)
	}
	// Process 1 sees the orca write (issued after the SET) but not the SET.
	bad := hist(in("o", ok(0, 0, 1, rOK, orca.KindNew, "x", "int")),
		in("k", ok(0, 2, 3, rOK, "set", "a", "1")), in("o", ok(0, 4, 5, rOK, "int.assign", "x", "1")),
		in("o", ok(1, 6, 7, rInt(1), "int.value", "x")), in("k", ok(1, 8, 9, rNil, "get", "a")))
	if r := mustSequential(t, bad, opt); r.Result != Illegal {
		t.Fatalf("bad history: %s %s", r.Result, r.Detail)
	}
}

// TestGenericSequentialBounds: a history that is not sequentially
// consistent, cut by the state limit, is Unknown, not Illegal or Ok.
func TestGenericSequentialBounds(t *testing.T) {
	var ops []history.Op
	ops = append(ops, ok(0, 0, 1, rOK, orca.KindNew, "x", "int"))
	for p := 1; p <= 3; p++ {
		for i := 0; i < 6; i++ {
			call := int64(10 + 2*i)
			ops = append(ops, ok(p, call, call+1, rOK, "int.assign", "x", fmt.Sprint(p*100+i)))
		}
	}
	ops = append(ops, ok(0, 2, 3, rInt(7), "int.value", "x")) // nobody writes 7
	r, err := Sequential(hist(ops...), Options{Services: orcaOpt.Services, MaxStates: 50})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != Unknown {
		t.Fatalf("with 50 states: %s %s", r.Result, r.Detail)
	}
	if r := mustSequential(t, hist(ops...), orcaOpt); r.Result != Illegal {
		t.Fatalf("without a bound: %s %s", r.Result, r.Detail)
	}
}
