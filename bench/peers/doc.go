// Package peers holds the benchmark driver's Targets for the systems Synod
// is compared with that are not spoken to over RESP: etcd v3 (EtcdTarget)
// and ZooKeeper (ZooKeeperTarget), each through its own client library.
//
// They are apart from package bench so that the server binary (cmd/synod,
// whose `synod bench` speaks RESP only) links neither client; the workbench
// (cmd/synod-lab: `synod-lab bench --target etcd|zookeeper`, `synod-lab
// compare`) adds them.
package peers

import "github.com/synod-dev/synod/bench"

var (
	_ bench.Target = (*EtcdTarget)(nil)
	_ bench.Target = (*ZooKeeperTarget)(nil)
)
