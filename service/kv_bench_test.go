package service

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"

	"github.com/synod-dev/synod/automaton/cpuwork"
)

// BenchmarkKVTypedWrites measures one write to a collection of the given
// size, with and without a Merkle tree kept up to date and hashed every 64
// writes (a collection's entry hash covers its whole encoding, O(size),
// taken once per StateHash for every collection written since).
func BenchmarkKVTypedWrites(b *testing.B) {
	for _, size := range []int{10, 1000} {
		for _, hashed := range []bool{false, true} {
			for _, w := range []struct {
				name     string
				fill, op func(i int) Op
			}{
				{"hset", nil, func(i int) Op { return op("hset", "k", fmt.Sprint("f", i%size), "v") }},
				{"rpush+lpop", func(int) Op { return op("rpush", "k", "v") }, func(i int) Op {
					if i%2 == 0 {
						return op("rpush", "k", "v")
					}
					return op("lpop", "k")
				}},
				{"zadd", nil, func(i int) Op { return op("zadd", "k", fmt.Sprint(i%97), fmt.Sprint("m", i%size)) }},
			} {
				b.Run(fmt.Sprintf("%s/size=%d/hashed=%v", w.name, size, hashed), func(b *testing.B) {
					s := newKVState()
					fill := w.fill
					if fill == nil {
						fill = w.op
					}
					for i := range size {
						s.Apply(fill(i))
					}
					if hashed {
						s.StateHash()
					}
					b.ResetTimer()
					for i := 0; i < b.N; i++ {
						s.Apply(w.op(i))
						if hashed && i%64 == 0 {
							s.StateHash()
						}
					}
				})
			}
		}
	}
}

// BenchmarkKVSnapshot10k is the snapshot ESDS's garbage collection writes
// (record "s") at 10,000 16-byte keys with 100-byte values, 500 of them
// rewritten between two snapshots: sorted afresh each time (fresh, what
// Snapshot does) or through a kept KeyOrder (kept, what ESDS does).
//
//	go test ./service -run '^$' -bench KVSnapshot10k
func BenchmarkKVSnapshot10k(b *testing.B) {
	for _, kept := range []bool{false, true} {
		b.Run(map[bool]string{false: "fresh", true: "kept"}[kept], func(b *testing.B) {
			s := newKVState()
			v := bytes.Repeat([]byte("v"), 100)
			for i := range 10000 {
				s.Apply(Op{Kind: "set", Key: fmt.Sprintf("key:%012d", i), Args: [][]byte{v}})
			}
			var o KeyOrder
			b.ResetTimer()
			for n := range b.N {
				b.StopTimer()
				for i := range 500 {
					s.Apply(Op{Kind: "set", Key: fmt.Sprintf("key:%012d", (n*500+i*7)%10000), Args: [][]byte{v}})
				}
				b.StartTimer()
				if kept {
					s.SnapshotOrdered(&o)
				} else {
					s.Snapshot()
				}
			}
		})
	}
}

// BenchmarkKVSetKeys is a plain SET of a 100-byte value to a key drawn
// (pseudo-randomly, the same sequence every run) from n keys that all
// exist, the ESDS benchmarks' put (redis-benchmark -t set -r 10000):
// every probe of the key map is a likely cache miss once the map
// outgrows the cache. Beside wall time it reports the benchmark thread's
// CPU per SET (cpu-ns/op), which a loaded machine's descheduling does not
// inflate.
//
//	go test ./service -run '^$' -bench KVSetKeys
func BenchmarkKVSetKeys(b *testing.B) {
	for _, n := range []int{10000, 1000000} {
		b.Run(fmt.Sprintf("keys=%d", n), func(b *testing.B) {
			s := newKVState()
			v := bytes.Repeat([]byte("v"), 100)
			ops := make([]Op, n)
			for i := range ops {
				ops[i] = Op{Kind: "set", Key: fmt.Sprintf("key:%012d", i), Args: [][]byte{v}}
				s.Apply(ops[i])
			}
			order := make([]int32, 1<<16)
			x := uint32(1)
			for i := range order {
				x ^= x << 13
				x ^= x >> 17
				x ^= x << 5
				order[i] = int32(x % uint32(n))
			}
			runtime.LockOSThread()
			defer runtime.UnlockOSThread()
			b.ResetTimer()
			c0, _ := cpuwork.ThreadCPU()
			for i := 0; i < b.N; i++ {
				s.Apply(ops[order[i&(len(order)-1)]])
			}
			c1, _ := cpuwork.ThreadCPU()
			b.ReportMetric(float64(c1-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
