package node

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/synoderr"
	"github.com/synod-dev/synod/transport"
	"github.com/synod-dev/synod/wire"
)

// Sharded namespaces (issue 33; config/shards.go, package shard).
//
// A sharded namespace has no automaton of its own: each of its shards is a
// replica group, run like any namespace (one loop, its own records in the
// node's shared storage engine, so every group on a node shares the WAL's
// writes and fdatasyncs) under the group's name "<namespace>#<shard>", on
// the shard's nodes only, with those nodes as its members. A request to the
// namespace (Backend.Do) is routed by its keys' hash slots: to the group on
// this node when this node replicates it, else forwarded to a node that
// does (below). An atomic group whose operations fall in different
// groups, or one operation whose keys do (RENAME a b), runs as a
// cross-shard transaction (txn.go, package shard/txn) where Redis Cluster
// answers CROSSSLOT. Operations on the whole keyspace (DBSIZE, KEYS,
// SCAN, FLUSHDB, RANDOMKEY) are answered for the whole namespace by
// fan-out over its groups (shardks.go), refused inside an atomic group;
// interactive transactions (SYNOD BEGIN) run at the client's node,
// validated at commit (itxn.go).
//
// Forwarding uses the peer transport under a reserved namespace name,
// forwardNS, which no namespace can have (config.GroupSep is not allowed
// in names): a request frame carries a call id, the group, the time left
// and the request; the receiving node runs it with Do on its own loop of
// that group and answers with a reply frame. The transport may lose
// frames, so a forwarded request whose answer does not come is of unknown
// outcome. When the namespace's protocol deduplicates retries
// (Protocol.IdempotentRetry: paxos), the forwarder resends the same
// request, same id, to the group's next node after forwardRetry without an
// answer; otherwise it waits for its one answer until the caller's context
// ends.

// forwardNS is the transport namespace of forwarded requests and replies.
const forwardNS = config.GroupSep + "forward"

// notReplicating ends the refusal of a forwarded request by a node that
// does not serve its group (followed by the group's name): nothing ran,
// so the forwarder tries the group's next node.
const notReplicating = " does not replicate "

// forwardRetry is how long a forwarded request of an idempotent protocol
// waits for its answer before it is resent to the group's next node.
const forwardRetry = 2 * time.Second

// shardedNS is one sharded namespace as this node routes it.
type shardedNS struct {
	index  map[string]int // group name -> its index in groups
	ns     config.Namespace
	svc    service.Service
	groups []config.Group
	cur    atomic.Pointer[slotView] // the newest slot map read (slotmap.go)
	retry  bool                     // the protocol deduplicates a resent request
	ops    []atomic.Uint64          // client requests routed to each group (placer.go; nil without a placement block)
	sl     *slotLoad                // client requests routed to each slot (slotload.go; nil without a placement block)
	cross  *crossCounts             // requests routed as cross-shard transactions (crossgroup.go)

	consultMu  sync.Mutex    // one placement read at a time for a MOVED (slotmap.go, consultPlacement)
	consulting chan struct{} // closed when the read in flight ends; nil: none
}

func (n *Node) initShards() {
	n.shards = map[string]*shardedNS{}
	n.groupOf = map[string]*shardedNS{}
	for _, ns := range n.cfg.Namespaces {
		if len(ns.Shards) == 0 {
			continue
		}
		svc, _ := service.Lookup(ns.Service)
		retry := false
		if p, err := automaton.LookupAny(ns.Protocol); err == nil {
			retry = p.IdempotentRetry()
		}
		n.addSharded(&shardedNS{ns: ns, svc: svc, groups: n.cfg.ShardGroups(ns), retry: retry, index: map[string]int{}})
	}
	if g, ok := n.cfg.PlacementGroup(); ok {
		// The placement namespace is routed as a sharded namespace of one
		// group owning every slot: members run it, others forward to it.
		svc, _ := service.Lookup(g.Namespace.Service)
		n.addSharded(&shardedNS{ns: g.Namespace, svc: svc, groups: []config.Group{g}, retry: true, index: map[string]int{}})
	}
	n.registerCross() // crossgroup.go
	if len(n.groupOf) > 0 {
		n.gossipNudge = make(chan struct{}, 1)
		n.placeNudge = make(chan struct{}, 1)
		n.slotClient = randUint64()
	}
	n.fwd.pending = map[uint64]chan fwdReply{}
	n.fwd.hint = map[string]leaderHint{}
}

