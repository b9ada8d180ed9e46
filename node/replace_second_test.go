package node

import (
	"context"
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// A data group that loses a second member right after a replacement keeps
// a leader (plmem46's live reproduction, session 48; the paxos fix is
// plmem47's, protocol/paxos settle.go). s0 on n2, n4, n5 of 8 nodes,
// #placement on n1, n3, n6, dead_after 1 s. n2 stops and is replaced
// (n1 joins); as soon as the record says so, s0's leader (n4 or n5) stops
// too. s0's survivors (the other and n1) are two of the three members the
// record names: they must elect, the placement must replace the stopped
// leader as well, and s0 must take writes and read back the one
// acknowledged before.
//
// Before plmem47 (a removal answered when the leader executed it) this
// failed 2 times in ~26 runs (plmem46): the add of the next node timed
// out for 60 s, the survivors holding the removal of n2 accepted but not
// known chosen.
func TestPlacementSecondMemberStopsAfterReplacement(t *testing.T) {
	if testing.Short() {
		t.Skip("two replacements of one group on 8 nodes")
	}
	cfg, ls := mkCluster(t, 8, config.Memory, placeTestNS())
	nodes := startNodes(t, cfg, ls)
	ctx, cancel := context.WithTimeout(context.Background(), 240*time.Second)
	defer cancel()
	pp := placeProbe{t, ctx}
	do := func(via *Node, ops ...service.Op) (string, error) { return dataDo(ctx, via, ops...) }
	pp.eventually("a first write", 30*time.Second, func() error { _, err := do(nodes["n5"], kvOp("set", "a", "1")); return err })
	pp.eventually("n1 leads #placement", 30*time.Second, func() error { return leadPlacement(ctx, nodes, "n1") })

	replaced := func(x automaton.NodeID) func() error {
		return func() error {
			rec, _, err := memRecord(ctx, nodes["n1"], "default")
			if err != nil {
				return err
			}
			mr, err := parseMembersRecord(rec, nodes["n1"].shards["default"].groups)
			if err != nil || mr.leaving[0] != "" || !slices.Contains(mr.former[0], x) || len(mr.members[0]) != 3 {
				return fmt.Errorf("record %q (%v); decision log:\n%s", rec, err, nodes["n1"].placementLog(ctx, nodes["n1"].shards["default"], 20))
			}
			return nil
		}
	}
	nodes["n2"].Close()
	nodes["n2"] = nil
	pp.eventually("n2 replaced", 60*time.Second, replaced("n2"))
	// The second to stop is s0's leader (n4 or n5), the node that executed
	// the removal of n2: the window plmem47 closed.
	x, y := automaton.NodeID("n4"), automaton.NodeID("n5")
	if p := nodes["n5"].loop("default#s0").leader.Load(); p != nil && *p == "n5" {
		x, y = y, x
	}
	nodes[x].Close()
	nodes[x] = nil
	start := time.Now()
	pp.eventually(string(x)+" replaced after n2", 90*time.Second, replaced(x))
	t.Logf("%s replaced %v after it stopped", x, time.Since(start).Round(time.Millisecond))
	pp.eventually("a write to s0 after both", 30*time.Second, func() error { _, err := do(nodes[y], kvOp("set", "b", "2")); return err })
	if got, err := do(nodes["n1"], kvOp("get", "a")); err != nil || got != "1" {
		t.Fatalf("GET a through n1 = %q %v, want 1", got, err)
	}
}

// dataDo runs ops on the namespace default through via (5 s) and returns
// the first result's bytes; a refused request is an error.
func dataDo(ctx context.Context, via *Node, ops ...service.Op) (string, error) {
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	resp, err := via.Do(wctx, "default", automaton.Request{ID: via.nextInternalID(), Ops: ops})
	if err == nil && resp.Result.IsErr() {
		err = fmt.Errorf("%s", resp.Result.Err)
	}
	if err != nil {
		return "", err
	}
	return string(resp.Results[0].Bytes), nil
}
