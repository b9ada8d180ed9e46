package node

import (
	"context"
	crand "crypto/rand"
	"encoding/binary"
	"fmt"
	"math/rand"
	"slices"
	"sort"
	"strconv"
	"strings"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/transport"
)

// Replica groups on this node: the table of loops, and groups started at
// run time (issue 33 item 2, replacing a dead node's replica).
//
// A node starts, in New, the groups whose cluster-file nodes include it.
// A sharded namespace's placement record mem/<ns> (slotmap.go) may make
// this node a member of another group since (a replacement, placer.go);
// the node then starts that group's loop at run time (hostGroups, after
// each placement read), from its own stored records if it hosted the group
// before (a restart), else empty: it joins as a learner and is caught up
// by the group's leader (paxos's add, snapshot or log). A node the record
// does not name a member no longer serves the group (serves: no local
// requests, forwarded ones refused, routing names the members only). A
// node the record names as a former member of a group (a replacement
// removed it, and such a node is never chosen for the group again) stops
// its replica when it reads that (retireGroups): the loop ends as at
// shutdown (its batches committed, its timers cancelled) and peer
// messages for it are dropped; its records stay on disk. A removed node
// that restarts with the group in its cluster file starts the replica
// and stops it again at its first placement read.
//
// Group incarnations (issue 33, session 49; config.IncSep): a group
// created at run time and later emptied by a merge is retired (shard
// decision "retire", placer_retire.go): the record makes its name
// unplaced at the next incarnation, and the next split founds it afresh
// as "<ns>#<shard>@<inc>". Its loop, records, peer messages, forwarded
// requests and leader gossip all carry that name (shardedNS.name,
// group), so no message or record of an earlier incarnation ever reaches
// it; a node that reads the record stops its replicas of earlier
// incarnations and removes their records (retireIncarnations). Lookups
// by a loop's or a message's name strip the incarnation (shardOf) and a
// name that is not the view's current incarnation is not served (serves).

// loopTable is the node's loops by group name. Loops are added at run
// time and never removed (a retired loop stays, ended), so a loop once
// read stays valid.
type loopTable struct {
	mu     sync.RWMutex
	m      map[string]*nsLoop
	closed bool // shutdown began: no more loops start
}

// loop returns group name's loop on this node (nil: not run here).
func (n *Node) loop(name string) *nsLoop {
	n.lt.mu.RLock()
	defer n.lt.mu.RUnlock()
	return n.lt.m[name]
}

// loopList returns every loop, in name order.
func (n *Node) loopList() []*nsLoop {
	n.lt.mu.RLock()
	defer n.lt.mu.RUnlock()
	names := make([]string, 0, len(n.lt.m))
	for k := range n.lt.m {
		names = append(names, k)
	}
	sort.Strings(names)
	out := make([]*nsLoop, len(names))
	for i, k := range names {
		out[i] = n.lt.m[k]
	}
	return out
}

// groupLoop builds the automaton and loop of group g on this node. A node
// outside g's cluster-file nodes (a member added at run time) is given
// g's nodes plus itself, with the file's nodes as the bootstrap
// configuration (paxos's "members"), so that it replays the group's
// history from the same start.
func (n *Node) groupLoop(g config.Group) (*nsLoop, error) {
	ns := g.Namespace
	lookup := automaton.Lookup
	if n.cfg.AllowBroken {
		lookup = automaton.LookupAny
	}
	proto, err := lookup(ns.Protocol)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
	}
	svc, err := service.Lookup(ns.Service)
	if err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
	}
	if err := automaton.CheckService(ns.Protocol, svc); err != nil {
		return nil, fmt.Errorf("namespace %s: %w", ns.Name, err)
	}
	var seed [8]byte
	if _, err := crand.Read(seed[:]); err != nil {
		return nil, fmt.Errorf("node: seeding randomness: %w", err)
	}
	params := map[string]string{}
	for k, v := range ns.Params {
		params[k] = v
	}
	nodes := g.Nodes
	if !slices.Contains(nodes, n.id) {
		if _, ok := params["members"]; !ok {
			ids := make([]string, len(nodes))
			for i, id := range nodes {
				ids[i] = string(id)
			}
			params["members"] = strings.Join(ids, ",")
		}
		nodes = append(slices.Clone(nodes), n.id)
	}
	a, err := proto.New(automaton.Config{
		Self: n.id, Nodes: nodes, Namespace: ns.Name, Service: svc, Params: params,
		Rand: rand.New(rand.NewSource(int64(binary.LittleEndian.Uint64(seed[:])))),
	})
	if err != nil {
		return nil, fmt.Errorf("namespace %s: protocol %s: %w", ns.Name, ns.Protocol, err)
	}
	return n.newLoop(ns, svc, a), nil
}

