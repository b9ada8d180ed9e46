package service

import (
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
)

// xadd is an xadd operation with Redis's default node limits.
func xadd(key string, args ...string) Op {
	return op("xadd", key, append([]string{"100", "4096"}, args...)...)
}

func TestKVStreamBasics(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 5000, `
		xadd s 100 4096 * a 1 => "5000-0"
		xadd s 100 4096 * a 2 => "5000-1"
		xadd s 100 4096 1-1 a 3 => (error) The ID specified in XADD is equal or smaller than the target stream top item
		xadd s 100 4096 5000-* a 3 => "5000-2"
		xadd s 100 4096 9000-* a 4 => "9000-0"
		xlen s => (integer) 4
		xrange s - + => ["5000-0" ["a" "1"] "5000-1" ["a" "2"] "5000-2" ["a" "3"] "9000-0" ["a" "4"]]
		xrange s (5000-0 5000-2 => ["5000-1" ["a" "2"] "5000-2" ["a" "3"]]
		xrevrange s + - count 1 => ["9000-0" ["a" "4"]]
		xrange s - + count 0 => (nil)
		xrange s (18446744073709551615-18446744073709551615 + => (error) invalid start ID for the interval
		xrange s x + => (error) Invalid stream ID specified as stream command argument
		xdel s 5000-1 1-1 => (integer) 1
		xlen s => (integer) 3
		xadd s 100 4096 * b 1 => "9000-1"
		xadd s 100 4096 nomkstream * a => (error) wrong number of arguments for 'xadd' command
		xadd none 100 4096 nomkstream * a 1 => (nil)
		exists none => (integer) 0
		xadd s 100 4096 0-0 a 1 => (error) The ID specified in XADD must be greater than 0-0
		xtrim s 100 maxlen 2 => (integer) 2
		xrange s - + => ["9000-0" ["a" "4"] "9000-1" ["b" "1"]]
		xtrim s 100 minid = 9000-1 => (integer) 1
		xtrim s 100 maxlen 1 limit 3 => (error) syntax error, LIMIT cannot be used without the special ~ option
		xdel s 9000-1 => (integer) 1
		xlen s => (integer) 0
		type s => "stream"
		xsetid s 1-0 => OK
		xadd s 100 4096 1-* x y => "1-1"
		xsetid s 0-5 => (error) The ID specified in XSETID is smaller than the target stream top item
		xsetid nokey 1-0 => (error) no such key
		set str v => OK
		xadd str 100 4096 * a 1 => (error) `+WrongType+`
		xlen str => (error) `+WrongType+`
		xread s 0 0 2 t 0 0 => ["s" ["1-1" ["x" "y"]]]
		xread s 0 0 1 $ => (nil)
		xread str 0 0 2 s 0 0 => (error) `+WrongType+`
		xread str 1 0 2 s 0 0 => ["s" ["1-1" ["x" "y"]]]
	`)
	// XADD * without an ordered time is refused; with one, the time is the
	// operation's, never a clock of the replica.
	if r := s.Apply(xadd("s", "*", "a", "1")); !strings.Contains(r.Err, "need a protocol that orders time") {
		t.Fatalf("xadd * without time: %v", r)
	}
	a, b := newKVState(), newKVState()
	for i := range 50 {
		env := Env{Time: int64(1700000000000+i/7) * 1e6}
		ra, rb := a.ApplyEnv(xadd("k", "*", "f", "v"), env), b.ApplyEnv(xadd("k", "*", "f", "v"), env)
		if !ra.Equal(rb) || !strings.HasPrefix(string(ra.Bytes), fmt.Sprint(1700000000000+i/7)+"-") {
			t.Fatalf("op %d: %v and %v", i, ra, rb)
		}
	}
}

