package node

import (
	"fmt"
	"runtime"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// BenchmarkIdleGroups measures what idle replica groups cost a node
// (issue 33's "1,000 idle groups on one node" target): three nodes in this
// process, one sharded paxos namespace whose shards all live on all three
// nodes, durability memory, no client. Once every group on n1 names a
// leader, it measures 5 s of idling: CPU (the process's user+system time,
// divided by the 3 nodes, and per group), peer messages sent per second per
// node (the groups' own: paxos heartbeats, every `heartbeat` = 50 ms, and
// their acknowledgements), the transport frames and writes that carried
// them (coalesced heartbeats, coalesce.go, put all of a tick's messages to
// one peer in one frame; a write carries every frame queued for a peer
// meanwhile), goroutines and heap in use per node.
//
//	go test -run '^$' -bench IdleGroups -benchtime 1x ./node
//
// Each group has its own loop and committer goroutines and its own
// heartbeat messages; their ticks fire together and their messages share
// frames (coalesce.go).
//
// It runs at paxos's default heartbeat (50 ms, election timeout 500 ms)
// and at a tenth of that rate (500 ms, 5 s), each without and with timer
// coalescing (coalesced=false fires each tick at its own deadline, as
// before coalescing existed), in one run so the two compare under one
// load. Select with -bench 'IdleGroups/groups=100/'. When not every group elects
// a leader within 2 minutes (an overloaded machine: elections time out
// before they finish), the figures are still reported, with groups-led.
func BenchmarkIdleGroups(b *testing.B) {
	for _, c := range []struct {
		groups              int
		heartbeat, election string
	}{{1, "", ""}, {100, "", ""}, {1000, "", ""}, {1, "500ms", "5s"}, {1000, "500ms", "5s"}} {
		for _, co := range []bool{false, true} {
			name := fmt.Sprintf("groups=%d", c.groups)
			if c.heartbeat != "" {
				name += "/heartbeat=" + c.heartbeat
			}
			name += fmt.Sprintf("/coalesced=%v", co)
			b.Run(name, func(b *testing.B) { idleGroups(b, c.groups, c.heartbeat, c.election, !co) })
		}
	}
}

func idleGroups(b *testing.B, groups int, heartbeat, election string, noCoalesce bool) {
	ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"}
	if heartbeat != "" {
		ns.Params = map[string]string{"heartbeat": heartbeat, "election_timeout": election}
	}
	for i, r := range shard.Even(groups) {
		ns.Shards = append(ns.Shards, config.Shard{Name: fmt.Sprintf("s%d", i), Slots: r.String(), Nodes: []string{"n1", "n2", "n3"}})
	}
	var ms0 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms0)
	g0 := runtime.NumGoroutine()
	cfg, ls := mkCluster(b, 3, config.Memory, ns)
	var nodes []*Node
	for i, l := range ls {
		nodes = append(nodes, startNode(b, cfg, fmt.Sprintf("n%d", i+1), l, Options{noCoalesce: noCoalesce}))
	}
	t0 := time.Now()
	led := 0
	for {
		led = 0
		for _, l := range nodes[0].loopList() {
			if p := l.leader.Load(); p != nil && *p != "" {
				led++
			}
		}
		if led >= groups { // the placement group may be counted too
			break
		}
		if time.Since(t0) > 2*time.Minute {
			b.Logf("only %d of %d groups have a leader after 2 min", led, groups)
			break
		}
		time.Sleep(50 * time.Millisecond)
	}
	elected := time.Since(t0)
	time.Sleep(2 * time.Second)
	sent := func() (m, f, w uint64) {
		for _, nd := range nodes {
			m += nd.msgsOut()
			for _, s := range nd.tr.Stats() {
				f += s.Sent
				w += s.Writes
			}
		}
		return
	}
	cpu := func() time.Duration {
		var ru syscall.Rusage
		syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
		return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
	}
	const window = 5 * time.Second
	m0, f0, x0 := sent()
	c0, w0 := cpu(), time.Now()
	time.Sleep(window)
	m1, f1, x1 := sent()
	c1, w1 := cpu(), time.Now()
	var ms1 runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&ms1)
	secs := w1.Sub(w0).Seconds()
	b.ReportMetric((c1-c0).Seconds()/secs/3, "cpu-cores/node")
	b.ReportMetric(float64(m1-m0)/secs/3, "msgs/s/node")
	b.ReportMetric(float64(f1-f0)/secs/3, "frames/s/node")
	b.ReportMetric(float64(x1-x0)/secs/3, "writes/s/node")
	b.ReportMetric((c1-c0).Seconds()/secs/3/float64(groups)*1e6, "cpu-us/s/group")
	b.ReportMetric(float64(runtime.NumGoroutine()-g0)/3, "goroutines/node")
	b.ReportMetric(float64(int64(ms1.HeapInuse)-int64(ms0.HeapInuse))/3/(1<<20), "heap-MiB/node")
	b.ReportMetric(elected.Seconds(), "s-to-elect")
	b.ReportMetric(float64(led), "groups-led")
}

// msgsOut is the peer messages n's groups have sent.
func (n *Node) msgsOut() (m uint64) {
	for _, l := range n.loopList() {
		m += l.msgsOut.Load()
	}
	return
}
