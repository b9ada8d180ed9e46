package cli

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sort"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

func init() {
	var dir string
	clusterCmd := &cobra.Command{
		Use:   "cluster",
		Short: "Start, inspect and stop a local cluster of synod node processes on 127.0.0.1",
		Long: `Runs a local cluster of real synod node processes on 127.0.0.1. Everything
lives in one directory (--dir): the cluster file, one log and pid file per node,
and the nodes' data. Nodes run detached, so they outlive this command; stop them
with "synod cluster down".`,
	}
	clusterCmd.PersistentFlags().StringVar(&dir, "dir", "./synod-cluster", "cluster directory")

	var up cluster.UpOptions
	var upTLS bool
	var upParams []string
	var upProcs string
	var upCallee, upCalleeService string
	var placement bool
	upCmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster and wait until every node answers PING",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			up.Dir = dir
			var err error
			// Unset, a resumed cluster keeps its file's procs (a new one: Go's
			// default); --procs go gives a resumed one Go's default back.
			if cmd.Flags().Changed("procs") {
				if up.Procs, err = cluster.ParseProcs(upProcs); err != nil {
					return err
				}
			}
			if placement {
				up.Placement = &config.Placement{}
			}
			if up.Params, err = ParseParams(upParams); err != nil {
				return err
			}
			up.Extra = append(up.Extra, CalleeNamespacesOf(up, upCallee, upCalleeService)...)
			c, err := upCluster(up, upTLS) // certs.go
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			verb := "started"
			if c.Resumed {
				verb = "resumed"
			}
			ns := c.Config.Namespaces[0]
			procs := ""
			if p := c.Config.Nodes[0].Procs; p > 0 {
				procs = fmt.Sprintf(", GOMAXPROCS %d per node", p)
			}
			fmt.Fprintf(out, "cluster %s %s in %s (%d nodes, protocol %s, service %s, durability %s%s)\n",
				c.Config.Cluster, verb, c.Dir, len(c.Nodes), ns.Protocol, ns.Service, c.Config.Durability, procs)
			for _, sh := range ns.Shards {
				slots := sh.Slots
				if slots == "" {
					slots = "none (a spare)"
				}
				fmt.Fprintf(out, "shard %s#%s: slots %s on %s\n", ns.Name, sh.Name, slots, strings.Join(sh.Nodes, " "))
			}
			if ns.Placement != nil {
				fmt.Fprintln(out, "placement: on (splits, merges and their log: synod cluster status)")
			}
			for _, x := range c.Config.Namespaces[1:] {
				fmt.Fprintf(out, "namespace %s: protocol %s, service %s\n", x.Name, x.Protocol, x.Service)
			}
			for _, n := range c.Nodes {
				if n.GRPC != "" {
					fmt.Fprintf(out, "%s %s grpc %s\n", n.ID, n.Client, n.GRPC)
				} else {
					fmt.Fprintf(out, "%s %s\n", n.ID, n.Client)
				}
			}
			if len(c.Nodes) > 0 {
				on, optional := c.Config.ClientTLS()
				plaintext := !on || optional // the client ports also speak plaintext
				if plaintext {
					_, port, _ := strings.Cut(c.Nodes[0].Client, ":")
					hint := "redis-cli -p " + port
					if c.Config.Password != "" {
						hint += " -a PASSWORD"
					}
					fmt.Fprintf(out, "try: %s\n", hint)
				}
				if h := tlsHint(c, c.Nodes[0].Client); h != "" {
					fmt.Fprintln(out, h)
				}
				if plaintext {
					addrs := strings.Join(c.ClientAddrs(), ",")
					pw := ""
					if c.Config.Password != "" {
						pw = " --password PASSWORD"
					}
					fmt.Fprintf(out, "or:  synod kv --addr %s%s set k v && synod kv --addr %s%s get k\n", addrs, pw, addrs, pw)
				}
			}
			fmt.Fprintf(out, "logs: %s/nK.log; stop: synod cluster down --dir %s\n", c.Dir, c.Dir)
			return nil
		},
	}
	f := upCmd.Flags()
	f.IntVar(&up.Nodes, "nodes", 3, "number of nodes")
	f.StringVar(&up.Protocol, "protocol", upDefaultProtocol, "replication protocol of the default namespace (paxos runs every Redis command; see README for what the others give up)")
	f.StringVar(&up.Service, "service", "kv", "data type of the default namespace")
	f.StringVar(&up.Transport, "transport", "tcp", "peer transport of the default namespace: tcp, grpc-unary or grpc-stream")
	f.StringVar(&up.Durability, "durability", "fsync", "fsync or memory")
	f.IntVar(&up.BasePort, "base-port", 0, "pin ports: client ports N.., peer ports N+100.., metrics ports N+200.., gRPC ports N+300..; 0 picks free ports")
	f.StringVar(&up.Password, "password", "", "require clients to AUTH with this password")
	f.StringArrayVar(&upParams, "param", nil, "protocol parameter of the default namespace, name=value (repeatable; each protocol's parameters are listed in its package doc)")
	f.StringVar(&upCallee, "callee-protocol", "paxos", "protocol of the namespaces the default namespace calls (adam's callee), added when missing: paxos, pbpaxos or unreplicated (docs/NESTED.md, \"Callee protocols\")")
	f.StringVar(&upCalleeService, "callee-service", "", "data type of the namespaces added with --callee-protocol (default: the default namespace's --service)")
	f.IntVar(&up.Shards, "shards", 0, "split the default namespace by hash slot into this many replica groups (Redis Cluster protocol; docs/SHARDING.md); 0: unsharded")
	f.IntVar(&up.Replicas, "replicas", 0, "nodes per shard with --shards (default 3, or every node when fewer)")
	f.IntVar(&up.Spares, "spare-shards", 0, "with --shards: this many more shards owning no slots, for the placement service's splits")
	f.BoolVar(&placement, "placement", false, "with --shards: the placement service splits hot or big shards into spares, merges cold ones and logs each decision (docs/SHARDING.md)")
	f.StringVar(&upProcs, "procs", "go", "GOMAXPROCS of each node (the cluster file's procs): go (Go's default), auto (ceil(cores / nodes): each co-located node its share of this machine) or a count; unset, a resumed cluster keeps its file's")
	f.BoolVar(&upTLS, "tls", false, "generate certificates and a secret into DIR/tls: peers use mutual TLS, clients must use TLS (docs/SECURITY.md)")

	statusCmd := &cobra.Command{
		Use:   "status",
		Short: "Show each node's pid, liveness and PING, and each shard's slots, nodes and leader",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			st, err := cluster.Status(dir)
			if err != nil {
				return err
			}
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 4, 2, ' ', 0)
			fmt.Fprintln(tw, "NODE\tPID\tALIVE\tPING\tCLIENT\tPEER")
			for _, s := range st {
				pid, ping := "-", "ok"
				if s.PID != 0 {
					pid = fmt.Sprint(s.PID)
				}
				if !s.PingOK {
					ping = "fail: " + s.PingErr
				}
				fmt.Fprintf(tw, "%s\t%s\t%v\t%s\t%s\t%s\n", s.ID, pid, s.Alive, ping, s.Client, s.Peer)
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			printPlacement(cmd.OutOrStdout(), st)
			printShards(cmd.OutOrStdout(), st)    // cluster_shards.go
			printMigration(cmd.OutOrStdout(), st) // cluster_migrate.go
			// The live membership of namespaces that change it through their
			// log (the cluster file is only the bootstrap membership).
			if mem, from, err := cluster.Members(dir); err == nil {
				names := make([]string, 0, len(mem))
				for ns := range mem {
					names = append(names, ns)
				}
				sort.Strings(names)
				for _, ns := range names {
					fmt.Fprintf(cmd.OutOrStdout(), "members of %s (from the log, as %s reports): %s\n", ns, from, strings.Join(mem[ns], " "))
				}
			}
			return nil
		},
	}

	var purge bool
	downCmd := &cobra.Command{
		Use:   "down",
		Short: "Stop every node (SIGTERM, then SIGKILL after 5 s); keep data unless --purge",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			stopped, err := cluster.Down(dir, purge)
			if len(stopped) > 0 {
				fmt.Fprintf(cmd.OutOrStdout(), "stopped %s\n", strings.Join(stopped, " "))
			} else if err == nil {
				fmt.Fprintln(cmd.OutOrStdout(), "no node was running")
			}
			if err == nil && purge {
				fmt.Fprintf(cmd.OutOrStdout(), "purged %s\n", dir)
			}
			return err
		},
	}
	downCmd.Flags().BoolVar(&purge, "purge", false, "also remove the cluster file, logs and data")

	killCmd := &cobra.Command{
		Use:   "kill ID",
		Short: "kill -9 one node",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cluster.Kill(dir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "killed %s\n", args[0])
			return nil
		},
	}
	restartCmd := &cobra.Command{
		Use:   "restart ID",
		Short: "Start a stopped node again and wait until it answers PING",
		Args:  cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cluster.Restart(dir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "restarted %s\n", args[0])
			return nil
		},
	}
	addCmd := &cobra.Command{
		Use:   "add",
		Short: "Start a new node and add it to the live membership (paxos namespaces)",
		Long: `Starts node n<next> on free ports (written into DIR's cluster file, so that
restart, kill and down work), then submits the add through a running member
(SYNOD MEMBER ADD). It returns once the new node has caught up and the change
has executed in every namespace's log. Replace a dead node with
"synod cluster remove ID" then "synod cluster add".`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			n, err := cluster.Add(dir)
			if err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "added %s %s (peer %s, pid %d)\n", n.ID, n.Client, n.Peer, n.PID)
			return nil
		},
	}
	removeCmd := &cobra.Command{
		Use:   "remove ID",
		Short: "Remove a node from the live membership, then stop it (paxos namespaces)",
		Long: `Submits the removal through a running member other than ID (SYNOD MEMBER
REMOVE), waits until it has executed in every namespace's log, then stops ID if
it runs and drops it from the cluster file (its log and data stay in DIR). A
dead node is removed the same way.`,
		Args: cobra.ExactArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := cluster.Remove(dir, args[0]); err != nil {
				return err
			}
			fmt.Fprintf(cmd.OutOrStdout(), "removed %s\n", args[0])
			return nil
		},
	}
	clusterCmd.AddCommand(upCmd, statusCmd, downCmd, killCmd, restartCmd, addCmd, removeCmd, migrateCmd(&dir)) // cluster_migrate.go
	rootCmd.AddCommand(clusterCmd)
}

