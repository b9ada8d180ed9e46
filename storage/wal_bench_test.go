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
		// The node's configuration (storage.go, Open): frames land on zeros
		// written ahead by the fill goroutine.
		{"wal-fdatasync-zerofill", func(d string) (Engine, error) {
			return OpenWAL(d, WALOptions{Sync: true, ZeroFill: true})
		}},
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

// BenchmarkCommitNamespaces measures group commit across namespaces: N
// namespaces of one node each commit small batches (as
// BenchmarkCommit's) in a closed loop from a goroutine of their own, as
// the node's per-namespace committers do under load, with fsync on. It
// compares one log per node (the WAL engine: a Commit that finds a write in
// progress joins the next frame, so namespaces share each write and
// fdatasync; and Pebble, whose commit pipeline shares its WAL sync) with
// one WAL per namespace (N engines, each fsyncing on its own), and reports
// commits per second, latency, and for the WAL the commits carried per
// frame (per fdatasync):
//
//	go test ./storage -run '^$' -bench CommitNamespaces -benchtime 4000x
func BenchmarkCommitNamespaces(b *testing.B) {
	type setup struct {
		name string
		open func(dir string, ns int) ([]Store, func() (uint64, uint64), func(), error)
	}
	shared := func(open func(string) (Engine, error)) func(string, int) ([]Store, func() (uint64, uint64), func(), error) {
		return func(dir string, ns int) ([]Store, func() (uint64, uint64), func(), error) {
			eng, err := open(dir)
			if err != nil {
				return nil, nil, nil, err
			}
			var stores []Store
			for i := 0; i < ns; i++ {
				s, err := eng.Namespace(fmt.Sprintf("ns%d", i))
				if err != nil {
					return nil, nil, nil, err
				}
				stores = append(stores, s)
			}
			writes := func() (uint64, uint64) { return 0, 0 }
			if w, ok := eng.(*WAL); ok {
				writes = w.Writes
			}
			return stores, writes, func() { eng.Close() }, nil
		}
	}
	setups := []setup{
		{"wal-one-log", shared(func(d string) (Engine, error) { return OpenWAL(d, WALOptions{Sync: true}) })},
		{"pebble-one-db", shared(func(d string) (Engine, error) { return OpenPebble(d, PebbleOptions{Sync: true}) })},
		{"wal-log-per-namespace", func(dir string, ns int) ([]Store, func() (uint64, uint64), func(), error) {
			var stores []Store
			var wals []*WAL
			for i := 0; i < ns; i++ {
				w, err := OpenWAL(fmt.Sprintf("%s/%d", dir, i), WALOptions{Sync: true})
				if err != nil {
					return nil, nil, nil, err
				}
				wals = append(wals, w)
				s, err := w.Namespace(fmt.Sprintf("ns%d", i))
				if err != nil {
					return nil, nil, nil, err
				}
				stores = append(stores, s)
			}
			writes := func() (c, f uint64) {
				for _, w := range wals {
					c1, f1 := w.Writes()
					c, f = c+c1, f+f1
				}
				return c, f
			}
			return stores, writes, func() {
				for _, w := range wals {
					w.Close()
				}
			}, nil
		}},
	}
	for _, ns := range []int{1, 4, 16} {
		for _, st := range setups {
			b.Run(fmt.Sprintf("%s/namespaces=%d", st.name, ns), func(b *testing.B) {
				stores, writes, closeAll, err := st.open(b.TempDir(), ns)
				if err != nil {
					b.Fatal(err)
				}
				defer closeAll()
				slot, counter := make([]byte, 150), make([]byte, 40)
				per := max(b.N/ns, 1)
				lats := make([][]time.Duration, ns)
				errs := make(chan error, ns)
				c0, f0 := writes()
				b.ResetTimer()
				t0 := time.Now()
				for i := range stores {
					go func(i int) {
						lat := make([]time.Duration, 0, per)
						for k := 0; k < per; k++ {
							t := time.Now()
							err := stores[i].Commit([]automaton.Persist{
								{Key: fmt.Sprintf("slot/%012d", k), Value: slot},
								{Key: "accepted", Value: counter},
							})
							lat = append(lat, time.Since(t))
							if err != nil {
								errs <- err
								return
							}
						}
						lats[i] = lat
						errs <- nil
					}(i)
				}
				for range stores {
					if err := <-errs; err != nil {
						b.Fatal(err)
					}
				}
				el := time.Since(t0)
				b.StopTimer()
				var all []time.Duration
				for _, l := range lats {
					all = append(all, l...)
				}
				slices.Sort(all)
				us := func(q float64) float64 { return float64(all[int(q*float64(len(all)-1))].Nanoseconds()) / 1e3 }
				b.ReportMetric(float64(len(all))/el.Seconds(), "commits/s")
				b.ReportMetric(us(0.5), "p50-us")
				b.ReportMetric(us(0.99), "p99-us")
				if c1, f1 := writes(); f1 > f0 {
					b.ReportMetric(float64(c1-c0)/float64(f1-f0), "commits/fsync")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}
