package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/compare"
)

func init() {
	var (
		protocols, dir, jsonPath string
		clients                  int
		duration                 time.Duration
		readRatio                float64
	)
	cmd := &cobra.Command{
		Use:   "costs",
		Short: "Print the cost model: this machine's physical limits, and messages, fsyncs and CPU per operation of each protocol",
		Long: `Measure this machine's physical limits (loopback TCP round trip, 4 KiB append +
fdatasync in --dir's file system, a Go map's operations per second, one RESP SET
parse and +OK reply), then run each protocol on a fresh 3-node cluster (fsync on)
for --duration with the closed-loop driver and divide the nodes' counters
(synod_peer_messages_sent_total, synod_fsyncs_total, process_cpu_seconds_total,
summed over the nodes) by the client operations completed. docs/COSTS.md
explains the model and records one run.`,
		Example: `  synod costs
  synod costs --protocols paxos,abd --clients 64 --duration 5s --json costs.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := compare.CostOptions{Clients: clients, Duration: duration, ReadRatio: readRatio}
			for _, p := range strings.Split(protocols, ",") {
				p = strings.TrimSpace(p)
				if _, err := automaton.Lookup(p); err != nil {
					return fmt.Errorf("--protocols: %w", err)
				}
				o.Protocols = append(o.Protocols, p)
			}
			if readRatio < 0 || readRatio > 1 {
				return fmt.Errorf("--read-ratio %v: want 0 to 1", readRatio)
			}
			if dir == "" {
				d, err := os.MkdirTemp("", "synod-costs-")
				if err != nil {
					return err
				}
				defer os.RemoveAll(d)
				dir = d
			}
			o.Dir = dir
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			rep, err := compare.MeasureCosts(ctx, o, os.Stderr)
			if rep != nil {
				rep.Print(cmd.OutOrStdout())
				if jsonPath != "" {
					b, _ := json.MarshalIndent(rep, "", "  ")
					if werr := os.WriteFile(jsonPath, append(b, '\n'), 0o644); werr != nil {
						return werr
					}
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	f.StringVar(&protocols, "protocols", "paxos,abd,esds,pbpaxos", "protocols to measure, comma-separated")
	f.IntVar(&clients, "clients", 16, "closed-loop clients per run")
	f.DurationVar(&duration, "duration", 3*time.Second, "measured time per protocol (after 1s of warm-up)")
	f.Float64Var(&readRatio, "read-ratio", 0.5, "fraction of gets (linearizable where the protocol is)")
	f.StringVar(&dir, "dir", "", "directory for the clusters and the fdatasync file (default a temporary directory, removed)")
	f.StringVar(&jsonPath, "json", "", "also write the figures as JSON to this file")
	rootCmd.AddCommand(cmd)
}
