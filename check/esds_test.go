package check

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

func esdsOp(id, kind, arg string, strict bool, res history.Result, prev ...string) history.Op {
	o := history.Op{Opts: map[string][]string{"opid": {id}, "prev": prev}, Kind: kind, Outcome: history.OK, Result: res}
	if strict {
		o.Opts["strict"] = []string{"1"}
	}
	if arg != "" {
		o.Args = []string{arg}
	}
	return o
}

func TestESDSAcceptsAndMeasuresInconsistency(t *testing.T) {
	h := &history.History{Ops: []history.Op{
		esdsOp("a", "append", "a", false, resBytes("a")),
		esdsOp("b", "append", "b", false, resBytes("b")), // saw only itself: inconsistent
		esdsOp("c", "append", "c", true, resBytes("abc"), "a"),
		esdsOp("r", "read", "", false, resBytes("abc")),
		{Opts: map[string][]string{"opid": {"u"}}, Kind: "append", Args: []string{"u"}, Outcome: history.Unknown}, // never ordered: fine
	}}
	orders := map[string][]string{"n1": {"a", "b", "c", "r"}, "n2": {"a", "b", "c", "r"}}
	rep, err := ESDS(h, orders, service.String{})
	if err != nil {
		t.Fatal(err)
	}
	if !rep.Ok {
		t.Fatalf("violations: %s", rep.Detail())
	}
	if rep.Strict != 1 || rep.NonStrict != 3 || rep.Inconsistent != 1 {
		t.Fatalf("counts: %s", rep.Detail())
	}
	// Def. 4 divides by every response (1 of 4); the non-strict share by
	// the non-strict ones (1 of 3).
	if rep.Degree != 0.25 || rep.NonStrictInconsistency != 1.0/3 {
		t.Fatalf("degree %v, non-strict share %v: %s", rep.Degree, rep.NonStrictInconsistency, rep.Detail())
	}
	if d := rep.Detail(); !strings.Contains(d, "25.0% of all responses (Def. 4)") || !strings.Contains(d, "33.3% of non-strict") {
		t.Fatalf("detail does not name both measures: %s", d)
	}
}

func TestESDSViolations(t *testing.T) {
	base := func() []history.Op {
		return []history.Op{
			esdsOp("a", "add", "1", false, resInt(1)),
			esdsOp("b", "add", "2", true, resInt(3), "a"),
		}
	}
	cases := []struct {
		name   string
		ops    []history.Op
		orders map[string][]string
		want   string
	}{
		{"ok", base(), map[string][]string{"n1": {"a", "b"}}, ""},
		{"diverged", base(), map[string][]string{"n1": {"a", "b"}, "n2": {"b", "a"}}, "did not converge"},
		{"short", base(), map[string][]string{"n1": {"a", "b"}, "n2": {"a"}}, "did not converge"},
		{"prev", base(), map[string][]string{"n1": {"b", "a"}}, "before \"a\" from its prev set"},
		{"strict", []history.Op{esdsOp("a", "add", "1", false, resInt(1)), esdsOp("b", "add", "2", true, resInt(2))},
			map[string][]string{"n1": {"a", "b"}}, "strict \"b\""},
		{"missing", base(), map[string][]string{"n1": {"a"}}, "no replica ordered it"},
		{"stranger", base(), map[string][]string{"n1": {"a", "b", "zz"}}, "no client invoked"},
		{"twice", base(), map[string][]string{"n1": {"a", "b", "a"}}, "twice"},
		{"prev absent", []history.Op{esdsOp("b", "add", "2", false, resInt(2), "x")}, map[string][]string{"n1": {"b"}}, "not in the order"},
	}
	for _, c := range cases {
		rep, err := ESDS(&history.History{Ops: c.ops}, c.orders, service.Counter{})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.want == "" {
			if !rep.Ok {
				t.Fatalf("%s: unexpected violations: %s", c.name, rep.Detail())
			}
			continue
		}
		if rep.Ok || !strings.Contains(rep.Detail(), c.want) {
			t.Fatalf("%s: want a violation containing %q, got %s", c.name, c.want, rep.Detail())
		}
	}
}

