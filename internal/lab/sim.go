package lab

import (
	"fmt"
	"os"
	"strings"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/internal/cli"
	"github.com/synod-dev/synod/sim"
)

func init() {
	var v sim.Flags
	cmd := &cobra.Command{
		Use:   "sim",
		Short: "Simulate a cluster under faults, deterministically, over many seeds, and check every history",
		Long: `Simulate a whole cluster and its clients in one goroutine, in virtual time, from a
seed (FoundationDB simulation testing / TigerBeetle VOPR style), with crashes,
pauses, partitions, loss, duplication, reordering, latency spikes and slow fsync,
then check each history: for linearizability, or for eventual serializability
(seed 000: --service, --strict, --prev; replicas converge, strict answers agree
with the final order, prev sets hold) for ESDS protocols.

The same seed and flags replay the same run byte for byte: the printed trace
digest is identical. Seeds run in parallel on --workers goroutines. For every
seed whose history is not linearizable the command prints the seed, its digest
and the command that replays it, and saves the history (JSON, for "synod check")
and Porcupine's HTML view under --save-failing. It exits non-zero if any seed
fails.

--faults is all, none, or a comma list of ` + strings.Join(sim.FaultKinds, ",") + `.
Distributions (--latency, --fsync, --client-latency, --think) are
constant:D, uniform:MIN:MAX, normal:MEAN:STDDEV or pareto:SCALE:SHAPE.`,
		Example: `  synod-lab sim --protocol abd --nodes 5 --clients 8 --ops 2000 --seeds 1-500 --faults all
  synod-lab sim --protocol abd-broken-nowriterid --seeds 1-50 --keys 2 --latency pareto:1ms:1.5
  synod-lab sim --protocol abd --seeds 42 --trace /tmp/trace.txt
  synod-lab sim --protocol paxos --groups 0.3 --seeds 1-50

Broken variants (kept to show that the checkers and invariants catch them):
` + automaton.DescribeBroken(),
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			cfg, seeds, err := v.Build()
			if err != nil {
				return err
			}
			// Validate the configuration once, before starting workers.
			probe := cfg
			probe.Ops, probe.NoCheck, probe.Seed = 0, true, seeds[0]
			if _, err := sim.Run(probe); err != nil {
				return err
			}
			if v.TraceFile != "" {
				if len(seeds) != 1 {
					return fmt.Errorf("--trace needs exactly one seed (got %d)", len(seeds))
				}
				trace, err := os.Create(v.TraceFile)
				if err != nil {
					return err
				}
				defer trace.Close()
				cfg.Trace = trace
			}
			return sim.RunSeeds(cfg, seeds, sim.SeedOptions{Stdout: cmd.OutOrStdout(), Stderr: cmd.ErrOrStderr(), Workers: v.Workers, SaveDir: v.SaveDir, Verbose: v.Verbose})
		},
	}
	v.Register(cmd.Flags())
	cli.AddCommand(cmd)
}
