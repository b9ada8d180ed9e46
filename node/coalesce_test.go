package node

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// coalesced puts a slack timer on the node's grid: never early, at most one
// step late, and two timers armed at different phases with the same delay
// fire at the same instant when their deadlines fall in one step. Zero or
// sub-millisecond slack leaves the delay alone.
func TestCoalescedTimers(t *testing.T) {
	const h = 50 * time.Millisecond
	for _, c := range []struct{ slack, step time.Duration }{
		{12500 * time.Microsecond, 10 * time.Millisecond},
		{time.Millisecond, time.Millisecond},
		{3 * time.Millisecond, 2 * time.Millisecond},
		{125 * time.Millisecond, 100 * time.Millisecond},
	} {
		for _, off := range []time.Duration{0, 1, 999 * time.Microsecond, 4 * time.Millisecond, 7777 * time.Microsecond} {
			now := timerEpoch.Add(time.Second + off)
			got := coalesced(now, h, c.slack)
			if got < h || got >= h+c.step {
				t.Fatalf("slack %v, now epoch+1s+%v: fires after %v, want in [%v, %v)", c.slack, off, got, h, h+c.step)
			}
			if at := now.Add(got).Sub(timerEpoch); at%c.step != 0 {
				t.Fatalf("slack %v: fires at epoch+%v, not on the %v grid", c.slack, at, c.step)
			}
		}
	}
	a := timerEpoch.Add(time.Second + time.Millisecond)
	b := timerEpoch.Add(time.Second + 8*time.Millisecond)
	if fa, fb := a.Add(coalesced(a, h, 12*time.Millisecond)), b.Add(coalesced(b, h, 12*time.Millisecond)); !fa.Equal(fb) {
		t.Fatalf("timers armed 7 ms apart fire at %v and %v, want together", fa.Sub(timerEpoch), fb.Sub(timerEpoch))
	}
	for _, s := range []time.Duration{0, 999 * time.Microsecond} {
		if got := coalesced(timerEpoch.Add(3*time.Millisecond+1), h, s); got != h {
			t.Fatalf("slack %v moved the timer to %v", s, got)
		}
	}
}

// Coalesced heartbeats (coalesce.go): 60 idle paxos groups on three nodes
// send their heartbeats and acknowledgements in a few frames per peer per
// tick, not one frame per message. The broken variant (coalescing off,
// each tick at its own deadline and each message its own frame) must fail
// the same check.
func TestCoalescedHeartbeats(t *testing.T) {
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprintf("coalesced=%v", on), func(t *testing.T) {
			ns := config.Namespace{Name: "default", Protocol: "paxos", Service: "kv"}
			const groups = 60
			for i, r := range shard.Even(groups) {
				ns.Shards = append(ns.Shards, config.Shard{Name: fmt.Sprintf("s%d", i), Slots: r.String(), Nodes: []string{"n1", "n2", "n3"}})
			}
			cfg, ls := mkCluster(t, 3, config.Memory, ns)
			var nodes []*Node
			for i, l := range ls {
				nodes = append(nodes, startNode(t, cfg, fmt.Sprintf("n%d", i+1), l, Options{InboxLen: 64, noCoalesce: !on}))
			}
			deadline := time.Now().Add(60 * time.Second)
			for led := 0; led < groups; {
				led = 0
				for _, l := range nodes[0].loopList() {
					if p := l.leader.Load(); p != nil && *p != "" {
						led++
					}
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d of %d groups elected in 60 s", led, groups)
				}
				time.Sleep(20 * time.Millisecond)
			}
			time.Sleep(500 * time.Millisecond)
			count := func() (m, f uint64) {
				for _, n := range nodes {
					m += n.msgsOut()
					for _, s := range n.tr.Stats() {
						f += s.Sent
					}
				}
				return
			}
			m0, f0 := count()
			time.Sleep(2 * time.Second)
			m1, f1 := count()
			msgs, frames := m1-m0, f1-f0
			t.Logf("2 s idle: %d messages in %d frames (%.1f per frame)", msgs, frames, float64(msgs)/float64(max(frames, 1)))
			if msgs < groups*2*10 {
				t.Fatalf("only %d messages in 2 s from %d groups: the groups are not heartbeating", msgs, groups)
			}
			// 60 groups tick on at most 6 grid points per 60 ms: each frame
			// to a peer carries several groups' messages (about 10 on an
			// idle machine, 7.7 at load 31; a run at load ~25 had 2.8,
			// under the bar of 3 this had). Without coalescing every
			// message is its own frame (1.0, a little under with the frames
			// that carry no heartbeat), so 2 still tells them apart.
			if good := frames*2 <= msgs; good != on {
				t.Fatalf("coalesced=%v: %d messages in %d frames", on, msgs, frames)
			}
		})
	}
}
