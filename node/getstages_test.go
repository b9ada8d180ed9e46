package node

import (
	"bufio"
	"fmt"
	"net"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// BenchmarkGetStages times one client's linearizable gets at the leader over
// RESP, stage by stage (trace.go), with the namespace's default read mode
// (quorum: each get waits for a heartbeat round sent after it arrived) and
// with read=lease (a valid lease stands in for the round), and logs the
// median time of each stage from the get's start and the peer messages
// per get:
//
//	go test ./node -run '^$' -bench GetStages -benchtime 3000x
func BenchmarkGetStages(b *testing.B) {
	for _, mode := range []string{"quorum", "lease"} {
		b.Run(mode, func(b *testing.B) {
			rec := newStageRecorder()
			_, leader := paxosClusterParams(b, config.Fsync, map[string]string{"read": mode}, func(id string) Options {
				return Options{trace: rec.tracer(automaton.NodeID(id))}
			})
			c, err := net.Dial("tcp", leader.ClientAddr().String())
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			conn := bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
			val := make([]byte, 100)
			for i := range 100 { // the keys the gets read, and a warm-up
				stagePut(b, leader, conn, uint64(1_000_000+i), val)
			}
			var gets [][]string
			var ats [][]time.Duration
			var ends []time.Duration
			sends := 0
			b.ResetTimer()
			for i := range b.N {
				rec.take()
				rec.mark("get")
				stageGet(b, conn, fmt.Sprintf("k%d", (1_000_000+i%100)%10000))
				rec.mark("answer")
				recs := rec.take()
				ls, as := stageLabels(recs, leader.ID(), leader.ID())
				end := slices.Index(ls, "client answer")
				gets, ats = append(gets, ls[:end+1]), append(ats, as[:end+1])
				ends = append(ends, as[end])
				for _, l := range ls[:end+1] {
					if strings.Contains(l, " send ") {
						sends++
					}
				}
			}
			b.StopTimer()
			one := reportMedianRun(b, gets, ats, ends)
			b.ReportMetric(float64(sends)/float64(b.N), "sends/get")
			if b.N == 1 { // the benchmark's probe run; its get is no median
				return
			}
			b.Logf("one client's get at the leader via resp, read=%s, fsync on, %d gets:\n%s\na get of median latency:\n%s",
				mode, b.N, stageTable(gets, ats), one)
		})
	}
}

// stageGet is one GET over a RESP connection; the key holds a 100-byte value.
func stageGet(t testing.TB, conn *bufio.ReadWriter, key string) {
	fmt.Fprintf(conn, "*2\r\n$3\r\nGET\r\n$%d\r\n%s\r\n", len(key), key)
	if err := conn.Flush(); err != nil {
		t.Fatal(err)
	}
	line, err := conn.ReadString('\n')
	if err != nil || line != "$100\r\n" {
		t.Fatalf("GET over RESP: %q %v", line, err)
	}
	if _, err := conn.Discard(102); err != nil {
		t.Fatal(err)
	}
}

// BenchmarkGets: closed-loop RESP clients (one connection each, no
// pipelining) reading at the leader of a 3-node Multi-Paxos cluster with
// fsync, the namespace's default read (quorum); issue 28's 16-client get
// cell in one process. Per get, summed over the process (the clients'
// goroutines included): CPU µs, hand-offs, read and write system calls,
// context switches, allocations, and msgs/op (peer messages; a
// confirmation round to two followers is 4: rounds/get = msgs/op / 4).
//
//	go test ./node -run '^$' -bench 'Gets$' -benchtime 20000x
func BenchmarkGets(b *testing.B) {
	for _, clients := range []int{1, 16} {
		b.Run(fmt.Sprintf("clients=%d", clients), func(b *testing.B) {
			nodes, leader := paxosCluster(b, config.Fsync, func(string) Options { return Options{} })
			conns := make(chan *replyClient, clients)
			val := string(make([]byte, 100))
			for i := range clients {
				cl := dialReplyClient(b, leader.ClientAddr().String())
				for k := range 100 / clients {
					cl.do(b, "SET", fmt.Sprintf("k%d", i*(100/clients)+k), val)
				}
				conns <- cl
			}
			b.ReportAllocs()
			p0, m0 := takeProcCounts(nodes), counter(nodes, msgsOf)
			b.ResetTimer()
			runClients(b, clients, func(next func() bool) {
				cl := <-conns
				for i := 0; next(); i++ {
					if got := cl.do(b, "GET", fmt.Sprintf("k%d", i%96)); len(got) > 0 && got[0] == '(' {
						b.Errorf("GET: %s", got)
					}
				}
				conns <- cl
			})
			b.StopTimer()
			n := float64(b.N)
			p0.report(b, nodes, n)
			b.ReportMetric(float64(counter(nodes, msgsOf)-m0)/n, "msgs/op")
		})
	}
}
