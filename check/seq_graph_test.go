package check

import (
	"fmt"
	"math/rand"
	"strings"
	"testing"

	"github.com/synod-dev/synod/history"
)

// The constraint graph proves violations without a search: its detail
// names the cycle, or the read nothing can satisfy.
func TestSequentialGraphViolations(t *testing.T) {
	cases := []struct {
		name, want string
		ops        []history.Op
	}{
		{"a value read back after it was overwritten", "a cycle", []history.Op{
			hset(1, 0, 1, "x", "a"), hset(1, 2, 3, "x", "b"),
			hget(2, 0, 1, "x", sp("b")), hget(2, 2, 3, "x", sp("a")),
		}},
		{"a value nobody wrote", "no operation of the history writes", []history.Op{
			hget(1, 0, 1, "x", sp("ghost")),
		}},
		{"absence after a set no delete can undo", "undoes it", []history.Op{
			hop(1, 0, 1, "del", "x", nil, resInt(0)), hset(1, 2, 3, "x", "a"), hget(1, 4, 5, "x", nil),
		}},
		{"presence after a delete no set can undo", "undoes it", []history.Op{
			hset(1, 0, 1, "x", "a"), hop(1, 2, 3, "del", "x", nil, resInt(1)), hop(1, 4, 5, "exists", "x", nil, resInt(1)),
		}},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			r := seqVerdict(t, c.ops, Options{})
			if r.Result != Illegal || !strings.Contains(r.Detail, c.want) {
				t.Errorf("%s, want Illegal with %q: %s", r.Result, c.want, r)
			}
			if r.States != 0 {
				t.Errorf("the graph alone should decide, but the search explored %d configurations", r.States)
			}
			if bruteSC(t, &history.History{Ops: c.ops}) {
				t.Error("brute force finds an order")
			}
		})
	}
}

// randomUniqueHistory returns a history of 2–3 processes of 1–4 operations
// (randomUniqueSized) over keys x and y
// whose SET values are all distinct (the case the constraint graph
// reasons about). It is generated from a real sequential execution (a
// random interleaving; unknown writes that landed or not), and with
// probability 1/2 perturbed: one read's result changed, or two adjacent
// operations of a process swapped.
func randomUniqueHistory(rng *rand.Rand) []history.Op { return randomUniqueSized(rng, 2, 3, 1, 4) }

// randomUniqueSized is randomUniqueHistory with minProcs..maxProcs
// processes of minOps..maxOps operations each.
func randomUniqueSized(rng *rand.Rand, minProcs, maxProcs, minOps, maxOps int) []history.Op {
	procs := minProcs + rng.Intn(maxProcs-minProcs+1)
	left := make([]int, procs)
	for p := range left {
		left[p] = minOps + rng.Intn(maxOps-minOps+1)
	}
	state := map[string]string{}
	byProc := make([][]history.Op, procs)
	for step := 0; ; step++ {
		var live []int
		for p, n := range left {
			if n > 0 {
				live = append(live, p)
			}
		}
		if len(live) == 0 {
			break
		}
		p := live[rng.Intn(len(live))]
		left[p]--
		key := []string{"x", "y"}[rng.Intn(2)]
		call := int64(len(byProc[p]) * 10)
		var o history.Op
		cur, present := state[key]
		switch rng.Intn(6) {
		case 0, 1:
			val := fmt.Sprintf("v%d", step)
			o = hset(p+1, call, call+5, key, val)
			if rng.Intn(4) == 0 {
				o.Outcome, o.Result = history.Unknown, history.Result{}
				if rng.Intn(2) == 0 {
					break // never landed
				}
			}
			state[key] = val
		case 2:
			n := int64(0)
			if present {
				n = 1
			}
			o = hop(p+1, call, call+5, "del", key, nil, resInt(n))
			delete(state, key)
		case 3:
			n := int64(0)
			if present {
				n = 1
			}
			o = hop(p+1, call, call+5, "exists", key, nil, resInt(n))
		default:
			if present {
				o = hget(p+1, call, call+5, key, sp(cur))
			} else {
				o = hget(p+1, call, call+5, key, nil)
			}
		}
		byProc[p] = append(byProc[p], o)
	}
	for perturb := rng.Intn(2) * (1 + rng.Intn(2)); perturb > 0; perturb-- {
		p := rng.Intn(procs)
		ops := byProc[p]
		i := rng.Intn(len(ops))
		if ops[i].Kind == "exists" {
			ops[i].Result.Int = 1 - ops[i].Result.Int
		} else if rng.Intn(2) == 0 && i+1 < len(ops) {
			ops[i].Kind, ops[i+1].Kind = ops[i+1].Kind, ops[i].Kind
			ops[i].Key, ops[i+1].Key = ops[i+1].Key, ops[i].Key
			ops[i].Args, ops[i+1].Args = ops[i+1].Args, ops[i].Args
			ops[i].Outcome, ops[i+1].Outcome = ops[i+1].Outcome, ops[i].Outcome
			ops[i].Result, ops[i+1].Result = ops[i+1].Result, ops[i].Result
		} else if ops[i].Kind == "get" {
			var vals []string
			for _, q := range byProc {
				for _, o := range q {
					if o.Kind == "set" && o.Key == ops[i].Key {
						vals = append(vals, o.Args[0])
					}
				}
			}
			if len(vals) > 0 && rng.Intn(3) > 0 {
				ops[i].Result = resBytes(vals[rng.Intn(len(vals))])
			} else {
				ops[i].Result = resNil
			}
		}
	}
	var all []history.Op
	for _, ops := range byProc {
		all = append(all, ops...)
	}
	return all
}