func (n *Node) addSharded(s *shardedNS) {
	s.cur.Store(initialView(s.groups))
	s.cross = newCrossCounts(len(s.groups))
	n.shards[s.ns.Name] = s
	for i, g := range s.groups {
		s.index[g.Namespace.Name] = i
		n.groupOf[g.Namespace.Name] = s
	}
}

func randUint64() uint64 {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return binary.LittleEndian.Uint64(b[:])
}

// crossSlot is Redis Cluster's answer to a request whose keys are not all
// in one slot; here: not all in one group.
const crossSlot = "CROSSSLOT Keys in request don't hash to the same slot"

// opKeys lists the keys op names: the service's lock declaration when it
// has one (service.Lockable: multi-key operations name every key), else
// the operation's key.
func opKeys(svc service.Service, op service.Op) []string {
	if ls, ok := service.LocksOf(svc, op); ok {
		out := make([]string, 0, len(ls))
		for _, l := range ls {
			if l.Key != "" {
				out = append(out, l.Key)
			}
		}
		return out
	}
	if op.Key == "" {
		return nil
	}
	return []string{op.Key}
}

// route returns the index of the group every key of req belongs to, or an
// error result when req spans groups or names no key. With asking (the
// client sent ASKING, after an ASK), a slot under migration belongs to the
// migration's destination.
func (s *shardedNS) route(req automaton.Request, asking bool) (int, service.Result, bool) {
	return s.routeSlots(req, asking, nil)
}

// routeSlots is route, noting in sb (when not nil) the slot of each key
// it routes by (slotload.go's per-slot count).
func (s *shardedNS) routeSlots(req automaton.Request, asking bool, sb *slotBuf) (int, service.Result, bool) {
	v := s.view()
	if req.Txn != nil {
		return 0, service.Errorf("ERR interactive transactions are not supported on sharded namespace %s yet (cross-shard transactions: issue 33)", s.ns.Name), false
	}
	ops := req.Ops
	if len(ops) == 0 {
		ops = []service.Op{req.Op}
	}
	g := -1
	for _, op := range ops {
		keys := opKeys(s.svc, op)
		if len(keys) == 0 {
			return 0, service.Errorf("ERR %s spans the keyspace, which sharded namespace %s serves only outside an atomic group (MULTI, scripts)", op.Kind, s.ns.Name), false
		}
		for _, k := range keys {
			if shard.Reserved(k) {
				return 0, service.Errorf("ERR keys starting with %q are reserved for slot migration", shard.ReservedPrefix), false
			}
			sl := shard.KeySlot(k)
			sb.note(sl)
			kg := int(v.m.Owner[sl])
			if asking && v.active() && shard.InRanges(v.mig.Slots, sl) {
				kg = v.mig.To
			}
			if kg == shard.Unowned {
				return 0, service.Fail(synoderr.ClusterDown, "Hash slot %d not served", shard.KeySlot(k)), false
			}
			if g >= 0 && kg != g {
				return 0, service.Errorf("%s", crossSlot), false
			}
			g = kg
		}
	}
	return g, service.Result{}, true
}