// Approximate trimming removes whole nodes only, as Redis does: the counts
// of Redis's own suite (tests/unit/type/stream.tcl).
func TestKVStreamNodes(t *testing.T) {
	s := newKVState()
	env := Env{Time: 1e12}
	for j := range 1000 {
		f := "xitem"
		if j%10 == 0 {
			f = "yitem"
		}
		s.ApplyEnv(xadd("m", "maxlen", "~", "555", "*", f, fmt.Sprint(j)), env)
	}
	if r := s.Apply(op("xlen", "m")); r.Int != 600 {
		t.Fatalf("MAXLEN ~ 555 over 1000 adds: xlen %d, Redis 600", r.Int)
	}
	s = newKVState()
	for range 100 {
		s.ApplyEnv(op("xadd", "m", "10", "4096", "*", "xitem", "v"), env)
	}
	for _, want := range []int64{71, 62} {
		s.ApplyEnv(op("xadd", "m", "10", "4096", "maxlen", "~", "55", "limit", "30", "*", "xitem", "v"), env)
		if r := s.Apply(op("xlen", "m")); r.Int != want {
			t.Fatalf("MAXLEN ~ 55 LIMIT 30: xlen %d, Redis %d", r.Int, want)
		}
	}
	s = newKVState()
	for range 1000 {
		s.ApplyEnv(xadd("m", "*", "xitem", "v"), env)
	}
	for _, c := range []struct {
		args []string
		want int64
	}{
		{[]string{"maxlen", "666"}, 666}, {[]string{"maxlen", "=", "555"}, 555},
		{[]string{"maxlen", "~", "444"}, 500}, {[]string{"maxlen", "~", "400"}, 400},
	} {
		s.ApplyEnv(op("xtrim", "m", append([]string{"100"}, c.args...)...), env)
		if r := s.Apply(op("xlen", "m")); r.Int != c.want {
			t.Fatalf("xtrim %v: xlen %d, Redis %d", c.args, r.Int, c.want)
		}
	}
	// The byte limit ends nodes too: big values fill a 4096-byte node fast.
	s = newKVState()
	big := strings.Repeat("x", 1000)
	for range 20 {
		s.ApplyEnv(xadd("b", "*", "f", big), env)
	}
	if st, _ := s.stream("b"); len(st.nodes) < 5 {
		t.Fatalf("20 entries of 1000 bytes in %d nodes", len(st.nodes))
	}
}

func TestKVStreamGroups(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 1000, `
		xgroup x create g $ => (error) The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.
		xgroup s create g $ mkstream => OK
		xgroup s create g $ => (error) BUSYGROUP Consumer Group name already exists
		xadd s 100 4096 1-0 a 1 => "1-0"
		xadd s 100 4096 2-0 a 2 => "2-0"
		xadd s 100 4096 3-0 a 3 => "3-0"
		xreadgroup s 0 g alice 0 1 1 > => ["s" ["1-0" ["a" "1"]]]
		xreadgroup s 0 g bob 0 0 1 > => ["s" ["2-0" ["a" "2"] "3-0" ["a" "3"]]]
		xreadgroup s 0 g bob 0 0 1 > => (nil)
		xreadgroup s 0 g bob 0 0 1 0 => ["s" ["2-0" ["a" "2"] "3-0" ["a" "3"]]]
		xreadgroup s 0 nog bob 0 0 1 > => (error) NOGROUP No such key 's' or consumer group 'nog' in XREADGROUP with GROUP option
		xreadgroup s 1 nog bob 0 0 1 > => (error) NOGROUP the consumer group this client was blocked on no longer exists
		xreadgroup s 1 g bob 0 0 1 > => (nil)
		xpending s 1000 g => [(integer) 3 "1-0" "3-0" [["alice" "1"] ["bob" "2"]]]
		xpending s 1000 g - + 10 bob => [["2-0" "bob" (integer) 0 (integer) 2] ["3-0" "bob" (integer) 0 (integer) 2]]
		xpending s 1500 g idle 400 - + 10 bob => [["2-0" "bob" (integer) 500 (integer) 2] ["3-0" "bob" (integer) 500 (integer) 2]]
		xpending s 1500 g idle 600 - + 10 bob => []
		xack s g 2-0 9-0 => (integer) 1
		xack s g 2-0 x => (error) Invalid stream ID specified as stream command argument
		xclaim s g carol 0 3-0 justid => ["3-0"]
		xpending s 1000 g - + 10 => [["1-0" "alice" (integer) 0 (integer) 1] ["3-0" "carol" (integer) 0 (integer) 2]]
		xdel s 1-0 => (integer) 1
		xautoclaim s g dave 0 0 => ["0-0" ["3-0" ["a" "3"]] ["1-0"]]
		xinfo s 1000 groups => [["name" "g" "consumers" (integer) 4 "pending" (integer) 1 "last-delivered-id" "3-0" "entries-read" (integer) 3 "lag" (integer) 0]]
		xgroup s delconsumer g dave => (integer) 1
		xgroup s destroy g => (integer) 1
		xgroup s destroy g => (integer) 0
		xreadgroup s 1 g bob 0 0 1 > => (error) NOGROUP the consumer group this client was blocked on no longer exists
		del s => (integer) 1
		xreadgroup s 1 g bob 0 0 1 > => (error) UNBLOCKED the stream key no longer exists
	`)
}

