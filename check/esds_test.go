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
