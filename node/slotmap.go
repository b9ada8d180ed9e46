package node

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/synoderr"
)

// The slot map in replicated state (issue 33 items 2 and 3; package shard,
// "Online slot migration"; docs/SHARDING.md).
//
// The placement namespace (config.PlacementName: paxos and KV on three
// nodes) holds, per sharded namespace ns, these keys:
//
//	map/<ns>  the slot map with its epoch (shard.Placement); absent: the
//	          cluster file's map, epoch 1
//	mig/<ns>  the last migration's record (shard.Migration)
//	ctl/<ns>  the operator's control of it (shard.Control)
//
// Every node reads them every placementPoll (one linearizable read of the
// three, at the placement group's leader, forwarded when the node is not a
// member) and routes by the newest epoch it has read: CLUSTER SLOTS,
// MOVED, forwarding. A node that has not read the newest map yet routes
// by an older one; that costs a redirection, never a wrong answer,
// because each group checks ownership itself, in its log (guard, below).
// Before a node answers MOVED it reads the map once more
// (consultPlacement) and routes the request again by a newer one, so a
// cluster client is not sent back to the node that sent it there.
//
// Decision (the smallest honest design): nodes poll rather than watch.
// The placement namespace changes a few times per migration; a poll of
// three keys every 250 ms is 4 reads per second per node, and the groups'
// own guards make a late map harmless. A fourth key, mem/<ns>, names
// each group's members once a replacement changed them (groups.go,
// replace.go); a node starts the groups it makes it host, and routes to
// the members it names.

// placementPoll is how often a node reads the placement namespace.
const placementPoll = 250 * time.Millisecond

// slotView is a sharded namespace's routing as a node knows it.
type slotView struct {
	epoch  uint64
	m      *shard.Map
	groups [][]shard.Range
	mig    *shard.Migration // the last migration (nil: none yet)
	migVer uint64           // mig/<ns>'s KV version
	ctl    shard.Control
	// members and hosts of each group, from the placement record mem/<ns>
	// (nil: the cluster file's nodes; groups.go, placer.go): members are
	// routed to; hosts also include a node being added.
	members, hosts [][]automaton.NodeID
	former         [][]automaton.NodeID // nodes a replacement removed, by group
	boot           [][]automaton.NodeID // groups created at run time: their bootstrap configuration
	leaving        []automaton.NodeID   // the node a replacement under way removes, by group
	// inc is each group's incarnation (groups.go; nil: every group's is
	// 0) and names the groups' incarnated names (nil: the plain names):
	// the names of their loops, stores and messages (config.IncSep).
	inc   []uint64
	names []string
	// memRead: members, hosts, former, leaving and boot are a read of
	// mem/<ns> from the placement namespace, whose KV version was then
	// memVer (false: the cluster file's lists, or the node's stored copy,
	// placemembers.go; a placement decision is never derived from those:
	// placer.go, writeMembers).
	memRead bool
	memVer  uint64
}

// active reports whether v's migration is under way.
func (v *slotView) active() bool { return v.mig != nil && !v.mig.Phase.Finished() }

func (s *shardedNS) view() *slotView { return s.cur.Load() }

func initialView(groups []config.Group) *slotView {
	rs := make([][]shard.Range, len(groups))
	for i, g := range groups {
		rs[i] = g.Slots
	}
	return &slotView{epoch: 1, m: shard.Build(rs), groups: rs}
}

// internal requests (the migration driver's, the placement reads) skip
// the ownership checks of client requests: their keys are reserved.
type internalKey struct{}

func internalCtx(ctx context.Context) context.Context {
	return context.WithValue(ctx, internalKey{}, true)
}

func isInternal(ctx context.Context) bool { v, _ := ctx.Value(internalKey{}).(bool); return v }

// nextInternalID is a request id of this node's own requests: a client id
// drawn at start, a sequence.
func (n *Node) nextInternalID() automaton.RequestID {
	return automaton.RequestID{Client: n.slotClient, Seq: atomic.AddUint64(&n.slotSeq, 1)}
}

// freshID is a request id used once: a request refused by a slot guard
// is resent under it (its first id's answer, the refusal, is what the
// protocol's deduplication would repeat).
func freshID() automaton.RequestID {
	return automaton.RequestID{Client: randUint64(), Seq: 1}
}