// ParseParams reads --param name=value flags.
func ParseParams(kvs []string) (map[string]string, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := map[string]string{}
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q: want name=value", kv)
		}
		out[k] = v
	}
	return out, nil
}

// CalleeNamespaces are the namespaces the default namespace calls
// (automaton.Caller: adam's callee) that up does not already add: each a
// paxos namespace of the default namespace's service (kv unless set), so
// that `cluster up --protocol adam` starts a cluster whose nested calls
// have somewhere to go.
func CalleeNamespaces(up cluster.UpOptions) []config.Namespace {
	return CalleeNamespacesOf(up, "paxos", "")
}

// CalleeNamespacesOf is CalleeNamespaces with namespaces of protocol and
// service (cluster up --callee-protocol, --callee-service; an empty
// service is the default namespace's). A protocol that does not serve
// nested requests is refused when the cluster file is validated, with
// the reason.
func CalleeNamespacesOf(up cluster.UpOptions, protocol, svc string) []config.Namespace {
	if svc == "" {
		svc = up.Service
	}
	if svc == "" {
		svc = "kv"
	}
	var out []config.Namespace
	for _, name := range automaton.Callees(up.Protocol, up.Params) {
		if name == "default" || slices.ContainsFunc(up.Extra, func(n config.Namespace) bool { return n.Name == name }) {
			continue
		}
		out = append(out, config.Namespace{Name: name, Protocol: protocol, Service: svc})
	}
	return out
}

