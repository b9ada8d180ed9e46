package check

import (
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Helpers to build transactional histories by hand.

// step is one operation of a transaction with the result the client saw.
func step(res history.Result, kind, key string, args ...string) history.Op {
	return history.Op{Kind: kind, Key: key, Args: args, Outcome: history.OK, Result: res}
}

// txn builds a transaction entry (interactive) with outcome out.
func txn(proc int, call, ret int64, out history.Outcome, steps ...history.Op) history.Op {
	for i := range steps {
		steps[i].Process = proc
	}
	o := history.Op{Process: proc, Kind: history.TxnKind, Txn: steps, Call: call, Return: ret, Outcome: out}
	if out == history.OK {
		o.Result = rOK
	}
	return o
}

// multi builds an atomic group entry with outcome out.
func multi(proc int, call, ret int64, out history.Outcome, steps ...history.Op) history.Op {
	o := txn(proc, call, ret, out, steps...)
	o.Kind = history.MultiKind
	return o
}

// verdicts runs both checkers.
func verdicts(t *testing.T, h *history.History, opt Options) (plain, strict *Report) {
	t.Helper()
	var err error
	if plain, err = Serializable(h, opt); err != nil {
		t.Fatalf("Serializable: %v", err)
	}
	if strict, err = StrictSerializable(h, opt); err != nil {
		t.Fatalf("StrictSerializable: %v", err)
	}
	return plain, strict
}

func TestSerializableHandBuilt(t *testing.T) {
	cases := []struct {
		name          string
		ops           []history.Op
		plain, strict string
		witness       string // in the strict report's Detail when Illegal
	}{
		{"two overlapping transfers, serial in the order opposite to their calls", []history.Op{
			multi(0, 0, 5, history.OK, step(rOK, "set", "a", "10"), step(rOK, "set", "b", "10"), step(rOK, "set", "c", "10")),
			txn(1, 10, 40, history.OK, // a -> b, 5; sees T2's write to b
				step(rBytes("10"), "get", "a"), step(rBytes("5"), "get", "b"),
				step(rOK, "set", "a", "5"), step(rOK, "set", "b", "10")),
			txn(2, 15, 30, history.OK, // b -> c, 5
				step(rBytes("10"), "get", "b"), step(rBytes("10"), "get", "c"),
				step(rOK, "set", "b", "5"), step(rOK, "set", "c", "15")),
			multi(3, 50, 60, history.OK, step(rBytes("5"), "get", "a"), step(rBytes("10"), "get", "b"), step(rBytes("15"), "get", "c")),
		}, Ok, Ok, ""},
		// The unit of COPY a b touches b too (it failed when a unit's
		// objects were its operations' first keys only).
		{"a COPY of unknown outcome explains a later read of its destination", []history.Op{
			multi(0, 0, 1, history.OK, step(rOK, "set", "a", "1"), step(rOK, "set", "b", "2")),
			{Process: 0, Kind: "copy", Key: "a", Args: []string{"b", "replace"}, Call: 10, Return: 20, Outcome: history.Unknown},
			ok(2, 30, 40, rInt(0), "incr", "b", "-1"),
		}, Ok, Ok, ""},
		{"lost update: both read 0, both write 1", []history.Op{
			ok(0, 0, 1, rOK, "set", "x", "0"),
			txn(1, 10, 20, history.OK, step(rBytes("0"), "get", "x"), step(rOK, "set", "x", "1")),
			txn(2, 10, 20, history.OK, step(rBytes("0"), "get", "x"), step(rOK, "set", "x", "1")),
			ok(3, 30, 40, rBytes("1"), "get", "x"),
		}, Illegal, Illegal, `GET "x" -> "0" but the state gives "1"`},
		{"lost update through INCR results", []history.Op{
			txn(1, 10, 20, history.OK, step(rInt(1), "incr", "x", "1")),
			txn(2, 10, 20, history.OK, step(rInt(1), "incr", "x", "1")),
		}, Illegal, Illegal, `INCR "x" "1" -> 1 but the state gives 2`},
		{"write skew", []history.Op{
			txn(1, 0, 10, history.OK, step(rNil, "get", "x"), step(rNil, "get", "y"), step(rOK, "set", "x", "1")),
			txn(2, 0, 10, history.OK, step(rNil, "get", "x"), step(rNil, "get", "y"), step(rOK, "set", "y", "1")),
		}, Illegal, Illegal, "but the state gives"},
		{"an aborted transaction's write is seen", []history.Op{
			txn(1, 0, 10, history.Failed, step(rOK, "set", "x", "1")),
			ok(2, 20, 30, rBytes("1"), "get", "x"),
		}, Illegal, Illegal, `op 1 {GET "x" -> "1" but the state gives (nil)}`},
		{"the same transaction committed", []history.Op{
			txn(1, 0, 10, history.OK, step(rOK, "set", "x", "1")),
			ok(2, 20, 30, rBytes("1"), "get", "x"),
		}, Ok, Ok, ""},
		{"an aborted transaction's reads promise nothing", []history.Op{
			ok(0, 0, 1, rOK, "set", "x", "0"),
			txn(1, 10, 20, history.Failed, step(rBytes("never"), "get", "x"), step(rOK, "set", "x", "2")),
			ok(2, 30, 40, rBytes("0"), "get", "x"),
		}, Ok, Ok, ""},
		{"an unknown transaction applied", []history.Op{
			txn(1, 0, 10, history.Unknown, step(history.Result{}, "set", "x", "1"), step(history.Result{}, "set", "y", "1")),
			multi(2, 20, 30, history.OK, step(rBytes("1"), "get", "x"), step(rBytes("1"), "get", "y")),
		}, Ok, Ok, ""},
		{"an unknown transaction not applied", []history.Op{
			txn(1, 0, 10, history.Unknown, step(history.Result{}, "set", "x", "1"), step(history.Result{}, "set", "y", "1")),
			multi(2, 20, 30, history.OK, step(rNil, "get", "x"), step(rNil, "get", "y")),
		}, Ok, Ok, ""},
		{"an unknown transaction half applied: x seen, y missing later", []history.Op{
			txn(1, 0, 10, history.Unknown, step(history.Result{}, "set", "x", "1"), step(history.Result{}, "set", "y", "1")),
			ok(2, 20, 30, rBytes("1"), "get", "x"),
			ok(2, 40, 50, rNil, "get", "y"),
		}, Illegal, Illegal, `GET "y" -> (nil) but the state gives "1"`},
		{"an unknown transaction applied late, after a read of its process", []history.Op{
			txn(1, 0, 10, history.Unknown, step(history.Result{}, "set", "x", "1")),
			ok(1, 20, 30, rNil, "get", "x"),
			ok(2, 40, 50, rBytes("1"), "get", "x"),
		}, Ok, Ok, ""},
		{"an unknown interactive transaction, if applied, answered what its client saw", []history.Op{
			txn(1, 0, 10, history.Unknown, step(rBytes("5"), "get", "x"), step(history.Result{}, "set", "y", "1")),
			ok(2, 20, 30, rBytes("1"), "get", "y"), // so it was applied, yet x was never 5
		}, Illegal, Illegal, `GET "y" -> "1" but the state gives (nil)`},
		{"a read in the middle of an atomic group sees it half applied", []history.Op{
			multi(1, 0, 10, history.OK, step(rOK, "set", "x", "1"), step(rOK, "set", "y", "1")),
			ok(2, 2, 3, rBytes("1"), "get", "x"),
			ok(2, 4, 5, rNil, "get", "y"),
		}, Illegal, Illegal, `GET "y" -> (nil) but the state gives "1"`},
		{"the same reads between two separate writes", []history.Op{
			ok(1, 0, 1, rOK, "set", "x", "1"),
			ok(2, 2, 3, rBytes("1"), "get", "x"),
			ok(2, 4, 5, rNil, "get", "y"),
			ok(1, 6, 10, rOK, "set", "y", "1"),
		}, Ok, Ok, ""},
		{"serializable only against real time", []history.Op{
			txn(1, 0, 10, history.OK, step(rOK, "set", "x", "1")),
			txn(2, 20, 30, history.OK, step(rNil, "get", "x")),
		}, Ok, Illegal, `txn 1 {GET "x" -> (nil) but the state gives "1"}`},
		{"a client misses its own committed write", []history.Op{
			txn(1, 0, 10, history.OK, step(rOK, "set", "x", "1")),
			txn(1, 20, 30, history.OK, step(rNil, "get", "x")),
		}, Illegal, Illegal, "but the state gives"},
		{"IRIW: every key alone is serializable, the whole is not", []history.Op{
			ok(1, 0, 100, rOK, "set", "x", "1"),
			ok(2, 0, 100, rOK, "set", "y", "1"),
			ok(3, 0, 10, rBytes("1"), "get", "x"), ok(3, 11, 20, rNil, "get", "y"),
			ok(4, 0, 10, rBytes("1"), "get", "y"), ok(4, 11, 20, rNil, "get", "x"),
		}, Illegal, Illegal, "but the state gives"},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			plain, strict := verdicts(t, hist(c.ops...), Options{})
			if plain.Result != c.plain {
				t.Errorf("Serializable: %s, want %s: %s", plain.Result, c.plain, plain.serializableString())
			}
			if strict.Result != c.strict {
				t.Errorf("StrictSerializable: %s, want %s: %s", strict.Result, c.strict, strict.serializableString())
			}
			if strict.Result == Illegal && !strings.Contains(strict.Detail, c.witness) {
				t.Errorf("strict report lacks witness %q: %s", c.witness, strict.Detail)
			}
			if plain.Guarantee != GuaranteeSerializable || strict.Guarantee != GuaranteeStrictSerializable {
				t.Errorf("models %q, %q", plain.Guarantee, strict.Guarantee)
			}
		})
	}
}

