package check

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/history"
)

// hop builds one history operation: kind key [arg] -> result, at [call, ret].
func hop(proc int, call, ret int64, kind, key string, args []string, res history.Result) history.Op {
	return history.Op{Process: proc, Kind: kind, Key: key, Args: args, Call: call, Return: ret, Outcome: history.OK, Result: res}
}

func hset(proc int, call, ret int64, key, val string) history.Op {
	return hop(proc, call, ret, "set", key, []string{val}, resOK)
}

func hget(proc int, call, ret int64, key string, val *string) history.Op {
	r := resNil
	if val != nil {
		r = resBytes(*val)
	}
	return hop(proc, call, ret, "get", key, nil, r)
}

func sp(s string) *string { return &s }

func seqVerdict(t *testing.T, ops []history.Op, opt Options) *Report {
	t.Helper()
	r, err := Sequential(&history.History{Ops: ops}, opt)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestSequentialHandBuilt(t *testing.T) {
	unknownSet := func(proc int, call int64, key, val string) history.Op {
		o := hset(proc, call, 0, key, val)
		o.Outcome, o.Result = history.Unknown, history.Result{}
		return o
	}
	cases := []struct {
		name     string
		ops      []history.Op
		seq, lin string
	}{
		{"stale read after a completed write: SC, not linearizable", []history.Op{
			hset(1, 0, 10, "x", "1"),
			hget(2, 20, 30, "x", nil),
		}, Ok, Illegal},
		{"Dekker: both read the other's key as absent", []history.Op{
			hset(1, 0, 10, "x", "1"), hget(1, 11, 20, "y", nil),
			hset(2, 0, 10, "y", "1"), hget(2, 11, 20, "x", nil),
		}, Illegal, Illegal},
		{"IRIW: every key alone is SC, the whole is not", []history.Op{
			hset(1, 0, 10, "x", "1"),
			hset(2, 0, 10, "y", "1"),
			hget(3, 0, 5, "x", sp("1")), hget(3, 6, 9, "y", nil),
			hget(4, 0, 5, "y", sp("1")), hget(4, 6, 9, "x", nil),
		}, Illegal, Illegal},
		{"program order: two writes seen in the opposite order", []history.Op{
			hset(1, 0, 1, "x", "1"), hset(1, 2, 3, "x", "2"),
			hget(2, 0, 100, "x", sp("2")), hget(2, 101, 200, "x", sp("1")),
		}, Illegal, Illegal},
		{"unknown write may land after its process's later ops", []history.Op{
			unknownSet(1, 0, "x", "1"), hget(1, 50, 60, "x", nil),
			hget(2, 70, 80, "x", sp("1")),
		}, Ok, Ok},
		{"unknown write may never land", []history.Op{
			unknownSet(1, 0, "x", "1"),
			hget(2, 70, 80, "x", nil), hget(2, 90, 95, "x", nil),
		}, Ok, Ok},
		{"unknown write cannot land before its program predecessors", []history.Op{
			hget(1, 0, 10, "x", nil), hset(1, 20, 30, "x", "2"), unknownSet(1, 40, "x", "1"),
			hget(2, 0, 5, "x", sp("1")), hget(2, 6, 7, "x", nil),
		}, Illegal, Illegal},
		{"delete, exists and a stale reader", []history.Op{
			hset(1, 0, 1, "x", "a"), hop(1, 2, 3, "del", "x", nil, resInt(1)), hop(1, 4, 5, "exists", "x", nil, resInt(0)),
			hop(2, 10, 11, "exists", "x", nil, resInt(1)), hget(2, 12, 13, "x", sp("a")),
		}, Ok, Illegal},
		{"a reader sees a value, its delete, then the value again", []history.Op{
			hset(1, 0, 1, "x", "a"), hop(1, 2, 3, "del", "x", nil, resInt(1)),
			hget(2, 10, 11, "x", sp("a")), hget(2, 12, 13, "x", nil), hget(2, 14, 15, "x", sp("a")),
		}, Illegal, Illegal},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := seqVerdict(t, c.ops, Options{})
			if r.Result != c.seq {
				t.Errorf("Sequential: %s, want %s: %s", r.Result, c.seq, r)
			}
			if r.Result == Illegal && !strings.Contains(r.String(), "NOT sequentially consistent") {
				t.Errorf("report does not say so: %s", r)
			}
			l, err := Linearizable(&history.History{Ops: c.ops}, Options{})
			if err != nil {
				t.Fatal(err)
			}
			if l.Result != c.lin {
				t.Errorf("Linearizable: %s, want %s", l.Result, c.lin)
			}
		})
	}
}

