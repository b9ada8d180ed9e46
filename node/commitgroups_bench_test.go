package node

import (
	"fmt"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// BenchmarkCommitGroups: how a namespace loop's records become commits
// (fdatasyncs) with fsync, at every node of a 3-node cluster in this
// process, under SETs of 100-byte values on 10,000 keys through the RESP
// gateway of n1 (abd, esds) or of the leader (paxos) by 1 or 64 clients,
// one connection each, no pipelining (the live 64-client cells of issue
// 28, scripts/bench-ab). Per SET: commits (fsyncs) at the entry node
// (commits-n1/op) and at all three (commits/op), the entry node's commits
// that held one record (lone-n1 %, a share of its commits), and where
// the entry node's commits ran (caller-n1 %: on the goroutine that
// stepped the request, commitOnCaller; the rest on a committer
// goroutine); handoffs/op and cpu-us/op as BenchmarkRESPSet. With -v each
// node's records-per-commit histogram is logged. The figures of
// docs/costs/s51-tail51.md:
//
//	go test ./node -run '^$' -bench CommitGroups -benchtime 20000x
func BenchmarkCommitGroups(b *testing.B) {
	for _, c := range []struct {
		proto   string
		clients int
	}{{"esds", 64}, {"abd", 64}, {"esds", 1}, {"abd", 1}, {"paxos", 1}, {"paxos", 64}} {
		b.Run(fmt.Sprintf("%s/clients=%d", c.proto, c.clients), func(b *testing.B) {
			benchCommitGroups(b, c.proto, c.clients)
		})
	}
}

// commitCounts is one node's commits, counted by its trace hook.
type commitCounts struct {
	mu       sync.Mutex
	l        *nsLoop // the default namespace's loop, once started
	seen     uint64  // l.persisted at the last commit's start
	sizes    map[uint64]int
	commits  int
	onCaller int
	onLoop   int // of onCaller: on the gateway's event loop
	on       bool
	// ended: the last commit's end; b2b: the commit being counted
	// started within 50 µs of the previous one's end (a committer's next
	// commit of what queued during the last fsync); loneB2B: such
	// commits that held one record.
	ended   time.Time
	b2b     bool
	loneB2B int
	b2bs    int
}

// start notes a commit beginning: the previous one's records are
// l.persisted's growth since (a loop's commits do not overlap).
func (c *commitCounts) start(caller, loop bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.l == nil {
		return
	}
	p := c.l.persisted.Load()
	if c.on && c.commits > 0 {
		c.sizes[p-c.seen]++
		if c.b2b && p-c.seen == 1 {
			c.loneB2B++
		}
	}
	c.seen = p
	c.b2b = !c.ended.IsZero() && time.Since(c.ended) < 50*time.Microsecond
	if c.on && c.b2b {
		c.b2bs++
	}
	if c.on {
		c.commits++
		if caller {
			c.onCaller++
		}
		if caller && loop {
			c.onLoop++
		}
	}
}

func (c *commitCounts) end() {
	c.mu.Lock()
	c.ended = time.Now()
	c.mu.Unlock()
}

// stop counts the last commit's records and stops counting.
func (c *commitCounts) stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.on && c.commits > 0 {
		c.sizes[c.l.persisted.Load()-c.seen]++
	}
	c.on = false
}

func (c *commitCounts) begin() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.on, c.commits, c.onCaller, c.onLoop, c.sizes = true, 0, 0, 0, map[uint64]int{}
	c.loneB2B, c.b2bs = 0, 0
	c.seen = c.l.persisted.Load()
}

func (c *commitCounts) histogram() string {
	var ks []uint64
	for k := range c.sizes {
		ks = append(ks, k)
	}
	sort.Slice(ks, func(i, j int) bool { return ks[i] < ks[j] })
	var s strings.Builder
	for _, k := range ks {
		fmt.Fprintf(&s, " %d:%d", k, c.sizes[k])
	}
	return s.String()
}

func benchCommitGroups(b *testing.B, proto string, clients int) {
	ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv"}
	if proto == "esds" {
		ns.Params = map[string]string{"reads": "local"}
	}
	cfg, ls := mkCluster(b, 3, config.Fsync, ns)
	var nodes []*Node
	counts := make([]*commitCounts, len(cfg.Nodes))
	for i, c := range cfg.Nodes {
		cc := &commitCounts{sizes: map[uint64]int{}}
		counts[i] = cc
		tr := func(stage string, _ automaton.NodeID, _ byte) {
			switch stage {
			case stageCommitStart:
				cc.start(inFunc(".(*nsLoop).commitOnCaller") >= 0, inFunc(".(*evLoop).run") >= 0)
			case stageCommitEnd:
				cc.end()
			}
		}
		nodes = append(nodes, startNode(b, cfg, c.ID, ls[i], Options{trace: tr}))
	}
	for i, n := range nodes {
		counts[i].mu.Lock()
		counts[i].l = n.loop("default")
		counts[i].mu.Unlock()
	}
	at := 0
	if proto == "paxos" {
		at = leaderIndex(b, nodes)
	}
	run := respSets(b, cfg.Nodes[at].Client, clients)
	for _, cc := range counts {
		cc.begin()
	}
	p0 := takeProcCounts(nodes)
	b.ResetTimer()
	run()
	b.StopTimer()
	for _, cc := range counts {
		cc.stop()
	}
	p0.report(b, nodes, float64(b.N))
	ops := float64(b.N)
	total := 0
	for i, cc := range counts {
		total += cc.commits
		b.Logf("%s: %d commits (%d on the caller, %d of them on the gateway's event loop; %d within 50 us of the previous one's end, %d of those with one record) for %d SETs; records per commit:%s",
			cfg.Nodes[i].ID, cc.commits, cc.onCaller, cc.onLoop, cc.b2bs, cc.loneB2B, b.N, cc.histogram())
	}
	e := counts[at]
	b.ReportMetric(float64(total)/ops, "commits/op")
	b.ReportMetric(float64(e.commits)/ops, "commits-n1/op")
	if e.commits > 0 {
		b.ReportMetric(100*float64(e.sizes[1])/float64(e.commits), "lone-n1-%")
		b.ReportMetric(100*float64(e.onCaller)/float64(e.commits), "caller-n1-%")
	}
}
