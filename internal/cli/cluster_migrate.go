package cli

import (
	"context"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
)

// migrateCmd is `synod cluster migrate`: start, show and control a slot
// migration of the local cluster's sharded namespace (CLUSTER MIGRATE and
// CLUSTER MIGRATION on any live node; node/migrate.go, docs/SHARDING.md).
func migrateCmd(dir *string) *cobra.Command {
	var rate float64
	var watch bool
	cmd := &cobra.Command{
		Use:   "migrate [FROM TO SLOTS | status | pause | resume | cancel | rate N]",
		Short: "Move hash slots between shards online, or show (status) and control the migration",
		Long: `Move a slot range from one shard to another while clients use it:
  synod cluster migrate s0 s1 0-999 --rate 5000   start (rate in keys/s, 0: no limit)
  synod cluster migrate status [--watch]          phase, keys and bytes copied and left
  synod cluster migrate pause|resume|cancel       control it (cancel: before the hand-off)
  synod cluster migrate rate 1000                 change the rate limit`,
		Args: cobra.MaximumNArgs(3),
		RunE: func(cmd *cobra.Command, args []string) error {
			st, err := cluster.Status(*dir)
			if err != nil {
				return err
			}
			var addrs []string
			for _, s := range st {
				if s.PingOK {
					addrs = append(addrs, s.Client)
				}
			}
			if len(addrs) == 0 {
				return fmt.Errorf("no node of %s answers", *dir)
			}
			c, err := client.New(addrs, client.Options{Timeout: 10 * time.Second})
			if err != nil {
				return err
			}
			defer c.Close()
			var req []string
			switch {
			case len(args) == 3:
				req = []string{"CLUSTER", "MIGRATE", args[0], args[1], args[2]}
				if rate > 0 {
					req = append(req, "RATE", fmt.Sprint(rate))
				}
			case len(args) == 0:
				req = []string{"CLUSTER", "MIGRATION", "STATUS"}
			default:
				req = append([]string{"CLUSTER", "MIGRATION"}, args...)
			}
			for {
				rep, err := c.Do(context.Background(), req...)
				if err != nil {
					return err
				}
				text := strings.TrimSpace(string(rep.Str))
				fmt.Fprintln(cmd.OutOrStdout(), text)
				if !watch || len(req) < 3 || !strings.EqualFold(req[2], "status") {
					return nil
				}
				if strings.Contains(text, "phase: done") || strings.Contains(text, "phase: canceled") {
					return nil
				}
				time.Sleep(time.Second)
			}
		},
	}
	cmd.Flags().Float64Var(&rate, "rate", 0, "keys per second when starting (0: no limit)")
	cmd.Flags().BoolVar(&watch, "watch", false, "with status: print it every second until the migration ends")
	return cmd
}

// printMigration writes the sharded namespace's slot map epoch and last
// migration as the first node that answers reports it (CLUSTER MIGRATION
// STATUS), for `synod cluster status`; nothing when no node is sharded.
func printMigration(out io.Writer, st []cluster.NodeStatus) {
	for _, s := range st {
		if !s.PingOK {
			continue
		}
		c, err := client.New([]string{s.Client}, client.Options{Timeout: 2 * time.Second})
		if err != nil {
			continue
		}
		rep, err := c.Do(context.Background(), "CLUSTER", "MIGRATION", "STATUS")
		c.Close()
		if err != nil || len(rep.Str) == 0 || strings.HasPrefix(string(rep.Str), "ERR") {
			return
		}
		fmt.Fprintf(out, "\nslot migration (as %s reports):\n", s.ID)
		for _, l := range strings.Split(strings.TrimSpace(string(rep.Str)), "\n") {
			fmt.Fprintf(out, "  %s\n", l)
		}
		return
	}
}
