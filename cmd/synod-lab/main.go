// Command synod-lab is Synod's workbench: every command of the server
// binary (cmd/synod: node, cluster, kv, certs, check, bench, image) and the
// workbench's (sim, mc, model, explore, experiment, compare, costs, chaos,
// orca, durability gen), with bench's etcd and ZooKeeper targets. It is
// synod.Main (package github.com/synod-dev/synod/synod) with nothing
// registered; the commands live in internal/cli and internal/lab.
package main

import "github.com/synod-dev/synod/synod"

func main() { synod.Main() }
