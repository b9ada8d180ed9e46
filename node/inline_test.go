package node

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/orcaprimary"
	_ "github.com/synod-dev/synod/protocol/unreplicated"
)

// TestInlinePass: a client request that finds its Multi-Paxos loop idle is
// stepped on the goroutine that hands it over (sched.go, inlinePass), at
// the leader (its Accepts leave from there) and at a follower (its
// Forward), not handed to a pool worker; so are peer messages that find
// their loop idle once their TCP reader has read all it holds
// (Node.readerIdle): Accept, Accepted, Forward, ForwardReply. With
// noDirect every step runs on a pool worker. Counted by the steps whose
// goroutine's stack holds Node.handOver, or Node.readerIdle: the old code
// (every input woke a worker) has none of either.
func TestInlinePass(t *testing.T) {
	for _, noDirect := range []bool{false, true} {
		var inline, reader atomic.Int64
		hook := func(l *nsLoop, enter bool) {
			if !enter || l.ns.Name != "default" {
				return
			}
			switch inFunc(".(*Node).handOver", ".(*Node).readerIdle") {
			case 0:
				inline.Add(1)
			case 1:
				reader.Add(1)
			}
		}
		nodes, leader := paxosCluster(t, config.Fsync, func(string) Options {
			return Options{onStep: hook, noDirect: noDirect}
		})
		follower := nodes[0]
		if follower == leader {
			follower = nodes[1]
		}
		do(t, follower, "default", req("set", "warm", "f")) // the follower knows the leader
		for _, entry := range []*Node{leader, follower} {
			inline.Store(0)
			reader.Store(0)
			const puts = 20
			l := entry.loop("default")
			for i := range puts {
				// Idle first: a pass still releasing the last answer, or
				// a heartbeat's, would take the request instead.
				eventually(t, "an idle loop", func() bool { return l.sched.Load() == loopIdle })
				if r := do(t, entry, "default", req("set", fmt.Sprintf("k%d", i), "v")); r.IsErr() {
					t.Fatalf("set: %v", r)
				}
			}
			role := "leader"
			if entry != leader {
				role = "follower"
			}
			got, rd := inline.Load(), reader.Load()
			switch {
			case noDirect && (got != 0 || rd != 0):
				t.Errorf("noDirect, at the %s: %d of %d requests stepped on the caller's goroutine, %d peer messages on a reader's, want none", role, got, puts, rd)
			case !noDirect && got < puts/2:
				t.Errorf("at the %s: %d of %d requests that found the loop idle stepped on the caller's goroutine, want most", role, got, puts)
			case !noDirect && rd < puts:
				// At least an Accept or Accepted per put (3 or 4 messages each).
				t.Errorf("at the %s: %d peer messages of %d puts stepped on a reader's goroutine, want at least one per put", role, rd, puts)
			}
			t.Logf("noDirect=%v, at the %s: %d steps on the caller's goroutine (%d requests), %d on readers", noDirect, role, got, puts, rd)
		}
	}
}

// inFunc returns the index of the first of fns (suffixes of function
// names) that the calling goroutine's stack holds, or -1.
func inFunc(fns ...string) int {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		for i, fn := range fns {
			if strings.HasSuffix(f.Function, fn) {
				return i
			}
		}
		if !more {
			return -1
		}
	}
}

// TestInlineWriteCommit pins the path of a lone fsync'd write in the
// protocols whose one-client put session 44's re-measure flagged
// (orca-primary 0.268 -> 0.311 ms, unreplicated 0.234 -> 0.252 ms p50,
// quiet, two rounds; docs/COSTS.md, lat45): the request is stepped by an
// inline pass on the goroutine that hands it over (sched.go, inlinePass),
// and its records are committed by the loop's committer, never on that
// goroutine: the connection's goroutine does not wait for the fsync
// inside the pass, so it parks in await before the fsync starts and the
// committer's fdatasync runs on its thread (lat45 measured it live:
// fdatasync and the reply on the reading thread for 99-100 % of
// unreplicated's puts). (A TCP peer reader's pass of a lone message, such
// as orca-primary's remote write at the primary, commits on the reader
// with SYNOD_READER_COMMIT=1 since lat46: sched.go, readerCommitPass;
// TestReaderCommit.) Each put at unreplicated's server costs two
// hand-offs (the batch to the committer, the response to the waiting
// goroutine), one fewer than a worker's pass. Fails with the inline pass
// off (0 requests inline, 3 hand-offs per put) and with a pass that
// commits on the caller (commits on the caller's goroutine).
func TestInlineWriteCommit(t *testing.T) {
	for _, proto := range []string{"unreplicated", "orca-primary"} {
		t.Run(proto, func(t *testing.T) {
			var inline, onCaller, commits atomic.Int64
			hook := func(l *nsLoop, enter bool) {
				if enter && l.ns.Name == "default" && inFunc(".(*Node).handOver") == 0 {
					inline.Add(1)
				}
			}
			tr := func(stage string, _ automaton.NodeID, _ byte) {
				if stage != stageCommitStart {
					return
				}
				commits.Add(1)
				if inFunc(".(*Node).handOver") >= 0 {
					onCaller.Add(1)
				}
			}
			size := 1
			ns := config.Namespace{Name: "default", Protocol: proto, Service: "kv"}
			if proto == "orca-primary" {
				// Three nodes, primaries where the hash puts them: two
				// writes in three are remote (stepped at the primary by
				// its TCP reader's inline pass).
				size = 3
				ns.Params = map[string]string{"migrate_after": "0"}
			}
			cfg, ls := mkCluster(t, size, config.Fsync, ns)
			var nodes []*Node
			for i, n := range cfg.Nodes {
				nodes = append(nodes, startNode(t, cfg, n.ID, ls[i], Options{onStep: hook, trace: tr}))
			}
			entry := nodes[0]
			do(t, entry, "default", req("set", "warm", "x"))
			l := entry.loop("default")
			const puts = 20
			inline.Store(0)
			h0, c0 := entry.Handoffs(), commits.Load()
			onCaller.Store(0)
			for i := range puts {
				eventually(t, "an idle loop", func() bool { return l.sched.Load() == loopIdle })
				if r := do(t, entry, "default", req("set", fmt.Sprintf("k%d", i), "v")); r.IsErr() {
					t.Fatalf("set: %v", r)
				}
			}
			got, hand, com, bad := inline.Load(), entry.Handoffs()-h0, commits.Load()-c0, onCaller.Load()
			t.Logf("%s: %d of %d puts stepped on the caller's goroutine; %d commits, %d of them on the caller's goroutine; %d hand-offs at the entry",
				proto, got, puts, com, bad, hand)
			if got < puts/2 {
				t.Errorf("%d of %d lone writes stepped on the caller's goroutine, want most", got, puts)
			}
			if com < puts {
				t.Errorf("%d commits for %d puts, want one per put at least", com, puts)
			}
			if bad != 0 {
				t.Errorf("%d of %d commits ran on the goroutine that stepped the write (the caller waits for the fsync)", bad, com)
			}
			// A few hand-offs besides the puts' own may fall in the
			// window (the warm-up's, a background flush: 41 for 20 puts
			// once in 6 runs while CI ran); a pass on a worker costs
			// one more per put, 20 more here.
			if slack := uint64(puts / 4); proto == "unreplicated" && hand > 2*puts+(puts-uint64(got))+slack {
				t.Errorf("%d hand-offs for %d puts (%d inline), want 2 per inline put (committer, response), 3 otherwise, +%d", hand, puts, got, slack)
			}
		})
	}
}
