package cli

import (
	"context"
	"fmt"
	"io"
	"os"
	"os/signal"
	"runtime/pprof"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/bench"
)

func init() {
	def := bench.DefaultConfig()
	var (
		addr, dist, keyPrefix, password, ns, readMode, workload string
		jsonPath, historyPath, durability                       string
		target                                                  string
		duration, timeout                                       time.Duration
		ops, seed                                               int64
		clients, keys, valueSize                                int
		readRatio, rate                                         float64
		preload, quiet, leader, abdClient, abdAll               bool
		arrivals, conns, cpuProfile                             string
		pipeline                                                int
	)
	cmd := &cobra.Command{
		Use:   "bench",
		Short: "Drive YCSB-style load against Synod or any Redis-protocol server",
		Long: `Drive YCSB-style load against Synod or any Redis-protocol server (redis-server)
and report throughput and latency percentiles (HDR histograms) for reads, writes
and all operations.

Closed loop by default (each client sends its next operation when the previous
returns); --rate R switches to an open loop with Poisson arrivals at R ops/s in
total, latency measured from each arrival's scheduled time.

--workload seed001 is seed 001's key-value experiment: 1000 keys, 1 KB values,
Zipf s=1.345675, 90% GETs (use --read-ratio 0.1 for the seed's write-heavy mix),
keys preloaded, 25 clients. Flags given explicitly override the preset.

The driver cannot know the target's durability; state it with --durability-label
(e.g. "fsync per write", "in-memory") and it is printed beside the numbers.

--target grpc drives Synod's gRPC API through the Go client (client.GRPC: every
client knows every --addr and follows the leader); --conns N shares N clients,
--pipeline P pipelines P clients' requests on one client's Pipeline streams.

In synod-lab (the workbench binary), --target etcd or --target zookeeper
drives etcd (v3 API; linearizable gets) or ZooKeeper (set = setData, created
on first write; get = sync then getData) through their own client libraries
instead of RESP, one session per client; the server binary links neither.`,
		Example: `  synod bench --addr 127.0.0.1:6379 --workload seed001 --duration 30s --durability-label "redis, no persistence"
  synod bench --addr 127.0.0.1:7001,127.0.0.1:7002 --ns kv --read-mode regular --rate 5000 --duration 1m --json out.json
  synod bench --addr 127.0.0.1:7001 --ops 10000 --history h.json && synod check h.json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			f := cmd.Flags()
			cfg := def
			if workload != "" {
				p, err := bench.Preset(workload)
				if err != nil {
					return err
				}
				cfg = p
			}
			set := func(name string, apply func()) {
				if f.Changed(name) {
					apply()
				}
			}
			set("addr", func() { cfg.Addrs = splitAddrs(addr) })
			set("clients", func() { cfg.Clients = clients })
			set("keys", func() { cfg.Keys = keys })
			set("value-size", func() { cfg.ValueSize = valueSize })
			set("read-ratio", func() { cfg.ReadRatio = readRatio })
			set("dist", func() { cfg.Dist = dist })
			set("preload", func() { cfg.Preload = preload })
			set("key-prefix", func() { cfg.KeyPrefix = keyPrefix })
			set("seed", func() { cfg.Seed = seed })
			set("timeout", func() { cfg.OpTimeout = timeout })
			cfg.Rate = rate
			cfg.Password = password
			cfg.Namespace = ns
			cfg.ReadMode = readMode
			cfg.Leader = leader
			cfg.HistoryPath = historyPath
			if historyPath != "" && !f.Changed("key-prefix") {
				// A fresh key prefix per run: the history's keys were
				// absent at its start even on a store holding data.
				cfg.RunID = bench.NewRunID()
			}
			cfg.DurabilityLabel = durability
			cfg.Ops = ops
			cfg.Duration = duration
			if !f.Changed("duration") && !f.Changed("ops") {
				cfg.Duration = 10 * time.Second
			}
			if err := applyBenchTarget(target, &cfg); err != nil {
				return err
			}
			if abdAll && !abdClient {
				return fmt.Errorf("--abd-all applies to --abd-client only")
			}
			if abdClient {
				cfg.UseABDClient(abdAll)
			}
			if err := applyBenchConns(conns, pipeline, f.Changed("conns"), f.Changed("pipeline"), &cfg); err != nil {
				return err
			}
			cfg.Arrivals = arrivals
			if err := cfg.Validate(); err != nil {
				return err
			}
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			if cpuProfile != "" {
				pf, err := os.Create(cpuProfile)
				if err != nil {
					return err
				}
				if err := pprof.StartCPUProfile(pf); err != nil {
					pf.Close()
					return err
				}
				defer func() { pprof.StopCPUProfile(); pf.Close() }()
			}
			var progress io.Writer
			if !quiet {
				progress = os.Stderr
			}
			rep, err := bench.Run(ctx, cfg, progress)
			if rep == nil {
				return err
			}
			rep.Print(cmd.OutOrStdout())
			if err != nil {
				return err
			}
			if jsonPath != "" {
				if err := rep.WriteJSON(jsonPath); err != nil {
					return fmt.Errorf("writing %s: %w", jsonPath, err)
				}
			}
			if rep.Interrupted {
				return fmt.Errorf("interrupted")
			}
			return nil
		},
	}
	f := cmd.Flags()
	f.StringVar(&target, "target", "resp", "client adapter: resp, grpc (Synod's gRPC API); in synod-lab also etcd (v3 API, linearizable gets) and zookeeper (sync+getData gets)")
	f.StringVar(&addr, "addr", strings.Join(def.Addrs, ","), "server address host:port, or several separated by commas (clients spread round-robin)")
	f.DurationVar(&duration, "duration", 0, "length of the measured phase (default 10s when --ops is not given)")
	f.Int64Var(&ops, "ops", 0, "number of operations to measure (open loop: arrivals); with --duration, stop at whichever comes first")
	f.IntVar(&clients, "clients", def.Clients, "simulated clients (operations outstanding), one connection each unless --conns or --pipeline")
	f.StringVar(&conns, "conns", "per-client", "connections the clients share: per-client, N (N shared connections; over RESP each pipelines its clients' commands), or pipeline:P (RESP: P clients per pipelined connection)")
	f.IntVar(&pipeline, "pipeline", 0, "RESP pipelining depth: --pipeline P is --conns pipeline:P (0: no pipelining)")
	f.IntVar(&keys, "keys", def.Keys, "number of distinct keys")
	f.IntVar(&valueSize, "value-size", def.ValueSize, fmt.Sprintf("bytes per written value (at least %d)", bench.MinValueSize))
	f.Float64Var(&readRatio, "read-ratio", def.ReadRatio, "fraction of operations that are GETs (the rest are SETs)")
	f.StringVar(&dist, "dist", def.Dist, "key distribution: uniform | zipf:S (S>1) | hotspot:H:P (fraction H of keys gets fraction P of ops)")
	f.Float64Var(&rate, "rate", 0, "open loop: Poisson arrivals at this many ops/s in total (0: closed loop)")
	f.StringVar(&arrivals, "arrivals", "poisson", "open-loop arrivals (with --rate): poisson | uniform (gaps uniform on [0, 2/rate], as seed 001 ran)")
	f.BoolVar(&abdClient, "abd-client", false, "client-driven ABD (seed 001): every client runs both phases itself against the replicas (a majority first), on Phases streams; --addr lists every replica's gRPC address; with --conns N or --pipeline P the clients share N (clients/P) ABD clients, whose streams carry their phases together")
	f.BoolVar(&abdAll, "abd-all", false, "with --abd-client: every phase asks every replica at once, as the ABD report's client does (default: a majority first, the others on a failure or a hedge)")
	f.BoolVar(&preload, "preload", def.Preload, "SET every key once before measuring")
	f.StringVar(&keyPrefix, "key-prefix", def.KeyPrefix, "prefix of the fixed-width key names (with --history and no --key-prefix, a random run id follows \"key:\", so the history starts from absent keys even on a used store)")
	f.StringVar(&password, "password", "", "send AUTH with this password on every connection")
	f.StringVar(&ns, "ns", "", "Synod namespace, selected with SYNOD NS on every connection (Synod only)")
	f.StringVar(&readMode, "read-mode", "", "Synod read mode: linearizable (default), log, quorum, lease, regular or local, set with SYNOD READ (Synod only)")
	f.BoolVar(&leader, "leader", false, "send every client to the namespace's leader, as the first server names it with SYNOD LEADER (Synod paxos only; without it followers forward)")
	f.Int64Var(&seed, "seed", def.Seed, "seed for key, operation, value and arrival choices")
	f.DurationVar(&timeout, "timeout", def.OpTimeout, "per-operation timeout (a timed-out write counts as an error of unknown outcome)")
	f.StringVar(&workload, "workload", "", "preset workload: "+strings.Join(bench.Workloads(), ", "))
	f.StringVar(&jsonPath, "json", "", "also write the report, with config and per-second series, as JSON to this file")
	f.StringVar(&historyPath, "history", "", "record every operation to this history file (checkable with synod check)")
	f.StringVar(&durability, "durability-label", "", "the target's durability mode, as you know it; printed beside the results")
	f.BoolVar(&quiet, "quiet", false, "no progress line on stderr")
	f.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the driver (this process, warm-up included) to this file (go tool pprof)")
	rootCmd.AddCommand(cmd)
}

// splitAddrs splits a comma-separated address list, trimming spaces.
func splitAddrs(s string) []string {
	var out []string
	for _, a := range strings.Split(s, ",") {
		out = append(out, strings.TrimSpace(a))
	}
	return out
}
