package node

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// Stage timing of one client's put (docs/COSTS.md, "One client's put, stage
// by stage"): three Multi-Paxos nodes in this process share one clock, the
// runtime calls Options.trace at each stage (trace.go), and each put's stages
// are timed from the moment the client hands it over.

// stageRec is one traced stage.
type stageRec struct {
	at    time.Duration // since the recorder's base
	node  automaton.NodeID
	stage string
	peer  automaton.NodeID
	kind  byte
}

type stageRecorder struct {
	base time.Time
	mu   sync.Mutex
	recs []stageRec
}

func newStageRecorder() *stageRecorder { return &stageRecorder{base: time.Now()} }

func (r *stageRecorder) tracer(id automaton.NodeID) tracer {
	return func(stage string, peer automaton.NodeID, kind byte) {
		at := time.Since(r.base)
		r.mu.Lock()
		r.recs = append(r.recs, stageRec{at, id, stage, peer, kind})
		r.mu.Unlock()
	}
}

// mark records a client-side stage.
func (r *stageRecorder) mark(stage string) {
	at := time.Since(r.base)
	r.mu.Lock()
	r.recs = append(r.recs, stageRec{at: at, node: "client", stage: stage})
	r.mu.Unlock()
}

// take returns and forgets the records so far.
func (r *stageRecorder) take() []stageRec {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := r.recs
	r.recs = nil
	return out
}

// paxosKinds names Multi-Paxos's message kinds (protocol/paxos/msg.go).
var paxosKinds = []string{"", "Prepare", "Promise", "Accept", "Accepted", "Heartbeat", "HeartbeatAck",
	"CatchupReq", "Catchup", "Snapshot", "Forward", "ForwardReply", "TakeOver"}

// stageLabels labels one put's records (those from its start to its end),
// naming nodes by role: L the leader, E the node the client reached when it
// is a follower, Fn2 (say) another follower; a stage met again in the same put
// gets #2, #3.
func stageLabels(recs []stageRec, leader, entry automaton.NodeID) (labels []string, at []time.Duration) {
	role := func(id automaton.NodeID) string {
		switch id {
		case "":
			return ""
		case "client":
			return "client"
		case leader:
			return "L"
		case entry:
			return "E"
		}
		return "F" + string(id) // the other followers apart
	}
	seen := map[string]int{}
	t0 := recs[0].at
	for _, r := range recs {
		l := role(r.node) + " " + r.stage
		if r.kind != 0 && int(r.kind) < len(paxosKinds) {
			l += " " + paxosKinds[r.kind]
		}
		if r.peer != "" {
			if r.stage == stageSend {
				l += " to " + role(r.peer)
			} else {
				l += " from " + role(r.peer)
			}
		}
		seen[l]++
		if n := seen[l]; n > 1 {
			l += fmt.Sprintf(" #%d", n)
		}
		labels = append(labels, l)
		at = append(at, r.at-t0)
	}
	return labels, at
}

// stageTable prints, for each label met in at least half the puts, the
// median time from the put's start, in order.
func stageTable(puts [][]string, ats [][]time.Duration) string {
	offs := map[string][]time.Duration{}
	for i, ls := range puts {
		for j, l := range ls {
			offs[l] = append(offs[l], ats[i][j])
		}
	}
	type row struct {
		label string
		med   time.Duration
		share float64
	}
	var rows []row
	for l, ds := range offs {
		if 2*len(ds) < len(puts) {
			continue
		}
		slices.Sort(ds)
		rows = append(rows, row{l, ds[len(ds)/2], float64(len(ds)) / float64(len(puts))})
	}
	sort.Slice(rows, func(i, j int) bool { return rows[i].med < rows[j].med })
	var b strings.Builder
	fmt.Fprintf(&b, "%-36s %10s %8s %6s\n", "stage (L leader, E entry, F followers)", "median us", "+us", "puts")
	var prev time.Duration
	for _, r := range rows {
		fmt.Fprintf(&b, "%-36s %10.1f %8.1f %5.0f%%\n", r.label, us(r.med), us(r.med-prev), 100*r.share)
		prev = r.med
	}
	return b.String()
}

// reportMedianRun reports the p50-us and p99-us of the runs' end times and
// returns the stage table of the run whose end is the median: each stage's
// label and its time from the run's start in µs.
func reportMedianRun(b *testing.B, labels [][]string, ats [][]time.Duration, ends []time.Duration) string {
	med := slices.Clone(ends)
	slices.Sort(med)
	ex := slices.Index(ends, med[len(med)/2])
	var one strings.Builder
	for j, l := range labels[ex] {
		fmt.Fprintf(&one, "%-36s %10.1f\n", l, us(ats[ex][j]))
	}
	b.ReportMetric(us(med[len(med)/2]), "p50-us")
	b.ReportMetric(us(med[len(med)*99/100]), "p99-us")
	return one.String()
}

