package check

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/history"
)

var gridOpt = Options{Services: map[string]string{"": matchmaker.ServiceName}}

// TestGenericGridMatchmaker checks gridmatchmaker (the Grid Services thesis IV.D.2) histories
// with the generic model: the service itself is the specification.
func TestGenericGridMatchmaker(t *testing.T) {
	adv := func(p int, call, ret int64, m, cpu, mem string) history.Op {
		return ok(p, call, ret, rOK, "advertise", m, cpu, mem)
	}
	sub := func(p int, call, ret int64, res history.Result, c, cpu, mem string) history.Op {
		return ok(p, call, ret, res, "submit", c, cpu, mem)
	}
	cases := []struct {
		name string
		h    *history.History
		want string
	}{
		{"sequential: first suitable machine, then the next, then none",
			hist(adv(0, 0, 1, "m0", "2", "2"), adv(0, 2, 3, "m1", "4", "4"),
				sub(1, 4, 5, rBytes("m1"), "c1", "3", "1"), sub(2, 6, 7, rBytes("m0"), "c2", "1", "1"),
				sub(1, 8, 9, rNil, "c1", "1", "1"),
				ok(0, 10, 11, rInt(1), "balance", "c1"), ok(0, 12, 13, rInt(0), "available", "")),
			Ok},
		{"concurrent submits take the two machines in either order",
			hist(adv(0, 0, 1, "m0", "2", "2"), adv(0, 2, 3, "m1", "2", "2"),
				sub(1, 4, 10, rBytes("m1"), "c1", "1", "1"), sub(2, 5, 9, rBytes("m0"), "c2", "1", "1")),
			Ok},
		{"a submit answered with a machine already taken",
			hist(adv(0, 0, 1, "m0", "2", "2"), adv(0, 2, 3, "m1", "2", "2"),
				sub(1, 4, 5, rBytes("m0"), "c1", "1", "1"), sub(2, 6, 7, rBytes("m0"), "c2", "1", "1")),
			Illegal},
		{"a submit skipping the first suitable machine",
			hist(adv(0, 0, 1, "m0", "2", "2"), adv(0, 2, 3, "m1", "2", "2"),
				sub(1, 4, 5, rBytes("m1"), "c1", "1", "1")),
			Illegal},
		{"a balance that forgets a completed submit",
			hist(adv(0, 0, 1, "m0", "2", "2"), sub(1, 2, 3, rBytes("m0"), "c1", "1", "1"),
				ok(2, 4, 5, rInt(0), "balance", "c1")),
			Illegal},
		{"a submit of unknown outcome may explain a later nil and balance",
			hist(adv(0, 0, 1, "m0", "2", "2"), unknown(1, 2, "submit", "c1", "1", "1"),
				sub(2, 10, 11, rNil, "c2", "1", "1"), ok(2, 12, 13, rInt(1), "balance", "c1")),
			Ok},
		{"too big a job gets nil while the machine stays available",
			hist(adv(0, 0, 1, "m0", "2", "2"), sub(1, 2, 3, rNil, "c1", "3", "1"),
				ok(2, 4, 5, rInt(1), "available", "")),
			Ok},
	}
	for _, c := range cases {
		r := mustCheck(t, c.h, gridOpt)
		if r.Result != c.want {
			t.Errorf("%s: %s, want %s\n%s", c.name, r.Result, c.want, r)
		}
		if r.Partitions != 1 {
			t.Errorf("%s: %d partitions, want the namespace as one object", c.name, r.Partitions)
		}
	}
}

// TestGenericRefusals: the nondeterministic Matchmaker and unknown services
// still have no Porcupine specification here, and invalid operations claimed
// successful are refused as for kv.
func TestGenericRefusals(t *testing.T) {
	for _, svc := range []string{"matchmaker", "nosuch"} {
		_, err := Linearizable(hist(), Options{Services: map[string]string{"": svc}})
		if err == nil || !strings.Contains(err.Error(), "no Porcupine specification") {
			t.Errorf("service %s: error %v", svc, err)
		}
	}
	if _, err := Linearizable(hist(ok(0, 0, 1, rOK, "advertise", "m0", "x", "1")), gridOpt); err == nil {
		t.Error("an invalid advertise recorded OK was accepted")
	}
}

// TestOpKeyKeepsArgumentsApart: the generic model's memo keys operations
// whose arguments differ only in where a NUL falls apart (joined with NUL
// separators, set x ["a\x00b"] and set x ["a", "b"] were one key, and the
// memo could answer one with the other's step).
func TestOpKeyKeepsArgumentsApart(t *testing.T) {
	pairs := [][2]input{
		{{kind: "set", key: "x", args: []string{"a\x00b"}}, {kind: "set", key: "x", args: []string{"a", "b"}}},
		{{kind: "set", key: "x\x00a", args: nil}, {kind: "set", key: "x", args: []string{"a"}}},
		{{kind: "get", key: "", args: []string{""}}, {kind: "get", key: ""}},
	}
	for _, p := range pairs {
		if opKey(p[0]) == opKey(p[1]) {
			t.Errorf("%+v and %+v share the memo key %q", p[0], p[1], opKey(p[0]))
		}
	}
	a := input{kind: "set", key: "x", args: []string{"1"}}
	if opKey(a) != opKey(input{kind: "set", key: "x", args: []string{"1"}}) {
		t.Error("equal operations get different keys")
	}
}
