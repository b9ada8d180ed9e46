package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
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
	// Conditional on both records read: the members record (as every
	// members write, writeMembers) and the migration record, so that a
	// migration into the group started since the read (a creation by a
	// deposed placement leader still running its createSplit, or an
	// operator's CLUSTER MIGRATION START) and the retirement cannot both
	// happen; startMigration guards on the members record in turn.
	key := "mem/" + s.ns.Name
	rs, err := n.placementDo(ctx, kvOp(service.GuardKind, "mig/"+s.ns.Name, "version", strconv.FormatUint(v.migVer, 10)),
		kvOp(service.GuardKind, key, "version", strconv.FormatUint(v.memVer, 10)), kvOp("set", key, rec))
	if err != nil {
		return fmt.Errorf("recording group %s retired: %w", s.nameIn(v, gi), err)
	}
	if service.IsGuardFailure(rs[0]) || service.IsGuardFailure(rs[1]) {
		return fmt.Errorf("recording group %s retired: the migration or members record changed since it was read", s.nameIn(v, gi))
	}
	n.log.Info("placement retired a group", "namespace", s.ns.Name, "group", s.nameIn(v, gi), "incarnation", d.Inc, "members", rec)
	n.nudgePlacement()
	return nil
}
