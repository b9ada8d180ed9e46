package node

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// Carrying out the placement service's replacements and leader moves
// (issue 33 item 2; the decisions are shard.Decide's, placer.go).
//
// A replacement "replace group=G node=X with=Y" runs on the placement
// leader, one at a time (no other decision meanwhile), in steps, each
// appended to the decision log dec/<ns> ("step ...") and counted in
// synod_placement_replace_steps_total{namespace,step}:
//
//  1. joining: the members record mem/<ns> (groups.go) names Y as joining
//     G. Y reads it (every placement poll) and starts G's replica at run
//     time, empty (groups.go startGroup).
//  2. added: G's membership change "add Y" (automaton.MemberAdd with Y's
//     addresses from the cluster file) goes to a member of G, whose
//     protocol takes it to G's leader; paxos makes Y a learner, catches it
//     up (log or snapshot) and logs the add once it has (reconfig.go
//     there). The step waits for the add's answer.
//  3. removed: "remove X", the same way.
//  4. recorded: mem/<ns> names G's members without X and with Y. Every
//     node routes by it from its next poll: CLUSTER SLOTS, SHARDS, NODES
//     and MOVED name Y, not X; X, restarted, no longer serves G
//     (groups.go serves).
//
// Each step is idempotent, and a replacement cut short (the placement
// leader fails, a step times out) after step 1 is resumed from the
// record before any new decision (resumeReplace: the record names the
// joining and the leaving node, so the same pair is redone even if the
// dead node came back or another node would be chosen now); an add of a
// member already in, or a remove of one already out, counts as done.
// Cut short before step 1, nothing was changed and Decide decides anew. Decision: the change requests carry one request id per
// replacement and step, so a forwarded request resent to another member
// is deduplicated by the group (paxos's table of outcomes).

// resumeReplace returns the replacement the members record (as read in
// v) shows cut short (a group with a joining and a leaving node), if any.
func resumeReplace(v *slotView) (shard.Decision, bool) {
	if v.leaving == nil {
		return shard.Decision{}, false
	}
	for gi, x := range v.leaving {
		if x == "" {
			continue
		}
		for _, h := range v.hosts[gi] {
			if !slices.Contains(v.members[gi], h) {
				return shard.Decision{Kind: shard.DecReplace, From: gi, To: gi, Node: string(x), With: string(h),
					Reason: "resuming a replacement cut short (the members record names " + string(h) + " joining, " + string(x) + " leaving)",
					Inputs: "members record"}, true
			}
		}
	}
	return shard.Decision{}, false
}

// replaceTimeout bounds one replacement (the add waits for the new
// member's catch-up: a snapshot of the group's state).
const replaceTimeout = 3 * time.Minute

// replace carries out replacement d of s, decided on view v (its own
// goroutine; see above).
func (n *Node) replace(s *shardedNS, d shard.Decision, v *slotView) {
	defer n.bg.Done()
	p := n.placerFor(s.ns.Name)
	defer p.replacing.Store(false)
	tctx, tcancel := context.WithTimeout(context.Background(), replaceTimeout)
	defer tcancel()
	ctx, cancel := n.untilStop(tctx)
	defer cancel()
	if err := n.replaceSteps(ctx, s, d, v); err != nil {
		n.replaceStep(ctx, s, d, "failed", err.Error())
		n.log.Warn("placement replacement failed; it will be decided again", "namespace", s.ns.Name, "decision", d.String(), "err", err)
		p.redo.Store(true) // decide it again
	}
}

