package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// TestOnceHoldsOnCaller pins commitLoop's once path (loop.go): at a
// 3-node Multi-Paxos leader with fsync, one RESP client's SET is
// committed on the connection's goroutine (callerCommits). Its commit is
// slowed here (2 ms in the trace hook at the caller's commit start), so
// that the first Accepted is stepped while it runs: that pass answers the
// put (the answer waits for the leader's own record) and persists the "c"
// record nobody waits for, a batch queued behind the caller's commit.
// After its commit the caller holds that batch and parks it in the loop
// (lazy commit), as a committer would; before, it started a committer
// goroutine that only parked it. Counted by the leader's committer
// goroutines that returned without a commit (idleCommitters): before
// the change "8 committer goroutines of 40 SETs made no commit, want at
// most 4" (the other puts' "c" batches came after the caller's commit
// and were held by flush, holdInLoop), now none in 5 of 5 runs. Each put
// is still answered, and read back (the "c" records are committed later,
// with the next put's records).
func TestOnceHoldsOnCaller(t *testing.T) {
	_, leader := paxosCluster(t, config.Fsync, func(string) Options {
		return Options{trace: func(stage string, _ automaton.NodeID, _ byte) {
			if stage == stageCommitStart && inFunc(".(*Node).SubmitReply") >= 0 {
				time.Sleep(2 * time.Millisecond)
			}
		}}
	})
	cl := dialReplyClient(t, leader.ClientAddr().String())
	if got := cl.do(t, "SET", "warm", "x"); got != "OK" {
		t.Fatalf("warm-up SET: %s", got)
	}
	l := leader.loop("default")
	const puts = 40
	i0, h0 := l.idleCommitters.Load(), l.loopHolds.Load()
	for i := range puts {
		if got := cl.do(t, "SET", fmt.Sprintf("k%d", i), "v"); got != "OK" {
			t.Fatalf("SET: %s", got)
		}
		if got := cl.do(t, "GET", fmt.Sprintf("k%d", i)); got != `"v"` {
			t.Fatalf("GET k%d after its SET: %q", i, got)
		}
	}
	idle, held := l.idleCommitters.Load()-i0, l.loopHolds.Load()-h0
	t.Logf("%d committer goroutines of %d SETs made no commit; %d batches held by flush", idle, puts, held)
	if idle > puts/10 {
		t.Errorf("%d committer goroutines of %d SETs made no commit, want at most %d", idle, puts, puts/10)
	}
}