// startGroup starts group g's loop at run time (hostGroups): its stored
// records, its transport, its goroutine. A group already running is left.
func (n *Node) startGroup(g config.Group) error {
	if n.loop(g.Namespace.Name) != nil {
		return nil
	}
	if !automaton.SupportsMembership(g.Namespace.Protocol) {
		return fmt.Errorf("group %s: protocol %s has a fixed membership", g.Namespace.Name, g.Namespace.Protocol)
	}
	l, err := n.groupLoop(g)
	if err != nil {
		return err
	}
	if l.store, err = n.engine.Namespace(g.Namespace.Name); err != nil {
		return err
	}
	recs, err := l.store.Load()
	if err != nil {
		l.store.Close()
		return fmt.Errorf("group %s: loading records: %w", g.Namespace.Name, err)
	}
	l.out = n.peerSender(g.Namespace)
	n.lt.mu.Lock()
	if n.lt.closed || n.lt.m[g.Namespace.Name] != nil {
		n.lt.mu.Unlock()
		l.store.Close()
		return nil
	}
	n.lt.m[g.Namespace.Name] = l
	n.wg.Add(1)
	n.lt.mu.Unlock()
	n.log.Info("group started at run time", "group", g.Namespace.Name, "records", len(recs))
	n.m.groupsStarted.Inc()
	l.start(automaton.Start{Records: recs})
	select {
	case <-n.stopping: // shutdown's endLoops may have missed it
		go l.end()
	default:
	}
	return nil
}

// hostGroups starts the groups of s that its placement record makes this
// node host (a member, or a member being added) and that it does not run,
// each under its incarnated name (config.IncSep): a loop of an earlier
// incarnation of the group is another group (retireGroups ends it).
func (n *Node) hostGroups(s *shardedNS) {
	v := s.view()
	for gi, g := range s.groups {
		g.Namespace.Name = s.nameIn(v, gi)
		if v.hosts == nil || !slices.Contains(v.hosts[gi], n.id) || n.loop(g.Namespace.Name) != nil {
			continue
		}
		if len(g.Nodes) == 0 {
			// A group created at run time: its bootstrap configuration is
			// the record's (a founding member starts with it as its
			// nodes; a member added later is given it as paxos's
			// "members", groupLoop).
			if v.boot == nil || len(v.boot[gi]) == 0 {
				continue
			}
			g.Nodes = v.boot[gi]
		}
		if err := n.startGroup(g); err != nil {
			n.log.Warn("starting a group at run time failed", "group", g.Namespace.Name, "err", err)
		}
	}
}

// retireGroups stops this node's replicas of the groups of s that its
// placement record names it a former member of (and not a member or a
// host): a replacement removed it (replace.go, step 4). It also stops
// every replica of an earlier incarnation of a group than the record's
// and removes its records (retireIncarnations).
func (n *Node) retireGroups(s *shardedNS) {
	v := s.view()
	n.retireIncarnations(s, v)
	if v.former == nil {
		return
	}
	for gi := range s.groups {
		if !slices.Contains(v.former[gi], n.id) || slices.Contains(s.members(gi), n.id) ||
			v.hosts != nil && slices.Contains(v.hosts[gi], n.id) {
			continue
		}
		name := s.nameIn(v, gi)
		if l := n.loop(name); l != nil && l.retired.CompareAndSwap(false, true) {
			n.log.Info("group stopped at run time: this node was removed from it", "group", name)
			n.m.groupsStopped.Inc()
			go l.end()
		}
	}
}