func (n *Node) replaceSteps(ctx context.Context, s *shardedNS, d shard.Decision, v *slotView) error {
	gi := d.From
	x, y := automaton.NodeID(d.Node), automaton.NodeID(d.With)
	if !v.memRead {
		return fmt.Errorf("the members record was not read")
	}
	var ym config.Node
	for _, m := range n.cfg.Nodes {
		if m.ID == string(y) {
			ym = m
		}
	}
	if ym.ID == "" {
		return fmt.Errorf("node %s is not in the cluster file", y)
	}
	members := func() [][]automaton.NodeID {
		out := make([][]automaton.NodeID, len(s.groups))
		for i := range s.groups {
			out[i] = slices.Clone(s.membersIn(v, i))
		}
		return out
	}
	former := make([][]automaton.NodeID, len(s.groups))
	if v.former != nil {
		for i := range former {
			former[i] = slices.Clone(v.former[i])
		}
	}
	// 1. joining
	mem := members()
	joining := make([][]automaton.NodeID, len(s.groups))
	joining[gi] = []automaton.NodeID{y}
	leaving := make([]automaton.NodeID, len(s.groups))
	leaving[gi] = x
	ver, err := n.writeMembers(ctx, s, v.memVer, formatMembersRecord(mem, joining, leaving, former, v.boot, v.inc))
	if err != nil {
		return fmt.Errorf("recording %s as joining: %w", y, err)
	}
	n.replaceStep(ctx, s, d, "joining", fmt.Sprintf("%s starts %s's replica", y, s.groups[gi].Namespace.Name))
	// 2. added
	base := n.nextInternalID()
	res, err := n.groupAdmin(ctx, s, gi, base, automaton.MemberAdd(y, ym.Peer, ym.Client))
	if err != nil {
		return fmt.Errorf("adding %s: %w", y, err)
	}
	if res.IsErr() && !settledAlready(res, "already a member") {
		return fmt.Errorf("adding %s: %s", y, res.Err)
	}
	n.replaceStep(ctx, s, d, "added", fmt.Sprintf("%s caught up and is a member", y))
	// 3. removed
	res, err = n.groupAdmin(ctx, s, gi, n.nextInternalID(), automaton.MemberRemove(x))
	if err != nil {
		return fmt.Errorf("removing %s: %w", x, err)
	}
	if res.IsErr() && !settledAlready(res, "not a member") {
		return fmt.Errorf("removing %s: %s", x, res.Err)
	}
	n.replaceStep(ctx, s, d, "removed", fmt.Sprintf("%s is no longer a member", x))
	// 4. recorded: derived from the joining record (the version written
	// in step 1), so it fails if anything wrote the record since.
	mem[gi] = slices.DeleteFunc(mem[gi], func(id automaton.NodeID) bool { return id == x || id == y })
	mem[gi] = append(mem[gi], y)
	if !slices.Contains(former[gi], x) {
		former[gi] = append(former[gi], x)
	}
	rec := formatMembersRecord(mem, nil, nil, former, v.boot, v.inc)
	if _, err := n.writeMembers(ctx, s, ver, rec); err != nil {
		return fmt.Errorf("recording the members: %w", err)
	}
	n.nudgePlacement()
	n.replaceStep(ctx, s, d, "recorded", "members "+rec)
	return nil
}

// writeMembers writes rec as s's members record mem/<ns> if the record's
// KV version is still ver, the version of the read rec was derived from
// (slotView.memVer), and returns the version written (session 46,
// plmem46). Every write of a members record goes through it: a record is
// rebuilt whole from a view of every group's members, so one derived
// from an older view (a restarted leader's cluster-file or stored lists, a
// read overtaken by another leader's write) would drop a newer record's
// members and former members. Refused (the guard fails), the step fails
// and is decided again from a new read.
func (n *Node) writeMembers(ctx context.Context, s *shardedNS, ver uint64, rec string) (uint64, error) {
	key := "mem/" + s.ns.Name
	rs, err := n.placementDo(ctx, kvOp(service.GuardKind, key, "version", strconv.FormatUint(ver, 10)),
		kvOp("set", key, rec), kvOp("version", key))
	if err != nil {
		return 0, err
	}
	if service.IsGuardFailure(rs[0]) {
		return 0, fmt.Errorf("the members record changed since it was read (%s)", rs[0].Err)
	}
	return uint64(rs[2].Int), nil
}

// replaceStep logs one step of replacement d: the node's log, the
// decision log dec/<ns>, the step counter.
func (n *Node) replaceStep(ctx context.Context, s *shardedNS, d shard.Decision, step, what string) {
	n.log.Info("placement replacement step", "namespace", s.ns.Name, "group", s.groups[d.From].Namespace.Name, "node", d.Node, "with", d.With, "step", step, "what", what)
	if n.placer.replaceSteps != nil {
		n.placer.replaceSteps.WithLabelValues(s.ns.Name, step).Inc()
	}
	n.logDecisionLine(ctx, s, fmt.Sprintf("step %s group=%d node=%s with=%s: %s", step, d.From, d.Node, d.With, what))
}

// logDecisionLine appends line to dec/<ns> under the next sequence number.
func (n *Node) logDecisionLine(ctx context.Context, s *shardedNS, line string) {
	rs, err := n.placementDo(ctx, kvOp("incr", "decseq/"+s.ns.Name, "1"))
	if err != nil {
		return
	}
	entry := fmt.Sprintf("%d %d %s", rs[0].Int, time.Now().UnixMilli(), line)
	n.placementDo(ctx, kvOp("rpush", "dec/"+s.ns.Name, entry), kvOp("ltrim", "dec/"+s.ns.Name, strconv.Itoa(-placeLogLen), "-1"))
}

// transferLeader carries out leader move d: G's leader hands its
// leadership to d.With (automaton.LeaderTransfer; paxos transfer.go).
func (n *Node) transferLeader(ctx context.Context, s *shardedNS, d shard.Decision) error {
	res, err := n.groupAdmin(ctx, s, d.From, n.nextInternalID(), automaton.LeaderTransfer(automaton.NodeID(d.With)))
	if err != nil {
		return err
	}
	if res.IsErr() {
		return fmt.Errorf("%s", res.Err)
	}
	return nil
}

// settledAlready reports whether res, an error answer to a membership
// change, says the change had already been made ("already a member" for an
// add, "not a member" for a remove). A retryable error never does: paxos
// answers TRYAGAIN "not a member of namespace ... yet" from a replica that
// has not yet joined, and that says nothing about the member removed.
func settledAlready(res service.Result, text string) bool {
	if e := res.AsError(); e != nil && e.Kind.Retry() {
		return false
	}
	return strings.Contains(res.Err, text)
}