// randomStreamOp is a random stream write or read on one of keys streams.
func randomStreamOp(r *rand.Rand, keys int) Op {
	k := fmt.Sprintf("s%d", r.IntN(keys))
	g := fmt.Sprintf("g%d", r.IntN(2))
	c := fmt.Sprintf("c%d", r.IntN(3))
	id := fmt.Sprintf("%d-%d", r.IntN(3000), r.IntN(3))
	switch r.IntN(12) {
	case 0, 1, 2:
		return op("xadd", k, "3", "200", "*", "f", fmt.Sprint(r.IntN(100)))
	case 3:
		return op("xadd", k, "3", "200", "maxlen", "~", fmt.Sprint(r.IntN(10)), "*", "f", "v")
	case 4:
		return op("xdel", k, id)
	case 5:
		return op("xtrim", k, "3", "minid", id)
	case 6:
		return op("xgroup", k, "create", g, "0", "mkstream")
	case 7:
		return op("xreadgroup", k, "0", g, c, fmt.Sprint(r.IntN(2)), fmt.Sprint(r.IntN(3)), "1", ">")
	case 8:
		return op("xack", k, g, id)
	case 9:
		return op("xclaim", k, g, c, "0", id)
	case 10:
		return op("xautoclaim", k, g, c, "0", "0", "count", "2")
	}
	return op("del", k)
}

// Streams, with their nodes and groups, travel in deltas and snapshots and
// are covered by the state hash; clones are independent.
func TestKVStreamTransfer(t *testing.T) {
	for seed := range uint64(20) {
		r := rand.New(rand.NewPCG(seed, 34))
		leader := newKVState()
		var follower, frozen *KVState
		var frozenSnap []byte
		now := int64(1_000_000)
		split := r.IntN(300)
		for i := range 400 {
			if i == split {
				follower = leader.Clone().(*KVState)
				frozen = leader.Clone().(*KVState)
				frozenSnap = frozen.Snapshot()
				StateHash(follower)
			}
			now += int64(r.IntN(3))
			if res := leader.ApplyEnv(randomStreamOp(r, 3), Env{Time: now * 1e6}); res.Type == ResultErr && strings.Contains(res.Err, "kv:") {
				t.Fatalf("seed %d: %v", seed, res)
			}
		}
		if string(frozen.Snapshot()) != string(frozenSnap) {
			t.Fatalf("seed %d: the leader's writes changed a clone", seed)
		}
		if err := TransferDelta(leader, follower, follower.Version()); err != nil {
			t.Fatal(err)
		}
		sameState(t, fmt.Sprintf("seed %d catch-up", seed), leader, follower)
		if follower.StateHash() != rebuiltTypedRoot(follower) {
			t.Fatalf("seed %d: incremental root differs from a rebuilt one", seed)
		}
		restored := newKVState()
		if err := restored.Restore(leader.Snapshot()); err != nil {
			t.Fatal(err)
		}
		sameState(t, "restored", leader, restored)
		env := Env{Time: (now + 5) * 1e6}
		for i := range 3 {
			k := fmt.Sprintf("s%d", i)
			for _, o := range []Op{op("xrange", k, "-", "+"), op("xinfo", k, "0", "stream", "full"), op("xpending", k, "0", "g0", "-", "+", "100")} {
				a, b, c := leader.ApplyEnv(o, env), follower.ApplyEnv(o, env), restored.ApplyEnv(o, env)
				if !a.Equal(b) || !a.Equal(c) {
					t.Fatalf("seed %d %v: leader %v, follower %v, restored %v", seed, o, a, b, c)
				}
			}
			// A further trim lands alike: the nodes travelled too.
			o := op("xadd", k, "3", "200", "maxlen", "~", "4", "*", "f", "v")
			if a, b := leader.ApplyEnv(o, env), restored.ApplyEnv(o, env); !a.Equal(b) || leader.StateHash() != restored.StateHash() {
				t.Fatalf("seed %d: %v after restore: %v and %v", seed, o, a, b)
			}
		}
	}
}

// The state hash covers a group's bookkeeping, not only the entries.
func TestKVStreamHashCoversGroups(t *testing.T) {
	s := newKVState()
	env := Env{Time: 1e12}
	s.ApplyEnv(xadd("s", "1-0", "a", "1"), env)
	s.ApplyEnv(op("xgroup", "s", "create", "g", "0"), env)
	h := s.StateHash()
	s.ApplyEnv(op("xreadgroup", "s", "0", "g", "c", "0", "0", "1", ">"), env)
	h2 := s.StateHash()
	if h == h2 {
		t.Fatal("XREADGROUP left the state hash unchanged")
	}
	s.ApplyEnv(op("xack", "s", "g", "1-0"), env)
	if s.StateHash() == h2 {
		t.Fatal("XACK left the state hash unchanged")
	}
}

func resultDepth(r Result) int {
	d := 0
	for _, e := range r.Elems {
		d = max(d, resultDepth(e))
	}
	if r.Type == ResultArray {
		d++
	}
	return d
}

