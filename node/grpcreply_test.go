package node

import (
	"context"
	"fmt"
	"log/slog"
	rtmetrics "runtime/metrics"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/service"
)

// BenchmarkGRPCParity: one closed-loop client at the leader (paxos) or n1
// (abd) of a 3-node cluster in memory, through RESP (one connection) or
// through gRPC (the Go client's direct transport, Do calls) with the
// server's grpc-go or direct transport; the same binary. Per operation,
// summed over the process (the client's goroutines included): hand-offs
// the node counts, context switches, read and write system calls, CPU µs,
// allocations (issue 28 item 6; docs/COSTS.md, grpc47).
func BenchmarkGRPCParity(b *testing.B) {
	for _, proto := range []string{"abd", "paxos"} {
		for _, kind := range []string{"get", "set"} {
			for _, path := range []string{"resp", grpcserver.TransportGRPCGo, grpcserver.TransportDirect, "stream-" + grpcserver.TransportGRPCGo, "stream-" + grpcserver.TransportDirect} {
				b.Run(fmt.Sprintf("%s/op=%s/%s", proto, kind, path), func(b *testing.B) {
					benchParity(b, proto, kind, path)
				})
			}
		}
	}
}

func benchParity(b *testing.B, proto, kind, path string) {
	ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv"}
	cfg, ls := mkCluster(b, 3, config.Memory, ns)
	gls := make([]lns, 3)
	for i := range cfg.Nodes {
		gls[i].client = listen(b)
		cfg.Nodes[i].GRPC = gls[i].client.Addr().String()
	}
	if err := cfg.Validate(); err != nil {
		b.Fatal(err)
	}
	// stream-TRANSPORT: the same calls on the client's Pipeline stream
	// (client.Options.Pipeline), one at a time: a lone Pipeline message.
	transport, stream := strings.CutPrefix(path, "stream-")
	srv := func(bk gateway.Backend, pw string, log *slog.Logger) ClientServer {
		return grpcserver.New(bk, grpcserver.Options{Password: pw, Logger: log, Transport: transport})
	}
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(b, cfg, n.ID, ls[i], Options{GRPCListener: gls[i].client, GRPC: srv}))
	}
	at := 0
	if proto == "paxos" {
		at = leaderIndex(b, nodes)
	}
	val := string(make([]byte, 100))
	var do func(k string) error
	if path == "resp" {
		cl := dialReplyClient(b, cfg.Nodes[at].Client)
		do = func(k string) error {
			var got string
			if kind == "set" {
				got = cl.do(b, "SET", k, val)
			} else {
				got = cl.do(b, "GET", k)
			}
			if len(got) > 0 && got[0] == '(' && got != "(nil)" {
				return fmt.Errorf("%s", got)
			}
			return nil
		}
	} else {
		gc, err := client.NewGRPC([]string{cfg.Nodes[at].GRPC}, client.Options{GRPCTransport: client.TransportDirect, Timeout: 10 * time.Second, Pipeline: stream})
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { gc.Close() })
		ctx := context.Background()
		do = func(k string) error {
			o := service.Op{Kind: kind, Key: k}
			if kind == "set" {
				o.Args = [][]byte{[]byte(val)}
			}
			_, _, err := gc.DoOp(ctx, "", o, client.OpOptions{})
			return err
		}
	}
	for i := range 1000 { // warm: every key set, the connections' buffers grown
		if err := do(fmt.Sprintf("k%d", i)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportAllocs()
	p0 := takeProcCounts(nodes)
	s0 := takeSchedCounts()
	b.ResetTimer()
	for i := range b.N {
		if err := do(fmt.Sprintf("k%d", i%1000)); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	n := float64(b.N)
	p0.report(b, nodes, n)
	s0.report(b, n)
}

// schedCounts are the Go scheduler's counts of the process: goroutines
// made runnable and then run (runtime/metrics /sched/latencies:seconds,
// which samples one scheduling in gTrackingPeriod = 8: its count × 8;
// wake-ups, new goroutines' first runs and preemptions) and goroutines
// created. Reported per op as runs/op and gonew/op: the hand-offs the
// node does not count (a connection reader waking a stream's handler).
type schedCounts struct{ runs, created float64 }

func takeSchedCounts() schedCounts {
	ms := []rtmetrics.Sample{{Name: "/sched/latencies:seconds"}, {Name: "/sched/goroutines-created:goroutines"}}
	rtmetrics.Read(ms)
	var c schedCounts
	if ms[0].Value.Kind() == rtmetrics.KindFloat64Histogram {
		for _, x := range ms[0].Value.Float64Histogram().Counts {
			c.runs += 8 * float64(x)
		}
	}
	if ms[1].Value.Kind() == rtmetrics.KindUint64 {
		c.created = float64(ms[1].Value.Uint64())
	}
	return c
}

func (s schedCounts) report(b *testing.B, n float64) {
	e := takeSchedCounts()
	b.ReportMetric((e.runs-s.runs)/n, "runs/op")
	b.ReportMetric((e.created-s.created)/n, "gonew/op")
}
