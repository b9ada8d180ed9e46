package node

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// TestTurnCommit: with turn commits (the default; SYNOD_TURN_COMMIT=0
// turns them off), the pass Kick runs for the requests an event-loop turn
// held (SubmitReplyHeld) commits their records on Kick's goroutine, the gateway's event loop (sched.go,
// turnCommits), when no committer runs; the replies follow that commit
// (package release decides what leaves: here, each reply comes after a
// commit that ended on Kick's goroutine). Without it (noTurnCommit) Kick's
// pass hands the records to a committer goroutine and no commit runs on
// Kick's goroutine. ESDS with fsync at n1 of three nodes: each turn holds
// four SETs.
func TestTurnCommit(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("turnCommit=%v", on), func(t *testing.T) {
			ns := config.Namespace{Name: "default", Protocol: "esds", Service: "kv"}
			cfg, ls := mkCluster(t, 3, config.Fsync, ns)
			var commits, onKick, endedOnKick atomic.Int64
			var nodes []*Node
			for i, nc := range cfg.Nodes {
				o := Options{noTurnCommit: !on}
				if i == 0 {
					o.trace = func(stage string, _ automaton.NodeID, _ byte) {
						switch stage {
						case stageCommitStart:
							commits.Add(1)
							if inFunc(".(*Node).Kick") >= 0 {
								onKick.Add(1)
							}
						case stageCommitEnd:
							if inFunc(".(*Node).Kick") >= 0 {
								endedOnKick.Add(1)
							}
						}
					}
				}
				nodes = append(nodes, startNode(t, cfg, nc.ID, ls[i], o))
			}
			n := nodes[0]
			l := n.loop("default")
			const turns, perTurn = 20, 4
			c0, k0 := commits.Load(), onKick.Load()
			var early atomic.Int64 // replies before any commit ended on Kick's goroutine in their turn
			for i := range turns {
				eventually(t, "an idle loop", func() bool {
					return l.sched.Load() == loopIdle && !l.committing.Load()
				})
				e0 := endedOnKick.Load()
				onKickBefore := onKick.Load()
				got := make(chan automaton.Response, perTurn)
				for j := range perTurn {
					r := req("set", fmt.Sprintf("k%d-%d", i, j), "v")
					done := func(resp automaton.Response, err error) {
						if err != nil {
							t.Errorf("SET: %v", err)
						}
						if onKick.Load() > onKickBefore && endedOnKick.Load() == e0 {
							early.Add(1)
						}
						got <- resp
					}
					if !n.SubmitReplyHeld(context.Background(), "default", r, done) {
						t.Fatal("SubmitReplyHeld took nothing")
					}
				}
				n.Kick("default")
				for range perTurn {
					select {
					case resp := <-got:
						if resp.Result.IsErr() {
							t.Fatalf("SET: %v", resp.Result)
						}
					case <-time.After(30 * time.Second):
						t.Fatal("no reply")
					}
				}
			}
			com, ok := commits.Load()-c0, onKick.Load()-k0
			t.Logf("turnCommit=%v: %d turns of %d SETs at n1; %d commits, %d of them on Kick's goroutine", on, turns, perTurn, com, ok)
			switch {
			case !on && ok != 0:
				t.Errorf("without turnCommit: %d commits on Kick's goroutine, want none", ok)
			case on && 2*ok < turns:
				t.Errorf("%d of %d turns committed on Kick's goroutine, want at least half", ok, turns)
			case early.Load() != 0:
				t.Errorf("%d replies left before the commit on Kick's goroutine ended", early.Load())
			}
		})
	}
}
