package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/wire"
)

// "slotstats slots" gives each slot's keys and bytes (split47): the sums
// are the plain form's, a key's bytes are its snapshot entry's length
// (session 49), expired and reserved keys are left out, and only slots
// holding a key appear.
func TestSlotStatsPerSlot(t *testing.T) {
	s := newKVState()
	s.Apply(Op{Kind: "set", Key: "a{x}", Args: [][]byte{[]byte("12345")}})
	s.Apply(Op{Kind: "set", Key: "b{x}", Args: [][]byte{[]byte("1")}})
	s.Apply(Op{Kind: "sadd", Key: "c", Args: [][]byte{[]byte("m1"), []byte("m2")}})
	s.Apply(Op{Kind: "set", Key: shard.DirtyKey, Args: [][]byte{[]byte("r")}})
	plain := s.Apply(Op{Kind: "slotstats"})
	per := s.Apply(Op{Kind: "slotstats", Args: [][]byte{[]byte("slots")}})
	if len(plain.Elems) != 2 || len(per.Elems) != 3 || plain.Elems[0].Int != 3 || per.Elems[0].Int != plain.Elems[0].Int || per.Elems[1].Int != plain.Elems[1].Int {
		t.Fatalf("plain %v, per slot %v", plain, per)
	}
	x, c := shard.KeySlot("{x}"), shard.KeySlot("c")
	want := []string{fmt.Sprintf("%d:2:%d", x, encodedEntryLen(s, "a{x}")+encodedEntryLen(s, "b{x}")), fmt.Sprintf("%d:1:%d", c, encodedEntryLen(s, "c"))}
	if x > c {
		want[0], want[1] = want[1], want[0]
	}
	if got := string(per.Elems[2].Bytes); got != strings.Join(want, " ") {
		t.Fatalf("per slot %q, want %q", got, strings.Join(want, " "))
	}
	if r := s.Apply(Op{Kind: "slotstats", Args: [][]byte{[]byte("x")}}); r.Type != ResultErr {
		t.Fatalf("slotstats x: %v, want an error", r)
	}
}

// BenchmarkSlotStats: the walk's cost, plain and per slot (split47), over
// 1,000,000 keys of 21 bytes with 100-byte values: ns and allocations
// per walk. go test -run - -bench BenchmarkSlotStats -count 4 ./service
func BenchmarkSlotStats(b *testing.B) {
	s := newKVState()
	v := []byte(strings.Repeat("v", 100))
	for i := 0; i < 1_000_000; i++ {
		s.Apply(Op{Kind: "set", Key: fmt.Sprintf("user:%08d:profile", i), Args: [][]byte{v}})
	}
	for _, form := range []struct {
		name string
		args [][]byte
	}{{"plain", nil}, {"slots", [][]byte{[]byte("slots")}}} {
		b.Run(form.name, func(b *testing.B) {
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if r := s.Apply(Op{Kind: "slotstats", Args: form.args}); r.Elems[0].Int != 1_000_000 {
					b.Fatal(r)
				}
			}
		})
	}
}

// Past slotStatsSample live keys the per-slot figures are a sample
// (every stride-th key of the walk, weighted by stride): over 100,000
// keys their sum is the keys' within a stride, and the first half of the
// slots holds its true share of keys within 4% (7 standard deviations of
// the sample's). Without the weight the sum would be a third.
func TestSlotStatsSampled(t *testing.T) {
	s := newKVState()
	const n = 100_000
	half := 0
	for i := 0; i < n; i++ {
		k := fmt.Sprintf("user:%d", i)
		s.Apply(Op{Kind: "set", Key: k, Args: [][]byte{[]byte("v")}})
		if shard.KeySlot(k) < shard.Slots/2 {
			half++
		}
	}
	r := s.Apply(Op{Kind: "slotstats", Args: [][]byte{[]byte("slots")}})
	var sum, low int64
	for _, f := range strings.Fields(string(r.Elems[2].Bytes)) {
		var sl, k, b int64
		fmt.Sscanf(strings.ReplaceAll(f, ":", " "), "%d %d %d", &sl, &k, &b)
		sum += k
		if sl < shard.Slots/2 {
			low += k
		}
	}
	stride := int64(n / slotStatsSample)
	if r.Elems[0].Int != n || sum < n-stride || sum > n+stride {
		t.Fatalf("keys %d, per-slot sum %d (stride %d)", r.Elems[0].Int, sum, stride)
	}
	d := float64(low-int64(half)) / float64(half)
	if d < -0.04 || d > 0.04 {
		t.Fatalf("the first half of the slots: %d sampled, %d true (%.1f%%)", low, half, 100*d)
	}
	t.Logf("per-slot sum %d of %d keys; the first half of the slots %d sampled, %d true (%+.2f%%)", sum, n, low, half, 100*d)
}

// encodedEntryLen is the length of key k's entry as a snapshot encodes it
// (encodeEntries), by encoding it.
func encodedEntryLen(s *KVState, k string) int {
	var w wire.Encoder
	x := s.m[k]
	w.String(k)
	w.Uvarint(x.gen)
	w.Varint(x.exp)
	x.encode(&w)
	return len(w.B)
}

// TestEntrySize (session 49): slotstats counts each key's serialized size,
// its snapshot entry's length, computed without encoding it: equal to the
// encoding's for every value type, small and large (varint prefixes of 1
// and 2+ bytes), with and without a deadline; the walk's total is their
// sum. With the estimate it replaced (key + string, or 32 bytes an
// element) the strings were each 5-8 bytes under and the collections off
// by any factor.
func TestEntrySize(t *testing.T) {
	s := KV{}.NewState().(*KVState)
	big := strings.Repeat("x", 300)
	var ops []Op
	ops = append(ops, Op{Kind: "set", Key: "s1", Args: [][]byte{[]byte("v")}}, Op{Kind: "set", Key: "s2", Args: [][]byte{[]byte(big)}},
		Op{Kind: "set", Key: strings.Repeat("k", 200), Args: [][]byte{[]byte("")}}, Op{Kind: "pexpire", Key: "s2", Args: [][]byte{[]byte("100000")}})
	for i := 0; i < 200; i++ {
		f := []byte(fmt.Sprint(i))
		ops = append(ops, Op{Kind: "hset", Key: "h", Args: [][]byte{f, []byte(big[:i])}}, Op{Kind: "rpush", Key: "l", Args: [][]byte{[]byte(big[:i])}},
			Op{Kind: "sadd", Key: "set", Args: [][]byte{f}}, Op{Kind: "zadd", Key: "z", Args: [][]byte{[]byte(fmt.Sprint(float64(i) / 7)), f}},
			Op{Kind: "xadd", Key: "x", Args: [][]byte{[]byte("100"), []byte("4096"), []byte("*"), []byte("f"), f}})
	}
	for i, op := range ops {
		if r := ApplyEnv(s, op, Env{Time: int64(i+1) * 1e6}); r.Err != "" {
			t.Fatalf("%v: %v", op, r.Err)
		}
	}
	sum := 0
	for k, e := range s.m {
		want := encodedEntryLen(s, k)
		if got := entrySize(k, e); got != want {
			t.Fatalf("%s (%v): entrySize %d, encoded %d", k[:min(len(k), 8)], e.typ(), got, want)
		}
		sum += want
	}
	if r := s.Apply(Op{Kind: "slotstats"}); r.Elems[1].Int != int64(sum) || r.Elems[0].Int != int64(len(s.m)) {
		t.Fatalf("slotstats %v, want %d keys, %d bytes", r, len(s.m), sum)
	}
}
