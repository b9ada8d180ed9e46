package gateway

import (
	"context"
	"crypto/sha1"
	"encoding/hex"
	"fmt"
	"net"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/synoderr"
)

// The Redis Cluster protocol for sharded namespaces (issue 33; package
// shard, config/shards.go, node/shard.go): CLUSTER SLOTS, CLUSTER SHARDS,
// CLUSTER NODES, CLUSTER KEYSLOT, CLUSTER INFO, CLUSTER MYID, READONLY,
// READWRITE and ASKING, so that redis-cli -c, redis-py's RedisCluster and
// go-redis's ClusterClient find each slot's group and send it its keys.
//
// A CLUSTER command describes the connection's namespace (the first of the
// cluster file, or SYNOD NS); an unsharded namespace answers Redis's
// "cluster support disabled" error, as a standalone Redis does. Each
// shard is a Redis Cluster shard: its leader (where this node knows it)
// is the master, its other nodes are replicas. Node ids are 40 hex digits,
// the SHA-1 of the cluster name and the node's id (stable across restarts).
//
// Redirection. Every node serves every slot of a sharded namespace: keys
// of a group this node does not replicate are forwarded to a node that
// does (node/shard.go), so a client that knows nothing of clusters works
// against any node. A connection that has shown it speaks the cluster
// protocol (it sent CLUSTER, READONLY, READWRITE or ASKING) is instead
// answered "-MOVED <slot> <host>:<port>" for a key whose group this node
// does not replicate, and follows the redirection itself as Redis Cluster
// clients do. While slots migrate (node/migrate.go), the source group
// answers ASK for them once it has handed them over, and a command after
// ASKING (ClusterMode.Asking) may be served by the group importing them;
// a client that knows nothing of clusters has both followed for it.
// An atomic group (MULTI/EXEC, MSET, ...) or a command (RENAME, SMOVE,
// ...) whose keys are in different groups runs as a cross-shard
// transaction (two-phase commit, package shard/txn) on the node.

// ClusterBackend is implemented by a Backend that serves sharded
// namespaces (package node).
type ClusterBackend interface {
	// ClusterShards describes sharded namespace ns; false when ns is not
	// sharded.
	ClusterShards(ns string) ([]ClusterShard, bool)
	// Cluster gives the cluster's name, this node's id and every node.
	Cluster() (cluster, self string, nodes []ClusterNode)
	// SlotLocal reports whether this node replicates the group owning
	// slot of ns, and otherwise the client address to redirect to.
	SlotLocal(ns string, slot int) (local bool, addr string)
}

// MigrationBackend starts, shows and controls slot migrations of a
// sharded namespace (package node, migrate.go): args are "start
// <from-shard> <to-shard> <slots> [rate <keys/s>]", "status", "pause",
// "resume", "cancel" or "rate <keys/s>". The answer is text.
type MigrationBackend interface {
	Migrate(ctx context.Context, ns string, args []string) (string, error)
}

// ClusterEpocher is implemented by a ClusterBackend whose slot map has a
// configuration epoch (the placement namespace's): CLUSTER INFO reports it
// as cluster_current_epoch and cluster_my_epoch.
type ClusterEpocher interface {
	ClusterEpoch(ns string) uint64
}

// ClusterShard is one group of a sharded namespace.
type ClusterShard struct {
	Name  string
	Slots []shard.Range
	// Nodes replicate the group; the first is the leader when LeaderKnown.
	Nodes       []ClusterNode
	LeaderKnown bool
}

// ClusterNode is one node as cluster clients see it.
type ClusterNode struct {
	ID     string // Synod's node id
	Client string // host:port of its Redis-protocol address
	Self   bool
}

// clusterConn is a connection's cluster state.
type clusterConn struct {
	aware  bool // sent CLUSTER, READONLY, READWRITE or ASKING: gets MOVED
	asking bool // the last command was ASKING: the next one may go to a slot's importing group
	now    bool // asking, for the command being run
}

// ClusterMode is what a request's client is, for a sharded namespace
// (Backend.Do reads it from the context): Aware, it follows ASK and MOVED
// itself (else the backend follows them for it); Asking, the command
// came right after ASKING (Redis Cluster: it may be served by the group
// importing its slot).
type ClusterMode struct{ Aware, Asking bool }