func TestSequentialBadInput(t *testing.T) {
	if _, err := Sequential(nil, Options{}); err == nil {
		t.Error("nil history accepted")
	}
	overlap := []history.Op{hset(1, 0, 10, "x", "1"), hget(1, 5, 20, "x", nil)}
	if _, err := Sequential(&history.History{Ops: overlap}, Options{}); err == nil || !strings.Contains(err.Error(), "not sequential") {
		t.Errorf("overlapping ops of one process: %v", err)
	}
	// Other services go to the generic search (seq_generic.go); a
	// nondeterministic or unknown one has no sequential specification.
	for _, svc := range []string{"matchmaker", "nosuch"} {
		if _, err := Sequential(&history.History{}, Options{Services: map[string]string{"c": svc}}); err == nil {
			t.Errorf("%s namespace accepted", svc)
		}
	}
	if r, err := Sequential(&history.History{}, Options{Services: map[string]string{"c": "counter"}}); err != nil || r.Result != Ok {
		t.Errorf("counter namespace, empty history: %v %v", r, err)
	}
	bad := []history.Op{hop(1, 0, 1, "set", "x", nil, resOK)} // set without a value, claimed OK
	if _, err := Sequential(&history.History{Ops: bad}, Options{}); err == nil {
		t.Error("refused op claimed OK accepted")
	}
}

func TestSequentialDelCount(t *testing.T) {
	ops := []history.Op{hop(1, 0, 1, "del", "x", nil, resInt(1))} // the key never existed
	if r := seqVerdict(t, ops, Options{}); r.Result != Illegal {
		t.Errorf("DEL -> 1 on an absent key: %s", r.Result)
	}
	if r := seqVerdict(t, ops, Options{IgnoreDelCount: true}); r.Result != Ok {
		t.Errorf("IgnoreDelCount: %s", r.Result)
	}
}

// A bound stops the search with Unknown, never with a wrong verdict.
func TestSequentialBound(t *testing.T) {
	// Many processes write distinct values; one reader sees an impossible
	// sequence at the end, so proving illegality needs a large search.
	var ops []history.Op
	for p := 1; p <= 4; p++ {
		for j := 0; j < 4; j++ {
			ops = append(ops, hset(p, int64(j*10), int64(j*10+5), fmt.Sprintf("k%d", j%2), fmt.Sprintf("p%d-%d", p, j)))
		}
	}
	ops = append(ops, hget(99, 0, 1, "k0", sp("p1-2")), hget(99, 2, 3, "k0", sp("p1-0")))
	// An APPEND (on a key of its own) turns the constraint graph off, so
	// only the search can decide.
	ops = append(ops, hop(98, 0, 1, "append", "k9", []string{"z"}, resInt(1)))
	r := seqVerdict(t, ops, Options{MaxStates: 10})
	if r.Result != Unknown || !strings.Contains(r.Detail, "state limit") {
		t.Errorf("MaxStates 10: %s", r)
	}
	r = seqVerdict(t, ops, Options{})
	if r.Result != Illegal {
		t.Errorf("unbounded: %s", r)
	}
}

// bruteSC decides sequential consistency of a small history by trying every
// interleaving of the processes' programs, with every choice of where (or
// whether) each floating write lands (memoised on the exact configuration,
// nothing else pruned). It is the reference the search is compared with.
func bruteSC(t *testing.T, h *history.History) bool { return bruteSCOpt(t, h, Options{}) }

// bruteSCOpt is bruteSC under opt (IgnoreDelCount).
func bruteSCOpt(t *testing.T, h *history.History, opt Options) bool {
	r := &Report{opt: opt}
	s, err := r.buildSequential(h)
	if err != nil {
		t.Fatal(err)
	}
	for pi := range s.procs { // the reference sees the real values, not the abstraction
		for j := range s.procs[pi] {
			s.procs[pi][j].in.args = h.Ops[s.procs[pi][j].orig].Args
		}
	}
	// Items: every non-float op in program order, and every float op as an
	// optional item constrained to come after its program predecessors.
	// Configurations already tried (positions, pool and state in full) are
	// not tried again.
	seen := map[string]bool{}
	var try func(pos []int, pool []bool, st map[string]kvState, left int) bool
	try = func(pos []int, pool []bool, st map[string]kvState, left int) bool {
		if left == 0 {
			return true
		}
		key := fmt.Sprint(pos, pool, st)
		if seen[key] {
			return false
		}
		seen[key] = true
		for p, ops := range s.procs {
			if pos[p] >= len(ops) {
				continue
			}
			o := ops[pos[p]]
			pos[p]++
			if o.float {
				f := s.procs[p][pos[p]-1].fi
				pool[f] = true
				if try(pos, pool, st, left-1) {
					return true
				}
				pool[f] = false
			} else {
				want, next := applyKV(st[o.key], o.in)
				if want.Equal(o.res) || o.in.kind == "del" && opt.IgnoreDelCount {
					old := st[o.key]
					st[o.key] = next
					if try(pos, pool, st, left-1) {
						return true
					}
					st[o.key] = old
				}
			}
			pos[p]--
		}
		for f, in := range pool {
			if !in {
				continue
			}
			o := s.floats[f]
			old := st[o.key]
			_, next := applyKV(old, o.in)
			pool[f] = false
			st[o.key] = next
			ok := try(pos, pool, st, left)
			st[o.key] = old
			pool[f] = true
			if ok {
				return true
			}
		}
		return false
	}
	return try(make([]int, len(s.procs)), make([]bool, len(s.floats)), map[string]kvState{}, s.total)
}

