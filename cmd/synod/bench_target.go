package main

import (
	"fmt"

	"github.com/synod-dev/synod/bench"
)

// benchTargets lists the values of synod bench --target.
const benchTargets = "resp, etcd, zookeeper"

// applyBenchTarget points cfg at the client adapter named by --target: resp
// (Synod or any Redis-protocol server, the default), etcd (v3 API, linearizable
// gets) or zookeeper (sync + getData gets, keys under bench.DefaultZooKeeperRoot).
// The Synod-only and Redis-only settings are refused for etcd and ZooKeeper.
func applyBenchTarget(name string, cfg *bench.Config) error {
	switch name {
	case "", "resp":
		return nil
	case "etcd", "zookeeper":
		for _, s := range []struct{ flag, val string }{{"--password", cfg.Password}, {"--ns", cfg.Namespace}, {"--read-mode", cfg.ReadMode}} {
			if s.val != "" {
				return fmt.Errorf("%s applies to --target resp only, not %s", s.flag, name)
			}
		}
		if cfg.Leader {
			return fmt.Errorf("--leader applies to --target resp only, not %s", name)
		}
		cfg.TargetName = name
		if name == "etcd" {
			cfg.NewTarget = bench.EtcdFactory(bench.EtcdOptions{Timeout: cfg.OpTimeout})
		} else {
			cfg.NewTarget = bench.ZooKeeperFactory(bench.ZooKeeperOptions{Timeout: cfg.OpTimeout})
		}
		return nil
	}
	return fmt.Errorf("unknown --target %q (want one of: %s)", name, benchTargets)
}