// retireIncarnations stops this node's replicas of earlier incarnations
// of s's groups than view v's (the merge that emptied a created group
// retired it: placer_retire.go) and removes their records from the
// storage engine (issue 33, session 49; docs/SHARDING.md "Group
// incarnations"). This is garbage collection, not safety: the group's
// next incarnation has another name, so its messages and records never
// meet these. Until it runs (a node down during the retirement restarts
// the old incarnation from its stored members copy) the old replica's
// peers no longer run it and drop its messages, so it commits nothing.
func (n *Node) retireIncarnations(s *shardedNS, v *slotView) {
	if v.inc == nil {
		return
	}
	for _, l := range n.loopList() {
		base, inc := config.SplitIncarnation(l.ns.Name)
		gi, ok := s.index[base]
		if !ok || inc >= v.inc[gi] || !l.retired.CompareAndSwap(false, true) {
			continue
		}
		n.log.Info("group stopped at run time: a later incarnation replaced it", "group", l.ns.Name, "incarnation", v.inc[gi])
		n.m.groupsStopped.Inc()
		n.bg.Add(1)
		go func() {
			defer n.bg.Done()
			l.end()
			n.removeRecords(l)
		}()
	}
}

// removeRecords deletes every record of ended loop l from its store (a
// retired incarnation, retireIncarnations).
func (n *Node) removeRecords(l *nsLoop) {
	if l.store == nil {
		return
	}
	recs, err := l.store.Load()
	if err == nil && len(recs) > 0 {
		batch := make([]automaton.Persist, 0, len(recs))
		for k := range recs {
			batch = append(batch, automaton.Persist{Key: k, Delete: true})
		}
		err = l.store.Commit(batch)
	}
	if err != nil {
		n.log.Warn("removing a retired incarnation's records failed", "group", l.ns.Name, "err", err)
		return
	}
	n.log.Info("a retired incarnation's records removed", "group", l.ns.Name, "records", len(recs))
}

// members returns the members of group gi of s: the placement record's
// when it names them, else the cluster file's.
func (s *shardedNS) members(gi int) []automaton.NodeID { return s.membersIn(s.view(), gi) }

// name is group gi's incarnated name (config.IncarnationName): the name
// of its loop, its records and its messages.
func (s *shardedNS) name(gi int) string { return s.nameIn(s.view(), gi) }

// nameIn is group gi's incarnated name in view v.
func (s *shardedNS) nameIn(v *slotView, gi int) string {
	if v.names == nil {
		return s.groups[gi].Namespace.Name
	}
	return v.names[gi]
}

// group is group gi under its incarnated name, as requests address it.
func (s *shardedNS) group(gi int) config.Group {
	g := s.groups[gi]
	if v := s.view(); v.names != nil {
		g.Namespace.Name = v.names[gi]
	}
	return g
}

// setInc installs incarnations inc (by group; nil: all 0) and the groups'
// incarnated names in v.
func (v *slotView) setInc(groups []config.Group, inc []uint64) {
	v.inc, v.names = nil, nil
	for gi, i := range inc {
		if i == 0 {
			continue
		}
		if v.names == nil {
			v.inc = inc
			v.names = make([]string, len(groups))
			for j, g := range groups {
				v.names[j] = g.Namespace.Name
			}
		}
		v.names[gi] = config.IncarnationName(groups[gi].Namespace.Name, i)
	}
}

// shardIndex is the sharded namespace and index of the group a loop or
// message names (nil: not a shard group, or not its current incarnation
// by this node's view).
func (n *Node) shardIndex(name string) (*shardedNS, int) {
	s := n.shardOf(name)
	if s == nil {
		return nil, -1
	}
	base, _ := config.SplitIncarnation(name)
	gi := s.index[base]
	if s.name(gi) != name {
		return nil, -1
	}
	return s, gi
}

// shardOfLoop is shardOf, free when no namespace is sharded (the
// request paths: node.go do, Submit, DoBatch; replyfn.go).
func (n *Node) shardOfLoop(name string) *shardedNS {
	if len(n.groupOf) == 0 {
		return nil
	}
	return n.shardOf(name)
}

// shardOf is the sharded namespace of the group a loop or message names
// (its incarnated name; nil: not a shard group).
func (n *Node) shardOf(name string) *shardedNS {
	if s := n.groupOf[name]; s != nil {
		return s
	}
	if base, inc := config.SplitIncarnation(name); inc > 0 {
		return n.groupOf[base]
	}
	return nil
}

