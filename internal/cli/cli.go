// Package cli is the synod command line: every subcommand (node, cluster,
// kv, sim, orca, bench, ...) lives in its own file here and adds itself to
// rootCmd from init. It is internal: programs run it through the public
// package github.com/synod-dev/synod/synod (synod.Main), which cmd/synod's
// main calls too, so a user's binary with their own services and object
// types registered is a full synod.
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
	Short:         "Synod: a replicated data service and a workbench for replication protocols",
	SilenceUsage:  true,
	SilenceErrors: true,
}

// Main runs the command line on os.Args and exits with status 1 on an
// error.
func Main() {
	if err := rootCmd.Execute(); err != nil {
		fmt.Fprintln(os.Stderr, "synod:", err)
		os.Exit(1)
	}
}
