package service

import (
	"strings"
	"testing"
)

// kvScript applies "kind key args... => want" lines to s in environment
// env (time in ms; 0: none) and compares each result's String(). A key
// written "-" is the empty key (keyspace operations).
func kvScript(t *testing.T, s *KVState, nowMs int64, script string) {
	t.Helper()
	for _, line := range strings.Split(strings.TrimSpace(script), "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		lhs, want, ok := strings.Cut(line, " => ")
		if !ok {
			t.Fatalf("bad script line %q", line)
		}
		f := strings.Fields(lhs)
		key := ""
		if len(f) > 1 && f[1] != "-" {
			key = f[1]
		}
		var args []string
		if len(f) > 2 {
			args = f[2:]
		}
		var env Env
		if nowMs > 0 {
			env = Env{Time: nowMs * 1e6, Seed: 7}
		}
		got := s.ApplyEnv(op(f[0], key, args...), env)
		if got.String() != want {
			t.Fatalf("%s: got %s, want %s", lhs, got, want)
		}
	}
}

const wrongTypeErr = "(error) " + WrongType

func TestKVStrings(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 1000, `
		set a hello => OK
		set a x nx get => "hello"
		set a world xx get => "hello"
		getset a v2 => "world"
		strlen a => (integer) 2
		append a 345 => (integer) 5
		getrange a 0 1 => "v2"
		getrange a -3 -1 => "345"
		getrange a 10 20 => ""
		getrange a -1 -3 => ""
		setrange a 1 XY => (integer) 5
		get a => "vXY45"
		setrange pad 3 ab => (integer) 5
		get pad => "\x00\x00\x00ab"
		setrange pad 9223372036854775807 A => (error) string exceeds maximum allowed size (proto-max-bulk-len)
		setrange pad 2147483647 A => (error) string exceeds maximum allowed size (proto-max-bulk-len)
		setrange pad 8388607 A => (integer) 8388608
		setrange pad 8388608 A => (error) string exceeds maximum allowed size (proto-max-bulk-len)
		setrange pad 0 x => (integer) 8388608
		del pad => (integer) 1
		incr n 10 => (integer) 10
		incr n -3 => (integer) 7
		incrbyfloat n 0.5 => "7.5"
		incrbyfloat f 10.5 => "10.5"
		incrbyfloat f 0.1 => "10.6"
		incrbyfloat a 1 => (error) value is not a valid float
		incrbyfloat f x => (error) value is not a valid float
		getdel f => "10.6"
		getdel f => (nil)
		set a 1 nx xx => (error) syntax error
		set a 1 ex 10 px 5 => (error) syntax error
		set a 1 ex 0 => (error) invalid expire time in 'set' command
		set a 1 ex x => (error) value is not an integer or out of range
		set a 1 keepttl ex 5 => (error) syntax error
		unlink a => (integer) 1
		type a => "none"
		set a 1 => OK
		type a => "string"
	`)
}

func TestKVWrongType(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		hset h f v => (integer) 1
		rpush l a => (integer) 1
		sadd s m => (integer) 1
		zadd z 1 m => (integer) 1
		set str v => OK
		get h => `+wrongTypeErr+`
		append l x => `+wrongTypeErr+`
		incr s 1 => `+wrongTypeErr+`
		set h v get => `+wrongTypeErr+`
		hget str f => `+wrongTypeErr+`
		lpush h x => `+wrongTypeErr+`
		sadd z x => `+wrongTypeErr+`
		zadd s 1 x => `+wrongTypeErr+`
		smembers l => `+wrongTypeErr+`
		zrange h 0 -1 => `+wrongTypeErr+`
		sinter s str => `+wrongTypeErr+`
		type h => "hash"
		type l => "list"
		type s => "set"
		type z => "zset"
		set h plain => OK
		type h => "string"
		exists h => (integer) 1
	`)
}

func TestKVHashes(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		hset h a 1 b 2 => (integer) 2
		hset h a 10 c 3 => (integer) 1
		hset h a => (error) wrong number of arguments for 'hset' command
		hsetnx h a 99 => (integer) 0
		hsetnx h d 4 => (integer) 1
		hget h a => "10"
		hget h zz => (nil)
		hmget h a zz c => ["10" (nil) "3"]
		hgetall h => ["a" "10" "b" "2" "c" "3" "d" "4"]
		hkeys h => ["a" "b" "c" "d"]
		hvals h => ["10" "2" "3" "4"]
		hlen h => (integer) 4
		hexists h b => (integer) 1
		hexists h zz => (integer) 0
		hstrlen h a => (integer) 2
		hincrby h a 5 => (integer) 15
		hincrby h new -2 => (integer) -2
		hincrbyfloat h b 0.25 => "2.25"
		hincrbyfloat h b +inf => (error) value is NaN or Infinity
		hincrby h b 1 => (error) hash value is not an integer
		hdel h a b zz => (integer) 2
		hdel h c d new => (integer) 3
		exists h => (integer) 0
		hgetall h => []
		hlen h => (integer) 0
		hget h a => (nil)
	`)
}