// nodeInfo asks a node that answered PING (plaintext, no password) for
// one INFO section; false when it cannot be asked or does not answer.
func nodeInfo(s cluster.NodeStatus, section string) (client.Reply, bool) {
	if !s.PingOK {
		return client.Reply{}, false
	}
	c, err := client.New([]string{s.Client}, client.Options{Timeout: 2 * time.Second})
	if err != nil {
		return client.Reply{}, false
	}
	defer c.Close()
	rep, err := c.Do(context.Background(), "INFO", section)
	return rep, err == nil
}

// printPlacement prints where each node holds copies of Orca objects (INFO
// placement: namespaces whose runtime places copies, orca-primary), for
// the nodes that answered PING over plaintext without a password; others
// are skipped.
func printPlacement(out io.Writer, st []cluster.NodeStatus) {
	for _, s := range st {
		rep, ok := nodeInfo(s, "placement")
		if !ok {
			continue
		}
		var lines []string
		for _, l := range strings.Split(string(rep.Str), "\n") {
			l = strings.TrimSpace(l)
			if l != "" && !strings.HasPrefix(l, "#") {
				lines = append(lines, strings.Replace(l, ":", " ", 1))
			}
		}
		sort.Strings(lines)
		for _, l := range lines {
			fmt.Fprintf(out, "placement at %s: %s\n", s.ID, l)
		}
	}
}

// upDefaultProtocol is cluster up's protocol when --protocol is not given:
// Multi-Paxos, which runs every Redis command Synod serves (atomic groups,
// MULTI/EXEC, expiry), so a newcomer's first redis-cli session works
// (issue 34). A namespace in a cluster file that names no protocol still
// gets automaton.DefaultProtocol.
const upDefaultProtocol = "paxos"
