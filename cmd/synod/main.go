// Command synod runs Synod nodes and local clusters, talks to them, benchmarks,
// simulates and checks histories. Each subcommand lives in its own file and adds
// itself to rootCmd from init.
package main

import (
	"fmt"
	"os"

	"github.com/spf13/cobra"

	// Protocols register themselves with the automaton package.
	_ "github.com/synod-dev/synod/protocol/all"
)

var rootCmd = &cobra.Command{
	Use:           "synod",
	Short:         "Synod: a replicated data service and a workbench for replication protocols",
	SilenceUsage:  true,
	SilenceErrors: true,
}

func main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "synod:", err)
		os.Exit(1)
	}
}
