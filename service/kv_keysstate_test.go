package service

import (
	"fmt"
	"math/rand"
	"testing"
)

// TestKVKeysStateAnswersKeyLocal: a key-local operation (KV.KeyLocal)
// applied to KeysState(its key) of a state answers what it answers on the
// whole state, and so does every later key-local operation on that key
// applied to both, over random runs of all five key-local kinds (values
// that are and are not integers) beside writes of other kinds. A copy that
// leaves out the key's entry, or shares its value bytes with a writer,
// fails it.
func TestKVKeysStateAnswersKeyLocal(t *testing.T) {
	rng := rand.New(rand.NewSource(28))
	kinds := []string{"get", "set", "append", "incr", "strlen"}
	op := func(k string) Op {
		switch kind := kinds[rng.Intn(len(kinds))]; kind {
		case "set":
			v := fmt.Sprint(rng.Intn(100))
			if rng.Intn(4) == 0 {
				v = "x" + v
			}
			return Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}}
		case "append":
			return Op{Kind: "append", Key: k, Args: [][]byte{[]byte(fmt.Sprint(rng.Intn(10)))}}
		case "incr":
			return Op{Kind: "incr", Key: k}
		default:
			return Op{Kind: kind, Key: k}
		}
	}
	for run := range 20 {
		s := newKVState()
		for i := range 300 {
			k := fmt.Sprint("k", rng.Intn(8))
			switch rng.Intn(10) {
			case 0:
				s.Apply(Op{Kind: "del", Key: k})
			case 1:
				s.Apply(Op{Kind: "lpush", Key: k, Args: [][]byte{[]byte("l")}})
			default:
				s.Apply(op(k))
			}
			if rng.Intn(10) != 0 {
				continue
			}
			lr := Op{Kind: "lrange", Key: k, Args: [][]byte{[]byte("0"), []byte("-1")}}
			before, beforeL := s.Apply(Op{Kind: "get", Key: k}).String(), s.Apply(lr).String()
			sub := s.KeysState([]string{k})
			// A collection is shared, not changed in place by either side.
			subL := sub.Apply(lr).String()
			s.Apply(Op{Kind: "rpush", Key: k, Args: [][]byte{[]byte("src")}})
			if got := sub.Apply(lr).String(); got != subL {
				t.Fatalf("run %d: a write to the source changed the copy's list: %s, was %s", run, got, subL)
			}
			sub.Apply(Op{Kind: "rpush", Key: k, Args: [][]byte{[]byte("sub")}})
			s.Apply(Op{Kind: "rpop", Key: k})
			if got := s.Apply(lr).String(); got != beforeL {
				t.Fatalf("run %d: a write to the copy changed the source's list: %s, was %s", run, got, beforeL)
			}
			sub = s.KeysState([]string{k})
			full := s.Clone()
			for j := range 6 {
				o := op(k)
				if got, want := sub.Apply(o).String(), full.Apply(o).String(); got != want {
					t.Fatalf("run %d, step %d, op %d: %s %s on KeysState answers %s, on the whole state %s", run, i, j, o.Kind, k, got, want)
				}
			}
			if got := s.Apply(Op{Kind: "get", Key: k}).String(); got != before {
				t.Fatalf("run %d: the source changed: %s, was %s", run, got, before)
			}
		}
	}
}