func TestKVLists(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		lpushx l a => (integer) 0
		exists l => (integer) 0
		rpush l a b c => (integer) 3
		lpush l x y => (integer) 5
		lrange l 0 -1 => ["y" "x" "a" "b" "c"]
		lrange l -2 100 => ["b" "c"]
		lrange l 3 1 => []
		llen l => (integer) 5
		lindex l 0 => "y"
		lindex l -1 => "c"
		lindex l 9 => (nil)
		lset l 1 X => OK
		lset l 9 X => (error) index out of range
		lset nokey 0 X => (error) no such key
		lpop l => "y"
		rpop l 2 => ["c" "b"]
		lrange l 0 -1 => ["X" "a"]
		rpushx l a b a => (integer) 5
		lrem l 2 a => (integer) 2
		lrange l 0 -1 => ["X" "b" "a"]
		rpush l a a => (integer) 5
		lrem l -1 a => (integer) 1
		lrange l 0 -1 => ["X" "b" "a" "a"]
		lrem l 0 a => (integer) 2
		linsert l before b B => (integer) 3
		linsert l after b C => (integer) 4
		linsert l after zz C => (integer) -1
		linsert nokey after b C => (integer) 0
		linsert l middle b C => (error) syntax error
		lrange l 0 -1 => ["X" "B" "b" "C"]
		ltrim l 1 2 => OK
		lrange l 0 -1 => ["B" "b"]
		lpop l 5 => ["B" "b"]
		exists l => (integer) 0
		lpop l => (nil)
		lpop l 2 => (nil)
		lpop l -1 => (error) value is out of range, must be positive
		ltrim nokey 0 1 => OK
	`)
}

func TestKVSets(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		sadd s c a b a => (integer) 3
		sadd s a d => (integer) 1
		smembers s => ["a" "b" "c" "d"]
		sismember s a => (integer) 1
		sismember s z => (integer) 0
		smismember s a z d => [(integer) 1 (integer) 0 (integer) 1]
		scard s => (integer) 4
		srem s a z => (integer) 1
		sadd t b c e => (integer) 3
		sinter s t => ["b" "c"]
		sunion s t => ["b" "c" "d" "e"]
		sdiff s t => ["d"]
		sinter s nokey => []
		sdiff s nokey => ["b" "c" "d"]
		srandmember nokey => (nil)
		srandmember nokey 3 => []
		scard nokey => (integer) 0
		spop nokey => (nil)
		spop nokey 2 => []
	`)
	// SPOP is a write: equal states pop equal members; everything goes.
	a, b := newKVState(), newKVState()
	for _, st := range []*KVState{a, b} {
		st.Apply(op("sadd", "s", "1", "2", "3", "4", "5"))
	}
	for range 2 {
		if ra, rb := a.Apply(op("spop", "s")), b.Apply(op("spop", "s")); !ra.Equal(rb) || ra.Type != ResultBytes {
			t.Fatalf("spop on equal states: %v and %v", ra, rb)
		}
	}
	if got := a.Apply(op("spop", "s", "10")); len(got.Elems) != 3 {
		t.Fatalf("spop 10 of 3: %v", got)
	}
	if got := a.Apply(op("exists", "s")); !got.Equal(Int(0)) {
		t.Fatal("emptied set still exists")
	}
	// SRANDMEMBER: distinct with a positive count, repeats allowed with a
	// negative one, nothing removed.
	a.Apply(op("sadd", "r", "x", "y", "z"))
	if got := a.Apply(op("srandmember", "r", "5")); len(got.Elems) != 3 {
		t.Fatalf("srandmember 5 of 3: %v", got)
	}
	if got := a.Apply(op("srandmember", "r", "-5")); len(got.Elems) != 5 {
		t.Fatalf("srandmember -5: %v", got)
	}
	if got := a.Apply(op("scard", "r")); !got.Equal(Int(3)) {
		t.Fatalf("srandmember removed members: %v", got)
	}
}

