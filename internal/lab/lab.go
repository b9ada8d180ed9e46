// Package lab is Synod's workbench command line: the simulator (sim), the
// model checker (mc) and its explorer (explore), the seeds' analytical
// models (model), experiments, the peer comparison (compare), the cost
// measurements (costs), live chaos runs (chaos), Orca programs (orca) and
// the durability compiler (durability gen). Each command lives in its own
// file here and adds itself, from init, to the server's command line
// (package internal/cli), whose commands (node, cluster, kv, bench, ...) the
// workbench therefore has too; it also gives `bench` its etcd and ZooKeeper
// targets (package bench/peers).
//
// It is linked by cmd/synod-lab and by the public synod.Main (package
// github.com/synod-dev/synod/synod), never by cmd/synod: it brings the
// plotting library (gonum), the etcd and ZooKeeper clients and the
// experiments.
package lab

import (
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/bench/peers"
	"github.com/synod-dev/synod/internal/cli"
)

func init() {
	cli.Root().Use = "synod-lab"
	cli.SetShort("Synod: a replicated data service and a workbench for replication protocols")
	cli.BenchTargets["etcd"] = func(cfg *bench.Config) bench.TargetFactory {
		return peers.EtcdFactory(peers.EtcdOptions{Timeout: cfg.OpTimeout})
	}
	cli.BenchTargets["zookeeper"] = func(cfg *bench.Config) bench.TargetFactory {
		return peers.ZooKeeperFactory(peers.ZooKeeperOptions{Timeout: cfg.OpTimeout})
	}
}

// Main runs the workbench's command line (the server's commands and the
// workbench's) on os.Args and exits with status 1 on an error.
func Main() { cli.Main() }
