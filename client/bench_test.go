package client

import (
	"context"
	"fmt"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/service"
)

// Benchmarks of the gRPC paths, client and server in this process over
// loopback (issue 28 item 6: CPU and allocations per operation of the Go
// client and gateway/grpcserver; `go test ./client -run X -bench . -benchmem
// -cpuprofile cpu.out`). They are commands, not timed tests: no figure is
// asserted.

// benchParallel runs do from 16 goroutines per GOMAXPROCS (closed loop)
// over b.N operations, and reports the CPU time per operation.
func benchParallel(b *testing.B, do func(ctx context.Context, i int64) error) {
	ctx := context.Background()
	var n atomic.Int64
	b.SetParallelism(16)
	b.ResetTimer()
	c0 := cpuTime()
	b.RunParallel(func(pb *testing.PB) {
		for pb.Next() {
			if err := do(ctx, n.Add(1)); err != nil {
				b.Error(err)
				return
			}
		}
	})
	// The process's CPU time (client and server) per operation: on a
	// loaded machine a steadier figure than the wall time per operation.
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}

// cpuTime is the process's user and system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// Client-driven ABD against 3 replicas (real ABD automatons), one client
// shared by the goroutines: puts (query and store phases) and gets, with
// phases to a majority first (the default) and to every replica (all,
// Options.ABDAll).
func BenchmarkABDClientDriven(b *testing.B) {
	_, _, addrs := abdReplicas(b, 3)
	val := make([]byte, 100)
	for _, all := range []bool{false, true} {
		a := newGRPC(b, addrs, Options{ABDAll: all}).ABD("")
		sfx := ""
		if all {
			sfx = "/all"
		}
		b.Run("put"+sfx, func(b *testing.B) {
			benchParallel(b, func(ctx context.Context, i int64) error {
				return a.Set(ctx, fmt.Sprintf("key:%04d", i%1000), val)
			})
		})
		b.Run("get"+sfx, func(b *testing.B) {
			benchParallel(b, func(ctx context.Context, i int64) error {
				_, _, err := a.Get(ctx, fmt.Sprintf("key:%04d", i%1000))
				return err
			})
		})
	}
}

// One node's gRPC API over an in-memory backend: SETs through Do (one
// unary call each) and through the Pipeline stream (Options.Pipeline), on
// a namespace with atomic groups (paxos) and on one without (abd).
func BenchmarkGRPCSet(b *testing.B) {
	val := make([]byte, 100)
	for _, proto := range []string{"paxos", "abd"} {
		for _, piped := range []bool{false, true} {
			name := proto + "/do"
			if piped {
				name = proto + "/pipeline"
			}
			b.Run(name, func(b *testing.B) {
				n := startGRPC(b, kvNS(proto), grpcserver.Options{})
				c := newGRPC(b, []string{n.addr}, Options{Pipeline: piped})
				benchParallel(b, func(ctx context.Context, i int64) error {
					_, _, err := c.DoOp(ctx, "", service.Op{Kind: "set", Key: fmt.Sprintf("key:%04d", i%1000), Args: [][]byte{val}}, OpOptions{})
					return err
				})
			})
		}
	}
}

// One caller, one request at a time (the one-client latency path), over
// an in-memory paxos namespace: GETs through Do (a unary call each) and
// through the Pipeline stream (Options.Pipeline). Count the goroutine
// hand-offs per call with a runtime trace: `go test ./client -run X
// -bench OneClient/stream -benchtime 5000x -trace t.out`, then count the
// trace's goroutine unblocks (docs/COSTS.md, "Client-driven ABD's phases
// in a compact form").
func BenchmarkGRPCOneClient(b *testing.B) {
	for _, piped := range []bool{false, true} {
		name := "do"
		if piped {
			name = "stream"
		}
		b.Run(name, func(b *testing.B) {
			n := startGRPC(b, kvNS("paxos"), grpcserver.Options{})
			c := newGRPC(b, []string{n.addr}, Options{Pipeline: piped})
			ctx := context.Background()
			if _, _, err := c.DoOp(ctx, "", service.Op{Kind: "set", Key: "k", Args: [][]byte{make([]byte, 100)}}, OpOptions{}); err != nil {
				b.Fatal(err)
			}
			b.ResetTimer()
			c0 := cpuTime()
			for range b.N {
				if _, _, err := c.DoOp(ctx, "", service.Op{Kind: "get", Key: "k"}, OpOptions{}); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
		})
	}
}
