// Package cli is the server's command line, cmd/synod: the commands an
// operator deploys and runs (node, cluster, kv, certs, check, bench, image),
// each in its own file here, adding itself to the root command from init.
// It links no plotting, no etcd or ZooKeeper client and no experiment,
// simulator or model-checker code (TestLeanDeps in cmd/synod keeps it so).
//
// The workbench's commands (sim, mc, model, explore, experiment, compare,
// costs, chaos, orca, durability gen) live in package internal/lab, which
// adds them to the same root with AddCommand: cmd/synod-lab and the public
// synod.Main (package github.com/synod-dev/synod/synod) link both. In the
// server binary each workbench command is a hidden stub that names
// synod-lab.
package cli

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	// Protocols register themselves with the automaton package.
	_ "github.com/synod-dev/synod/protocol/all"
)

var rootCmd = &cobra.Command{
	Use:           "synod",
	Short:         "Synod: a replicated data service (the server; the workbench is synod-lab)",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// LabCommands are the workbench's top-level commands (package internal/lab).
// The server binary answers each with an error naming synod-lab.
var LabCommands = []string{"sim", "mc", "model", "explore", "experiment", "compare", "costs", "chaos", "orca", "durability", "image"}

func init() {
	for _, name := range LabCommands {
		rootCmd.AddCommand(&cobra.Command{
			Use:                name,
			Hidden:             true,
			DisableFlagParsing: true,
			RunE: func(*cobra.Command, []string) error {
				return fmt.Errorf("%q is a workbench command: it is in synod-lab, not in the server binary (go build -o bin/synod-lab ./cmd/synod-lab; then bin/synod-lab %s)", name, name)
			},
		})
	}
}

// AddCommand adds a workbench command to the root, in place of its stub.
func AddCommand(cmd *cobra.Command) {
	for _, c := range rootCmd.Commands() {
		if c.Name() == cmd.Name() && c.Hidden {
			rootCmd.RemoveCommand(c)
		}
	}
	rootCmd.AddCommand(cmd)
}

// Root is the root command (for tests that run a command line in-process).
func Root() *cobra.Command { return rootCmd }

// SetShort replaces the root command's one-line description (the workbench
// says it is one).
func SetShort(s string) { rootCmd.Short = s }

// Main runs the command line on os.Args and exits with status 1 on an
// error.
func Main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "synod:", err)
		os.Exit(1)
	}
}
