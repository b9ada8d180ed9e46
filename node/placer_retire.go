package node

import (
	"context"
	"fmt"
	"slices"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/shard"
)

// retireGroup carries out shard.Decide's retirement of created group
// d.From (issue 33, session 49; shard/retire.go): one members-record
// write, conditional on the version view was read at (writeMembers),
// that leaves the group without members, boot or former members and at
// incarnation d.Inc ("<index>@<inc>:", groups.go). Every node reads it at
// its next placement poll: a replica of the old incarnation stops and
// removes its records (retireIncarnations), routing names the group
// nowhere, and the next split into the name creates it afresh under
// "<ns>#<shard>@<inc>" on the nodes it chooses (createSteps keeps the
// record's incarnation).
func (n *Node) retireGroup(ctx context.Context, s *shardedNS, d shard.Decision, v *slotView) error {
	gi := d.From
	if len(s.groups[gi].Nodes) > 0 || len(v.groups[gi]) > 0 || v.active() {
		return fmt.Errorf("group %s is declared in the cluster file, owns slots or is migrating", s.nameIn(v, gi))
	}
	if v.inc != nil && d.Inc <= v.inc[gi] {
		return fmt.Errorf("group %s is at incarnation %d already", s.nameIn(v, gi), v.inc[gi])
	}
	mem := make([][]automaton.NodeID, len(s.groups))
	boot := make([][]automaton.NodeID, len(s.groups))
	former := make([][]automaton.NodeID, len(s.groups))
	inc := make([]uint64, len(s.groups))
	for i := range s.groups {
		mem[i] = slices.Clone(s.membersIn(v, i))
		if v.boot != nil {
			boot[i] = v.boot[i]
		}
		if v.former != nil {
			former[i] = v.former[i]
		}
		if v.inc != nil {
			inc[i] = v.inc[i]
		}
	}
	mem[gi], boot[gi], former[gi], inc[gi] = nil, nil, nil, d.Inc
	rec := formatMembersRecord(mem, nil, nil, former, boot, inc)
	if _, err := n.writeMembers(ctx, s, v.memVer, rec); err != nil {
		return fmt.Errorf("recording group %s retired: %w", s.nameIn(v, gi), err)
	}
	n.log.Info("placement retired a group", "namespace", s.ns.Name, "group", s.nameIn(v, gi), "incarnation", d.Inc, "members", rec)
	n.nudgePlacement()
	return nil
}
