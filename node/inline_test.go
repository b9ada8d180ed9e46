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
// Forward), not handed to a pool worker; with noDirect every step runs on
// a pool worker. Counted by the steps whose goroutine's stack holds
// Node.handOver: the old code (every request woke a worker) has none.
func TestInlinePass(t *testing.T) {
	for _, noDirect := range []bool{false, true} {
		var inline atomic.Int64
		hook := func(l *nsLoop, enter bool) {
			if enter && l.ns.Name == "default" && inHandOver() {
				inline.Add(1)
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
			got := inline.Load()
			switch {
			case noDirect && got != 0:
				t.Errorf("noDirect, at the %s: %d of %d requests stepped on the caller's goroutine, want none", role, got, puts)
			case !noDirect && got < puts/2:
				t.Errorf("at the %s: %d of %d requests that found the loop idle stepped on the caller's goroutine, want most", role, got, puts)
			}
			t.Logf("noDirect=%v, at the %s: %d of %d steps inline", noDirect, role, got, puts)
		}
	}
}

// inHandOver reports whether the calling goroutine is in Node.handOver.
func inHandOver() bool {
	pcs := make([]uintptr, 64)
	frames := runtime.CallersFrames(pcs[:runtime.Callers(2, pcs)])
	for {
		f, more := frames.Next()
		if strings.HasSuffix(f.Function, ".(*Node).handOver") {
			return true
		}
		if !more {
			return false
		}
	}
}