// membersIn returns the members of group gi of s in view v.
func (s *shardedNS) membersIn(v *slotView, gi int) []automaton.NodeID {
	if v.members != nil && v.members[gi] != nil {
		return v.members[gi]
	}
	return s.groups[gi].Nodes
}

// serves reports whether this node serves group name: it runs the group
// and, for a shard group, is one of its members, by the placement record
// and by its own replica (one that executed its removal does not serve,
// whatever a stale record says: placemembers.go), and name is the
// group's current incarnation by the record.
func (n *Node) serves(name string) bool {
	l := n.loop(name)
	if l == nil || l.retired.Load() {
		return false
	}
	s := n.shardOf(name)
	if s == nil {
		return true
	}
	base, _ := config.SplitIncarnation(name)
	gi := s.index[base]
	v := s.view()
	return s.nameIn(v, gi) == name && slices.Contains(s.membersIn(v, gi), n.id) && !l.outside.Load()
}

// closeLoops stops run-time starts (shutdown, before waiting for loops).
func (n *Node) closeLoops() {
	n.lt.mu.Lock()
	n.lt.closed = true
	n.lt.mu.Unlock()
}

// membersRecord is a sharded namespace's record mem/<ns> in the placement
// namespace: for each group it names, its members (routed to) and the
// nodes being added (hosting it, not yet members). Its text is a space
// list of "<group index>:<members, comma list>[/<joining>[><leaving>]]";
// a group not listed has its cluster-file nodes. A "!<former, comma
// list>" suffix names the nodes a replacement removed (never chosen for
// the group again: shard.GroupReport.Former). Only the placement
// leader writes it (placer.go, replace).
//
// Incarnations (session 49): "<group index>@<incarnation>:..." names a
// group created at run time at an incarnation after 0 (config.IncSep;
// "<index>:" is incarnation 0, so a record written before incarnations
// reads the same). "<index>@<incarnation>:" with no members is a created
// group retired by the merge that emptied it (placer_retire.go):
// unplaced again, its next creation is that incarnation, and every
// replica of an earlier one stops and removes its records
// (retireIncarnations).
type membersRecord struct {
	members, hosts [][]automaton.NodeID // by group; nil entries: the file's
	// boot: a group created at run time (a split into an unplaced shard,
	// placer.go createSplit): its bootstrap configuration, the nodes it
	// was created on ("^<boot, comma list>" at the end of its entry).
	boot    [][]automaton.NodeID
	former  [][]automaton.NodeID // by group: nodes removed from it
	leaving []automaton.NodeID   // by group: the node a replacement under way removes ("": none)
	inc     []uint64             // by group: its incarnation
}

func parseMembersRecord(text string, groups []config.Group) (membersRecord, error) {
	r := membersRecord{members: make([][]automaton.NodeID, len(groups)), hosts: make([][]automaton.NodeID, len(groups)),
		former: make([][]automaton.NodeID, len(groups)), leaving: make([]automaton.NodeID, len(groups)), boot: make([][]automaton.NodeID, len(groups)),
		inc: make([]uint64, len(groups))}
	ids := func(s string) []automaton.NodeID {
		var out []automaton.NodeID
		for _, f := range strings.Split(s, ",") {
			if f != "" {
				out = append(out, automaton.NodeID(f))
			}
		}
		return out
	}
	for _, e := range strings.Fields(text) {
		gs, rest, ok := strings.Cut(e, ":")
		gs, incs, hasInc := strings.Cut(gs, config.IncSep)
		gi, err := strconv.Atoi(gs)
		if !ok || err != nil || gi < 0 || gi >= len(groups) {
			return r, fmt.Errorf("placement members record: bad entry %q", e)
		}
		if hasInc {
			inc, err := strconv.ParseUint(incs, 10, 64)
			if err != nil || inc == 0 || len(groups[gi].Nodes) > 0 {
				// Only a group created at run time has incarnations.
				return r, fmt.Errorf("placement members record: bad incarnation in %q", e)
			}
			r.inc[gi] = inc
			if rest == "" {
				continue // retired: unplaced at this incarnation
			}
		}
		rest, boot, _ := strings.Cut(rest, "^")
		r.boot[gi] = ids(boot)
		rest, former, _ := strings.Cut(rest, "!")
		r.former[gi] = ids(former)
		mem, join, _ := strings.Cut(rest, "/")
		join, leaving, _ := strings.Cut(join, ">")
		r.leaving[gi] = automaton.NodeID(leaving)
		r.members[gi] = ids(mem)
		if len(r.members[gi]) == 0 {
			return r, fmt.Errorf("placement members record: group %d has no members", gi)
		}
		r.hosts[gi] = append(slices.Clone(r.members[gi]), ids(join)...)
	}
	for gi := range groups {
		if r.members[gi] == nil {
			r.hosts[gi] = groups[gi].Nodes
		}
	}
	return r, nil
}