// Stream replies stay within MaxArrayDepth with EXEC's array around them:
// a deeper result cannot be encoded into a log entry (pbpaxos refuses the
// entry at every replica).
func TestKVStreamResultDepth(t *testing.T) {
	s := newKVState()
	env := Env{Time: 1e12}
	for _, o := range []Op{
		xadd("s", "1-0", "a", "1"), xadd("s", "2-0", "b", "2"), xadd("t", "1-0", "c", "3"),
		op("xgroup", "s", "create", "g", "0"),
		op("xreadgroup", "s", "0", "g", "c1", "0", "0", "1", ">"),
		op("xdel", "s", "1-0"),
	} {
		if r := s.ApplyEnv(o, env); r.IsErr() {
			t.Fatalf("%v: %v", o, r)
		}
	}
	deepest := 0
	for _, o := range []Op{
		op("xrange", "s", "-", "+"),
		op("xread", "s", "0", "0", "2", "t", "0", "0"),
		op("xreadgroup", "s", "0", "g", "c1", "0", "0", "1", "0"),
		op("xinfo", "s", "0", "stream"),
		op("xinfo", "s", "0", "stream", "full"),
		op("xinfo", "s", "0", "groups"),
		op("xinfo", "s", "0", "consumers", "g"),
		op("xpending", "s", "0", "g"),
		op("xpending", "s", "0", "g", "-", "+", "10"),
		op("xautoclaim", "s", "g", "c2", "0", "0"),
		op("xclaim", "s", "g", "c3", "0", "2-0"),
	} {
		r := s.ApplyEnv(o, env)
		if r.IsErr() {
			t.Fatalf("%v: %v", o, r)
		}
		d := resultDepth(r)
		deepest = max(deepest, d)
		if d > MaxArrayDepth-1 {
			t.Errorf("%v: result nested %d deep, at most %d fit inside EXEC: %v", o, d, MaxArrayDepth-1, r)
		}
	}
	if deepest < 3 {
		t.Fatalf("weak test: deepest result %d", deepest)
	}
}

// TestStreamReportConsumers: with ReportMark, XREADGROUP, XCLAIM,
// XAUTOCLAIM and XGROUP DELCONSUMER name the keys whose group gained or lost
// the consumer, and only those; without it their results are as before.
func TestStreamReportConsumers(t *testing.T) {
	s := newKVState()
	const now = 1_000_000
	kvScript(t, s, now, `
xadd s 100 4096 1-0 f v => "1-0"
xadd t 100 4096 1-0 f v => "1-0"
xgroup s create g 0 => OK
xgroup t create g $ => OK
xgroup s createconsumer g Bob => (integer) 1
`)
	m := ReportMark
	for _, c := range []struct {
		op   Op
		want string
	}{
		// Alice is created on s (served) and not on t (nothing new there).
		{op("xreadgroup", "s", "0", "g", "Alice", "0", "0", "2", "t", ">", ">", m), `[["s"] ["s" ["1-0" ["f" "v"]]]]`},
		{op("xreadgroup", "s", "0", "g", "Alice", "0", "0", "2", "t", ">", ">", m), `(nil)`},
		{op("xreadgroup", "s", "0", "g", "Alice", "0", "0", "1", "0", m), `[[] ["s" ["1-0" ["f" "v"]]]]`},
		{op("xclaim", "s", "g", "Mike", "0", "1-0", "force", m), `[["s"] ["1-0" ["f" "v"]]]`},
		{op("xgroup", "s", "delconsumer", "g", "Lee", m), `[[] (integer) 0]`},
		{op("xautoclaim", "s", "g", "Bob", "0", "0", m), `[[] ["0-0" ["1-0" ["f" "v"]] []]]`},
		{op("xautoclaim", "s", "g", "Zed", "0", "0", "justid", m), `[["s"] ["0-0" ["1-0"] []]]`},
		{op("xgroup", "s", "delconsumer", "g", "Bob", m), `[["s"] (integer) 0]`},
		{op("xgroup", "s", "delconsumer", "g", "Zed", m), `[["s"] (integer) 1]`},
		{op("xclaim", "s", "nosuch", "Mike", "0", "1-0", m), `(error) NOGROUP No such key 's' or consumer group 'nosuch'`},
		// Without the mark, the plain result.
		{op("xclaim", "s", "g", "Ann", "0", "1-0", "force"), `["1-0" ["f" "v"]]`},
	} {
		if got := s.ApplyEnv(c.op, Env{Time: now * 1e6}).String(); got != c.want {
			t.Errorf("%s %v: got %s, want %s", c.op.Kind, c.op.Args, got, c.want)
		}
	}
}