func TestKVSortedSets(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		zadd z 1 a 2 b 3 c => (integer) 3
		zadd z 1 a 5 b => (integer) 0
		zadd z ch 1 a 6 b 7 d => (integer) 2
		zadd z nx 100 a 4 e => (integer) 1
		zadd z xx 100 zz => (integer) 0
		zadd z xx ch 1.5 a => (integer) 1
		zadd z gt ch 1 a 10 c => (integer) 1
		zadd z lt ch 2 c => (integer) 1
		zadd z incr 2 a => "3.5"
		zadd z nx incr 2 a => (nil)
		zadd z nx xx 1 a => (error) ERR XX and NX options at the same time are not compatible
		zadd z gt lt 1 a => (error) GT, LT, and/or NX options at the same time are not compatible
		zadd z incr 1 a 2 b => (error) ERR INCR option supports a single increment-element pair
		zadd z 1 => (error) wrong number of arguments for 'zadd' command
		zadd z 1 a 2 => (error) syntax error
		zadd z x a => (error) value is not a valid float
		zrange z 0 -1 withscores => ["c" "2" "a" "3.5" "e" "4" "b" "6" "d" "7"]
		zscore z a => "3.5"
		zscore z zz => (nil)
		zmscore z a zz => ["3.5" (nil)]
		zincrby z 0.5 a => "4"
		zincrby z 1 new => "1"
		zcard z => (integer) 6
		zcount z 4 6 => (integer) 3
		zcount z (4 +inf => (integer) 2
		zcount z -inf (4 => (integer) 2
		zrank z a => (integer) 2
		zrevrank z a => (integer) 3
		zrank z zz => (nil)
		zrank z a withscore => [(integer) 2 "4"]
		zrange z 0 1 => ["new" "c"]
		zrange z 0 1 rev => ["d" "b"]
		zrange z 4 (7 byscore => ["a" "e" "b"]
		zrange z (7 4 byscore rev => ["b" "e" "a"]
		zrange z -inf +inf byscore limit 1 2 withscores => ["c" "2" "a" "4"]
		zrange z 0 -1 limit 0 1 => (error) syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX
		zrange z x 1 => (error) value is not an integer or out of range
		zrange z x 1 byscore => (error) min or max is not a float
		zrem z new zz => (integer) 1
		zpopmin z => ["c" "2"]
		zpopmax z 2 => ["d" "7" "b" "6"]
		zrange z 0 -1 => ["a" "e"]
		zadd f 0.1 a 1e20 b => (integer) 2
		zincrby f 0.2 a => "0.30000000000000004"
		zrange f 0 -1 withscores => ["a" "0.30000000000000004" "b" "1e+20"]
		zadd inf +inf m -inf n => (integer) 2
		zrange inf 0 -1 withscores => ["n" "-inf" "m" "inf"]
		zpopmin nokey => []
		zrange nokey 0 -1 => []
	`)
	kvScript(t, newKVState(), 0, `
		zadd lex 0 a 0 b 0 c 0 d => (integer) 4
		zrange lex [b (d bylex => ["b" "c"]
		zrange lex - + bylex limit 1 1 => ["b"]
		zrange lex + [c bylex rev => ["d" "c"]
		zrange lex a c bylex => (error) min or max not valid string range item
		zrange lex - + bylex withscores => (error) syntax error, WITHSCORES not supported in combination with BYLEX
		zrem lex a b c d => (integer) 4
		exists lex => (integer) 0
	`)
}

// A clone shares collections until one side writes: the other never sees
// the write.
func TestKVCollectionCopyOnWrite(t *testing.T) {
	a := newKVState()
	a.Apply(op("rpush", "l", "1", "2"))
	a.Apply(op("hset", "h", "f", "1"))
	a.Apply(op("zadd", "z", "1", "m"))
	b := a.Clone().(*KVState)
	b.Apply(op("rpush", "l", "3"))
	b.Apply(op("lset", "l", "0", "X"))
	b.Apply(op("hset", "h", "f", "2"))
	b.Apply(op("zincrby", "z", "5", "m"))
	a.Apply(op("lpop", "l"))
	for _, c := range []struct {
		st   *KVState
		o    Op
		want string
	}{
		{a, op("lrange", "l", "0", "-1"), `["2"]`},
		{b, op("lrange", "l", "0", "-1"), `["X" "2" "3"]`},
		{a, op("hget", "h", "f"), `"1"`},
		{b, op("hget", "h", "f"), `"2"`},
		{a, op("zscore", "z", "m"), `"1"`},
		{b, op("zscore", "z", "m"), `"6"`},
	} {
		if got := c.st.Apply(c.o).String(); got != c.want {
			t.Errorf("%v: %s, want %s", c.o, got, c.want)
		}
	}
}

func TestKVZRemRange(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		zadd z 1 a 2 b 3 c 4 d 5 e => (integer) 5
		zremrange z 0 1 => (integer) 2
		zrange z 0 -1 => ["c" "d" "e"]
		zremrange z (3 4 byscore => (integer) 1
		zrange z 0 -1 => ["c" "e"]
		zremrange z [a [c bylex => (integer) 1
		zremrange z x 1 byscore => (error) min or max is not a float
		zremrange z 0 1 byrank => (error) syntax error
		zremrange z 5 9 => (integer) 0
		zremrange z 0 -1 => (integer) 1
		exists z => (integer) 0
		zremrange nokey 0 -1 => (integer) 0
		set str x => OK
		zremrange str 0 -1 => (error) WRONGTYPE Operation against a key holding the wrong kind of value
	`)
}

func TestKVMore(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 1000, `
		set a v => OK
		copy a b => (integer) 1
		copy a b => (integer) 0
		copy a a => (error) source and destination objects are the same
		copy nokey b => (integer) 0
		rpush l x y => (integer) 2
		copy l b replace => (integer) 1
		rpush b z => (integer) 3
		lrange l 0 -1 => ["x" "y"]
		lmove l m right left => "y"
		lmove l m left left => "x"
		lmove l m left left => (nil)
		exists l => (integer) 0
		lrange m 0 -1 => ["x" "y"]
		lmove a m left left => (error) WRONGTYPE Operation against a key holding the wrong kind of value
		lmove m a left left => (error) WRONGTYPE Operation against a key holding the wrong kind of value
		rpush p a b a c a => (integer) 5
		lpos p a => (integer) 0
		lpos p a rank -1 => (integer) 4
		lpos p a rank 2 count 0 => [(integer) 2 (integer) 4]
		lpos p a count 2 maxlen 3 => [(integer) 0 (integer) 2]
		lpos p z => (nil)
		lpos p a rank 0 => (error) ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list
		sadd s1 1 2 3 => (integer) 3
		sadd s2 2 3 4 => (integer) 3
		smove s1 s2 1 => (integer) 1
		smove s1 s2 1 => (integer) 0
		setstore d sinter s1 s2 => (integer) 2
		setstore a sunion s1 s2 => (integer) 4
		type a => "set"
		setstore d sdiff s1 s2 => (integer) 0
		exists d => (integer) 0
		sintercard s1 0 s2 => (integer) 2
		sintercard s1 1 s2 => (integer) 1
		hset h f v => (integer) 1
		hrandfield h => "f"
		hrandfield h -2 withvalues => ["f" "v" "f" "v"]
		hrandfield h -9223372036854775807 => (error) value is out of range
		srandmember s1 -9223372036854775807 => (error) value is out of range
		setbit big 67108864 1 => (error) string exceeds maximum allowed size (proto-max-bulk-len)
		setbit big 67108863 1 => (integer) 0
		strlen big => (integer) 8388608
		getbit big 67108863 => (integer) 1
		setbit big 67108863 0 => (integer) 1
	`)
}
