package service

import (
	"strconv"
	"testing"
)

// DeltaSizeHint estimates Delta's length from below without encoding it:
// for every value type it is at most the delta's length and grows with the
// value (one byte per element at least), and 0 when no delta is available.
func TestDeltaSizeHint(t *testing.T) {
	ops := map[string]func(i int) Op{
		"string": func(i int) Op { return Op{Kind: "append", Key: "k", Args: [][]byte{[]byte("abc")}} },
		"list":   func(i int) Op { return Op{Kind: "rpush", Key: "k", Args: [][]byte{[]byte(strconv.Itoa(i))}} },
		"set":    func(i int) Op { return Op{Kind: "sadd", Key: "k", Args: [][]byte{[]byte(strconv.Itoa(i))}} },
		"hash": func(i int) Op {
			return Op{Kind: "hset", Key: "k", Args: [][]byte{[]byte(strconv.Itoa(i)), []byte("v")}}
		},
		"zset": func(i int) Op {
			return Op{Kind: "zadd", Key: "k", Args: [][]byte{[]byte(strconv.Itoa(i)), []byte(strconv.Itoa(i))}}
		},
		"stream": func(i int) Op {
			return Op{Kind: "xadd", Key: "k", Args: [][]byte{[]byte("100"), []byte("4096"), []byte("*"), []byte("f"), []byte("v")}}
		},
	}
	for name, op := range ops {
		st := KV{}.NewState().(*KVState)
		for i := 0; i < 300; i++ {
			v := st.Version()
			if r := ApplyEnv(st, op(i), Env{Time: int64(i+1) * 1e6}); r.Err != "" {
				t.Fatalf("%s: %v", name, r.Err)
			}
			d, err := st.Delta(v)
			if err != nil {
				t.Fatal(err)
			}
			h := st.DeltaSizeHint(v)
			if h > len(d) {
				t.Fatalf("%s after %d writes: hint %d above the delta's %d bytes", name, i+1, h, len(d))
			}
			if h < i+1 {
				t.Fatalf("%s after %d writes: hint %d below one byte per element", name, i+1, h)
			}
		}
		if h := st.DeltaSizeHint(st.Version() + 1); h != 0 {
			t.Fatalf("%s: hint %d for a version the state has not reached", name, h)
		}
	}
}
