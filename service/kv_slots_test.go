package service

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/shard"
)

// "slotstats slots" gives each slot's keys and bytes (split47): the sums
// are the plain form's, a collection counts 32 bytes an element, expired
// and reserved keys are left out, and only slots holding a key appear.
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
	want := []string{fmt.Sprintf("%d:2:%d", x, 4+5+4+1), fmt.Sprintf("%d:1:%d", c, 1+64)}
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
