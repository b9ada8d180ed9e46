// Command synod is Synod's server binary, the one operators deploy: node,
// cluster, kv, certs, check, bench (over RESP) and image (package
// internal/cli). It links no plotting, no etcd or ZooKeeper client and no
// simulator, model checker or experiment code (TestLeanDeps). The workbench
// (sim, mc, model, explore, experiment, compare, costs, chaos, orca,
// durability gen) is cmd/synod-lab; this binary answers those commands
// with an error naming it.
package main

import "github.com/synod-dev/synod/internal/cli"

func main() { cli.Main() }
