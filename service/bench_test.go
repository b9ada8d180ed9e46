package service

import (
	"fmt"
	"runtime"
	"testing"
)

// Benchmarks for state hashing and transfer (issue 9 item 5's figures):
//
//	go test ./service -run xxx -bench 'Hash|Delta' -benchtime 200x

const benchKeys = 100_000

// benchKV returns a hashed KV state of benchKeys keys ("key%06d" → 32-byte
// values) and its size in bytes of keys and values.
func benchKV(b *testing.B) (*KVState, int64) {
	b.Helper()
	s := KV{}.NewState().(*KVState)
	val := make([]byte, 32)
	var size int64
	for i := range benchKeys {
		k := fmt.Sprintf("key%06d", i)
		s.Apply(Op{Kind: "set", Key: k, Args: [][]byte{val}})
		size += int64(len(k) + len(val))
	}
	s.StateHash()
	return s, size
}

// Hash cost per touched key: one set, then StateHash, on a 100k-key state.
func BenchmarkHashPerTouchedKey(b *testing.B) {
	s, _ := benchKV(b)
	val := []byte("0123456789abcdef0123456789abcdef")
	b.ResetTimer()
	for i := range b.N {
		s.Apply(Op{Kind: "set", Key: fmt.Sprintf("key%06d", (i*7919)%benchKeys), Args: [][]byte{val}})
		s.StateHash()
	}
}

// Hash cost per touched key when 1000 sets are hashed together.
func BenchmarkHashPerTouchedKeyBatch1000(b *testing.B) {
	s, _ := benchKV(b)
	val := []byte("0123456789abcdef0123456789abcdef")
	b.ResetTimer()
	for i := range b.N {
		s.Apply(Op{Kind: "set", Key: fmt.Sprintf("key%06d", (i*7919)%benchKeys), Args: [][]byte{val}})
		if i%1000 == 999 {
			s.StateHash()
		}
	}
	s.StateHash()
}

// A set without a tree, for comparison (the cost protocols that never hash
// pay).
func BenchmarkSetUnhashed(b *testing.B) {
	s := KV{}.NewState().(*KVState)
	val := make([]byte, 32)
	for i := range benchKeys {
		s.Apply(Op{Kind: "set", Key: fmt.Sprintf("key%06d", i), Args: [][]byte{val}})
	}
	b.ResetTimer()
	for i := range b.N {
		s.Apply(Op{Kind: "set", Key: fmt.Sprintf("key%06d", (i*7919)%benchKeys), Args: [][]byte{val}})
	}
}

// Full-tree hash throughput: the tree rebuilt from scratch over 100k keys
// (MB/s of keys and values).
func BenchmarkHashFullTree(b *testing.B) {
	s, size := benchKV(b)
	b.SetBytes(size)
	b.ResetTimer()
	for range b.N {
		s.tree = nil
		s.StateHash()
	}
}

// Delta extraction and installation with 1% and 10% of 100k keys changed
// (ns/key is per changed key; ns/op per whole delta).
func BenchmarkDelta(b *testing.B) {
	for _, pct := range []int{1, 10} {
		leader, _ := benchKV(b)
		follower := leader.Clone().(*KVState)
		changed := benchKeys * pct / 100
		for i := range changed {
			k := fmt.Sprintf("key%06d", (i*7919)%benchKeys)
			if i%10 == 0 {
				leader.Apply(Op{Kind: "del", Key: k})
			} else {
				leader.Apply(Op{Kind: "set", Key: k, Args: [][]byte{[]byte("changed")}})
			}
		}
		since := follower.Version()
		b.Run(fmt.Sprintf("extract/%d%%", pct), func(b *testing.B) {
			var d []byte
			for range b.N {
				d, _ = leader.Delta(since)
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*changed), "ns/key")
			b.ReportMetric(float64(len(d))/float64(changed), "B/key")
		})
		d, err := leader.Delta(since)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(fmt.Sprintf("apply/%d%%", pct), func(b *testing.B) {
			for range b.N {
				b.StopTimer()
				c := follower.Clone().(*KVState)
				c.ownTree()  // the copy-on-write copy is Clone's cost, not the delta's
				runtime.GC() // nor is collecting the previous copies
				b.StartTimer()
				if err := c.ApplyDelta(d); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*changed), "ns/key")
		})
	}
}