// Random tiny histories (2–3 processes, 1–4 operations each) with distinct written values (the graph's case):
// the checker agrees with brute force on every one, valid or perturbed.
func TestSequentialAgreesWithBruteForceUnique(t *testing.T) {
	rng := rand.New(rand.NewSource(2))
	counts := map[string]int{}
	byGraph := 0
	for i := 0; i < 4000; i++ {
		ops := randomUniqueHistory(rng)
		h := &history.History{Ops: ops}
		opt := Options{IgnoreDelCount: i%2 == 1} // register protocols' DEL replies are not checked
		r, err := Sequential(h, opt)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteSCOpt(t, h, opt)
		counts[r.Result]++
		if r.Result == Illegal && r.States == 0 {
			byGraph++
		}
		if (r.Result == Ok) != want || r.Result == Unknown {
			t.Fatalf("history %d (IgnoreDelCount %v): checker says %s, brute force says SC=%v\n%s\n%+v", i, opt.IgnoreDelCount, r.Result, want, r, ops)
		}
	}
	if counts[Ok] < 1000 || counts[Illegal] < 300 || byGraph < 100 {
		t.Errorf("unbalanced sample: %v, %d decided by the graph alone", counts, byGraph)
	}
	t.Logf("verdicts: %v; %d violations proved by the graph alone", counts, byGraph)
}

// Medium random histories (3–4 processes, 3–6 operations each, distinct
// written values, half with DEL replies unchecked): deep enough for the
// search's pruning (starved reads of absence or presence, broken values)
// to cut branches; the checker agrees with brute force on every one.
func TestSequentialAgreesWithBruteForceMedium(t *testing.T) {
	rng := rand.New(rand.NewSource(5))
	counts := map[string]int{}
	for i := 0; i < 800; i++ {
		ops := randomUniqueSized(rng, 3, 4, 3, 6)
		h := &history.History{Ops: ops}
		opt := Options{IgnoreDelCount: i%2 == 1}
		r, err := Sequential(h, opt)
		if err != nil {
			t.Fatal(err)
		}
		want := bruteSCOpt(t, h, opt)
		counts[r.Result]++
		if (r.Result == Ok) != want || r.Result == Unknown {
			t.Fatalf("history %d (IgnoreDelCount %v): checker says %s, brute force says SC=%v\n%s\n%+v",
				i, opt.IgnoreDelCount, r.Result, want, r, ops)
		}
	}
	if counts[Ok] < 500 || counts[Illegal] < 50 {
		t.Errorf("unbalanced sample: %v", counts)
	}
	t.Logf("verdicts: %v", counts)
}

// The search's pruning at a write (seq_prune.go): applying the SET first
// is a dead end exactly when the reads it leaves behind cannot be served.
func TestSequentialPruneAtWrite(t *testing.T) {
	del := func(proc int, call int64) history.Op { return hop(proc, call, call+1, "del", "x", nil, resInt(1)) }
	cases := []struct {
		name  string
		ops   []history.Op
		alive bool
	}{
		{"a read of absence whose only DEL follows it is starved", []history.Op{
			hset(1, 0, 1, "x", "a"),
			hget(2, 0, 1, "x", nil), del(2, 2),
		}, false},
		{"a DEL of another process may still come between", []history.Op{
			hset(1, 0, 1, "x", "a"),
			hget(2, 0, 1, "x", nil),
			del(3, 0),
		}, true},
		{"a read of absence that must precede a read of the value breaks it", []history.Op{
			hset(1, 0, 1, "x", "a"),
			hget(2, 0, 1, "x", nil), hget(2, 2, 3, "x", sp("a")),
			del(3, 10),
		}, false},
		{"a read of absence after the value's reads does not", []history.Op{
			hset(1, 0, 1, "x", "a"),
			hget(2, 0, 1, "x", sp("a")), hget(2, 2, 3, "x", nil),
			del(3, 10),
		}, true},
	}
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			h := &history.History{Ops: c.ops}
			r := &Report{opt: Options{}}
			s, err := r.buildSequential(h)
			if err != nil {
				t.Fatal(err)
			}
			if v := s.buildGraph(h); v != "" {
				t.Fatal(v)
			}
			s.counters()
			for _, o := range s.all {
				if o.kind == scSet {
					ok, next := s.step(o)
					if _, alive := s.applyWrite(o, next); !ok || alive != c.alive {
						t.Errorf("SET applied first: alive %v, want %v", alive, c.alive)
					}
				}
			}
			if !bruteSC(t, h) {
				t.Error("brute force finds no order: the case should be valid")
			}
		})
	}
}