// refuseUnowned is the ownership check of a group's own requests: a
// request that reaches group gname (by this node's routing, or forwarded
// by a node whose cluster file places the slots differently) with a key
// of a slot the group does not own is refused with MOVED naming the slot,
// before the group's automaton sees it. So no group accepts a write to a
// slot it does not own, whatever routed it there.
func (n *Node) refuseUnowned(ctx context.Context, gname string, req automaton.Request) (service.Result, bool) {
	s := n.shardOf(gname)
	if s == nil {
		return service.Result{}, false
	}
	v := s.view()
	base, _ := config.SplitIncarnation(gname)
	own := s.index[base]
	if s.nameIn(v, own) != gname {
		// An incarnation this node's view does not have (an earlier
		// one, retired; or a later one not read yet): it owns nothing.
		own = -1
	}
	gi, res, ok := s.route(req, gateway.ClusterModeOf(ctx).Asking)
	if !ok {
		return res, true
	}
	if gi != own {
		ops := req.Ops
		if len(ops) == 0 {
			ops = []service.Op{req.Op}
		}
		slot := 0
		for _, op := range ops {
			for _, k := range opKeys(s.svc, op) {
				if v.m.Group(k) != own {
					slot = shard.KeySlot(k)
				}
			}
		}
		n.nudgePlacement()
		if addr := n.groupAddr(s, int(v.m.Owner[slot])); addr != "" {
			return service.Errorf("MOVED %d %s", slot, addr), true
		}
		return service.Fail(synoderr.Moved, "%d: slot %d is not owned by %s on %s", slot, slot, gname, n.id), true
	}
	return service.Result{}, false
}

// doSharded serves Do for sharded namespace ns: on the group's loop here,
// or forwarded to a node of the group.
func (n *Node) doSharded(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	s := n.shards[ns]
	// Routing reads the request's keys, so one that no edge validated (a
	// nested call) is validated here, once.
	if !req.Checked {
		if err := automaton.ValidateRequest(s.svc, req); err != nil {
			return automaton.Response{ID: req.ID, Result: service.Fail(synoderr.Invalid, "%v", err)}, nil
		}
		req.Checked = true
	}
	if req.Txn != nil && s.ns.Name != config.PlacementName {
		return n.interactive(ctx, s, req) // itxn.go
	}
	if len(req.Ops) == 0 && keyspaceKinds[req.Op.Kind] && s.ns.Name != config.PlacementName {
		return n.wholeKeyspace(ctx, s, req) // shardks.go
	}
	if len(req.Ops) == 0 && req.Txn == nil && automaton.IsSessionEnd(req.Op) {
		return n.endSessionSharded(ctx, s, req) // shardsession.go: every group
	}
	epoch := s.view().epoch
	resp, err := n.routeOnce(ctx, s, req)
	if err == nil && isMoved(resp.Result) && n.consultPlacement(ctx, s, epoch) {
		// The map changed since: route again by the newest.
		id := req.ID
		req.ID = freshID()
		resp, err = n.routeOnce(ctx, s, req)
		resp.ID = id
	}
	if err != nil || gateway.ClusterModeOf(ctx).Aware || s.ns.Name == config.PlacementName {
		return resp, err
	}
	return n.followRedirects(ctx, s, req, resp) // slotmap.go
}

// routeOnce runs req on the group its keys route to: on this node's loop
// of it, or forwarded.
func (n *Node) routeOnce(ctx context.Context, s *shardedNS, req automaton.Request) (automaton.Response, error) {
	asking := gateway.ClusterModeOf(ctx).Asking
	var sb slotBuf
	gi, res, ok := s.routeSlots(req, asking, &sb)
	if !ok && res.Err == crossSlot {
		if parts, ok := s.crossParts(req, asking); ok {
			s.countCross(parts, nil)                     // crossgroup.go
			return n.crossShard(ctx, s, req, parts, nil) // txn.go
		}
		if parts, comp, ok := s.computeParts(req, asking); ok {
			s.countCross(parts, comp)
			return n.crossShard(ctx, s, req, parts, comp)
		}
	}
	if !ok {
		return automaton.Response{ID: req.ID, Result: res}, nil
	}
	s.countOps(gi)    // placer.go
	s.countSlots(&sb) // slotload.go
	g := s.group(gi)  // its incarnated name (groups.go)
	if n.serves(g.Namespace.Name) {
		return n.do(ctx, g.Namespace.Name, req)
	}
	return n.forward(ctx, s, g, req)
}

// ---- forwarding ----

type forwarder struct {
	mu      sync.Mutex
	next    uint64
	pending map[uint64]chan fwdReply
	hint    map[string]leaderHint // group -> its leader as last claimed or named (leadergossip.go)
}

type fwdReply struct {
	resp   automaton.Response
	err    string
	leader automaton.NodeID
}

