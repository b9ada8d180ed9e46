package lab

import (
	"context"
	"fmt"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/spf13/cobra"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/compare"
	"github.com/synod-dev/synod/internal/cli"
)

func init() {
	def := compare.DefaultOptions()
	var (
		protocol, clients, systems, dir, jsonPath string
		params                                    map[string]string
		durability, conns, depths, procs          string
		isolate                                   bool
		idleWindow                                time.Duration
		duration, warmup                          time.Duration
		keys, keySize, valueSize                  int
		keep                                      bool
	)
	cmd := &cobra.Command{
		Use:   "compare",
		Short: "Benchmark a 3-node Synod cluster beside etcd, ZooKeeper and Redis, each in its best client configuration",
		Long: `Start a 3-member etcd, a 3-server ZooKeeper, a 3-node Synod cluster and, when
asked, redis-server (redis: no persistence; redis-aof: appendfsync always) on
127.0.0.1 (free ports, data in a temporary directory), preload the keys, then
measure puts and linearizable gets separately at each client count, systems
taking turns (all configurations of one op and client count at a time). During
a system's turn every other system is paused (SIGSTOP) and resumed (SIGCONT)
for its own turn, so no peer is measured beside another system's background
work (--isolate=false: all run throughout); each system's CPU while it serves
no client (after the preload, and right after each of its turns) is printed
beside the tables.

Each system is swept over client configurations, the number of clients (operations
outstanding) staying the same: one connection per client; for etcd and ZooKeeper
also --conns shared connections (as etcd's benchmark separates --conns from
--clients); for Synod and Redis over RESP, pipelining each --pipeline depth per
connection; for Synod also its gRPC client, --conns of them shared by all
clients, and gRPC clients pipelining each --pipeline depth on their streams. Prints the sweep, then each system's best configuration and the ratios
Synod/peer best against best, durability beside every figure; writes the same as
JSON. A peer that is not installed is skipped with its install command printed.
Every process started is stopped by PID at the end, on error and on Ctrl-C.

etcd is Debian's etcd-server (/usr/bin/etcd); ZooKeeper is Debian's zookeeperd
(/usr/share/java/zookeeper.jar, run with java); Redis is Debian's redis-server.`,
		Example: `  synod-lab compare --duration 5s --clients 16,256
  synod-lab compare --protocol abd --durability memory --systems synod,redis --clients 64
  synod-lab compare --protocol abd --systems synod,redis-aof --clients 64
  synod-lab compare --protocol abd --systems synod,etcd --conns 1,4,16 --json cmp.json --dir /tmp/cmp`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			o := def
			o.Protocol = protocol
			if _, err := automaton.Lookup(protocol); err != nil {
				return fmt.Errorf("--protocol: %w", err)
			}
			cs, err := compare.ParseClients(clients)
			if err != nil {
				return err
			}
			o.Clients = cs
			o.Duration = duration
			o.Warmup = warmup
			o.Keys, o.KeySize, o.ValueSize = keys, keySize, valueSize
			o.Dir, o.Keep = dir, keep
			o.PipelineDepths = nil
			if depths != "" && depths != "0" {
				if o.PipelineDepths, err = compare.ParseClients(depths); err != nil {
					return fmt.Errorf("--pipeline: %w", err)
				}
			}
			o.Isolate, o.IdleWindow = isolate, idleWindow
			o.Conns = nil
			if conns != "" {
				if o.Conns, err = compare.ParseClients(conns); err != nil {
					return fmt.Errorf("--conns: %w", err)
				}
			}
			nprocs, err := cluster.ParseProcs(procs)
			if err != nil {
				return err
			}
			if durability != "fsync" && durability != "memory" {
				return fmt.Errorf("--durability %q: want fsync or memory", durability)
			}
			var sys []compare.System
			for _, s := range strings.Split(systems, ",") {
				switch strings.TrimSpace(s) {
				case "synod":
					sys = append(sys, compare.SynodSystemParams(protocol, "", durability, params, nprocs))
				case "etcd":
					sys = append(sys, compare.EtcdSystemProcs(nprocs))
				case "zookeeper":
					sys = append(sys, compare.ZooKeeperSystem())
				case "redis":
					sys = append(sys, compare.RedisSystem(false))
				case "redis-aof":
					sys = append(sys, compare.RedisSystem(true))
				default:
					return fmt.Errorf("--systems: unknown system %q (want synod, etcd, zookeeper, redis, redis-aof)", s)
				}
			}
			if err := o.Validate(); err != nil {
				return err
			}
			// Signals stay caught until the deferred stop, that is until every
			// started process has been stopped.
			ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
			defer stop()
			res, err := compare.Run(ctx, o, sys, cmd.OutOrStdout(), os.Stderr)
			if res != nil && (len(res.Cells) > 0 || err == nil) {
				fmt.Fprintln(cmd.OutOrStdout())
				if procsOf(nprocs) > 0 {
					// A co-location setting: said beside the figures it affects.
					fmt.Fprintf(cmd.OutOrStdout(), "Synod's nodes and etcd's members ran GOMAXPROCS %d each (--procs), not Go's default\n", procsOf(nprocs))
				}
				res.Print(cmd.OutOrStdout())
				if jsonPath != "" {
					if jerr := res.WriteJSON(jsonPath); jerr != nil {
						return fmt.Errorf("writing %s: %w", jsonPath, jerr)
					}
					fmt.Fprintf(cmd.OutOrStdout(), "  JSON: %s\n", jsonPath)
				}
			}
			return err
		},
	}
	f := cmd.Flags()
	// Multi-Paxos is the natural counterpart of etcd's Raft and ZooKeeper's
	// Zab; the flag is required in a binary built without it.
	if _, err := automaton.Lookup("paxos"); err == nil {
		f.StringVar(&protocol, "protocol", "paxos", "Synod protocol replicating the benchmark namespace")
	} else {
		f.StringVar(&protocol, "protocol", "", "Synod protocol replicating the benchmark namespace (required)")
		cmd.MarkFlagRequired("protocol")
	}
	f.StringVar(&clients, "clients", "1,16,64,256", "client counts, comma-separated; one cell per count, op and system")
	f.DurationVar(&duration, "duration", def.Duration, "measured time per cell")
	f.DurationVar(&warmup, "warmup", def.Warmup, "unmeasured run of each cell's workload before its measured time (0: none)")
	f.IntVar(&keys, "keys", def.Keys, "number of keys (all preloaded)")
	f.IntVar(&keySize, "key-size", def.KeySize, "bytes per key")
	f.IntVar(&valueSize, "value-size", def.ValueSize, "bytes per value")
	f.StringToStringVar(&params, "param", nil, "protocol parameters of Synod's namespace, key=value[,key=value] (repeatable; for example esds reads=local)")
	f.StringVar(&systems, "systems", "synod,etcd,zookeeper", "systems to run, comma-separated: synod, etcd, zookeeper, redis (no persistence), redis-aof (appendfsync always); synod is the one the ratios divide")
	f.StringVar(&procs, "procs", "go", "GOMAXPROCS of each Synod node and each etcd member (all share this machine): go (Go's default), auto (ceil(cores / members)) or a count")
	f.StringVar(&durability, "durability", "fsync", "Synod's durability: fsync or memory (compare memory with redis, fsync with the others)")
	f.StringVar(&conns, "conns", "1,16", "shared connection counts swept beside one per client (etcd, ZooKeeper, Synod's gRPC client); empty: none")
	f.StringVar(&depths, "pipeline", "16,64", "pipelining depths swept beside one connection per client, comma-separated (RESP: Synod, Redis; Synod's gRPC Pipeline streams); 0 or empty: none")
	f.BoolVar(&isolate, "isolate", def.Isolate, "pause (SIGSTOP) every other system during a system's cells; --isolate=false runs all throughout")
	f.DurationVar(&idleWindow, "idle-window", def.IdleWindow, "measure each system's CPU over this window while it serves no client, after the preload and after each turn (0: not measured)")
	f.StringVar(&dir, "dir", "", "directory for all data and logs (empty or new; default a temporary directory, removed after a successful run)")
	f.BoolVar(&keep, "keep", false, "keep the temporary directory after a successful run")
	f.StringVar(&jsonPath, "json", "compare.json", "write the results as JSON to this file (empty: do not)")
	cli.AddCommand(cmd)
}
