package service

import "testing"

// TestKVMultiPop: LMPOP/ZMPOP pick the first non-empty key in order, a key
// of another type answers WRONGTYPE on a first attempt and counts as empty
// for a blocked client (wait 1); BLMOVE answers nil, not WRONGTYPE, for an
// empty source with a destination of another type.
func TestKVMultiPop(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		lmpop a 0 left 1 b => (nil)
		rpush b x y z => (integer) 3
		lmpop a 0 left 2 b => ["b" ["x" "y"]]
		lmpop a 0 right 5 b => ["b" ["z"]]
		exists b => (integer) 0
		set s v => OK
		rpush l p => (integer) 1
		lmpop s 0 left 1 l => (error) WRONGTYPE Operation against a key holding the wrong kind of value
		lmpop l 0 left 1 s => ["l" ["p"]]
		lmpop s 1 left 1 l => (nil)
		rpush l q => (integer) 1
		lmpop s 1 right 1 l => ["l" ["q"]]
		bready s list l => (integer) 0
		zadd z 1 a 2 b 3 c => (integer) 3
		bready s zset z => (integer) 1
		bready s list z => (integer) 0
		zmpop s 0 min 1 z => (error) WRONGTYPE Operation against a key holding the wrong kind of value
		zmpop s 1 min 1 z => ["z" ["a" "1"]]
		zmpop z 0 max 2 => ["z" ["c" "3" "b" "2"]]
		zmpop z 0 max 2 => (nil)
		blmove l 0 s left left => (nil)
		rpush l e => (integer) 1
		blmove l 0 s left left => (error) WRONGTYPE Operation against a key holding the wrong kind of value
		lrange l 0 -1 => ["e"]
		blmove s 0 l left left => (error) WRONGTYPE Operation against a key holding the wrong kind of value
		blmove s 1 l left left => (nil)
		blmove l 1 m right left => "e"
		lrange m 0 -1 => ["e"]
	`)
	for _, bad := range []Op{op("lmpop", "a", "2", "left", "1"), op("lmpop", "a", "0", "up", "1"),
		op("lmpop", "a", "0", "left", "0"), op("zmpop", "a", "0", "left", "1"), op("blmove", "a", "0", "b", "left", "up"),
		op("bready", "a", "hash")} {
		if (KV{}).Validate(bad) == nil {
			t.Errorf("%v: validated", bad)
		}
	}
}

// TestKVZMore: ZRANGESTORE stores what ZRANGE selects (replacing the
// destination, deleting it when empty), ZINTERCARD counts the
// intersection up to its limit, ZRANDMEMBER picks members of the zset.
func TestKVZMore(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		zadd z 1 a 2 b 3 c => (integer) 3
		zadd y 2 b 3 c 4 d => (integer) 3
		zrangestore d z 0 1 => (integer) 2
		zrange d 0 -1 withscores => ["a" "1" "b" "2"]
		zrangestore d z (1 +inf byscore => (integer) 2
		zrange d 0 -1 => ["b" "c"]
		zrangestore d nope 0 -1 => (integer) 0
		exists d => (integer) 0
		zrangestore d z 0 -1 withscores => (error) syntax error
		zintercard z 0 y => (integer) 2
		zintercard z 1 y => (integer) 1
		zintercard z 0 nope => (integer) 0
		zrandmember nope => (nil)
		zrandmember nope 3 => []
		zrandmember z 0 => []
	`)
	if got := s.Apply(op("zrandmember", "z", "5", "withscores")); len(got.Elems) != 6 {
		t.Errorf("zrandmember 5 withscores of 3: %v", got)
	}
	if got := s.Apply(op("zrandmember", "z", "-5")); len(got.Elems) != 5 {
		t.Errorf("zrandmember -5: %v", got)
	}
}