// formatMembersRecord renders members (and joining, leaving, former,
// boot and inc, any may be nil) of every group for mem/<ns>; a group
// without members (an unplaced shard) has no entry, unless its
// incarnation is not 0 (retired: "<index>@<inc>:").
func formatMembersRecord(members, joining [][]automaton.NodeID, leaving []automaton.NodeID, former, boot [][]automaton.NodeID, inc []uint64) string {
	var parts []string
	for gi, m := range members {
		gs := strconv.Itoa(gi)
		if inc != nil && inc[gi] > 0 {
			gs += config.IncSep + strconv.FormatUint(inc[gi], 10)
			if len(m) == 0 {
				parts = append(parts, gs+":")
				continue
			}
		}
		if len(m) == 0 {
			continue
		}
		ids := make([]string, len(m))
		for i, id := range m {
			ids[i] = string(id)
		}
		e := gs + ":" + strings.Join(ids, ",")
		if joining != nil && len(joining[gi]) > 0 {
			js := make([]string, len(joining[gi]))
			for i, id := range joining[gi] {
				js[i] = string(id)
			}
			e += "/" + strings.Join(js, ",")
			if leaving != nil && leaving[gi] != "" {
				e += ">" + string(leaving[gi])
			}
		}
		if former != nil && len(former[gi]) > 0 {
			fs := make([]string, len(former[gi]))
			for i, id := range former[gi] {
				fs[i] = string(id)
			}
			e += "!" + strings.Join(fs, ",")
		}
		if boot != nil && len(boot[gi]) > 0 {
			bs := make([]string, len(boot[gi]))
			for i, id := range boot[gi] {
				bs[i] = string(id)
			}
			e += "^" + strings.Join(bs, ",")
		}
		parts = append(parts, e)
	}
	return strings.Join(parts, " ")
}

// admin requests are membership operations the placement leader sends to
// a group (groupAdmin): forwarded with fwdAdmin, run by changeMembership.
type adminKey struct{}

func adminCtx(ctx context.Context) context.Context { return context.WithValue(ctx, adminKey{}, true) }

func isAdmin(ctx context.Context) bool { v, _ := ctx.Value(adminKey{}).(bool); return v }

// groupAdmin runs membership operation op (automaton.MemberAdd,
// MemberRemove, LeaderTransfer) on group gi of s under request id id: on
// this node's replica when it serves the group, else forwarded to a
// member; the group's protocol takes it to its leader.
func (n *Node) groupAdmin(ctx context.Context, s *shardedNS, gi int, id automaton.RequestID, op service.Op) (service.Result, error) {
	g := s.group(gi)
	if n.serves(g.Namespace.Name) {
		return n.changeMembership(ctx, g.Namespace.Name, id, op)
	}
	resp, err := n.forward(adminCtx(ctx), s, g, automaton.Request{ID: id, Op: op})
	if err != nil {
		return service.Result{}, err
	}
	return resp.Result, nil
}

// peerSender is the transport a loop of namespace ns sends its peer
// messages on: the namespace's peer transport (config.PeerTransport).
func (n *Node) peerSender(ns config.Namespace) transport.Sender {
	switch ns.PeerTransport() {
	case config.TransportGRPCUnary:
		return n.gp.Unary()
	case config.TransportGRPCStream:
		return n.gp.Stream()
	default:
		return n.tr
	}
}
