package node

import (
	"context"
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/paxos"
	_ "github.com/synod-dev/synod/protocol/unreplicated"
	"github.com/synod-dev/synod/service"
)

// BenchmarkPaxosPut measures the node runtime path alone (no RESP
// gateway): puts submitted with Node.Do to the leader of a 3-node
// Multi-Paxos cluster in this process, one at a time or 64 at a time. Besides ns/op it
// reports allocs/op and B/op summed over the three nodes (all in this
// process), fsyncs/op and msgs/op (peer messages sent, summed over the
// nodes) and cpu-us/op, the process's user+system CPU per put, the figure
// docs/COSTS.md ("Runtime path profile") compares before and after.
//
//	go test ./node -run '^$' -bench PaxosPut -benchtime 20000x
func BenchmarkPaxosPut(b *testing.B) {
	for _, bc := range []struct {
		d    string
		conc int
	}{{config.Memory, 1}, {config.Memory, 64}, {config.Fsync, 1}, {config.Fsync, 64}} {
		d, conc := bc.d, bc.conc
		b.Run(fmt.Sprintf("%s/clients=%d", d, conc), func(b *testing.B) {
			nodes, leader := paxosCluster(b, d, func(string) Options { return Options{} })
			val := make([]byte, 100)
			var client atomic.Uint64
			put := func(id, seq uint64) {
				r := automaton.Request{ID: automaton.RequestID{Client: 1000 + id, Seq: seq},
					Op: service.Op{Kind: "set", Key: fmt.Sprintf("k%d", seq%10000), Args: [][]byte{val}}}
				ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
				resp, err := leader.Do(ctx, "default", r)
				cancel()
				if err != nil || resp.Result.IsErr() {
					b.Errorf("set: %v %v", err, resp.Result)
				}
			}
			b.ReportAllocs()
			cpu0, fs0, msgs0 := cpuTime(), counter(nodes, fsyncsOf), counter(nodes, msgsOf)
			b.ResetTimer()
			if conc == 1 {
				for i := range b.N {
					put(0, uint64(i+1))
				}
			} else {
				b.SetParallelism(conc / runtime.GOMAXPROCS(0))
				b.RunParallel(func(pb *testing.PB) {
					id := client.Add(1)
					for seq := uint64(1); pb.Next(); seq++ {
						put(id, seq)
					}
				})
			}
			b.StopTimer()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(counter(nodes, fsyncsOf)-fs0)/float64(b.N), "fsyncs/op")
			b.ReportMetric(float64(counter(nodes, msgsOf)-msgs0)/float64(b.N), "msgs/op")
		})
	}
}

func fsyncsOf(l *nsLoop) uint64 { return l.fsyncs.Load() }
func msgsOf(l *nsLoop) uint64   { return l.msgsOut.Load() }

// counter sums one of the default namespace's counters over nodes.
func counter(nodes []*Node, f func(*nsLoop) uint64) uint64 {
	var s uint64
	for _, n := range nodes {
		s += f(n.loop("default"))
	}
	return s
}

// cpuTime is this process's user+system CPU time so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkNamespacesPut measures group commit across namespaces on the
// live runtime: one node (fsync on, the WAL engine) with N namespaces of
// protocol unreplicated (the node is the server: each put is persisted,
// then answered), 64 clients spread over the namespaces, puts through
// Node.Do. Each namespace's committer commits its own batches; the WAL
// lets commits of different namespaces that meet a write in progress share
// the next frame. It reports commits/op (namespace commits, what
// synod_fsyncs_total counts) and frames/op (the log's writes, each one
// fdatasync: what the disk did), and cpu-us/op.
//
//	go test ./node -run '^$' -bench NamespacesPut -benchtime 20000x
func BenchmarkNamespacesPut(b *testing.B) {
	for _, nss := range []int{1, 4, 16} {
		b.Run(fmt.Sprintf("namespaces=%d", nss), func(b *testing.B) {
			var spaces []config.Namespace
			for i := range nss {
				spaces = append(spaces, config.Namespace{Name: fmt.Sprintf("ns%d", i), Protocol: "unreplicated", Service: "kv"})
			}
			cfg, ls := mkCluster(b, 1, config.Fsync, spaces...)
			n := startNode(b, cfg, "n1", ls[0], Options{})
			w := n.wal.Load()
			if w == nil {
				b.Fatal("the node does not use the WAL engine")
			}
			val := make([]byte, 100)
			var client atomic.Uint64
			commits := func() uint64 {
				var s uint64
				for _, sp := range spaces {
					s += n.loop(sp.Name).fsyncs.Load()
				}
				return s
			}
			c0, cpu0 := commits(), cpuTime()
			_, f0 := w.Writes()
			b.ResetTimer()
			b.SetParallelism(64 / runtime.GOMAXPROCS(0))
			b.RunParallel(func(pb *testing.PB) {
				id := client.Add(1)
				ns := spaces[int(id)%nss].Name
				for seq := uint64(1); pb.Next(); seq++ {
					r := automaton.Request{ID: automaton.RequestID{Client: 1000 + id, Seq: seq},
						Op: service.Op{Kind: "set", Key: fmt.Sprintf("k%d", seq%10000), Args: [][]byte{val}}}
					ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
					resp, err := n.Do(ctx, ns, r)
					cancel()
					if err != nil || resp.Result.IsErr() {
						b.Errorf("set: %v %v", err, resp.Result)
					}
				}
			})
			b.StopTimer()
			_, f1 := w.Writes()
			b.ReportMetric(float64(cpuTime()-cpu0)/float64(time.Microsecond)/float64(b.N), "cpu-us/op")
			b.ReportMetric(float64(commits()-c0)/float64(b.N), "commits/op")
			b.ReportMetric(float64(f1-f0)/float64(b.N), "frames/op")
		})
	}
}