func kvOp(kind, key string, args ...string) service.Op {
	op := service.Op{Kind: kind, Key: key}
	for _, a := range args {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// placementDo runs an atomic group of KV ops on the placement namespace.
func (n *Node) placementDo(ctx context.Context, ops ...service.Op) ([]service.Result, error) {
	resp, err := n.Do(internalCtx(ctx), config.PlacementName, automaton.Request{ID: n.nextInternalID(), Ops: ops})
	if err != nil {
		return nil, err
	}
	if resp.Result.IsErr() {
		return nil, fmt.Errorf("placement: %s", resp.Result.Err)
	}
	if len(resp.Results) != len(ops) {
		return nil, fmt.Errorf("placement: %d results for %d operations", len(resp.Results), len(ops))
	}
	return resp.Results, nil
}

// pollPlacement reads ns's placement keys and installs a newer map.
func (n *Node) pollPlacement(ctx context.Context, s *shardedNS) error {
	name := s.ns.Name
	rs, err := n.placementDo(ctx, kvOp("get", "map/"+name), kvOp("get", "mig/"+name), kvOp("version", "mig/"+name), kvOp("get", "ctl/"+name), kvOp("get", "mem/"+name), kvOp("version", "mem/"+name))
	if err != nil {
		return err
	}
	mr, err := n.membersRead(s, rs[4])
	if err != nil {
		return err
	}
	old := s.view()
	v := *old
	if rs[0].Type == service.ResultBytes {
		p, err := shard.ParsePlacement(string(rs[0].Bytes), len(s.groups))
		if err != nil {
			return err
		}
		if p.Epoch > v.epoch {
			v.epoch, v.groups, v.m = p.Epoch, p.Groups, shard.Build(p.Groups)
		}
	}
	if rs[1].Type == service.ResultBytes {
		m, err := shard.ParseMigration(string(rs[1].Bytes))
		if err != nil {
			return err
		}
		v.mig, v.migVer = &m, uint64(rs[2].Int)
	}
	v.ctl = shard.Control{}
	if rs[3].Type == service.ResultBytes {
		v.ctl = shard.ParseControl(string(rs[3].Bytes))
	}
	if ver := uint64(rs[5].Int); !old.memRead || ver >= old.memVer {
		// (A read overtaken by a newer one, two polls racing, is not
		// installed over it.)
		if mr != nil {
			v.members, v.hosts, v.former, v.leaving, v.boot = mr.members, mr.hosts, mr.former, mr.leaving, mr.boot
			v.setInc(s.groups, mr.inc)
		}
		v.memRead, v.memVer = true, ver
	}
	s.cur.CompareAndSwap(old, &v)
	n.hostGroups(s)   // groups.go
	n.retireGroups(s) // groups.go
	return nil
}

// pollPlacementMembers reads the placement namespace's own members record,
// mem/#placement (written by its leader when it replaces one of them:
// placer.go decidePlacementGroup), and routes to, starts and stops its
// replica by it, as pollPlacement does for a sharded namespace's groups.
// A node routes by the cluster file's members until its first read, which
// reaches the group through any of them still a live member.
func (n *Node) pollPlacementMembers(ctx context.Context, s *shardedNS) error {
	rs, err := n.placementDo(ctx, kvOp("get", "mem/"+s.ns.Name), kvOp("version", "mem/"+s.ns.Name))
	if err != nil {
		return err
	}
	mr, err := n.membersRead(s, rs[0])
	if err != nil {
		return err
	}
	old := s.view()
	v := *old
	if ver := uint64(rs[1].Int); !old.memRead || ver >= old.memVer {
		if mr != nil {
			v.members, v.hosts, v.former, v.leaving = mr.members, mr.hosts, mr.former, mr.leaving
		}
		v.memRead, v.memVer = true, ver
	}
	s.cur.CompareAndSwap(old, &v)
	n.hostGroups(s)   // groups.go
	n.retireGroups(s) // groups.go
	return nil
}

// membersRead parses r, a read of s's members record (nil: absent), and
// stores it (placemembers.go) before the node acts on it.
func (n *Node) membersRead(s *shardedNS, r service.Result) (*membersRecord, error) {
	if r.Type != service.ResultBytes {
		return nil, nil
	}
	mr, err := parseMembersRecord(string(r.Bytes), s.groups)
	if err != nil {
		return nil, err
	}
	n.saveMembers(s, string(r.Bytes))
	return &mr, nil
}

// runPlacement polls the placement namespace and runs the migration
// driver while this node leads it, until the node stops.
func (n *Node) runPlacement() {
	defer n.bg.Done()
	t := time.NewTicker(placementPoll)
	defer t.Stop()
	for {
		for _, s := range n.shards {
			if s.ns.Name == config.PlacementName {
				ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
				if err := n.pollPlacementMembers(ctx, s); err != nil && ctx.Err() == nil {
					n.log.Debug("placement members read failed", "err", err)
				}
				cancel()
				continue
			}
			if h := n.opts.holdPoll; h != nil && h.Load() {
				continue // tests only: this node's background reads of data namespaces paused
			}
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := n.pollPlacement(ctx, s); err != nil && ctx.Err() == nil {
				n.log.Debug("placement read failed", "namespace", s.ns.Name, "err", err)
			}
			cancel()
			n.maybeDrive(s) // migrate.go
		}
		select {
		case <-n.stopping:
			return
		case <-t.C:
		case <-n.placeNudge:
		}
	}
}

// isMoved says whether r is a MOVED redirection.
func isMoved(r service.Result) bool {
	return r.IsErr() && strings.HasPrefix(r.Err, "MOVED ")
}

// consultMax bounds the placement read a node makes before answering
// MOVED.
const consultMax = time.Second

// consultPlacement reads the placement map of s now, before this node
// answers MOVED, and reports whether it holds a newer epoch than before
// (the epoch the request was routed by).
// A node that has not yet read a flipped map would otherwise send a
// cluster client back to the node that sent it there, for up to
// placementPoll. At most one such read is in flight per namespace: a
// MOVED that meets one waits for it and takes its answer.
func (n *Node) consultPlacement(ctx context.Context, s *shardedNS, before uint64) bool {
	if s.ns.Name == config.PlacementName || n.shards[config.PlacementName] == nil {
		return false
	}
	if s.view().epoch > before {
		return true // read meanwhile (a MOVED nudges the poller)
	}
	s.consultMu.Lock()
	if ch := s.consulting; ch != nil {
		s.consultMu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
		}
		return s.view().epoch > before
	}
	ch := make(chan struct{})
	s.consulting = ch
	s.consultMu.Unlock()
	defer func() {
		s.consultMu.Lock()
		s.consulting = nil
		s.consultMu.Unlock()
		close(ch)
	}()
	cctx, cancel := context.WithTimeout(ctx, consultMax)
	defer cancel()
	if err := n.pollPlacement(cctx, s); err != nil {
		n.nudgePlacement()
		return false
	}
	return s.view().epoch > before
}

// nudgePlacement asks for a placement read now (a group answered MOVED).
func (n *Node) nudgePlacement() {
	select {
	case n.placeNudge <- struct{}{}:
	default:
	}
}

// ---- the group's guard ----

// guarded makes client request req of group gname an atomic group that
// first checks, in the group's log, that the group serves each slot the
// request names (guard slot), and for a write marks each written key dirty
// when its slot is being copied (slotdirty). It returns the request and
// how many guards it put first; ok is false when the protocol has no
// atomic groups (then slots cannot migrate, and the request runs as is).
func (n *Node) guarded(s *shardedNS, gname string, req automaton.Request, asking bool) (automaton.Request, int, bool) {
	if !automaton.TransactionsOf(s.ns.Protocol).Atomic || s.ns.Name == config.PlacementName {
		return req, 0, false
	}
	ops := req.Ops
	single := len(ops) == 0
	if single {
		ops = []service.Op{req.Op}
	}
	write := false
	seen := map[int]bool{}
	var guards, dirty []service.Op
	for _, op := range ops {
		w := !s.svc.IsRead(op) && op.Kind != service.GuardKind
		write = write || w
		for _, k := range opKeys(s.svc, op) {
			sl := shard.KeySlot(k)
			if !seen[sl] {
				seen[sl] = true
				guards = append(guards, kvOp(service.GuardKind, shard.StateKey(sl), "slot", ""))
			}
			if w {
				dirty = append(dirty, kvOp("slotdirty", k))
			}
		}
	}
	if !write && n.opts.brokenReadGuards {
		return req, 0, false
	}
	mode := shard.ModeRead
	if write {
		mode = shard.ModeWrite
	}
	if asking {
		mode = shard.ModeAsking
	}
	for i := range guards {
		guards[i].Args[1] = []byte(mode)
	}
	out := req
	out.Op = service.Op{}
	out.Ops = append(append(append(make([]service.Op, 0, len(guards)+len(ops)+len(dirty)), guards...), ops...), dirty...)
	return out, len(guards), true
}

// unguarded turns the response of a guarded request back into the
// response of the request the client sent (nops operations; single when
// it was one operation, not a group), translating a failed slot guard
// into ASK, MOVED or TRYAGAIN.
func (n *Node) unguarded(s *shardedNS, req automaton.Request, resp automaton.Response, nguards, nops int, single bool) automaton.Response {
	if resp.Result.IsErr() || len(resp.Results) < nguards+nops {
		return resp
	}
	for i := 0; i < nguards; i++ {
		r := resp.Results[i]
		if service.IsGuardFailure(r) {
			slot, _ := strconv.Atoi(strings.TrimPrefix(req.Ops[i].Key, shard.ReservedPrefix+"slot:"))
			return automaton.Response{ID: resp.ID, Result: n.refusal(s, slot, r.Err)}
		}
	}
	out := automaton.Response{ID: resp.ID, Result: resp.Result}
	if single {
		out.Result = resp.Results[nguards]
		return out
	}
	out.Results = resp.Results[nguards : nguards+nops]
	return out
}

// refusal is the client's answer to a failed slot guard ("GUARDFAILED
// slot <refusal> <peer group>").
func (n *Node) refusal(s *shardedNS, slot int, text string) service.Result {
	f := strings.Fields(text)
	if len(f) < 4 {
		return service.Fail(synoderr.TryAgain, "slot %d: %s", slot, text)
	}
	ref, peer := f[2], f[3]
	pi, ok := s.index[config.GroupName(s.ns.Name, peer)]
	if !ok {
		pi = int(s.view().m.Owner[slot])
	}
	addr := n.groupAddr(s, pi)
	switch ref {
	case shard.RefuseAsk:
		return service.Errorf("ASK %d %s", slot, addr)
	case shard.RefuseMoved:
		n.nudgePlacement()
		return service.Errorf("MOVED %d %s", slot, addr)
	case shard.RefuseLocked:
		return service.Fail(synoderr.TryAgain, "slot %d is held by cross-shard transaction %s", slot, peer)
	}
	return service.Fail(synoderr.TryAgain, "slot %d is being migrated to %s", slot, peer)
}

// groupAddr is the client address of group gi's leader as this node knows
// it (its first target).
func (n *Node) groupAddr(s *shardedNS, gi int) string {
	if gi < 0 || gi >= len(s.groups) {
		return ""
	}
	to := n.targets(s.group(gi))[0]
	for _, m := range n.cfg.Nodes {
		if m.ID == string(to) {
			return m.Client
		}
	}
	return ""
}

// doGuarded runs client request req on this node's loop of group gname,
// guarded by the slots' states in the group's log.
func (n *Node) doGuarded(ctx context.Context, s *shardedNS, gname string, req automaton.Request) (automaton.Response, error) {
	g, nguards, ok := n.guarded(s, gname, req, gateway.ClusterModeOf(ctx).Asking)
	if !ok {
		return n.do(internalCtx(ctx), gname, req)
	}
	nops := len(req.Ops)
	single := nops == 0
	if single {
		nops = 1
	}
	g.Checked = req.Checked // the guards are the node's own
	resp, err := n.do(internalCtx(ctx), gname, g)
	if err != nil {
		return resp, err
	}
	return n.unguarded(s, g, resp, nguards, nops, single), nil
}

// followRedirects is how a node serves a client that does not speak the
// cluster protocol: it follows ASK (to the migration's destination, with
// ASKING), MOVED (after reading the placement map again) and TRYAGAIN
// (after a pause) itself, each time under a fresh request id (the
// refused attempt applied nothing), until the request's context ends.
func (n *Node) followRedirects(ctx context.Context, s *shardedNS, req automaton.Request, resp automaton.Response) (automaton.Response, error) {
	id := req.ID // the client's: every answer carries it (req.ID changes each hop)
	for hop := 0; ; hop++ {
		if !resp.Result.IsErr() {
			return resp, nil
		}
		e := resp.Result.Err
		asking := false
		if hop > 0 {
			n.nudgePlacement()
			select {
			case <-ctx.Done():
				return resp, nil
			case <-time.After(time.Duration(min(hop, 10)) * 10 * time.Millisecond):
			}
		}
		switch {
		case strings.HasPrefix(e, "ASK "):
			asking = true
		case strings.HasPrefix(e, "MOVED "), strings.HasPrefix(e, "TRYAGAIN "):
		default:
			return resp, nil
		}
		req.ID = freshID()
		var err error
		resp, err = n.routeOnce(gateway.WithClusterMode(ctx, gateway.ClusterMode{Asking: asking}), s, req)
		if err != nil {
			return resp, err
		}
		resp.ID = id
	}
}

var _ gateway.ClusterEpocher = (*Node)(nil)

// ClusterEpoch implements gateway.ClusterEpocher: the epoch of the newest
// slot map this node has read for sharded namespace ns (0: not sharded).
func (n *Node) ClusterEpoch(ns string) uint64 {
	if s := n.shards[ns]; s != nil && ns != config.PlacementName {
		return s.view().epoch
	}
	return 0
}
