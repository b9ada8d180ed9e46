package check

import (
	"math/rand"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Helpers to build histories by hand. Times are arbitrary integers.

var (
	rNil = history.Result{Type: "nil"}
	rOK  = history.Result{Type: "ok"}
)

func rBytes(s string) history.Result { return history.Result{Type: "bytes", Bytes: s} }
func rInt(i int64) history.Result    { return history.Result{Type: "int", Int: i} }
func rErr(s string) history.Result   { return history.Result{Type: "err", Err: s} }

// ok builds an operation that returned res.
func ok(proc int, call, ret int64, res history.Result, kind, key string, args ...string) history.Op {
	return history.Op{Process: proc, Kind: kind, Key: key, Args: args, Call: call, Return: ret,
		Outcome: history.OK, Result: res}
}

// unknown builds an operation whose outcome is unknown.
func unknown(proc int, call int64, kind, key string, args ...string) history.Op {
	return history.Op{Process: proc, Kind: kind, Key: key, Args: args, Call: call, Return: call + 1,
		Outcome: history.Unknown}
}

func in(ns string, o history.Op) history.Op { o.Namespace = ns; return o }

func hist(ops ...history.Op) *history.History { return &history.History{Ops: ops} }

func mustCheck(t *testing.T, h *history.History, opt Options) *Report {
	t.Helper()
	r, err := Linearizable(h, opt)
	if err != nil {
		t.Fatalf("Linearizable: %v", err)
	}
	return r
}

func wantResult(t *testing.T, r *Report, want string) {
	t.Helper()
	if r.Result != want {
		t.Fatalf("result %q, want %q\nreport: %s", r.Result, want, r)
	}
}

// writeHTML writes the report's visualization and returns its text.
func writeHTML(t *testing.T, r *Report) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "h.html")
	if err := r.WriteHTML(path); err != nil {
		t.Fatalf("WriteHTML: %v", err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(b) == 0 {
		t.Fatal("empty HTML file")
	}
	return string(b)
}

func TestConcurrentSetGetLinearizable(t *testing.T) {
	h := hist(
		ok(0, 0, 100, rOK, "set", "x", "1"),
		ok(1, 10, 20, rNil, "get", "x"),        // before the set's linearization point
		ok(2, 30, 40, rBytes("1"), "get", "x"), // after it
		ok(3, 50, 150, rBytes("1"), "get", "x"),
		ok(1, 160, 170, rInt(1), "exists", "x"),
	)
	r := mustCheck(t, h, Options{})
	wantResult(t, r, Ok)
	if r.Ops != 5 || r.Partitions != 1 || r.FailedPartition != "" {
		t.Fatalf("report %+v", r)
	}
	html := writeHTML(t, r)
	if !strings.Contains(html, `EXISTS \"x\"`) {
		t.Fatal("linearizable visualization does not show the operations")
	}
}

func TestStaleReadAfterCompletedWrite(t *testing.T) {
	h := hist(
		ok(0, 0, 10, rOK, "set", "stalekey", "new"),
		ok(1, 20, 30, rNil, "get", "stalekey"),
	)
	r := mustCheck(t, h, Options{})
	wantResult(t, r, Illegal)
	if r.FailedPartition != "(default)/stalekey" {
		t.Fatalf("failed partition %q", r.FailedPartition)
	}
	if !strings.Contains(r.Detail, `GET "stalekey" -> (nil)`) {
		t.Fatalf("detail does not name the offending read: %s", r.Detail)
	}
	if html := writeHTML(t, r); !strings.Contains(html, "stalekey") {
		t.Fatal("HTML does not mention the failing key")
	}
}

func TestNewOldInversion(t *testing.T) {
	// Two sequential reads, both concurrent with one write: the first sees the
	// new value, the second the old one.
	base := []history.Op{
		ok(0, 0, 5, rOK, "set", "x", "old"),
		ok(0, 10, 100, rOK, "set", "x", "new"),
		ok(1, 20, 30, rBytes("new"), "get", "x"),
	}
	r := mustCheck(t, hist(append(base, ok(1, 40, 50, rBytes("old"), "get", "x"))...), Options{})
	wantResult(t, r, Illegal)
	// The same reads in the other order are fine.
	base[2].Result = rBytes("old")
	r = mustCheck(t, hist(append(base, ok(1, 40, 50, rBytes("new"), "get", "x"))...), Options{})
	wantResult(t, r, Ok)
}

func TestUnknownWriteMaybeApplied(t *testing.T) {
	w := unknown(0, 0, "set", "x", "1")
	// Observed by a later read.
	r := mustCheck(t, hist(w, ok(1, 50, 60, rBytes("1"), "get", "x")), Options{})
	wantResult(t, r, Ok)
	if r.MaybeApplied != 1 {
		t.Fatalf("MaybeApplied %d", r.MaybeApplied)
	}
	// Observed by no read.
	r = mustCheck(t, hist(w, ok(1, 50, 60, rNil, "get", "x"), ok(1, 70, 80, rNil, "get", "x")), Options{})
	wantResult(t, r, Ok)
	// Its effect cannot be undone: seen, then not seen, is a violation.
	r = mustCheck(t, hist(w, ok(1, 50, 60, rBytes("1"), "get", "x"), ok(1, 70, 80, rNil, "get", "x")), Options{})
	wantResult(t, r, Illegal)
	// It cannot take effect before it was called.
	r = mustCheck(t, hist(ok(1, 0, 10, rBytes("1"), "get", "x"), unknown(0, 20, "set", "x", "1")), Options{})
	wantResult(t, r, Illegal)
}

func TestAcknowledgedWriteLost(t *testing.T) {
	h := hist(
		ok(0, 0, 10, rOK, "set", "x", "1"),
		ok(0, 20, 30, rOK, "set", "x", "2"),
		ok(1, 40, 50, rBytes("1"), "get", "x"),
	)
	wantResult(t, mustCheck(t, h, Options{}), Illegal)
}

func TestPartitionsByKey(t *testing.T) {
	// Each key alone is linearizable; a single-register model would not be
	// (get y would have to return "1").
	h := hist(
		ok(0, 0, 10, rOK, "set", "x", "1"),
		ok(1, 20, 30, rNil, "get", "y"),
		ok(1, 40, 50, rBytes("1"), "get", "x"),
		in("other", ok(2, 60, 70, rNil, "get", "x")), // same key, other namespace
	)
	r := mustCheck(t, h, Options{})
	wantResult(t, r, Ok)
	if r.Partitions != 3 {
		t.Fatalf("partitions %d, want 3", r.Partitions)
	}

	// A violation on one key is attributed to that key only.
	h.Ops = append(h.Ops, ok(3, 80, 90, rNil, "get", "x"))
	r = mustCheck(t, h, Options{})
	wantResult(t, r, Illegal)
	if r.FailedPartition != "(default)/x" || len(r.FailedPartitions) != 1 {
		t.Fatalf("failed %q %v", r.FailedPartition, r.FailedPartitions)
	}
	html := writeHTML(t, r)
	if !strings.Contains(html, `\"x\"`) || strings.Contains(html, `\"y\"`) {
		t.Fatal("HTML should show the failing partition only")
	}
}

func TestCounter(t *testing.T) {
	opt := Options{Services: map[string]string{"c": "counter"}}
	ops := []history.Op{
		in("c", ok(0, 0, 100, rInt(5), "add", "", "5")),
		in("c", ok(1, 10, 90, rInt(8), "add", "ignored-key", "3")), // ordered after the first add
		in("c", ok(2, 20, 30, rInt(0), "read", "")),
		in("c", ok(2, 110, 120, rInt(8), "read", "")),
	}
	r := mustCheck(t, hist(ops...), opt)
	wantResult(t, r, Ok)
	if r.Partitions != 1 {
		t.Fatalf("a counter namespace is one object; got %d partitions", r.Partitions)
	}
	ops[3].Result = rInt(5) // loses the second add
	r = mustCheck(t, hist(ops...), opt)
	wantResult(t, r, Illegal)
	if r.FailedPartition != "c" {
		t.Fatalf("failed partition %q", r.FailedPartition)
	}
	// Without the service mapping the ops are not valid KV ops.
	if _, err := Linearizable(hist(ops...), Options{}); err == nil {
		t.Fatal("counter ops in a KV namespace should be rejected")
	}
}

func TestSetNXXX(t *testing.T) {
	ops := []history.Op{
		ok(0, 0, 10, rNil, "set", "x", "a", "xx"), // absent: XX fails
		ok(0, 20, 30, rOK, "set", "x", "a", "nx"),
		ok(0, 40, 50, rNil, "set", "x", "b", "nx"), // present: NX fails
		ok(0, 60, 70, rOK, "set", "x", "c", "xx"),
		ok(0, 80, 90, rBytes("c"), "get", "x"),
	}
	wantResult(t, mustCheck(t, hist(ops...), Options{}), Ok)
	bad := append([]history.Op(nil), ops...)
	bad[2].Result = rOK // NX succeeded on a present key
	wantResult(t, mustCheck(t, hist(bad...), Options{}), Illegal)
	bad = append([]history.Op(nil), ops...)
	bad[0].Result = rOK // XX succeeded on an absent key
	wantResult(t, mustCheck(t, hist(bad...), Options{}), Illegal)
}

func TestIgnoreDelCount(t *testing.T) {
	ops := []history.Op{
		ok(0, 0, 10, rOK, "set", "x", "1"),
		ok(0, 20, 30, rInt(0), "del", "x"), // a register protocol's count
		ok(0, 40, 50, rNil, "get", "x"),
	}
	wantResult(t, mustCheck(t, hist(ops...), Options{}), Illegal)
	r := mustCheck(t, hist(ops...), Options{IgnoreDelCount: true})
	wantResult(t, r, Ok)
	// The delete still takes effect.
	ops[2].Result = rBytes("1")
	wantResult(t, mustCheck(t, hist(ops...), Options{IgnoreDelCount: true}), Illegal)
}

func TestOtherKVOps(t *testing.T) {
	ops := []history.Op{
		ok(0, 0, 10, rInt(0), "cas", "x", "a", "b"), // absent
		ok(0, 20, 30, rInt(3), "append", "x", "abc"),
		ok(0, 40, 50, rInt(1), "cas", "x", "abc", "7"),
		ok(0, 60, 70, rInt(10), "incr", "x", "3"),
		ok(0, 80, 90, rInt(1), "del", "x"),
		ok(0, 100, 110, rInt(-2), "incr", "x", "-2"),
		ok(0, 120, 130, rBytes("-2"), "get", "x"),
	}
	wantResult(t, mustCheck(t, hist(ops...), Options{}), Ok)
	for i := range ops {
		bad := append([]history.Op(nil), ops...)
		bad[i].Result.Int++
		if bad[i].Result.Type == "bytes" {
			bad[i].Result.Bytes += "!"
		}
		if r := mustCheck(t, hist(bad...), Options{}); r.Result != Illegal {
			t.Errorf("op %d with a wrong reply: %s", i, r)
		}
	}
}

func TestOutcomeRules(t *testing.T) {
	// A write answered by an error may have taken effect.
	r := mustCheck(t, hist(
		ok(0, 0, 10, rErr("no quorum"), "set", "x", "1"),
		ok(1, 20, 30, rBytes("1"), "get", "x"),
	), Options{})
	wantResult(t, r, Ok)
	if r.MaybeApplied != 1 {
		t.Fatalf("MaybeApplied %d", r.MaybeApplied)
	}
	// A read answered by an error says nothing; an unknown read neither.
	r = mustCheck(t, hist(
		ok(0, 0, 10, rOK, "set", "x", "1"),
		ok(1, 20, 30, rErr("no quorum"), "get", "x"),
		unknown(1, 40, "get", "x"),
	), Options{})
	wantResult(t, r, Ok)
	if r.Dropped != 2 || r.Ops != 1 {
		t.Fatalf("dropped %d ops %d", r.Dropped, r.Ops)
	}
	// A failed write is known not to have happened.
	failed := ok(0, 0, 10, rErr("refused"), "set", "x", "1")
	failed.Outcome = history.Failed
	wantResult(t, mustCheck(t, hist(failed, ok(1, 20, 30, rBytes("1"), "get", "x")), Options{}), Illegal)
	// Read modes do not exempt a read.
	stale := ok(1, 20, 30, rNil, "get", "x")
	stale.ReadMode = "local"
	wantResult(t, mustCheck(t, hist(ok(0, 0, 10, rOK, "set", "x", "1"), stale), Options{}), Illegal)
}

func TestBadInput(t *testing.T) {
	cases := map[string]struct {
		h   *history.History
		opt Options
	}{
		"unknown service":     {hist(), Options{Services: map[string]string{"a": "nosuch"}}},
		"bad result type":     {hist(ok(0, 0, 1, history.Result{Type: "weird"}, "get", "x")), Options{}},
		"invalid op with ok":  {hist(ok(0, 0, 1, rOK, "set", "x")), Options{}},
		"unknown kind":        {hist(ok(0, 0, 1, rOK, "frob", "x")), Options{}},
		"returns before call": {hist(ok(0, 5, 1, rOK, "set", "x", "1")), Options{}},
	}
	for name, c := range cases {
		if _, err := Linearizable(c.h, c.opt); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
	// A refused op (error reply) is dropped, not an error.
	r := mustCheck(t, hist(ok(0, 0, 1, rErr("syntax error"), "set", "x")), Options{})
	if r.Dropped != 1 || r.Ops != 0 || r.Result != Ok {
		t.Fatalf("report %+v", r)
	}
}

func TestTimeout(t *testing.T) {
	h := hist(ok(0, 0, 10, rOK, "set", "x", "1"), ok(0, 0, 10, rOK, "set", "y", "1"))
	r := mustCheck(t, h, Options{Timeout: time.Nanosecond})
	wantResult(t, r, Unknown)
	if len(r.Undecided) == 0 {
		t.Fatal("no undecided partitions")
	}
}

// TestModelMatchesService runs random operations through service.KVState and
// checks that the model predicts every reply, error replies included.
func TestModelMatchesService(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	vals := []string{"", "a", "7", "-3", "9223372036854775807", "xyz"}
	pick := func() string { return vals[rng.Intn(len(vals))] }
	kinds := []string{"get", "exists", "set", "del", "cas", "append", "incr"}
	for run := 0; run < 50; run++ {
		st := service.KV{}.NewState()
		var ms kvState
		for step := 0; step < 40; step++ {
			op := service.Op{Kind: kinds[rng.Intn(len(kinds))], Key: "k"}
			var args []string
			switch op.Kind {
			case "set":
				args = []string{pick()}
				if c := rng.Intn(3); c > 0 {
					args = append(args, []string{"nx", "xx"}[c-1])
				}
			case "cas":
				args = []string{pick(), pick()}
			case "append":
				args = []string{pick()}
			case "incr":
				args = []string{strconv.Itoa(rng.Intn(11) - 5)}
				if rng.Intn(10) == 0 {
					args[0] = "9223372036854775807"
				}
			}
			for _, a := range args {
				op.Args = append(op.Args, []byte(a))
			}
			want := history.FromResult(st.Apply(op))
			var got history.Result
			got, ms = applyKV(ms, input{service: "kv", kind: op.Kind, key: "k", args: args})
			if !got.Equal(want) {
				t.Fatalf("run %d step %d: %s: model %+v, service %+v", run, step, op, got, want)
			}
		}
	}
}

// TestSequentialHistories records random sequential runs of the real service
// over several keys: they must check Ok, and corrupting one read must not.
func TestSequentialHistories(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	keys := []string{"a", "b", "c"}
	for run := 0; run < 20; run++ {
		st := service.KV{}.NewState()
		var h history.History
		var reads []int
		for i := 0; i < 60; i++ {
			op := service.Op{Key: keys[rng.Intn(len(keys))]}
			switch rng.Intn(4) {
			case 0:
				op.Kind = "get"
			case 1:
				op.Kind = "del"
			default:
				op.Kind = "set"
				op.Args = [][]byte{[]byte(strconv.Itoa(rng.Intn(4)))}
			}
			res := history.FromResult(st.Apply(op))
			if op.Kind == "get" {
				reads = append(reads, len(h.Ops))
			}
			o := ok(rng.Intn(3), int64(10*i), int64(10*i+5), res, op.Kind, op.Key)
			for _, a := range op.Args {
				o.Args = append(o.Args, string(a))
			}
			h.Ops = append(h.Ops, o)
		}
		wantResult(t, mustCheck(t, &h, Options{}), Ok)
		if len(reads) == 0 {
			continue
		}
		i := reads[rng.Intn(len(reads))]
		if h.Ops[i].Result.Type == "nil" {
			h.Ops[i].Result = rBytes("nope")
		} else {
			h.Ops[i].Result = rNil
		}
		r := mustCheck(t, &h, Options{})
		wantResult(t, r, Illegal)
		if want := "(default)/" + h.Ops[i].Key; r.FailedPartition != want {
			t.Fatalf("failed partition %q, want %q", r.FailedPartition, want)
		}
	}
}

func TestLoadSavedHistory(t *testing.T) {
	now := int64(0)
	rec := history.NewRecorder(func() int64 { now += 10; return now })
	rec.SetMeta("protocol", "test")
	p := rec.Invoke(0, "ns1", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v1")}}, "")
	p.Complete(service.OK())
	p = rec.Invoke(1, "ns1", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v2")}}, "")
	p.Unknown()
	p = rec.Invoke(2, "ns1", service.Op{Kind: "get", Key: "k"}, "linearizable")
	p.Complete(service.Bytes([]byte("v2")))
	p = rec.Invoke(2, "ns1", service.Op{Kind: "get", Key: "k"}, "linearizable")
	p.Complete(service.Bytes([]byte("v1")))

	path := filepath.Join(t.TempDir(), "history.json")
	if err := rec.History().Save(path); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(path)
	if err != nil {
		t.Fatal(err)
	}
	r := mustCheck(t, h, Options{})
	// v2 was seen, so the unknown set happened; v1 afterwards is a violation.
	wantResult(t, r, Illegal)
	if r.FailedPartition != "ns1/k" || r.Ops != 4 || r.MaybeApplied != 1 {
		t.Fatalf("report %+v", r)
	}
	if html := writeHTML(t, r); !strings.Contains(html, `\"k\"`) || !strings.Contains(html, "ns1/k") {
		t.Fatal("HTML does not mention the failing key")
	}
}