// BenchmarkABDPut measures what issue 28 item 3 is about on the runtime
// path alone (no RESP gateway): 64 puts in flight through Node.Do at one
// coordinator of a 3-node ABD cluster (durability memory), with the loop
// yielding once before it steps a pass's client batch (loop.go,
// yieldForRequests) and without. Besides cpu-us/op it reports, summed over
// the nodes, msgs/op (peer messages sent), writes/op (peer write system
// calls: an inline frame, or the writer's batch of queued frames) and
// steps/op (automaton steps: a pass's client batch is one) and
// handoffs/op (Node.Handoffs; direct=false: every request goes through
// the loop goroutine, no direct pass).
//
//	go test ./node -run '^$' -bench ABDPut -benchtime 20000x
func BenchmarkABDPut(b *testing.B) {
	for _, v := range []struct{ noYield, noDirect bool }{{true, true}, {false, true}, {false, false}} {
		b.Run(fmt.Sprintf("yield=%v/direct=%v", !v.noYield, !v.noDirect), func(b *testing.B) {
			benchABD(b, "set", nil, Options{noYield: v.noYield, noDirect: v.noDirect})
		})
	}
}

// BenchmarkABDThrifty is BenchmarkABDPut's direct passes with abd's
// query phases asking a majority first (thrifty=true) or every replica
// (false, the default), for puts and for gets (of keys no replica
// holds: every answer carries the zero tag, one phase each):
//
//	go test ./node -run '^$' -bench ABDThrifty -benchtime 20000x
func BenchmarkABDThrifty(b *testing.B) {
	for _, kind := range []string{"set", "get"} {
		for _, thrifty := range []string{"false", "true"} {
			b.Run(fmt.Sprintf("op=%s/thrifty=%s", kind, thrifty), func(b *testing.B) {
				benchABD(b, kind, map[string]string{"thrifty": thrifty}, Options{})
			})
		}
	}
}

// benchABD runs b.N requests of kind (set or get) through a 3-node abd
// cluster's first node, 64 at a time.
func benchABD(b *testing.B, kind string, params map[string]string, opts Options) {
	benchQuorum(b, "abd", config.Memory, kind, 64, params, opts)
}