func us(d time.Duration) float64 { return float64(d) / float64(time.Microsecond) }

// stageCluster starts a 3-node Multi-Paxos cluster with every node traced
// into rec, and returns it with its leader.
func stageCluster(t testing.TB, durability string, rec *stageRecorder) (nodes []*Node, leader *Node) {
	nodes, leader = paxosCluster(t, durability, func(id string) Options {
		return Options{trace: rec.tracer(automaton.NodeID(id))}
	})
	for _, n := range nodes { // every node knows the leader
		do(t, n, "default", req("set", "warm", "y"))
	}
	return nodes, leader
}

// paxosCluster starts a 3-node Multi-Paxos cluster (namespace "default", kv)
// with each node's options from opts, and returns it with its leader.
func paxosCluster(t testing.TB, durability string, opts func(id string) Options) (nodes []*Node, leader *Node) {
	return paxosClusterParams(t, durability, nil, opts)
}

// paxosClusterParams is paxosCluster with the namespace's protocol
// parameters.
func paxosClusterParams(t testing.TB, durability string, params map[string]string, opts func(id string) Options) (nodes []*Node, leader *Node) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv", Params: params}
	cfg, ls := mkCluster(t, 3, durability, ns)
	for i, n := range cfg.Nodes {
		nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], opts(n.ID)))
	}
	do(t, nodes[0], "default", req("set", "warm", "x")) // elects a leader
	eventually(t, "a leader", func() bool {
		id, _, _ := nodes[0].Leader("default")
		for _, n := range nodes {
			if n.ID() == id {
				leader = n
				return true
			}
		}
		return false
	})
	return nodes, leader
}

// stagePut is one put: through Node.Do, or over a RESP connection to the
// node's client port when conn is set.
func stagePut(t testing.TB, n *Node, conn *bufio.ReadWriter, seq uint64, val []byte) {
	key := fmt.Sprintf("k%d", seq%10000)
	if conn != nil {
		fmt.Fprintf(conn, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(val), val)
		if err := conn.Flush(); err != nil {
			t.Fatal(err)
		}
		line, err := conn.ReadString('\n')
		if err != nil || line != "+OK\r\n" {
			t.Fatalf("SET over RESP: %q %v", line, err)
		}
		return
	}
	r := automaton.Request{ID: automaton.RequestID{Client: 7, Seq: seq},
		Op: service.Op{Kind: "set", Key: key, Args: [][]byte{val}}}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := n.Do(ctx, "default", r)
	if err != nil || resp.Result.IsErr() {
		t.Fatalf("set: %v %v", err, resp.Result)
	}
}

// BenchmarkPutStages times one client's puts stage by stage (fsync on), at
// the leader and through a follower, through Node.Do and over RESP, and logs
// the median time of each stage from the put's start:
//
//	go test ./node -run '^$' -bench PutStages -benchtime 3000x
func BenchmarkPutStages(b *testing.B) {
	for _, at := range []string{"leader", "follower"} {
		for _, via := range []string{"do", "resp"} {
			b.Run(at+"/"+via, func(b *testing.B) {
				rec := newStageRecorder()
				nodes, leader := stageCluster(b, config.Fsync, rec)
				entry := leader
				if at == "follower" {
					for _, n := range nodes {
						if n != leader {
							entry = n
							break
						}
					}
				}
				var conn *bufio.ReadWriter
				if via == "resp" {
					c, err := net.Dial("tcp", entry.ClientAddr().String())
					if err != nil {
						b.Fatal(err)
					}
					defer c.Close()
					conn = bufio.NewReadWriter(bufio.NewReader(c), bufio.NewWriter(c))
				}
				val := make([]byte, 100)
				for i := range 100 { // warm up
					stagePut(b, entry, conn, uint64(1_000_000+i), val)
				}
				var puts [][]string
				var ats [][]time.Duration
				var ends []time.Duration
				b.ResetTimer()
				for i := range b.N {
					rec.take()
					rec.mark("put")
					stagePut(b, entry, conn, uint64(2_000_000+i), val)
					rec.mark("answer")
					recs := rec.take()
					ls, as := stageLabels(recs, leader.ID(), entry.ID())
					// Only the put's own window: from "put" to "answer".
					end := slices.Index(ls, "client answer")
					puts, ats = append(puts, ls[:end+1]), append(ats, as[:end+1])
					ends = append(ends, as[end])
				}
				b.StopTimer()
				// One put of median latency, stage by stage.
				one := reportMedianRun(b, puts, ats, ends)
				b.Logf("one client's put at the %s via %s, fsync on, %d puts:\n%s\na put of median latency:\n%s",
					at, via, b.N, stageTable(puts, ats), one)
			})
		}
	}
}