const (
	fwdRequest = 1
	fwdReplyK  = 2
)

// targets orders group g's nodes for forwarding and for what cluster
// clients are told (CLUSTER SLOTS, MOVED): the last known leader first,
// then the others in file order, the nodes this one has no live peer
// connection to last (a killed node drops out of the answers as soon as
// its connection does, before any forwarded request times out on it).
func (n *Node) targets(g config.Group) []automaton.NodeID {
	nodes := g.Nodes
	if s := n.shardOf(g.Namespace.Name); s != nil {
		base, _ := config.SplitIncarnation(g.Namespace.Name)
		nodes = s.members(s.index[base]) // the placement record's (groups.go)
	}
	h := n.hintOf(g.Namespace.Name)
	var st map[automaton.NodeID]transport.PeerStats
	if n.tr != nil {
		st = n.tr.Stats()
	}
	up := func(id automaton.NodeID) bool { s, ok := st[id]; return id == n.id || !ok || s.Connected }
	claim := automaton.NodeID("")
	if g.Namespace.Name == config.PlacementName {
		claim = n.placementClaim(nodes) // placemembers.go: a leader the view does not name
	}
	if slices.Contains(nodes, n.id) && !n.serves(g.Namespace.Name) {
		// Named by a stale record, but this node's replica is outside
		// the group (or not run): not a target (placemembers.go).
		nodes = slices.DeleteFunc(slices.Clone(nodes), func(id automaton.NodeID) bool { return id == n.id })
	}
	out := make([]automaton.NodeID, 0, len(nodes)+1)
	for _, live := range []bool{true, false} {
		if slices.Contains(nodes, h) && up(h) == live {
			out = append(out, h)
		}
		for _, id := range nodes {
			if id != h && up(id) == live {
				out = append(out, id)
			}
		}
		if claim != "" && up(claim) == live {
			out = append(out, claim)
		}
	}
	return out
}

func (n *Node) forward(ctx context.Context, s *shardedNS, g config.Group, req automaton.Request) (automaton.Response, error) {
	if n.tr == nil {
		return automaton.Response{}, errors.New("node not started")
	}
	ch := make(chan fwdReply, len(n.targets(g))+1)
	n.fwd.mu.Lock()
	n.fwd.next++
	id := n.fwd.next
	n.fwd.pending[id] = ch
	n.fwd.mu.Unlock()
	defer func() {
		n.fwd.mu.Lock()
		delete(n.fwd.pending, id)
		n.fwd.mu.Unlock()
	}()
	targets := n.targets(g)
	if len(targets) == 0 {
		return automaton.Response{}, fmt.Errorf("shard %s: no node to forward to", g.Namespace.Name)
	}
	for i := 0; ; i++ {
		to := targets[i%len(targets)]
		left := time.Minute
		if d, ok := ctx.Deadline(); ok {
			left = time.Until(d)
		}
		n.tr.Send(to, forwardNS, encodeForward(id, g.Namespace.Name, left, fwdFlags(ctx), req)) // a lost frame is a lost message: see the retry below
		var retry <-chan time.Time
		if s.retry && len(targets) > 1 {
			t := time.NewTimer(forwardRetry)
			defer t.Stop()
			retry = t.C
		}
		select {
		case r := <-ch:
			n.noteHint(g.Namespace.Name, r.leader, 0, false, time.Now())
			if strings.HasSuffix(r.err, notReplicating+g.Namespace.Name) && i+1 < len(targets) {
				// Refused unrun by a node that does not serve the group
				// (a stale members record named it): the next one.
				continue
			}
			if r.err != "" {
				return automaton.Response{}, fmt.Errorf("forwarded to %s (shard %s): %s", to, g.Namespace.Name, r.err)
			}
			r.resp.ID = req.ID
			return r.resp, nil
		case <-retry:
			n.forgetHint(g.Namespace.Name, to)
			continue // the same request, same id: the group answers it once
		case <-ctx.Done():
			return automaton.Response{}, fmt.Errorf("request %s forwarded to %s (shard %s): outcome unknown: %w", req.ID, to, g.Namespace.Name, ctx.Err())
		case <-n.stopping:
			return automaton.Response{}, fmt.Errorf("request %s: outcome unknown: %w", req.ID, gateway.ErrShuttingDown)
		}
	}
}

