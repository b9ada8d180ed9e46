package main

import (
	"fmt"
	"strings"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/cluster"
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
	upCmd := &cobra.Command{
		Use:   "up",
		Short: "Start a local cluster and wait until every node answers PING",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			up.Dir = dir
			c, err := cluster.Up(up)
			if err != nil {
				return err
			}
			out := cmd.OutOrStdout()
			verb := "started"
			if c.Resumed {
				verb = "resumed"
			}
			ns := c.Config.Namespaces[0]
			fmt.Fprintf(out, "cluster %s %s in %s (%d nodes, protocol %s, service %s, durability %s)\n",
				c.Config.Cluster, verb, c.Dir, len(c.Nodes), ns.Protocol, ns.Service, c.Config.Durability)
			for _, n := range c.Nodes {
				if n.GRPC != "" {
					fmt.Fprintf(out, "%s %s grpc %s\n", n.ID, n.Client, n.GRPC)
				} else {
					fmt.Fprintf(out, "%s %s\n", n.ID, n.Client)
				}
			}
			if len(c.Nodes) > 0 {
				_, port, _ := strings.Cut(c.Nodes[0].Client, ":")
				hint := "redis-cli -p " + port
				if c.Config.Password != "" {
					hint += " -a PASSWORD"
				}
				fmt.Fprintf(out, "try: %s\n", hint)
			}
			fmt.Fprintf(out, "logs: %s/nK.log; stop: synod cluster down --dir %s\n", c.Dir, c.Dir)
			return nil
		},
	}
	f := upCmd.Flags()
	f.IntVar(&up.Nodes, "nodes", 3, "number of nodes")
	f.StringVar(&up.Protocol, "protocol", "abd", "replication protocol of the default namespace")
	f.StringVar(&up.Service, "service", "kv", "data type of the default namespace")
	f.StringVar(&up.Durability, "durability", "fsync", "fsync or memory")
	f.IntVar(&up.BasePort, "base-port", 0, "client ports N.., peer ports N+100.., metrics ports N+200..; 0 picks free ports")
	f.StringVar(&up.Password, "password", "", "require clients to AUTH with this password")

	statusCmd := &cobra.Command{
		Use:   "status",
		Short: "Show each node's pid, liveness and PING",
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
			return tw.Flush()
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
	clusterCmd.AddCommand(upCmd, statusCmd, downCmd, killCmd, restartCmd)
	rootCmd.AddCommand(clusterCmd)
}