type clusterModeKey struct{}

// WithClusterMode returns ctx carrying m.
func WithClusterMode(ctx context.Context, m ClusterMode) context.Context {
	return context.WithValue(ctx, clusterModeKey{}, m)
}

// ClusterModeOf is the ClusterMode ctx carries (zero: a client that
// knows nothing of clusters).
func ClusterModeOf(ctx context.Context) ClusterMode {
	m, _ := ctx.Value(clusterModeKey{}).(ClusterMode)
	return m
}

// clusterCtx is ctx with the connection's cluster mode, for the command
// being run.
func (c *conn) clusterCtx(ctx context.Context) context.Context {
	if !c.cluster.aware {
		return ctx
	}
	return WithClusterMode(ctx, ClusterMode{Aware: true, Asking: c.cluster.now})
}

func init() {
	register("cluster",
		&command{name: "cluster", arity: -2, flags: []string{"loading", "stale"}, fn: cmdCluster},
		&command{name: "readonly", arity: 1, flags: []string{"loading", "stale", "fast"}, fn: cmdClusterMode},
		&command{name: "readwrite", arity: 1, flags: []string{"loading", "stale", "fast"}, fn: cmdClusterMode},
		&command{name: "asking", arity: 1, flags: []string{"fast"}, fn: cmdClusterMode},
	)
}

// clusterNodeID is a node's Redis Cluster id: 40 hex digits.
func clusterNodeID(cluster, id string) string {
	h := sha1.Sum([]byte(cluster + "/" + id))
	return hex.EncodeToString(h[:])
}

// clusterShards returns the connection namespace's shards, or writes the
// error a standalone Redis gives and returns false.
func (c *conn) clusterShards() (ClusterBackend, []ClusterShard, bool) {
	cb, ok := c.s.b.(ClusterBackend)
	var shards []ClusterShard
	if ok {
		c.mu.Lock()
		ns := c.ns.Name
		c.mu.Unlock()
		shards, ok = cb.ClusterShards(ns)
	}
	if !ok {
		c.writeError("ERR This instance has cluster support disabled")
		return nil, nil, false
	}
	return cb, shards, true
}

func cmdClusterMode(c *conn, args [][]byte) {
	c.cluster.aware = true
	if strings.EqualFold(string(args[0]), "asking") {
		c.cluster.asking = true
	}
	c.w.WriteSimple("OK")
}

func splitHostPort(addr string) (string, int) {
	h, p, err := net.SplitHostPort(addr)
	if err != nil {
		return addr, 0
	}
	port, _ := strconv.Atoi(p)
	return h, port
}

