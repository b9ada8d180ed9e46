package cluster

import (
	"fmt"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/shard"
)

// DefaultReplicas is the replica count of each shard `synod cluster up
// --shards` places when --replicas is not given.
const DefaultReplicas = 3

// ShardLayout places shards replica groups of replicas nodes each on
// nodes nodes n1..nN, with the slots split evenly as redis-cli --cluster
// create splits them (shard.Even). Shard i starts at node i*nodes/shards
// and takes the next replicas nodes round the ring, so 9 nodes and 3
// shards give n1-n3, n4-n6, n7-n9, and 3 nodes with 3 shards put every
// shard on all three nodes, each group starting at a different node.
func ShardLayout(nodes, shards, replicas int) ([]config.Shard, error) {
	return ShardLayoutSpares(nodes, shards, 0, replicas)
}

// ShardLayoutSpares is ShardLayout with spares more shards that own no
// slots (the placement service splits into them: config.Placement), placed
// round the ring as the others, the ring divided among all of them.
func ShardLayoutSpares(nodes, shards, spares, replicas int) ([]config.Shard, error) {
	if shards < 1 || shards > shard.Slots {
		return nil, fmt.Errorf("cluster: --shards %d: must be 1-%d", shards, shard.Slots)
	}
	if replicas < 1 || replicas > nodes {
		return nil, fmt.Errorf("cluster: --replicas %d: must be 1-%d (the node count)", replicas, nodes)
	}
	if spares < 0 {
		return nil, fmt.Errorf("cluster: --spare-shards %d: must be 0 or more", spares)
	}
	out := make([]config.Shard, shards+spares)
	ranges := shard.Even(shards)
	for i := range out {
		start := i * nodes / (shards + spares)
		sh := config.Shard{Name: fmt.Sprintf("s%d", i)}
		if i < shards {
			sh.Slots = ranges[i].String()
		}
		for j := 0; j < replicas; j++ {
			sh.Nodes = append(sh.Nodes, fmt.Sprintf("n%d", (start+j)%nodes+1))
		}
		out[i] = sh
	}
	return out, nil
}
