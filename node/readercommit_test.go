package node

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// TestReaderCommit: at a Multi-Paxos follower, a one-client put's Accept
// (a lone message on the leader's connection, the loop idle, no committer
// running) is stepped and committed on the TCP reader that read it
// (sched.go, readerCommitPass): the follower's write and fdatasync follow
// the step on that goroutine, with no committer goroutine started and no
// hand-off for the batch, and the Accepted leaves once the record is
// durable (package release decides, as before). Without readerCommit
// (the default, and the code before) no commit runs on a reader: each goes to a committer
// goroutine, one hand-off more per commit. Counted by the commits whose
// goroutine's stack holds Node.readerIdle, and by each follower's
// hand-offs on the commit path: a batch handed to a committer (flush) or
// to the running one (commitOnCaller). Only those: the followers' other
// hand-offs (a timer's firing, a reader's wake-up of a loop that was
// busy) grow with the time the puts take, and under load (two copies
// at once, load ~25) all of them together passed one per commit in 2 of
// 100 runs (39-80 for 60-72 commits) while the commit path's stayed at
// the commits not made on a reader. What leaves and when is package
// release's decision on either path (setDurable after the commit); the
// simulator and the conformance suite check it.
func TestReaderCommit(t *testing.T) {
	for _, off := range []bool{false, true} {
		t.Run(fmt.Sprintf("readerCommit=%v", !off), func(t *testing.T) {
			type counts struct {
				commits, onReader, handoffs atomic.Int64
			}
			cs := map[automaton.NodeID]*counts{}
			nodes, leader := paxosCluster(t, config.Fsync, func(id string) Options {
				c := &counts{}
				cs[automaton.NodeID(id)] = c
				tr := func(stage string, _ automaton.NodeID, _ byte) {
					switch stage {
					case stageCommitStart:
						c.commits.Add(1)
						if inFunc(".(*Node).readerIdle") >= 0 {
							c.onReader.Add(1)
						}
					}
				}
				ho := func(k int) {
					if inFunc(".(*nsLoop).flush", ".(*nsLoop).commitOnCaller") >= 0 {
						c.handoffs.Add(int64(k))
					}
				}
				return Options{trace: tr, onHandoff: ho, readerCommit: !off}
			})
			var fs []*Node
			for _, n := range nodes {
				if n != leader {
					fs = append(fs, n)
				}
			}
			const puts = 30
			var c0, r0, h0 [2]int64
			for i, f := range fs {
				c := cs[f.ID()]
				c0[i], r0[i], h0[i] = c.commits.Load(), c.onReader.Load(), c.handoffs.Load()
			}
			for i := range puts {
				// The followers idle first (no pass, no committer): a
				// heartbeat's pass or the last put's commit would take
				// the Accept otherwise.
				for _, f := range fs {
					l := f.loop("default")
					eventually(t, "an idle follower", func() bool {
						return l.sched.Load() == loopIdle && !l.committing.Load()
					})
				}
				if r := do(t, leader, "default", req("set", fmt.Sprintf("k%d", i), "v")); r.IsErr() {
					t.Fatalf("set: %v", r)
				}
			}
			var com, rd, hand int64
			for i, f := range fs {
				c := cs[f.ID()]
				com += c.commits.Load() - c0[i]
				rd += c.onReader.Load() - r0[i]
				hand += c.handoffs.Load() - h0[i]
			}
			t.Logf("readerCommit=%v: %d puts at the leader; the followers committed %d times, %d of them on a TCP reader's goroutine; %d hand-offs on the followers' commit path",
				!off, puts, com, rd, hand)
			if com < puts {
				t.Errorf("%d follower commits for %d puts, want one per put and follower at least", com, puts)
			}
			switch {
			case off && rd != 0:
				t.Errorf("without readerCommit: %d commits on a reader, want none", rd)
			case off && hand < com/2:
				// Each commit takes at least one batch handed to its
				// committer (a held batch joins a later commit): fewer
				// means the count misses the commit path's hand-offs.
				t.Errorf("without readerCommit: %d hand-offs on the commit path for %d commits, want about one per commit", hand, com)
			case !off && rd < com/2:
				t.Errorf("%d of %d follower commits on the reader that stepped the Accept, want most", rd, com)
			case !off && hand >= com:
				// One per commit is the committer goroutine's hand-off
				// (about one per commit without readerCommit; here only
				// the commits not made on a reader pay it).
				t.Errorf("%d hand-offs on the followers' commit path for %d commits, want fewer than one per commit", hand, com)
			}
		})
	}
}
