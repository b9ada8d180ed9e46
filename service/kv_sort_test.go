package service

import "testing"

// TestKVSort: SORT's orders (numeric with ties by element, ALPHA, DESC, a
// list's and a sorted set's own order under BY nosort), LIMIT, BY and GET
// patterns (strings, hash fields, '#', missing keys), STORE (replacing,
// deleting when empty) and the errors, with the answers of Redis's
// tests/unit/sort.tcl.
func TestKVSort(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
rpush l 5 3 4 1 2 10 => (integer) 6
sort l => ["1" "2" "3" "4" "5" "10"]
sort l desc limit 1 2 => ["5" "4"]
sort l alpha => ["1" "10" "2" "3" "4" "5"]
sort l by nosort => ["5" "3" "4" "1" "2" "10"]
sort l by nosort desc limit 0 2 => ["10" "2"]
sort l limit 10 5 => []
zadd z 1 a 5 b 2 c 10 d 3 e => (integer) 5
sort z by nosort => ["a" "c" "e" "b" "d"]
sort z by nosort desc => ["d" "b" "e" "c" "a"]
sort z alpha desc => ["e" "d" "c" "b" "a"]
set w_a 3 => OK
set w_b 1 => OK
hset o_a f 20 => (integer) 1
hset o_c f 10 => (integer) 1
sadd s a b c => (integer) 3
sortkeys s by w_* => ["c" "b" "a"]
sortkeys s by o_*->f => ["b" "c" "a"]
sortkeys s by nosort get # get w_* get o_*->f => ["a" "3" "20" "b" "1" (nil) "c" (nil) "10"]
sortkeys s by w_* alpha => ["c" "b" "a"]
sortkeysstore s dst by nosort get w_* => (integer) 3
lrange dst 0 -1 => ["3" "1" ""]
sortstore s dst by nosort => (integer) 3
lrange dst 0 -1 => ["a" "b" "c"]
sortstore nosuch dst => (integer) 0
exists dst => (integer) 0
sadd bad 1 2 x => (integer) 3
sort bad => (error) One or more scores can't be converted into double
set str x => OK
sort str => (error) WRONGTYPE Operation against a key holding the wrong kind of value
sort l limit 1 => (error) syntax error
sort l limit a 1 => (error) value is not an integer or out of range
`)
	if err := (KV{}).Validate(op("sort", "s", "by", "w_*")); err == nil {
		t.Error("sort with a BY pattern was accepted: it reads keys it does not declare")
	}
}
