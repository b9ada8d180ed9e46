package lab

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/internal/cli"
	// Experiments register themselves with package experiment.
	_ "github.com/synod-dev/synod/experiment/all"
)

func init() {
	expCmd := &cobra.Command{
		Use:   "experiment",
		Short: "List and run the seeds' experiments (tables beside the seeds' figures, JSON, plots)",
	}
	listCmd := &cobra.Command{
		Use:   "list",
		Short: "List the experiments",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			tw := tabwriter.NewWriter(cmd.OutOrStdout(), 0, 0, 2, ' ', 0)
			for _, e := range experiment.All() {
				fmt.Fprintf(tw, "%s\t%s\n", e.Name(), firstSentence(e.Description()))
			}
			return tw.Flush()
		},
	}
	runCmd := &cobra.Command{
		Use:   "run NAME [--out DIR] [--duration D] [--quick] [flags]",
		Short: "Run one experiment",
		Long: `Run one experiment: every cell (parameter combination) in order, with a
progress line per second, then the table of our figures beside the seed's, and
results.json plus PNG and SVG plots in --out (default ./results/NAME-<timestamp>).
Everything the experiment starts (clusters, peers) is stopped by PID at the end,
on error and on Ctrl-C. Each experiment has its own flags: synod-lab experiment run NAME --help.`,
	}
	for _, e := range experiment.All() {
		runCmd.AddCommand(experimentCommand(e))
	}
	runCmd.AddCommand(experimentAllCommand())
	expCmd.AddCommand(listCmd, runCmd)
	cli.AddCommand(expCmd)
}

func experimentCommand(e experiment.Experiment) *cobra.Command {
	var (
		out, binary string
		duration    time.Duration
		quick       bool
		reps        int
	)
	cmd := &cobra.Command{
		Use:   e.Name(),
		Short: firstSentence(e.Description()),
		Long:  e.Description(),
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			if duration < 0 {
				return fmt.Errorf("--duration %v is negative", duration)
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			_, err := experiment.Run(ctx, e, experiment.RunOptions{
				Options: experiment.Options{Duration: duration, Quick: quick, Reps: reps},
				Out:     out, Binary: binary,
				Log: os.Stderr, Stdout: cmd.OutOrStdout(),
			})
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "output directory (default ./results/NAME-<timestamp>)")
	f.DurationVar(&duration, "duration", 0, "measured length of each cell (default: the experiment's; shorter with --quick)")
	f.BoolVar(&quick, "quick", false, "short cells, for a quick look")
	f.IntVar(&reps, "repeat", 0, "runs of every cell; the claims are judged on every run's value (default: the experiment's, else 3)")
	f.StringVar(&binary, "binary", "", "synod binary the clusters run (default: this one)")
	e.Flags(f)
	return cmd
}

// experimentAllCommand is `synod-lab experiment run all`: every experiment, one
// report (experiment.RunAll).
func experimentAllCommand() *cobra.Command {
	var (
		out, doc, plots, note string
		only, with            []string
		duration              time.Duration
		quick                 bool
		reps                  int
	)
	cmd := &cobra.Command{
		Use:   "all",
		Short: "Run every experiment and regenerate docs/REPRODUCTION.md (claims, verdicts with their statistics, tables, plots)",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			line := "synod-lab experiment run all"
			if quick {
				line += " --quick"
			}
			if reps > 0 {
				line += fmt.Sprintf(" --repeat %d", reps)
			}
			if len(only) > 0 {
				line += " --only " + strings.Join(only, ",")
			}
			args := map[string][]string{}
			for _, w := range with {
				f := strings.Fields(w)
				if len(f) < 2 {
					return fmt.Errorf("--with %q: want an experiment's name and its flags", w)
				}
				args[f[0]] = append(args[f[0]], f[1:]...)
				line += fmt.Sprintf(" --with %q", w)
			}
			_, err := experiment.RunAll(ctx, experiment.ReportOptions{
				RunOptions: experiment.RunOptions{
					Options: experiment.Options{Duration: duration, Quick: quick, Reps: reps},
					Out:     out, Log: os.Stderr, Stdout: cmd.OutOrStdout(),
				},
				Names: only, Doc: doc, PlotDir: plots, Command: line, Args: args, Note: note,
			})
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&out, "out", "", "output directory of the runs (default ./results/all-<timestamp>)")
	f.StringVar(&doc, "doc", "docs/REPRODUCTION.md", "the report written")
	f.StringVar(&plots, "plots", "docs/reproduction", "directory the report's PNG plots are copied into")
	f.StringVar(&note, "note", "", "a sentence for the report's header (why the pass is quick, what the load did)")
	f.StringArrayVar(&with, "with", nil, "an experiment's own flags (and --duration, --repeat, --quick=false for it alone), its name first (\"seed000-strict-share --mode sim\"); repeatable")
	f.StringSliceVar(&only, "only", nil, "run only these experiments (comma-separated names); the other experiments' sections of an existing --doc are kept")
	f.DurationVar(&duration, "duration", 0, "measured length of each cell (default: each experiment's)")
	f.BoolVar(&quick, "quick", false, "short cells, for a quick pass")
	f.IntVar(&reps, "repeat", 0, "runs of every cell (default: each experiment's, else 3)")
	return cmd
}

func firstSentence(s string) string {
	if i := strings.Index(s, ". "); i >= 0 {
		return s[:i+1]
	}
	return s
}
