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
				b.Logf("one client's put at the %s via %s, fsync on, %d puts:\n%s\na put of median latency:\n%s\nthe path, put by put:\n%s",
					at, via, b.N, stageTable(puts, ats), one, pathTable(puts, ats, at == "follower"))
			})
		}
	}
}

// pathTable splits each put into the segments of its critical path and
// prints their medians (µs) and what share of the put's median they are,
// beside the physical floor (one fdatasync, the answering follower's here,
// and the hops): the entry's own stages; the leader's Accept to the
// follower whose Accepted the leader stepped first ("the answering
// follower"), its read (hop), its step and the start of its commit
// (pre-sync), the commit (its fdatasync), the Accepted's way back (hop) and
// the leader's step of it; then the respond and the client's read. It
// also counts the puts whose answer waited for the leader's own commit
// (it ended after the answering follower's Accepted was stepped) and those
// whose leader's commit ended after the second follower's Accepted too:
// only those would gain from answering on the two followers' durable
// acceptances without the leader's own (protocol/paxos's package doc,
// "Why the leader may send before its own fsync").
func pathTable(puts [][]string, ats [][]time.Duration, viaFollower bool) string {
	type seg struct {
		name string
		ds   []time.Duration
	}
	names := []string{"request to the leader's step", "step to the Accept's write", "hop: the answering follower reads it",
		"its step and commit start (pre-sync)", "its commit (WAL write + fdatasync)", "hop: its Accepted stepped by the leader",
		"the leader's respond after it", "the entry's answer to the client's read"}
	segs := make([]seg, len(names))
	for i, n := range names {
		segs[i].name = n
	}
	var leaderLast, leaderAfterBoth, beforeOwn, counted int
	var lsync, lwait, ends, twoF []time.Duration
	for i, ls := range puts {
		// find: the first stage at or after from that pred accepts.
		var from time.Duration
		find := func(pred func(string) bool) (string, time.Duration, bool) {
			for j, l := range ls {
				if ats[i][j] >= from && pred(l) {
					return l, ats[i][j], true
				}
			}
			return "", 0, false
		}
		_, tStep, ok1 := find(func(l string) bool {
			return l == "L step-request" || strings.HasPrefix(l, "L step-msg Forward from")
		})
		from = tStep
		// The answering follower: of the followers the leader sent this
		// put's Accept to, the one whose Accepted, after its read of the
		// Accept and its commit, the leader stepped first (an earlier put's
		// late Accepted may come first in the window, so the chain is
		// followed per follower).
		var f string
		var tSend, tDel, tCS, tCE, tAcc time.Duration
		var chained []time.Duration // each follower's Accepted of this put's Accept, stepped
		for _, l := range ls {
			to, ok := strings.CutPrefix(l, "L send Accept to ")
			if !ok {
				continue
			}
			to = strings.Fields(to)[0]
			from = tStep
			_, s1, ok2 := find(func(l string) bool { return strings.HasPrefix(l, "L send Accept to "+to) })
			_, d1, ok3 := find(func(l string) bool { return strings.HasPrefix(l, to+" deliver Accept from L") })
			from = d1
			_, c1, ok4 := find(func(l string) bool { return strings.HasPrefix(l, to+" commit-start") })
			from = c1
			_, e1, ok5 := find(func(l string) bool { return strings.HasPrefix(l, to+" commit-end") })
			from = e1
			_, a1, ok6 := find(func(l string) bool { return strings.HasPrefix(l, "L step-msg Accepted from "+to) })
			if ok2 && ok3 && ok4 && ok5 && ok6 {
				chained = append(chained, a1)
			}
			if ok2 && ok3 && ok4 && ok5 && ok6 && (f == "" || a1 < tAcc) {
				f = to
				tSend, tDel, tCS, tCE, tAcc = s1, d1, c1, e1, a1
			}
		}
		from = tAcc
		_, tResp, ok6 := find(func(l string) bool { return strings.HasPrefix(l, "E respond") || !viaFollower && l == "L respond" })
		_, tEnd, ok7 := find(func(l string) bool { return l == "client answer" })
		from = 0
		if !ok1 || f == "" || !ok6 || !ok7 {
			continue // not traced within the put's window
		}
		counted++
		for k, d := range []time.Duration{tStep, tSend - tStep, tDel - tSend, tCS - tDel, tCE - tCS, tAcc - tCE, tResp - tAcc, tEnd - tResp} {
			segs[k].ds = append(segs[k].ds, d)
		}
		var gain time.Duration
		from = tStep
		_, lcs, okS := find(func(l string) bool { return l == "L commit-start" })
		from = lcs
		_, lce, okE := find(func(l string) bool { return l == "L commit-end" })
		from = 0
		if okS && okE {
			if tResp < lce {
				beforeOwn++ // answered on the followers' acceptances (automaton.Unpin)
			}
			lsync = append(lsync, lce-lcs)
			if lce > tAcc {
				leaderLast++
				lwait = append(lwait, lce-tAcc)
				// The other follower's Accepted of this put's Accept (its
				// chain: deliver, commit, Accepted), not an earlier put's
				// late one: session 50's estimate took the first Accepted
				// stepped from the other follower, often the previous put's.
				tAcc2, ok := time.Duration(0), false
				for _, a1 := range chained {
					if a1 > tAcc && (!ok || a1 < tAcc2) {
						tAcc2, ok = a1, true
					}
				}
				if ok && tAcc2 < lce {
					leaderAfterBoth++
					gain = lce - tAcc2 // answered on the followers' acceptances alone
				}
			}
		}
		ends, twoF = append(ends, tEnd), append(twoF, tEnd-gain)
	}
	med := func(ds []time.Duration) time.Duration {
		if len(ds) == 0 {
			return 0
		}
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return ds[len(ds)/2]
	}
	var b strings.Builder
	var total time.Duration
	for _, sg := range segs {
		total += med(sg.ds)
	}
	fmt.Fprintf(&b, "%-44s %10s %6s\n", "segment (medians over "+fmt.Sprint(counted)+" puts)", "us", "share")
	for _, sg := range segs {
		fmt.Fprintf(&b, "%-44s %10.1f %5.0f%%\n", sg.name, us(med(sg.ds)), 100*float64(med(sg.ds))/float64(total))
	}
	fmt.Fprintf(&b, "%-44s %10.1f\n", "sum of the medians", us(total))
	fmt.Fprintf(&b, "the leader's own commit: median %.1f us; it ended after the answering follower's Accepted was stepped in %d of %d puts (by %.1f us, median), after both followers' Accepteds in %d\n",
		us(med(lsync)), leaderLast, counted, us(med(lwait)), leaderAfterBoth)
	fmt.Fprintf(&b, "answered before the leader's own commit ended (on two followers' durable acceptances, automaton.Unpin): %d of %d puts\n", beforeOwn, counted)
	pct := func(ds []time.Duration, q int) float64 {
		ds = slices.Clone(ds)
		slices.Sort(ds)
		return us(ds[len(ds)*q/100])
	}
	if len(ends) > 0 {
		fmt.Fprintf(&b, "answered as soon as the two followers' Accepteds were stepped, were the leader's commit not waited for then (an estimate: each such put ends earlier by the wait): p50 %.1f -> %.1f us, p90 %.1f -> %.1f\n",
			pct(ends, 50), pct(twoF, 50), pct(ends, 90), pct(twoF, 90))
	}
	return b.String()
}