func TestSerializableCounts(t *testing.T) {
	h := hist(
		txn(1, 0, 10, history.OK, step(rOK, "set", "x", "1"), step(rOK, "set", "y", "1")), // joins x and y
		txn(2, 0, 10, history.Failed, step(rOK, "set", "z", "1")),                         // dropped
		txn(3, 0, 10, history.Unknown, step(rNil, "get", "z")),                            // read-only unknown: dropped
		ok(4, 0, 10, rErr("timeout"), "set", "w", "1"),                                    // maybe applied
		ok(4, 20, 30, rErr("timeout"), "get", "w"),                                        // dropped
		ok(5, 0, 10, rBytes("1"), "get", "x"),
	)
	r, err := StrictSerializable(h, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != Ok || r.Ops != 3 || r.Dropped != 3 || r.MaybeApplied != 1 || r.Partitions != 2 {
		t.Errorf("got result %s, %d units, %d dropped, %d maybe, %d components; want ok, 3, 3, 1, 2: %s",
			r.Result, r.Ops, r.Dropped, r.MaybeApplied, r.Partitions, r.serializableString())
	}
	// Program order joins the components a process touches.
	h.Ops = append(h.Ops, ok(5, 40, 50, rInt(1), "exists", "w"))
	if r, _ := Serializable(h, Options{}); r.Partitions != 1 || r.Result != Ok {
		t.Errorf("program order: %d components, %s; want 1, ok: %s", r.Partitions, r.Result, r.serializableString())
	}
	if r, _ := StrictSerializable(h, Options{}); r.Partitions != 2 {
		t.Errorf("real time: %d components, want 2", r.Partitions)
	}
}

func TestSerializableServicesAndNamespaces(t *testing.T) {
	h := hist(
		multi(1, 0, 10, history.OK, in("c", step(rInt(5), "add", "", "5")), step(rOK, "set", "x", "5")),
		txn(2, 20, 30, history.OK, in("c", step(rInt(5), "read", "")), step(rBytes("5"), "get", "x")),
	)
	opt := Options{Services: map[string]string{"c": "counter"}}
	if _, strict := verdicts(t, h, opt); strict.Result != Ok || strict.Partitions != 1 {
		t.Errorf("counter and kv in one group: %s", strict.serializableString())
	}
	h.Ops[1].Txn[0].Result = rInt(0) // the counter part of the group is missing
	if _, strict := verdicts(t, h, opt); strict.Result != Illegal || !strings.Contains(strict.Detail, "c: READ -> 0 but the state gives 5") {
		t.Errorf("half a cross-namespace group: %s", strict.serializableString())
	}
}

func TestSerializableIgnoreDelCount(t *testing.T) {
	h := hist(txn(1, 0, 10, history.OK, step(rInt(1), "del", "x"))) // x never existed
	if r, _ := StrictSerializable(h, Options{}); r.Result != Illegal {
		t.Errorf("DEL -> 1 of an absent key: %s", r.Result)
	}
	if r, _ := StrictSerializable(h, Options{IgnoreDelCount: true}); r.Result != Ok {
		t.Errorf("IgnoreDelCount: %s", r.Result)
	}
}

func TestSerializableBadInput(t *testing.T) {
	if _, err := Serializable(nil, Options{}); err == nil {
		t.Error("nil history accepted")
	}
	if _, err := Serializable(hist(), Options{Services: map[string]string{"m": "matchmaker"}}); err == nil ||
		!strings.Contains(err.Error(), "nondeterministic") {
		t.Errorf("nondeterministic service: %v", err)
	}
	if _, err := Serializable(hist(), Options{Services: map[string]string{"m": "nosuch"}}); err == nil {
		t.Error("unknown service accepted")
	}
	refused := hist(txn(1, 0, 10, history.OK, step(rOK, "set", "x"))) // SET without a value, claimed OK
	if _, err := Serializable(refused, Options{}); err == nil || !strings.Contains(err.Error(), "refuses") {
		t.Errorf("refused step claimed OK: %v", err)
	}
	backwards := hist(txn(1, 10, 5, history.OK, step(rOK, "set", "x", "1")))
	if _, err := Serializable(backwards, Options{}); err == nil {
		t.Error("a unit returning before its call accepted")
	}
	// A refused step that the history does not claim succeeded has no effect.
	quiet := hist(txn(1, 0, 10, history.OK, step(rErr("syntax"), "set", "x"), step(rNil, "get", "x")))
	if r, err := Serializable(quiet, Options{}); err != nil || r.Result != Ok {
		t.Errorf("refused step answered by an error: %v %v", r, err)
	}
}

func TestSerializableBounds(t *testing.T) {
	h := randomSerialHistory(rand.New(rand.NewSource(1)), 300, 10, 2)
	r, err := StrictSerializable(h, Options{Timeout: 1})
	if err != nil {
		t.Fatal(err)
	}
	if r.Result != Unknown || !strings.Contains(r.Detail, "time limit") || len(r.Undecided) != r.Partitions {
		t.Errorf("1 ns time limit: %s", r.serializableString())
	}
	// A lost update behind many concurrent writers of distinct values: the
	// search needs many configurations to prove it illegal.
	var ops []history.Op
	for p := 1; p <= 6; p++ {
		ops = append(ops, txn(p, 0, 100, history.OK, step(rOK, "set", "x", strconv.Itoa(p))))
	}
	ops = append(ops, txn(7, 0, 100, history.OK, step(rNil, "get", "x"), step(rOK, "set", "x", "7")),
		txn(8, 0, 100, history.OK, step(rNil, "get", "x"), step(rOK, "set", "x", "8")))
	if r, _ := StrictSerializable(hist(ops...), Options{MaxStates: 3}); r.Result != Unknown || !strings.Contains(r.Detail, "state limit") {
		t.Errorf("MaxStates 3: %s", r.serializableString())
	}
	if r, _ := StrictSerializable(hist(ops...), Options{}); r.Result != Illegal {
		t.Errorf("unbounded: %s", r.serializableString())
	}
}

// randomSerialHistory applies n random units serially to a KV state and
// records them with overlapping intervals around their serialization
// points, as a strictly serializable system would. Keys fall in groups of
// perGroup; a unit touches one group, and each group has its own clients,
// so groups are independent components under both models. About 5% of the
// transactions abort and 5% of the units end unknown (applied or not).
func randomSerialHistory(rng *rand.Rand, n, keys, perGroup int) *history.History {
	groups := (keys + perGroup - 1) / perGroup
	const procsPerGroup = 4 // at most 3 units are open at a time (windows < 40, one unit per 10)
	lastRet := make([]int64, groups*procsPerGroup)
	for p := range lastRet {
		lastRet[p] = -1
	}
	st := service.KV{}.NewState()
	key := func(g int) string { return "k" + strconv.Itoa(min(g*perGroup+rng.Intn(perGroup), keys-1)) }
	randOp := func(g int) service.Op {
		k := key(g)
		v := []byte(strconv.Itoa(rng.Intn(5)))
		switch rng.Intn(8) {
		case 0, 1:
			return service.Op{Kind: "get", Key: k}
		case 2:
			return service.Op{Kind: "set", Key: k, Args: [][]byte{v}}
		case 3:
			return service.Op{Kind: "incr", Key: k, Args: [][]byte{[]byte("1")}}
		case 4:
			return service.Op{Kind: "append", Key: k, Args: [][]byte{v}}
		case 5:
			return service.Op{Kind: "del", Key: k}
		case 6:
			return service.Op{Kind: "cas", Key: k, Args: [][]byte{v, []byte(strconv.Itoa(rng.Intn(5)))}}
		}
		return service.Op{Kind: "exists", Key: k}
	}
	h := &history.History{}
	for i := 0; i < n; i++ {
		t := int64(i) * 10
		var g, p int
		for {
			g = rng.Intn(groups)
			p = g*procsPerGroup + rng.Intn(procsPerGroup)
			if lastRet[p] < t {
				break
			}
		}
		call := max(lastRet[p]+1, t-int64(rng.Intn(40)))
		ret := t + int64(rng.Intn(40))
		var ops []service.Op
		kind := ""
		switch r := rng.Intn(10); {
		case r < 4:
			ops = []service.Op{randOp(g)}
		case r < 8:
			kind = history.TxnKind
		default:
			kind = history.MultiKind
		}
		if kind != "" {
			for j := 2 + rng.Intn(3); j > 0; j-- {
				ops = append(ops, randOp(g))
			}
		}
		outcome := history.OK
		switch r := rng.Intn(20); {
		case r == 0 && kind == history.TxnKind:
			outcome = history.Failed
		case r == 1:
			outcome = history.Unknown
		}
		apply := outcome == history.OK || (outcome == history.Unknown && rng.Intn(2) == 0)
		target := st
		if !apply {
			target = st.(*service.KVState).Clone()
		}
		var results []service.Result
		for _, op := range ops {
			results = append(results, target.Apply(op))
		}
		if outcome == history.Unknown {
			ret = call + 1 // the client gives up at once; the unit may land later
		}
		lastRet[p] = ret
		if kind == "" {
			o := history.Op{Process: p, Kind: ops[0].Kind, Key: ops[0].Key, Call: call, Return: ret, Outcome: outcome}
			for _, a := range ops[0].Args {
				o.Args = append(o.Args, string(a))
			}
			if outcome == history.OK {
				o.Result = history.FromResult(results[0])
			}
			h.Ops = append(h.Ops, o)
			continue
		}
		o := history.Op{Process: p, Kind: kind, Call: call, Return: ret, Outcome: outcome, Result: rOK}
		for j, op := range ops {
			s := history.Op{Process: p, Kind: op.Kind, Key: op.Key, Outcome: history.OK}
			for _, a := range op.Args {
				s.Args = append(s.Args, string(a))
			}
			if kind == history.TxnKind || outcome == history.OK { // a lost EXEC answers nothing
				s.Result = history.FromResult(results[j])
			}
			o.Txn = append(o.Txn, s)
		}
		if outcome != history.OK {
			o.Result = history.Result{}
		}
		h.Ops = append(h.Ops, o)
	}
	return h
}

// A large serial history is accepted by both checkers, on components, with
// few configurations per unit; one changed answer in it is caught, and the
// report names the component holding it.
func TestSerializableLargeRandom(t *testing.T) {
	const units, keys, perGroup = 2000, 50, 5
	h := randomSerialHistory(rand.New(rand.NewSource(7)), units, keys, perGroup)
	plain, strict := verdicts(t, h, Options{})
	for _, r := range []*Report{plain, strict} {
		if r.Result != Ok {
			t.Fatalf("%s: %s", r.Guarantee, r.serializableString())
		}
		if r.Partitions != keys/perGroup {
			t.Errorf("%s: %d components, want %d", r.Guarantee, r.Partitions, keys/perGroup)
		}
		// Program order leaves more orders open than real time does.
		perUnit := 2
		if r.Guarantee == GuaranteeSerializable {
			perUnit = 10
		}
		if r.States > perUnit*r.Ops {
			t.Errorf("%s: %d configurations for %d units: the memo or the reductions stopped working", r.Guarantee, r.States, r.Ops)
		}
		t.Logf("%s (%d configurations)", r.serializableString(), r.States)
	}
	// Change the last answered GET of a committed unit to a value never written.
	for i := len(h.Ops) - 1; i >= 0; i-- {
		o := &h.Ops[i]
		if o.Outcome == history.OK && o.Kind == "get" && o.Result.Type == "bytes" {
			o.Result.Bytes = "never written"
			want := "(default)/k" // the group's first key names the component
			plain, strict := verdicts(t, h, Options{})
			for _, r := range []*Report{plain, strict} {
				if r.Result != Illegal || !strings.HasPrefix(r.FailedPartition, want) || !strings.Contains(r.Detail, `"never written"`) {
					t.Errorf("%s: changed op %d: %s", r.Guarantee, i, r.serializableString())
				}
			}
			return
		}
	}
	t.Fatal("no GET to change")
}

// bruteSerializable decides a tiny history by trying every order of every
// subset of its maybe-applied units under the model's constraints, with no
// memo, reduction or components. It is the reference the search is
// compared with.
func bruteSerializable(t *testing.T, h *history.History, strict bool) bool {
	c := &srCheck{strict: strict, nsIdx: map[string]int{}, objIdx: map[string]int{}}
	if err := c.build(h, &Report{}); err != nil {
		t.Fatal(err)
	}
	us := c.units
	applied := make([]bool, len(us))
	before := func(a, b *srUnit) bool { // a must precede b
		if a.maybe {
			return false
		}
		if strict {
			return a.ret < b.call
		}
		return a.proc == b.proc && (a.call < b.call || a.call == b.call && a.orig < b.orig)
	}
	var try func(st service.State, left int) bool
	try = func(st service.State, left int) bool {
		if left == 0 {
			return true
		}
		for i := range us {
			if applied[i] {
				continue
			}
			ready := true
			for j := range us {
				if !applied[j] && j != i && before(&us[j], &us[i]) {
					ready = false
				}
			}
			if !ready {
				continue
			}
			next := st.(*service.KVState).Clone()
			fits := true
			for _, o := range us[i].ops {
				if got := history.FromResult(next.Apply(o.op)); o.check && !got.Equal(o.res) {
					fits = false
					break
				}
			}
			if !fits {
				continue
			}
			applied[i] = true
			d := 1
			if us[i].maybe {
				d = 0
			}
			if try(next, left-d) {
				applied[i] = false
				return true
			}
			applied[i] = false
		}
		return false
	}
	req := 0
	for _, u := range us {
		if !u.maybe {
			req++
		}
	}
	return try(service.KV{}.NewState(), req)
}

// The search agrees with the brute-force reference on small random
// histories, serial ones with some answers changed.
func TestSerializableMatchesBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(3))
	legal, illegal := 0, 0
	for n := 0; n < 400; n++ {
		h := randomSerialHistory(rng, 3+rng.Intn(4), 3, 3)
		for i := range h.Ops { // squeeze the intervals so that units overlap more
			h.Ops[i].Call /= 3
			if h.Ops[i].Outcome != history.Unknown {
				h.Ops[i].Return /= 3
			}
			if h.Ops[i].Return < h.Ops[i].Call {
				h.Ops[i].Return = h.Ops[i].Call
			}
		}
		if rng.Intn(2) == 0 { // change one answer
			for try := 0; try < 10; try++ {
				o := &h.Ops[rng.Intn(len(h.Ops))]
				if len(o.Txn) > 0 {
					o = &o.Txn[rng.Intn(len(o.Txn))]
				}
				if o.Result.Type == "bytes" || o.Result.Type == "nil" {
					o.Result = history.Result{Type: "bytes", Bytes: strconv.Itoa(rng.Intn(5))}
					break
				}
				if o.Result.Type == "int" {
					o.Result.Int += int64(1 - 2*rng.Intn(2))
					break
				}
			}
		}
		for _, strict := range []bool{false, true} {
			want := bruteSerializable(t, h, strict)
			r, err := serializable(h, Options{}, strict)
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Result == Ok; got != want {
				t.Fatalf("history %d strict=%v: search says %s, brute force %v\n%s\n%+v", n, strict, r.Result, want, r.serializableString(), h.Ops)
			}
			if want {
				legal++
			} else {
				illegal++
			}
		}
	}
	t.Logf("%d legal, %d illegal verdicts agree", legal, illegal)
	if legal < 100 || illegal < 100 {
		t.Errorf("too few of one kind: %d legal, %d illegal", legal, illegal)
	}
}

func BenchmarkSerializableLargeRandom(b *testing.B) {
	h := randomSerialHistory(rand.New(rand.NewSource(7)), 2000, 50, 5)
	for _, strict := range []bool{false, true} {
		b.Run(fmt.Sprintf("strict=%v", strict), func(b *testing.B) {
			var r *Report
			for i := 0; i < b.N; i++ {
				r, _ = serializable(h, Options{}, strict)
			}
			b.ReportMetric(float64(r.States), "configurations")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(r.Ops), "ns/unit")
		})
	}
	// One component: every unit may touch every key. The search is
	// exponential in the same-key orders it cannot tell apart before a
	// read resolves them, so a single component is much dearer per unit.
	for _, n := range []int{250, 500} {
		h1 := randomSerialHistory(rand.New(rand.NewSource(7)), n, 50, 50)
		b.Run(fmt.Sprintf("one-component/units=%d/strict=true", n), func(b *testing.B) {
			var r *Report
			for i := 0; i < b.N; i++ {
				r, _ = StrictSerializable(h1, Options{})
			}
			b.ReportMetric(float64(r.States), "configurations")
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/float64(r.Ops), "ns/unit")
		})
	}
}
