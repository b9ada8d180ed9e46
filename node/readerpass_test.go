package node

import (
	"fmt"
	"sync/atomic"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	_ "github.com/synod-dev/synod/protocol/esds"
)

// TestReaderPass pins readerpass.go: in a 3-node ABD cluster (a protocol
// whose loops run direct passes), one client's puts and gets at n1, each
// sent when every loop is idle, have their peer messages stepped on the
// TCP readers' goroutines (steps whose stack holds Node.readerIdle): at
// each replica the coordinator's query and store, at the coordinator the
// replies, and the coordinator's responses leave from there too (the
// phase completed on the reader, no pool worker woken). On the old code,
// and with noReaderPass, every peer message of these loops woke a pool
// worker: none of either on a reader. ESDS (gossip between replicas, the
// front end answering from its own replica) steps its peers' gossip on
// the readers as well.
func TestReaderPass(t *testing.T) {
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("abd/noReaderPass=%v", before), func(t *testing.T) {
			ns := config.Namespace{Name: "default", Protocol: "abd", Service: "kv"}
			cfg, ls := mkCluster(t, 3, config.Memory, ns)
			var onReader [3]atomic.Int64 // steps on a reader, per node
			var responds atomic.Int64    // n1's responses sent on a reader
			var nodes []*Node
			for i, c := range cfg.Nodes {
				o := Options{noReaderPass: before}
				o.onStep = func(l *nsLoop, enter bool) {
					if enter && l.ns.Name == "default" && inFunc(".(*Node).readerIdle") == 0 {
						onReader[i].Add(1)
					}
				}
				if i == 0 {
					o.trace = func(stage string, _ automaton.NodeID, _ byte) {
						if stage == stageRespond && inFunc(".(*Node).readerIdle") == 0 {
							responds.Add(1)
						}
					}
				}
				nodes = append(nodes, startNode(t, cfg, c.ID, ls[i], o))
			}
			// Warm up until n1's messages reach both replicas: a node
			// dials its peers as it starts, and a dial refused because
			// the peer was not listening yet backs off; until n1's
			// connection to a replica is up, ABD's quorum is n1 and the
			// other replica, and the first replica steps nothing (seen
			// in CI: n2 0, n3 30).
			eventually(t, "n1's messages reach n2 and n3", func() bool {
				do(t, nodes[0], "default", req("set", "warm", "x"))
				return nodes[1].loop("default").msgsIn.Load() > 0 && nodes[2].loop("default").msgsIn.Load() > 0
			})
			idle := func() bool {
				for _, n := range nodes {
					if l := n.loop("default"); l.sched.Load() != loopIdle || !l.pass.TryLock() {
						return false
					} else {
						l.pass.Unlock()
					}
				}
				return true
			}
			for i := range onReader {
				onReader[i].Store(0)
			}
			responds.Store(0)
			const ops = 20
			for i := range ops {
				eventually(t, "idle loops", idle)
				r := req("set", fmt.Sprintf("k%d", i), "v")
				if i%2 == 1 {
					r = req("get", fmt.Sprintf("k%d", i-1))
				}
				if res := do(t, nodes[0], "default", r); res.IsErr() {
					t.Fatalf("%s: %v", r.Op.Kind, res)
				}
			}
			// A replica whose reply the quorum did not wait for may not
			// have read its messages yet when the last operation
			// returns (its reader goroutine woken late on a loaded
			// machine): wait until both replicas stepped every message
			// n1 sent them, and every loop is idle again.
			eventually(t, "the replicas step every message n1 sent", func() bool {
				return nodes[1].loop("default").msgsIn.Load()+nodes[2].loop("default").msgsIn.Load() >= nodes[0].loop("default").msgsOut.Load() && idle()
			})
			c, r2, r3, resp := onReader[0].Load(), onReader[1].Load(), onReader[2].Load(), responds.Load()
			t.Logf("%d operations: steps on readers at n1 %d, n2 %d, n3 %d; n1's responses sent on a reader %d", ops, c, r2, r3, resp)
			if before {
				if c+r2+r3+resp != 0 {
					t.Errorf("noReaderPass: %d steps and %d responses on readers, want none", c+r2+r3, resp)
				}
				return
			}
			// Each operation is one or two phases: each replica gets at
			// least one message per operation, the coordinator at least
			// one reply that finds its loop idle.
			if r2 < ops/2 || r3 < ops/2 {
				t.Errorf("replicas stepped %d and %d peer messages on their readers in %d operations, want most", r2, r3, ops)
			}
			if c < ops/2 {
				t.Errorf("the coordinator stepped %d replies on its readers in %d operations, want most", c, ops)
			}
			if resp < ops/2 {
				t.Errorf("the coordinator answered %d of %d operations from a reader's pass, want most", resp, ops)
			}
		})
	}
	for _, before := range []bool{false, true} {
		t.Run(fmt.Sprintf("esds/noReaderPass=%v", before), func(t *testing.T) {
			ns := config.Namespace{Name: "default", Protocol: "esds", Service: "kv"}
			cfg, ls := mkCluster(t, 3, config.Fsync, ns)
			var onReader atomic.Int64
			var nodes []*Node
			for i, c := range cfg.Nodes {
				o := Options{noReaderPass: before}
				o.onStep = func(l *nsLoop, enter bool) {
					if enter && l.ns.Name == "default" && inFunc(".(*Node).readerIdle") == 0 {
						onReader.Add(1)
					}
				}
				nodes = append(nodes, startNode(t, cfg, c.ID, ls[i], o))
			}
			for i := range 10 {
				if res := do(t, nodes[i%3], "default", req("set", fmt.Sprintf("k%d", i), "v")); res.IsErr() {
					t.Fatalf("set: %v", res)
				}
			}
			// Every replica gets every put by gossip (the reads at n3 see
			// the puts at n1 once it came).
			eventually(t, "gossip", func() bool {
				return do(t, nodes[2], "default", req("get", "k0")).String() != do(t, nodes[2], "default", req("get", "missing")).String()
			})
			got := onReader.Load()
			t.Logf("esds: %d steps on readers", got)
			if before && got != 0 {
				t.Errorf("noReaderPass: %d steps on readers, want none", got)
			}
			if !before && got == 0 {
				t.Errorf("no gossip message stepped on a reader")
			}
		})
	}
}

// BenchmarkReaderPass is benchQuorum with the reader passes (readerpass.go)
// and without them (noReaderPass: every peer message of an abd or esds
// loop wakes a pool worker), for abd in memory (puts and gets, 64 in
// flight at one coordinator; puts one at a time) and esds with fsync (puts,
// 64 in flight and one at a time): hand-offs, peer writes,
// read/write system calls and context switches per operation, same
// binary, variants alternated within one run:
//
//	go test ./node -run '^$' -bench ReaderPass -benchtime 20000x -count 3
func BenchmarkReaderPass(b *testing.B) {
	for _, c := range []struct {
		proto, dur, kind string
		clients          int
	}{
		{"abd", config.Memory, "set", 64}, {"abd", config.Memory, "get", 64}, {"abd", config.Memory, "set", 1},
		{"esds", config.Fsync, "set", 64}, {"esds", config.Fsync, "set", 1},
	} {
		for _, before := range []bool{true, false} {
			b.Run(fmt.Sprintf("%s/%s/op=%s/clients=%d/readerPass=%v", c.proto, c.dur, c.kind, c.clients, !before), func(b *testing.B) {
				benchQuorum(b, c.proto, c.dur, c.kind, c.clients, nil, Options{noReaderPass: before})
			})
		}
	}
}
