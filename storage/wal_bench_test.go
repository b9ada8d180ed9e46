package storage

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// BenchmarkCommit measures one Commit of a small batch (two records, a
// 150-byte slot and a 40-byte counter, like a Multi-Paxos accept) with fsync
// on, for Pebble and the WAL variants, and reports the latency p50/p99:
//
//	go test ./storage -run '^$' -bench Commit -benchtime 5000x
func BenchmarkCommit(b *testing.B) {
	engines := []struct {
		name string
		open func(dir string) (Engine, error)
	}{
		{"pebble", func(d string) (Engine, error) { return OpenPebble(d, PebbleOptions{Sync: true}) }},
		{"wal-fdatasync-fallocate", func(d string) (Engine, error) { return OpenWAL(d, WALOptions{Sync: true}) }},
		{"wal-fdatasync-append", func(d string) (Engine, error) { return OpenWAL(d, WALOptions{Sync: true, Chunk: -1}) }},
		{"wal-odsync-fallocate", func(d string) (Engine, error) { return OpenWAL(d, WALOptions{Sync: true, DSync: true}) }},
		{"wal-odsync-append", func(d string) (Engine, error) {
			return OpenWAL(d, WALOptions{Sync: true, DSync: true, Chunk: -1})
		}},
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			eng, err := e.open(b.TempDir())
			if err != nil {
				b.Fatal(err)
			}
			defer eng.Close()
			s, err := eng.Namespace("bench")
			if err != nil {
				b.Fatal(err)
			}
			slot, counter := make([]byte, 150), make([]byte, 40)
			lat := make([]time.Duration, 0, b.N)
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				t0 := time.Now()
				err := s.Commit([]automaton.Persist{
					{Key: fmt.Sprintf("slot/%012d", i), Value: slot},
					{Key: "accepted", Value: counter},
				})
				lat = append(lat, time.Since(t0))
				if err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			slices.Sort(lat)
			us := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
			b.ReportMetric(us(0.5), "p50-us")
			b.ReportMetric(us(0.99), "p99-us")
			b.ReportMetric(0, "ns/op")
		})
	}
}