func cmdCluster(c *conn, args [][]byte) {
	c.cluster.aware = true
	sub := strings.ToLower(string(args[1]))
	if sub == "keyslot" {
		if len(args) != 3 {
			c.writeError(arityErr("cluster|keyslot"))
			return
		}
		c.w.WriteInt(int64(shard.KeySlot(string(args[2]))))
		return
	}
	if sub == "help" {
		lines := []string{
			"CLUSTER <subcommand> [<arg> [value] [opt] ...]. Subcommands are:",
			"INFO", "    Return information about the cluster.",
			"KEYSLOT <key>", "    Return the hash slot for <key>.",
			"MYID", "    Return the node id.",
			"NODES", "    Return cluster configuration seen by node.",
			"SHARDS", "    Return information about slot range mappings and the nodes of each shard.",
			"SLOTS", "    Return information about slots range mappings.",
			"MIGRATE <from-shard> <to-shard> <slots> [RATE <keys/s>]", "    Start moving slots between shards (Synod).",
			"MIGRATION [STATUS|PAUSE|RESUME|CANCEL|RATE <keys/s>]", "    Show or control the slot migration (Synod).",
		}
		c.w.WriteArray(len(lines))
		for _, l := range lines {
			c.w.WriteSimple(l)
		}
		return
	}
	if sub == "migrate" || sub == "migration" {
		c.clusterMigrate(sub, args[2:])
		return
	}
	cb, shards, ok := c.clusterShards()
	if !ok {
		return
	}
	cluster, self, nodes := cb.Cluster()
	switch sub {
	case "slots":
		n := 0
		for _, s := range shards {
			n += len(s.Slots)
		}
		c.w.WriteArray(n)
		for _, s := range shards {
			for _, r := range s.Slots {
				c.w.WriteArray(2 + len(s.Nodes))
				c.w.WriteInt(int64(r.First))
				c.w.WriteInt(int64(r.Last))
				for _, nd := range s.Nodes {
					host, port := splitHostPort(nd.Client)
					c.w.WriteArray(3)
					c.w.WriteBulkString(host)
					c.w.WriteInt(int64(port))
					c.w.WriteBulkString(clusterNodeID(cluster, nd.ID))
				}
			}
		}
	case "shards":
		c.w.WriteArray(len(shards))
		for _, s := range shards {
			c.w.WriteMap(2)
			c.w.WriteBulkString("slots")
			c.w.WriteArray(2 * len(s.Slots))
			for _, r := range s.Slots {
				c.w.WriteInt(int64(r.First))
				c.w.WriteInt(int64(r.Last))
			}
			c.w.WriteBulkString("nodes")
			c.w.WriteArray(len(s.Nodes))
			for i, nd := range s.Nodes {
				host, port := splitHostPort(nd.Client)
				role := "replica"
				if i == 0 {
					role = "master"
				}
				c.w.WriteMap(7)
				for _, kv := range [][2]string{{"id", clusterNodeID(cluster, nd.ID)}, {"ip", host}, {"endpoint", host}, {"hostname", nd.ID}, {"role", role}, {"health", "online"}} {
					c.w.WriteBulkString(kv[0])
					c.w.WriteBulkString(kv[1])
				}
				c.w.WriteBulkString("port")
				c.w.WriteInt(int64(port))
			}
		}
	case "nodes":
		c.w.WriteBulkString(clusterNodes(cluster, self, nodes, shards))
	case "myid":
		c.w.WriteBulkString(clusterNodeID(cluster, self))
	case "info":
		assigned := 0
		for _, s := range shards {
			for _, r := range s.Slots {
				assigned += r.Last - r.First + 1
			}
		}
		state := "ok"
		if assigned != shard.Slots {
			state = "fail"
		}
		var epoch uint64
		if ce, ok := cb.(ClusterEpocher); ok {
			c.mu.Lock()
			ns := c.ns.Name
			c.mu.Unlock()
			epoch = ce.ClusterEpoch(ns)
		}
		info := fmt.Sprintf("cluster_state:%s\r\ncluster_slots_assigned:%d\r\ncluster_slots_ok:%d\r\ncluster_slots_pfail:0\r\ncluster_slots_fail:0\r\ncluster_known_nodes:%d\r\ncluster_size:%d\r\ncluster_current_epoch:%d\r\ncluster_my_epoch:%d\r\n",
			state, assigned, assigned, len(nodes), len(shards), epoch, epoch)
		c.w.WriteBulkString(info)
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try CLUSTER HELP.", args[1]))
	}
}

// clusterMigrate is CLUSTER MIGRATE (start a migration) and CLUSTER
// MIGRATION (show or control it), Synod's own subcommands.
func (c *conn) clusterMigrate(sub string, args [][]byte) {
	mb, ok := c.s.b.(MigrationBackend)
	if !ok || !c.sharded() {
		c.writeError("ERR This instance has cluster support disabled")
		return
	}
	var a []string
	if sub == "migrate" {
		a = append(a, "start")
	}
	for _, x := range args {
		a = append(a, string(x))
	}
	c.mu.Lock()
	ns := c.ns.Name
	c.mu.Unlock()
	ctx, cancel := context.WithTimeout(c.s.ctx, c.s.opts.RequestTimeout)
	defer cancel()
	out, err := mb.Migrate(ctx, ns, a)
	if err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	if out == "OK" {
		c.w.WriteSimple("OK")
		return
	}
	c.w.WriteBulkString(out)
}

