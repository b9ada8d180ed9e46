package config

import (
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// Shard is one replica group of a sharded namespace (issue 33): the hash
// slots it owns (package shard: Redis Cluster's 16,384 slots, CRC16 with
// hash tags) and the nodes that replicate it. Each shard runs the
// namespace's protocol, service and parameters on its own nodes, with its
// own leader and its own records; every node may host shards of many
// namespaces, and a node that hosts none of a namespace's shards still
// serves its clients by forwarding (package node, shard.go).
//
//	namespaces:
//	  - name: default
//	    protocol: paxos
//	    service: kv
//	    shards:
//	      - {name: s0, slots: 0-5460, nodes: [n1, n2, n3]}
//	      - {name: s1, slots: 5461-10922, nodes: [n4, n5, n6]}
//	      - {name: s2, slots: 10923-16383, nodes: [n7, n8, n9]}
//
// Placement is static: the cluster file says which group owns which slots
// on which nodes, and every slot must be owned by exactly one group
// (shard.Check). A placement service and online migration are later work
// (docs/SHARDING.md).
type Shard struct {
	Name  string `yaml:"name"`
	Slots string `yaml:"slots"` // "0-5460" or "0-99,200-299" (shard.ParseSlots); "": a spare (placement.go)
	// Nodes replicate the shard; none (with no slots, in a namespace with
	// a placement block): an unplaced shard, created by a split on the
	// nodes the placement service chooses (placement.go).
	Nodes []string `yaml:"nodes"`
}

// GroupSep joins a sharded namespace's name and a shard's name into the
// group's name, under which the group's automaton, records, peer messages
// and metrics go. Namespace names cannot contain it, so a group never
// collides with a namespace.
const GroupSep = "#"

// GroupName is the name of shard sh of namespace ns.
func GroupName(ns, sh string) string { return ns + GroupSep + sh }

// IncSep joins a group's name and its incarnation (issue 33, session 49):
// a group created by a split and retired by the merge that emptied it
// frees its name for a later split, which founds the group again under
// the next incarnation, a new identity (docs/SHARDING.md "Group
// incarnations"). The incarnated name is the group's name everywhere the
// group is its name: its loop, its storage records, the peer transport's
// namespace field, #forward and #batch frames, leader gossip. Incarnation
// 0 is spelled as the plain name, so no stored data moves. Names cannot
// contain IncSep (nameRE), so it never collides with a namespace or shard.
const IncSep = "@"

// IncarnationName is group name's name at incarnation inc: name itself
// for 0, else "<name>@<inc>".
func IncarnationName(name string, inc uint64) string {
	if inc == 0 {
		return name
	}
	return name + IncSep + strconv.FormatUint(inc, 10)
}

// SplitIncarnation parses an incarnated group name into the group's name
// and incarnation (0 when it has none). A name whose suffix is not a
// number is returned whole, at incarnation 0.
func SplitIncarnation(name string) (string, uint64) {
	i := strings.LastIndex(name, IncSep)
	if i < 0 {
		return name, 0
	}
	inc, err := strconv.ParseUint(name[i+1:], 10, 64)
	if err != nil || inc == 0 {
		return name, 0
	}
	return name[:i], inc
}

// Group is one replica group a node may run: an unsharded namespace on
// every node of the cluster, or one shard of a sharded namespace on its
// own nodes.
type Group struct {
	// Namespace is the group's configuration: the namespace's, renamed to
	// the group's name for a shard (and without Shards).
	Namespace Namespace
	// Parent is the namespace clients name ("" when the group is an
	// unsharded namespace, whose Namespace.Name clients use).
	Parent string
	// Index is the shard's index in Parent's Shards (0 when unsharded).
	Index int
	// Slots are the shard's slots (nil when unsharded).
	Slots []shard.Range
	// Nodes replicate the group, in file order.
	Nodes []automaton.NodeID
}

// Groups lists every replica group of the cluster: each unsharded
// namespace, then each shard of each sharded namespace, in file order,
// then the placement namespace when a namespace is sharded. The cluster
// must be valid.
func (c *Cluster) Groups() []Group {
	var out []Group
	for _, ns := range c.Namespaces {
		if len(ns.Shards) == 0 {
			out = append(out, Group{Namespace: ns, Nodes: c.NodeIDs()})
			continue
		}
		out = append(out, c.ShardGroups(ns)...)
	}
	if g, ok := c.PlacementGroup(); ok {
		out = append(out, g)
	}
	return out
}

// PlacementName is the placement namespace's name (issue 33 item 2): a
// paxos KV group that records each sharded namespace's slot map with its
// epoch and its migrations (package shard, "Online slot migration";
// node/slotmap.go). Clients cannot name it: namespace names cannot
// contain GroupSep.
const PlacementName = GroupSep + "placement"

// PlacementGroup is the placement namespace, when some namespace is
// sharded: paxos and KV on three nodes spread over the cluster file's
// order (nodes 1, 1+N/3 and 1+2N/3; every node when there are fewer than
// three), so that with the default `synod cluster up` split its members are
// in three different shards.
func (c *Cluster) PlacementGroup() (Group, bool) {
	sharded := false
	for _, ns := range c.Namespaces {
		sharded = sharded || len(ns.Shards) > 0
	}
	if !sharded || len(c.Nodes) == 0 {
		return Group{}, false
	}
	ids := c.NodeIDs()
	nodes := ids
	if len(ids) > 3 {
		nodes = []automaton.NodeID{ids[0], ids[len(ids)/3], ids[2*len(ids)/3]}
	}
	ns := Namespace{Name: PlacementName, Protocol: "paxos", Service: "kv"}
	return Group{Namespace: ns, Parent: PlacementName, Slots: []shard.Range{{First: 0, Last: shard.Slots - 1}}, Nodes: nodes}, true
}

// ShardGroups lists the groups of sharded namespace ns, in its Shards'
// order.
func (c *Cluster) ShardGroups(ns Namespace) []Group {
	out := make([]Group, 0, len(ns.Shards))
	for i, sh := range ns.Shards {
		g := ns
		g.Name, g.Shards = GroupName(ns.Name, sh.Name), nil
		rs, _ := shardSlots(sh.Slots)
		ids := make([]automaton.NodeID, len(sh.Nodes))
		for j, id := range sh.Nodes {
			ids[j] = automaton.NodeID(id)
		}
		out = append(out, Group{Namespace: g, Parent: ns.Name, Index: i, Slots: rs, Nodes: ids})
	}
	return out
}

// SlotMap is sharded namespace ns's slot table: for each slot, the index
// of the shard that owns it.
func SlotMap(ns Namespace) *shard.Map {
	groups := make([][]shard.Range, len(ns.Shards))
	for i, sh := range ns.Shards {
		groups[i], _ = shardSlots(sh.Slots)
	}
	return shard.Build(groups)
}

// validateShards checks each sharded namespace: shard names, slot sets
// that own every slot exactly once (shard.Check), nodes of this cluster,
// and a deployment the protocol accepts on each shard's node count.
func (c *Cluster) validateShards(bad func(field, f string, a ...any)) {
	ids := map[string]bool{}
	for _, n := range c.Nodes {
		ids[n.ID] = true
	}
	for i, ns := range c.Namespaces {
		if len(ns.Shards) == 0 {
			if ns.Placement != nil {
				bad(fmt.Sprintf("namespaces[%d].placement", i), "only a sharded namespace has a placement")
			}
			continue
		}
		f := fmt.Sprintf("namespaces[%d].shards", i)
		names := map[string]bool{}
		var groups [][]shard.Range
		slotsOK := true
		for j, sh := range ns.Shards {
			fs := fmt.Sprintf("%s[%d]", f, j)
			if !nameRE.MatchString(sh.Name) {
				bad(fs+".name", "%q must be 1-63 letters, digits, '_', '.' or '-'", sh.Name)
			} else if names[sh.Name] {
				bad(fs+".name", "duplicate shard %q", sh.Name)
			}
			names[sh.Name] = true
			rs, err := shardSlots(sh.Slots)
			if err != nil {
				bad(fs+".slots", "%v", err)
				slotsOK = false
			}
			groups = append(groups, rs)
			if len(sh.Nodes) == 0 && (len(rs) > 0 || ns.Placement == nil || !automaton.SupportsMembership(ns.Protocol)) {
				// No nodes: an unplaced group, a name the placement
				// service creates a group under when it splits one
				// (shard.Decide, node/placer.go createSplit).
				bad(fs+".nodes", "at least one node is required (none: an unplaced shard, which owns no slots, in a namespace with a placement block and a protocol with membership changes)")
			}
			seen := map[string]bool{}
			for k, id := range sh.Nodes {
				switch {
				case !ids[id]:
					bad(fmt.Sprintf("%s.nodes[%d]", fs, k), "node %q is not in this cluster", id)
				case seen[id]:
					bad(fmt.Sprintf("%s.nodes[%d]", fs, k), "node %q listed twice", id)
				}
				seen[id] = true
			}
			if svc, err := service.Lookup(ns.Service); err == nil && len(sh.Nodes) > 0 {
				if err := automaton.CheckDeployment(ns.Protocol, svc, ns.Params, len(sh.Nodes), c.Durability); err != nil {
					bad(fs+".nodes", "%v", err)
				}
			}
		}
		if slotsOK {
			if err := shard.Check(groups); err != nil {
				bad(f, "%v", err)
			}
		}
		if ns.Placement != nil {
			if _, err := ns.Placement.Params(); err != nil {
				bad(fmt.Sprintf("namespaces[%d].placement", i), "%v", err)
			}
			// The placement service replaces a dead node's replicas and
			// creates groups by membership changes, and splits, merges
			// and balances by slot migrations: a protocol without
			// membership changes is refused here rather than failing
			// at the first decision (docs/SHARDING.md, "Which protocols
			// shard"; static shards of any protocol need no placement).
			if _, err := automaton.Lookup(ns.Protocol); err == nil && !automaton.SupportsMembership(ns.Protocol) {
				bad(fmt.Sprintf("namespaces[%d].placement", i), "protocol %s has a fixed membership: the placement service needs membership changes (%s) to replace replicas and create groups; shard it statically (shards with nodes, no placement block)", ns.Protocol, strings.Join(slices.DeleteFunc(automaton.Names(), func(p string) bool { return !automaton.SupportsMembership(p) }), ", "))
			}
		}
	}
	// A sharded namespace has no single automaton to call (node/call.go).
	for i, ns := range c.Namespaces {
		for _, callee := range automaton.Callees(ns.Protocol, ns.Params) {
			if j := slices.IndexFunc(c.Namespaces, func(x Namespace) bool { return x.Name == callee }); j >= 0 && len(c.Namespaces[j].Shards) > 0 {
				bad(fmt.Sprintf("namespaces[%d].params", i), "namespace %q calls namespace %q, which is sharded: nested calls reach unsharded namespaces only", ns.Name, callee)
			}
		}
	}
}
