package lab

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/signal"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/nemesis"
)

func init() {
	var (
		opts   nemesis.Options
		faults string
		params []string
		quiet  bool
	)
	cmd := &cobra.Command{
		Use:   "chaos",
		Short: "Run real node processes in network namespaces under faults with load, and check the history",
		Long: `Starts --nodes synod node processes of this binary, each in its own network
namespace on a bridge (needs root and iproute2), runs --clients clients with
history recording for --duration while a nemesis injects faults drawn from
--seed, heals, drains, reads every key back through every node and checks the
history with the protocol's checker. See docs/CHAOS.md for what each fault does.

Prints the duration, the faults injected by kind, the operations checked, the
violations and the acknowledged writes lost; exits non-zero on a violation, a
lost write or a final read unanswered a minute after the faults healed. By
default the faults are those inside the protocol's failure model
(--faults applicable); naming others prints a warning. Interrupting it (Ctrl-C) stops the run early and removes every
namespace, link, mount and process it made.`,
		Example: `  synod-lab chaos --protocol paxos --duration 10m
  synod-lab chaos --protocol abd --duration 30s --faults partition,kill,loss --seed 7`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var err error
			applicable := nemesis.FaultsFor(opts.Protocol)
			if faults == "applicable" {
				opts.Faults = applicable
			} else if opts.Faults, err = nemesis.ParseFaults(faults); err != nil {
				return err
			}
			var outside []string
			for _, k := range opts.Faults {
				if !slices.Contains(applicable, k) {
					outside = append(outside, k)
				}
			}
			if len(outside) > 0 {
				fmt.Fprintf(cmd.ErrOrStderr(), "chaos: warning: %s is safe only under %s (its failure model, automaton.SafeFaultsOf); %s are outside it, so a violation under them is expected, not a bug\n",
					opts.Protocol, strings.Join(applicable, ","), strings.Join(outside, ","))
			}
			if opts.Params, err = cli.ParseParams(params); err != nil {
				return err
			}
			if !quiet {
				opts.Log = cmd.ErrOrStderr()
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := nemesis.Run(ctx, opts)
			if err != nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			if rep.Failed() {
				return errors.New("chaos: the history violates the protocol's guarantee, lost acknowledged writes, or the namespace stayed down after the faults healed")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&opts.Protocol, "protocol", "paxos", "protocol of the namespace under test")
	f.DurationVar(&opts.Duration, "duration", 20*time.Second, "time under load and faults (healing, draining and checking come after)")
	f.IntVar(&opts.Nodes, "nodes", 3, fmt.Sprintf("node processes (1-%d)", nemesis.MaxNodes))
	f.IntVar(&opts.Clients, "clients", 4, "concurrent clients")
	f.IntVar(&opts.Keys, "keys", 10, "keys the clients use")
	f.StringVar(&faults, "faults", "applicable", "comma-separated fault kinds: "+strings.Join(nemesis.AllFaults, ",")+"; all; or applicable: every kind inside the protocol's failure model (all but partitions and losses for pb and pbdurable, which assume a perfect failure detector)")
	f.Uint64Var(&opts.Seed, "seed", 1, "seed of the fault schedule, its targets and the relays' choices")
	f.Int64Var(&opts.DiskSize, "disk-size", nemesis.DefaultDiskSize, "bytes of each node's tmpfs data directory")
	f.StringArrayVar(&params, "param", nil, "protocol parameter name=value (repeatable)")
	f.BoolVar(&quiet, "quiet", false, "do not log faults as they happen")
	f.BoolVar(&opts.Leader, "target-leader", false, "aim the faults that hit one node (and a partition's minority) at the namespace's current leader")
	cli.AddCommand(cmd)
}
