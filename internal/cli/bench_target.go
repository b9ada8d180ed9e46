package cli

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/synod-dev/synod/bench"
)

// BenchTargets are the client adapters of synod bench --target besides
// resp and grpc: the workbench (internal/lab) adds etcd and zookeeper, whose
// client libraries the server binary does not link. Each makes cfg's
// TargetFactory from cfg (its OpTimeout).
var BenchTargets = map[string]func(cfg *bench.Config) bench.TargetFactory{}

// peerTargets are the --target values the workbench adds.
var peerTargets = []string{"etcd", "zookeeper"}

// applyBenchTarget points cfg at the client adapter named by --target: resp
// (Synod or any Redis-protocol server, the default), grpc (Synod's gRPC API
// through the Go client; --pipeline P pipelines P clients on one client's
// streams) or one of BenchTargets (in synod-lab: etcd, v3 API, linearizable
// gets; zookeeper, sync + getData gets, keys under
// peers.DefaultZooKeeperRoot). The Synod-only and Redis-only settings are
// refused for etcd and ZooKeeper.
func applyBenchTarget(name string, cfg *bench.Config) error {
	switch name {
	case "", "resp":
		return nil
	case "grpc":
		if cfg.Leader {
			return fmt.Errorf("--leader applies to --target resp only (the gRPC client follows the leader's notifications itself)")
		}
		cfg.TargetName = bench.TargetGRPC
		cfg.NewTarget = bench.GRPCFactory(grpcBenchOptions(cfg, false))
		return nil
	}
	factory, ok := BenchTargets[name]
	if !ok {
		if slices.Contains(peerTargets, name) {
			return fmt.Errorf("--target %s is in synod-lab, the workbench binary (the server binary links no %s client): go build -o bin/synod-lab ./cmd/synod-lab", name, name)
		}
		return fmt.Errorf("unknown --target %q (want resp, grpc, or in synod-lab: %s)", name, strings.Join(peerTargets, ", "))
	}
	for _, s := range []struct{ flag, val string }{{"--password", cfg.Password}, {"--ns", cfg.Namespace}, {"--read-mode", cfg.ReadMode}} {
		if s.val != "" {
			return fmt.Errorf("%s applies to --target resp only, not %s", s.flag, name)
		}
	}
	if cfg.Leader {
		return fmt.Errorf("--leader applies to --target resp only, not %s", name)
	}
	cfg.TargetName = name
	cfg.NewTarget = factory(cfg)
	return nil
}

// applyBenchConns arranges the clients' connections as --conns (or
// --pipeline P, which is --conns pipeline:P) says, with
// bench.ParseConnSpec and bench.WithConns: one per client (the default), N
// shared connections, or pipelined RESP connections carrying P clients'
// commands each. Over RESP a shared connection is a pipelined one (a plain
// RESP connection serves one caller at a time); over gRPC a shared client
// multiplexes Do calls, and a pipelined one carries its P clients' requests
// on its Pipeline streams; etcd's and ZooKeeper's clients are shared as
// they are and do not pipeline.
func applyBenchConns(conns string, pipeline int, connsSet, pipelineSet bool, cfg *bench.Config) error {
	if pipelineSet {
		if connsSet {
			return fmt.Errorf("give --conns or --pipeline, not both")
		}
		if pipeline < 0 {
			return fmt.Errorf("--pipeline %d: want a depth of at least 1 (0: none)", pipeline)
		}
		if pipeline > 0 {
			conns = fmt.Sprintf("pipeline:%d", pipeline)
		}
	}
	spec, err := bench.ParseConnSpec(conns)
	if err != nil {
		return err
	}
	if spec == bench.PerClient {
		return nil
	}
	factory, pipelined := cfg.NewTarget, bench.TargetFactory(nil)
	switch cfg.TargetName {
	case bench.TargetABDClient:
		// A client-driven ABD client sends every phase on its Phases
		// streams (one per replica), so a shared one is a pipelined one:
		// the phases of the clients sharing it leave together.
		pipelined = factory
	case "", "resp":
		o := bench.RedisOptions{Password: cfg.Password, Namespace: cfg.Namespace, ReadMode: cfg.ReadMode, Leader: cfg.Leader, Timeout: cfg.OpTimeout}
		factory, pipelined = bench.PipelinedRedisFactory(o), bench.PipelinedRedisFactory(o)
	case bench.TargetGRPC:
		pipelined = bench.GRPCFactory(grpcBenchOptions(cfg, true))
	}
	f, err := bench.WithConns(spec, cfg.Clients, factory, pipelined)
	if err != nil {
		return fmt.Errorf("--target %s: %w", cmp.Or(cfg.TargetName, "resp"), err)
	}
	cfg.NewTarget = f
	cfg.TargetName = fmt.Sprintf("%s (%s)", cmp.Or(cfg.TargetName, "resp"), spec.Describe(cfg.Clients))
	return nil
}

// grpcBenchOptions are the gRPC client options of synod bench --target
// grpc: every client knows every address (--addr) and follows the leader.
func grpcBenchOptions(cfg *bench.Config, pipeline bool) bench.GRPCOptions {
	return bench.GRPCOptions{Addrs: cfg.Addrs, Namespace: cfg.Namespace, ReadMode: cfg.ReadMode,
		Timeout: cfg.OpTimeout, Password: cfg.Password, Pipeline: pipeline}
}