// onForward handles a forwarding frame from peer from (transport reader
// goroutine: a request runs on a goroutine of its own).
func (n *Node) onForward(from automaton.NodeID, msg []byte) {
	d := wire.NewDecoder(msg)
	switch d.Byte() {
	case fwdRequest:
		id, group, left := d.Uvarint(), d.String(), time.Duration(d.Uvarint())*time.Millisecond
		flags := d.Byte()
		req := decodeRequest(d)
		if d.Done() != nil {
			n.log.Warn("bad forwarded request; dropped", "peer", from)
			return
		}
		go func() {
			ctx, cancel := context.WithTimeout(flagsCtx(context.Background(), flags), left)
			defer cancel()
			var r fwdReply
			if !n.serves(group) {
				r.err = fmt.Sprintf("node %s%s", n.id, notReplicating+group)
			} else if isAdmin(ctx) {
				// Only membership operations travel as admin (the
				// placement leader's, over the cluster's peer links).
				if !automaton.IsMemberOp(req.Op) || len(req.Ops) > 0 {
					r.err = "not a membership operation"
				} else if res, err := n.changeMembership(ctx, group, req.ID, req.Op); err != nil {
					r.err = err.Error()
				} else {
					r.resp = automaton.Response{ID: req.ID, Result: res}
				}
			} else if resp, err := n.Do(ctx, group, req); err != nil {
				r.err = err.Error()
			} else {
				r.resp = resp
				if p := n.loop(group).leader.Load(); p != nil {
					r.leader = *p
				}
			}
			n.tr.Send(from, forwardNS, encodeReply(id, r))
		}()
	case fwdLeaders:
		n.onLeaderGossip(from, d) // leadergossip.go
	case fwdReplyK:
		id := d.Uvarint()
		var r fwdReply
		r.err = d.String()
		r.leader = automaton.NodeID(d.String())
		r.resp = decodeResponse(d)
		if d.Done() != nil {
			n.log.Warn("bad forwarded reply; dropped", "peer", from)
			return
		}
		n.fwd.mu.Lock()
		ch := n.fwd.pending[id]
		n.fwd.mu.Unlock()
		if ch != nil {
			select {
			case ch <- r:
			default:
			}
		}
	}
}

// Forwarded request flags: the request is the node's own (internal:
// no ownership checks, its keys are reserved), and the client sent ASKING.
const (
	fwdInternal = 1 << iota
	fwdAsking
	fwdAdmin // a membership operation of the placement leader (groups.go groupAdmin)
)

func fwdFlags(ctx context.Context) byte {
	var f byte
	if isInternal(ctx) {
		f |= fwdInternal
	}
	if gateway.ClusterModeOf(ctx).Asking {
		f |= fwdAsking
	}
	if isAdmin(ctx) {
		f |= fwdAdmin
	}
	return f
}

func flagsCtx(ctx context.Context, f byte) context.Context {
	if f&fwdInternal != 0 {
		ctx = internalCtx(ctx)
	}
	if f&fwdAdmin != 0 {
		ctx = adminCtx(ctx)
	}
	// A forwarded client request is answered to the forwarding node,
	// which follows redirections for its client or passes them on.
	return gateway.WithClusterMode(ctx, gateway.ClusterMode{Aware: true, Asking: f&fwdAsking != 0})
}

func encodeForward(id uint64, group string, left time.Duration, flags byte, req automaton.Request) []byte {
	e := wire.Encoder{}
	e.Byte(fwdRequest)
	e.Uvarint(id)
	e.String(group)
	e.Uvarint(uint64(max(left, 0) / time.Millisecond))
	e.Byte(flags)
	encodeRequest(&e, req)
	return e.B
}

func encodeReply(id uint64, r fwdReply) []byte {
	e := wire.Encoder{}
	e.Byte(fwdReplyK)
	e.Uvarint(id)
	e.String(r.err)
	e.String(string(r.leader))
	encodeResponse(&e, r.resp)
	return e.B
}