// benchQuorum is benchABD for protocol proto and durability dur, with
// clients requests in flight (1: one after the other). Besides
// benchABD's figures it reports, per operation over the whole process
// (the nodes' peer connections are its only sockets), read and write
// system calls (syscr/op, syscw/op: /proc/self/io), context switches of
// its threads (ctxsw/op, voluntary and not: a thread that sleeps and is
// woken pays one), and passes run inline on a caller's or a peer reader's
// goroutine (inline/op: sched.go, readerpass.go).
func benchQuorum(b *testing.B, proto, dur, kind string, clients int, params map[string]string, opts Options) {
	ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv", Params: params}
	cfg, ls := mkCluster(b, 3, dur, ns)
	var nodes []*Node
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(b, cfg, n.ID, ls[i], opts))
	}
	coord := nodes[0]
	do(b, coord, "default", req("set", "warm", "x"))
	val := make([]byte, 100)
	var client atomic.Uint64
	writes := func() (s uint64) {
		for _, n := range nodes {
			for _, st := range n.tr.Stats() {
				s += st.Writes
			}
		}
		return s
	}
	b.ReportAllocs()
	p0, msgs0, w0, st0 := takeProcCounts(nodes), counter(nodes, msgsOf), writes(), counter(nodes, steppedOf)
	in0, fs0 := counter(nodes, inlinesOf), counter(nodes, fsyncsOf)
	b.ResetTimer()
	run := func(next func() bool) {
		id := client.Add(1)
		for seq := uint64(1); next(); seq++ {
			r := automaton.Request{ID: automaton.RequestID{Client: 1000 + id, Seq: seq},
				Op: service.Op{Kind: kind, Key: fmt.Sprintf("k%d-%d", id, seq%1000)}}
			if kind == "set" {
				r.Op.Args = [][]byte{val}
			}
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			resp, err := coord.Do(ctx, "default", r)
			cancel()
			if err != nil || resp.Result.IsErr() {
				b.Errorf("%s: %v %v", kind, err, resp.Result)
			}
		}
	}
	runClients(b, clients, run)
	b.StopTimer()
	n := float64(b.N)
	p0.report(b, nodes, n)
	b.ReportMetric(float64(counter(nodes, msgsOf)-msgs0)/n, "msgs/op")
	b.ReportMetric(float64(writes()-w0)/n, "writes/op")
	b.ReportMetric(float64(counter(nodes, steppedOf)-st0)/n, "steps/op")
	b.ReportMetric(float64(counter(nodes, inlinesOf)-in0)/n, "inline/op")
	b.ReportMetric(float64(counter(nodes, fsyncsOf)-fs0)/n, "fsyncs/op")
}

func inlinesOf(l *nsLoop) uint64 { return l.inlines.Load() }

// procCounts is what the node benchmarks report per operation, summed over
// the process (clients included): CPU time, the hand-offs the nodes count,
// read and write system calls, context switches.
type procCounts struct {
	cpu      time.Duration
	handoffs uint64
	io       [2]uint64
	ctxsw    uint64
}

// takeProcCounts reads the counts so far.
func takeProcCounts(nodes []*Node) procCounts {
	p := procCounts{cpu: cpuTime(), io: procIO(), ctxsw: ctxSwitches()}
	for _, n := range nodes {
		p.handoffs += n.Handoffs()
	}
	return p
}

// report reports the counts since p per operation over n operations:
// cpu-us/op, handoffs/op, syscr/op, syscw/op and ctxsw/op.
func (p procCounts) report(b *testing.B, nodes []*Node, n float64) {
	q := takeProcCounts(nodes)
	b.ReportMetric(float64(q.cpu-p.cpu)/float64(time.Microsecond)/n, "cpu-us/op")
	b.ReportMetric(float64(q.handoffs-p.handoffs)/n, "handoffs/op")
	b.ReportMetric(float64(q.io[0]-p.io[0])/n, "syscr/op")
	b.ReportMetric(float64(q.io[1]-p.io[1])/n, "syscw/op")
	b.ReportMetric(float64(q.ctxsw-p.ctxsw)/n, "ctxsw/op")
}

// procIO is this process's read and write system calls so far
// (/proc/self/io syscr, syscw; zero where there is none).
func procIO() (rw [2]uint64) {
	data, err := os.ReadFile("/proc/self/io")
	if err != nil {
		return rw
	}
	for _, line := range strings.Split(string(data), "\n") {
		k, v, ok := strings.Cut(line, ": ")
		x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
		switch {
		case ok && k == "syscr":
			rw[0] = x
		case ok && k == "syscw":
			rw[1] = x
		}
	}
	return rw
}

// ctxSwitches is the context switches, voluntary and not, of this
// process's threads so far (/proc/self/task/*/status).
func ctxSwitches() (s uint64) {
	tasks, _ := os.ReadDir("/proc/self/task")
	for _, t := range tasks {
		data, err := os.ReadFile("/proc/self/task/" + t.Name() + "/status")
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(data), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.HasSuffix(k, "ctxt_switches") {
				x, _ := strconv.ParseUint(strings.TrimSpace(v), 10, 64)
				s += x
			}
		}
	}
	return s
}

func steppedOf(l *nsLoop) uint64 { return l.stepped.Load() }

// runClients runs run as clients closed-loop clients for b.N operations in
// all: one on the benchmark's goroutine, or RunParallel with about clients
// goroutines; run loops while next says so.
func runClients(b *testing.B, clients int, run func(next func() bool)) {
	if clients == 1 {
		i := 0
		run(func() bool { i++; return i <= b.N })
		return
	}
	b.SetParallelism(max(clients/runtime.GOMAXPROCS(0), 1))
	b.RunParallel(func(pb *testing.PB) { run(pb.Next) })
}
