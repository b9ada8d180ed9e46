package client

import (
	"context"
	"fmt"
	"net"
	"testing"

	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/service"
)

// BenchmarkParity: one caller, one request at a time, against one node in
// this process whose backend answers at once on the submitting goroutine
// (gatewaytest.ReplyBackend with Inline: the node's own share is the same
// small one for every path), through
//
//	resp    the Go client's RESP pool (Client) and the RESP gateway
//	do      GRPC's unary Do calls, direct transport on both sides
//	stream  GRPC's Pipeline stream (Options.Pipeline), one call at a time
//
// Per operation over the whole process (client and server): allocations
// (-benchmem) and CPU (cpu-ns/op). So the gRPC paths' own costs are set
// against RESP's for the same operation, without a cluster's (issue 28
// item 6; docs/costs/s51-grpc51.md):
//
//	go test ./client -run '^$' -bench Parity -benchmem -benchtime 5000x
func BenchmarkParity(b *testing.B) {
	for _, proto := range []string{"abd", "paxos", "esds"} {
		for _, kind := range []string{"get", "set"} {
			for _, path := range []string{"resp", "do", "stream"} {
				b.Run(fmt.Sprintf("%s/%s/%s", proto, kind, path), func(b *testing.B) {
					benchParity(b, proto, kind, path)
				})
			}
		}
	}
}

func benchParity(b *testing.B, proto, kind, path string) {
	rb := gatewaytest.NewReply(kvNS(proto))
	rb.Inline.Store(true)
	val := make([]byte, 100)
	ctx := context.Background()
	var do func(k string) error
	if path == "resp" {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		s := gateway.NewServer(rb, gateway.ServerOptions{})
		done := make(chan error, 1)
		go func() { done <- s.Serve(l) }()
		b.Cleanup(func() { s.Close(); <-done })
		c, err := New([]string{l.Addr().String()}, Options{})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { c.Close() })
		do = func(k string) error {
			if kind == "set" {
				return c.Set(ctx, k, val)
			}
			_, _, err := c.Get(ctx, k)
			return err
		}
	} else {
		n := startGRPCOver(b, rb, rb.MemBackend, grpcserver.Options{Transport: grpcserver.TransportDirect})
		c := newGRPC(b, []string{n.addr}, Options{GRPCTransport: TransportDirect, Pipeline: path == "stream"})
		do = func(k string) error {
			o := service.Op{Kind: kind, Key: k}
			if kind == "set" {
				o.Args = [][]byte{val}
			}
			_, _, err := c.DoOp(ctx, "", o, OpOptions{})
			return err
		}
	}
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = fmt.Sprintf("key:%04d", i)
		if err := do(keys[i]); err != nil { // every key set, buffers grown
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	c0 := cpuTime()
	for i := range b.N {
		if err := do(keys[i%len(keys)]); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(cpuTime()-c0)/float64(b.N), "cpu-ns/op")
}