// encodeRequest writes what a forwarded request needs: its id, operation
// or atomic group, read mode and protocol options (the Env is observed
// again where it runs; transactions and fan-out are not forwarded).
//
// The client's bound (automaton.Request.Unanswered, client sessions) rides
// in the options list under fwdUnanswered (its decimal value), only when
// set: a request without it is encoded byte for byte as before, and a node
// of an earlier build, which has no other extensible field in this frame
// (a trailing field or a new frame kind it drops without a reply, and the
// forwarder would wait for its time limit), still reads the frame and
// serves the request without the bound, as before. decodeRequest takes
// the entry out again, so that no protocol sees it.
func encodeRequest(e *wire.Encoder, r automaton.Request) {
	e.Uvarint(r.ID.Client)
	e.Uvarint(r.ID.Seq)
	e.Byte(byte(r.Opts.Read))
	e.Uvarint(uint64(len(r.Ops)))
	for _, op := range r.Ops {
		service.EncodeOp(e, op)
	}
	if len(r.Ops) == 0 {
		service.EncodeOp(e, r.Op)
	}
	keys := make([]string, 0, len(r.Opts.Ext)+1)
	for k := range r.Opts.Ext {
		if k != fwdUnanswered {
			keys = append(keys, k)
		}
	}
	if r.Unanswered > 0 {
		keys = append(keys, fwdUnanswered)
	}
	sort.Strings(keys)
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		if k == fwdUnanswered {
			e.Uvarint(1)
			e.String(strconv.FormatUint(r.Unanswered, 10))
			continue
		}
		e.Uvarint(uint64(len(r.Opts.Ext[k])))
		for _, v := range r.Opts.Ext[k] {
			e.String(v)
		}
	}
}

// fwdUnanswered is the options entry that carries a forwarded request's
// bound (encodeRequest). No protocol declares an option of this name (the
// "synod." prefix is the runtime's, as automaton.SessionOpKind).
const fwdUnanswered = "synod.unanswered"

const maxForwardOps = 1 << 16

func decodeRequest(d *wire.Decoder) automaton.Request {
	r := automaton.Request{ID: automaton.RequestID{Client: d.Uvarint(), Seq: d.Uvarint()}}
	r.Opts.Read = automaton.ReadMode(d.Byte())
	k := d.Count(maxForwardOps, 2)
	for i := 0; i < k && d.Err() == nil; i++ {
		r.Ops = append(r.Ops, service.DecodeOp(d))
	}
	if k == 0 {
		r.Op = service.DecodeOp(d)
	}
	x := d.Count(maxForwardOps, 2)
	for i := 0; i < x && d.Err() == nil; i++ {
		name := d.String()
		m := d.Count(maxForwardOps, 1)
		var vs []string
		for j := 0; j < m && d.Err() == nil; j++ {
			vs = append(vs, d.String())
		}
		if r.Opts.Ext == nil {
			r.Opts.Ext = map[string][]string{}
		}
		if name == fwdUnanswered {
			if len(vs) == 1 {
				if u, err := strconv.ParseUint(vs[0], 10, 64); err == nil {
					r.Unanswered = u
					continue
				}
			}
			d.Fail(fmt.Errorf("a forwarded request's bound %q", vs))
			continue
		}
		r.Opts.Ext[name] = vs
	}
	if len(r.Opts.Ext) == 0 {
		r.Opts.Ext = nil
	}
	return r
}

func encodeResponse(e *wire.Encoder, r automaton.Response) {
	service.EncodeResult(e, r.Result)
	e.Uvarint(uint64(len(r.Results)))
	for _, x := range r.Results {
		service.EncodeResult(e, x)
	}
}

func decodeResponse(d *wire.Decoder) automaton.Response {
	r := automaton.Response{Result: service.DecodeResult(d)}
	k := d.Count(maxForwardOps, 1)
	for i := 0; i < k && d.Err() == nil; i++ {
		r.Results = append(r.Results, service.DecodeResult(d))
	}
	return r
}

// ---- what the gateway asks (gateway.ClusterBackend) ----

var _ gateway.ClusterBackend = (*Node)(nil)