// Random tiny histories: the search agrees with brute force, both ways.
func TestSequentialAgreesWithBruteForce(t *testing.T) {
	rng := rand.New(rand.NewSource(1))
	counts := map[string]int{}
	for i := 0; i < 3000; i++ {
		var ops []history.Op
		procs := 2 + rng.Intn(2)
		for p := 1; p <= procs; p++ {
			n := 1 + rng.Intn(3)
			for j := 0; j < n; j++ {
				key := []string{"x", "y"}[rng.Intn(2)]
				call, ret := int64(j*10), int64(j*10+5)
				var o history.Op
				switch rng.Intn(5) {
				case 0, 1:
					o = hset(p, call, ret, key, fmt.Sprint(rng.Intn(2)))
					if rng.Intn(5) == 0 {
						o.Outcome = history.Unknown
					}
				case 2:
					o = hop(p, call, ret, "del", key, nil, resInt(int64(rng.Intn(2))))
				default:
					var v *string
					if rng.Intn(3) > 0 {
						v = sp(fmt.Sprint(rng.Intn(2)))
					}
					o = hget(p, call, ret, key, v)
				}
				ops = append(ops, o)
			}
		}
		h := &history.History{Ops: ops}
		r, err := Sequential(h, Options{})
		if err != nil {
			t.Fatal(err)
		}
		want := bruteSC(t, h)
		counts[r.Result]++
		if (r.Result == Ok) != want {
			t.Fatalf("history %d: search says %s, brute force says SC=%v\n%+v", i, r.Result, want, ops)
		}
	}
	if counts[Ok] < 300 || counts[Illegal] < 300 {
		t.Errorf("unbalanced sample: %v", counts)
	}
	t.Logf("verdicts: %v", counts)
}

// A long history produced by a real sequential execution (random
// interleaving, per-process program order, some unknown writes that did or
// did not land) is accepted quickly.
func TestSequentialLargeValid(t *testing.T) {
	ops := largeValidHistory(rand.New(rand.NewSource(7)), 2000)
	start := time.Now()
	r := seqVerdict(t, ops, Options{Timeout: 20 * time.Second})
	if r.Result != Ok {
		t.Fatalf("valid history: %s", r)
	}
	t.Logf("2000 ops: %s (%v, %d states)", r.Result, time.Since(start), r.States)
}

// largeValidHistory returns n operations of 8 processes on 5 keys from a
// real sequential execution (random interleaving, some unknown writes that
// did or did not land).
func largeValidHistory(rng *rand.Rand, n int) []history.Op {
	state := map[string]string{}
	var ops []history.Op
	for i := 0; i < n; i++ {
		p := rng.Intn(8)
		key := fmt.Sprintf("k%d", rng.Intn(5))
		call := int64(i * 10) // ops take effect in the order generated
		var o history.Op
		if rng.Intn(2) == 0 {
			val := fmt.Sprintf("v%d", i)
			o = hset(p, call, call+5, key, val)
			switch rng.Intn(20) {
			case 0: // lost write
				o.Outcome, o.Result = history.Unknown, history.Result{}
			case 1: // landed, but the client saw no reply
				o.Outcome, o.Result = history.Unknown, history.Result{}
				state[key] = val
			default:
				state[key] = val
			}
		} else if v, ok := state[key]; ok {
			o = hget(p, call, call+5, key, sp(v))
		} else {
			o = hget(p, call, call+5, key, nil)
		}
		ops = append(ops, o)
	}
	return ops
}

// BenchmarkSequential checks a valid history of 8 processes and 8,000
// operations (go test ./check -run '^$' -bench Sequential).
func BenchmarkSequential(b *testing.B) {
	h := &history.History{Ops: largeValidHistory(rand.New(rand.NewSource(7)), 8000)}
	for b.Loop() {
		r, err := Sequential(h, Options{})
		if err != nil || r.Result != Ok {
			b.Fatal(err, r)
		}
		b.ReportMetric(float64(r.States), "configurations/op")
	}
}