func TestESDSBadInput(t *testing.T) {
	h := &history.History{Ops: []history.Op{{Kind: "read", Outcome: history.OK}}}
	if _, err := ESDS(h, map[string][]string{"n1": nil}, service.Counter{}); err == nil {
		t.Fatal("operation without id accepted")
	}
	h = &history.History{Ops: []history.Op{{Opts: map[string][]string{"opid": {"a"}}, Kind: "read"}, {Opts: map[string][]string{"opid": {"a"}}, Kind: "read"}}}
	if _, err := ESDS(h, map[string][]string{"n1": nil}, service.Counter{}); err == nil {
		t.Fatal("duplicate id accepted")
	}
	if _, err := ESDS(&history.History{}, nil, service.Counter{}); err == nil {
		t.Fatal("no orders accepted")
	}
}

// kvOp is an ESDS operation of the KV service on key k.
func kvOp(id, kind, val string, res history.Result, prev ...string) history.Op {
	o := esdsOp(id, kind, val, false, res, prev...)
	o.Key = "k"
	return o
}

// TestESDSLocalReads: with LocalReads, a non-strict read may be absent from
// the order, an operation naming it in prev must follow the read's own prev
// closure, and a read's value must come from a set holding its prev closure
// (checkReadsAgainstPrev). Each broken history is a way a replica could
// answer a read from a view missing its prev.
func TestESDSLocalReads(t *testing.T) {
	nilRes := history.FromResult(service.Nil())
	ok := history.FromResult(service.OK())
	cases := []struct {
		name  string
		ops   []history.Op
		order []string
		local bool
		want  string // "" passes
	}{
		{"read outside the order", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r", "get", "", resBytes("a"), "w1")},
			[]string{"w1"}, true, ""},
		{"read outside the order, option off", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r", "get", "", resBytes("a"), "w1")},
			[]string{"w1"}, false, "no replica ordered it"},
		{"read misses its prev write (nil)", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r", "get", "", nilRes, "w1")},
			[]string{"w1"}, true, "non-strict read \"r\""},
		{"read misses its prev write, also when ordered", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r", "get", "", nilRes, "w1")},
			[]string{"w1", "r"}, false, "non-strict read \"r\""},
		{"read sees a write its prev overwrote", []history.Op{kvOp("w0", "set", "z", ok), kvOp("w1", "set", "a", ok, "w0"), kvOp("r", "get", "", resBytes("z"), "w1")},
			[]string{"w0", "w1"}, true, "non-strict read \"r\""},
		{"read sees a concurrent write", []history.Op{kvOp("w0", "set", "z", ok), kvOp("w1", "set", "a", ok), kvOp("r", "get", "", resBytes("z"), "w1")},
			[]string{"w0", "w1"}, true, ""},
		{"read through a read's prev", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r1", "get", "", resBytes("a"), "w1"), kvOp("r2", "get", "", nilRes, "r1")},
			[]string{"w1"}, true, "non-strict read \"r2\""},
		{"write after a read follows the read's prev", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r", "get", "", resBytes("a"), "w1"), kvOp("w2", "set", "b", ok, "r")},
			[]string{"w2", "w1"}, true, "before \"w1\" from its prev set"},
		{"write after a read, in order", []history.Op{kvOp("w1", "set", "a", ok), kvOp("r", "get", "", resBytes("a"), "w1"), kvOp("w2", "set", "b", ok, "r")},
			[]string{"w1", "w2"}, true, ""},
		{"not blind: unchecked", []history.Op{kvOp("w1", "append", "a", history.Result{Type: "int", Int: 1}), kvOp("r", "get", "", nilRes, "w1")},
			[]string{"w1"}, true, ""},
	}
	for _, c := range cases {
		rep, err := ESDSWith(&history.History{Ops: c.ops}, map[string][]string{"n1": c.order}, service.KV{}, ESDSOptions{LocalReads: c.local})
		if err != nil {
			t.Fatalf("%s: %v", c.name, err)
		}
		if c.want == "" {
			if !rep.Ok {
				t.Errorf("%s: %s", c.name, rep.Detail())
			}
			continue
		}
		if rep.Ok || !strings.Contains(rep.Detail(), c.want) {
			t.Errorf("%s: want a violation naming %q, got %s", c.name, c.want, rep.Detail())
		}
	}
}