// ClusterShards implements gateway.ClusterBackend: sharded namespace ns's
// groups, each with its slots and nodes, the leader first where this node
// knows it (its own groups' leader hint, or the leader the last forwarded
// answer named).
func (n *Node) ClusterShards(ns string) ([]gateway.ClusterShard, bool) {
	s := n.shards[ns]
	if s == nil {
		return nil, false
	}
	addr := map[automaton.NodeID]config.Node{}
	for _, m := range n.cfg.Nodes {
		addr[automaton.NodeID(m.ID)] = m
	}
	out := make([]gateway.ClusterShard, 0, len(s.groups))
	v := s.view()
	for gi := range s.groups {
		g := s.group(gi)
		// Live nodes first, the leader before them: a local group's
		// leader hint, or the leader a remote group's last answer named.
		ids := n.targets(g)
		var leader automaton.NodeID
		if l := n.loop(g.Namespace.Name); l == nil || !n.serves(g.Namespace.Name) {
			leader = n.hintOf(g.Namespace.Name)
		} else if p := l.leader.Load(); p != nil {
			leader = *p
			if i := indexOf(ids, leader); i > 0 {
				ids = append(append([]automaton.NodeID{leader}, ids[:i]...), ids[i+1:]...)
			}
		}
		cs := gateway.ClusterShard{Name: g.Namespace.Name, Slots: v.groups[gi]}
		cs.LeaderKnown = leader != "" && len(ids) > 0 && ids[0] == leader
		for _, id := range ids {
			m := addr[id]
			cs.Nodes = append(cs.Nodes, gateway.ClusterNode{ID: string(id), Client: m.Client, Self: id == n.id})
		}
		out = append(out, cs)
	}
	return out, true
}

// Cluster implements gateway.ClusterBackend: the cluster's name, this
// node's id and every node's client address.
func (n *Node) Cluster() (cluster string, self string, nodes []gateway.ClusterNode) {
	for _, m := range n.cfg.Nodes {
		nodes = append(nodes, gateway.ClusterNode{ID: m.ID, Client: m.Client, Self: m.ID == string(n.id)})
	}
	return n.cfg.Cluster, string(n.id), nodes
}

// SlotLocal implements gateway.ClusterBackend: whether this node
// replicates the group owning slot of sharded namespace ns, and if not the
// client address of the node a cluster client should be redirected to.
func (n *Node) SlotLocal(ns string, slot int) (bool, string) {
	s := n.shards[ns]
	if s == nil {
		return true, ""
	}
	gi := int(s.view().m.Owner[slot])
	if gi < 0 {
		return true, "" // refused when it runs (CLUSTERDOWN)
	}
	g := s.group(gi)
	if n.serves(g.Namespace.Name) {
		return true, ""
	}
	to := n.targets(g)[0]
	for _, m := range n.cfg.Nodes {
		if m.ID == string(to) {
			return false, m.Client
		}
	}
	return true, ""
}

func indexOf(ids []automaton.NodeID, id automaton.NodeID) int {
	for i, x := range ids {
		if x == id {
			return i
		}
	}
	return -1
}

// shardsInfo is INFO's Shards section: for each group this node runs of a
// sharded namespace, its slots, nodes and leader.
func (n *Node) shardsInfo() map[string]string {
	out := map[string]string{}
	for _, s := range n.shards {
		v := s.view()
		for gi := range s.groups {
			g := s.group(gi)
			mem := s.members(gi)
			ids := make([]string, len(mem))
			for i, id := range mem {
				ids[i] = string(id)
			}
			fact := fmt.Sprintf("slots=%s,nodes=%s,epoch=%d,cross=%d", shard.FormatSlots(v.groups[gi]), strings.Join(ids, " "), v.epoch, s.cross.byGroup[gi].Load())
			if l := n.loop(g.Namespace.Name); l != nil && n.serves(g.Namespace.Name) {
				if p := l.leader.Load(); p != nil {
					fact += ",leader=" + string(*p)
				}
				fact += ",local=1"
			} else {
				fact += ",local=0"
			}
			out[g.Namespace.Name] = fact
		}
	}
	return out
}
