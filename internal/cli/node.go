package cli

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"syscall"

	"github.com/synod-dev/synod/gateway/grpcserver"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/daemon"
	"github.com/synod-dev/synod/node"
)

func init() {
	var cfgPath, id, level, format string
	var procs int
	cmd := &cobra.Command{
		Use:   "node --config cluster.yaml --id n1",
		Short: "Run one Synod node of a cluster until SIGINT or SIGTERM",
		Long: `Runs node --id of the cluster described by --config: the Redis-protocol
gateway on the node's client address, the peer transport on its peer address,
one automaton per namespace, storage under data_dir/<id> (durability fsync) or
in memory (durability memory: data is lost on restart), and, when the node has
a metrics address, Prometheus /metrics and /debug/pprof/.

--procs N (or the node's procs: in the cluster file; the flag wins) sets the
process's GOMAXPROCS; 0 keeps Go's default. It is for nodes that share a
machine: each then runs at most its share of the cores (docs/COSTS.md).

The process runs with GOGC 400 and a soft memory limit of a quarter of the
machine's memory unless the GOGC or GOMEMLIMIT environment variable is set
(README, "Garbage collection").

On SIGINT or SIGTERM it stops accepting clients and peers, finishes the batch
in progress (commit, then release), closes storage and exits 0. A storage
failure exits 1 without answering the requests of the failed batch.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			var lv slog.Level
			if err := lv.UnmarshalText([]byte(level)); err != nil {
				return fmt.Errorf("--log-level %q: want debug, info, warn or error", level)
			}
			hopts := &slog.HandlerOptions{Level: lv}
			var h slog.Handler
			switch format {
			case "text":
				h = slog.NewTextHandler(os.Stderr, hopts)
			case "json":
				h = slog.NewJSONHandler(os.Stderr, hopts)
			default:
				return fmt.Errorf("--log-format %q: want text or json", format)
			}
			cfg, err := config.Load(cfgPath)
			if err != nil {
				return err
			}
			self, err := cfg.Node(id)
			if err != nil {
				return err
			}
			if procs < 0 {
				return fmt.Errorf("--procs %d: want 0 (Go's default) or more", procs)
			}
			if !cmd.Flags().Changed("procs") {
				procs = self.Procs
			}
			if procs > 0 {
				runtime.GOMAXPROCS(procs)
			}
			// GOGC 400 and a soft memory limit unless GOGC or GOMEMLIMIT
			// is set (daemon.TuneGC; README "Garbage collection").
			gcPercent, memLimit := daemon.TuneGC(daemon.NodeGCPercent, daemon.MemoryLimit())
			log := slog.New(h)
			grpcserver.UseSlog(log) // gRPC's own lines in the node's format
			n, err := daemon.New(cfg, id, node.Options{Logger: log})
			if err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			// SIGHUP reloads the certificates (docs/SECURITY.md).
			go daemon.ReloadOnSIGHUP(ctx, n, log)
			errc := make(chan error, 1)
			go func() { errc <- n.Run(ctx) }()
			select {
			case <-n.Ready():
				metrics := ""
				if self.Metrics != "" {
					metrics = ", metrics on " + self.Metrics
				}
				log.Info(fmt.Sprintf("synod node %s: clients on %s, peers on %s%s, durability %s, GOMAXPROCS %d, GOGC %d, memory limit %d MiB",
					id, n.ClientAddr(), n.PeerAddr(), metrics, n.Durability(), runtime.GOMAXPROCS(0), gcPercent, memLimit>>20),
					"node", id, "clients", n.ClientAddr(), "peers", n.PeerAddr(), "durability", n.Durability(), "gomaxprocs", runtime.GOMAXPROCS(0),
					"gogc", gcPercent, "memlimit", memLimit)
			case err := <-errc:
				return err
			}
			return <-errc
		},
	}
	f := cmd.Flags()
	f.StringVar(&cfgPath, "config", "", "cluster file (YAML)")
	f.StringVar(&id, "id", "", "this node's id in the cluster file")
	f.StringVar(&level, "log-level", "info", "debug, info, warn or error")
	f.StringVar(&format, "log-format", "text", "text or json")
	f.IntVar(&procs, "procs", 0, "GOMAXPROCS of this node, 0 for Go's default (unset: the cluster file's procs)")
	cmd.MarkFlagRequired("config")
	cmd.MarkFlagRequired("id")
	rootCmd.AddCommand(cmd)
}