// clusterNodes is CLUSTER NODES's text: one line per node. Redis Cluster
// gives a node one role; a Synod node may lead one group and follow
// another (shards whose node sets overlap). Decision (shardks49, session
// 49): a node leading any group is a master, with the slots of every
// group it leads (each group's leader is the first of its nodes: the
// leader where known); a node leading none is a replica of the leader of
// the first group (cluster-file order) it replicates. So every slot is
// listed once, under its group's leader, whatever the order of the
// groups; that a master also follows another group is not shown. CLUSTER
// SLOTS and CLUSTER SHARDS list every group's nodes in full, and the
// clients this file names read those.
func clusterNodes(cluster, self string, nodes []ClusterNode, shards []ClusterShard) string {
	role := map[string]string{}    // node -> "master" or master's id
	slots := map[string][]string{} // master -> slot ranges
	for _, s := range shards {
		if len(s.Nodes) == 0 {
			continue
		}
		lead := s.Nodes[0].ID
		role[lead] = "master"
		for _, r := range s.Slots {
			slots[lead] = append(slots[lead], r.String())
		}
	}
	for _, s := range shards {
		if len(s.Nodes) == 0 {
			continue
		}
		for _, nd := range s.Nodes[1:] {
			if _, ok := role[nd.ID]; !ok {
				role[nd.ID] = clusterNodeID(cluster, s.Nodes[0].ID)
			}
		}
	}
	var b strings.Builder
	for _, nd := range nodes {
		host, port := splitHostPort(nd.Client)
		flags, master := "master", "-"
		if r, ok := role[nd.ID]; ok && r != "master" {
			flags, master = "slave", r
		}
		if nd.ID == self {
			flags = "myself," + flags
		}
		fmt.Fprintf(&b, "%s %s:%d@%d,%s %s %s 0 0 0 connected", clusterNodeID(cluster, nd.ID), host, port, port, nd.ID, flags, master)
		for _, s := range slots[nd.ID] {
			b.WriteString(" " + s)
		}
		b.WriteString("\n")
	}
	return b.String()
}

// redirect answers MOVED, for a cluster-aware connection, when the first
// key of cmd is in a group this node does not replicate. It reports
// whether it answered.
func (c *conn) redirect(cmd *command, args [][]byte) bool {
	// ASKING holds for the one command after it (Redis Cluster).
	c.cluster.now, c.cluster.asking = c.cluster.asking, false
	if !c.cluster.aware || cmd.first <= 0 || cmd.first >= len(args) || c.cluster.now {
		return false
	}
	cb, ok := c.s.b.(ClusterBackend)
	if !ok {
		return false
	}
	c.mu.Lock()
	ns := c.ns.Name
	sharded := len(c.ns.Shards) > 0
	c.mu.Unlock()
	if !sharded {
		return false
	}
	slot := shard.KeySlot(string(args[cmd.first]))
	local, addr := cb.SlotLocal(ns, slot)
	if local || addr == "" {
		return false
	}
	c.writeError(synoderr.New(synoderr.Moved, fmt.Sprintf("%d %s", slot, addr)).Error())
	return true
}

// sharded reports whether the connection's namespace is sharded.
func (c *conn) sharded() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.ns.Shards) > 0
}

// keyspaceWide are the commands a sharded namespace answers for the whole
// namespace at any node (node/shardks.go).
var keyspaceWide = map[string]bool{"dbsize": true, "keys": true, "scan": true, "randomkey": true, "flushdb": true, "flushall": true}

// shardedKeyspaceTips is COMMAND's tips for a keyspaceWide command on a
// sharded namespace: Redis's request_policy (all_shards, special) and
// response_policy tips tell a cluster client to send the command to every
// master and combine the answers, which would count each key once per
// master here, where any node answers for the namespace; so they are left
// out (no request_policy: any one node; go-redis's dynamic resolver,
// ClusterClient.NewDynamicResolver, routes by them).
func shardedKeyspaceTips(tips []string) []string {
	var out []string
	for _, t := range tips {
		if !strings.HasPrefix(t, "request_policy:") && !strings.HasPrefix(t, "response_policy:") {
			out = append(out, t)
		}
	}
	return out
}
