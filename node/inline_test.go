package node

import (
	"fmt"
	"runtime"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/config"
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
