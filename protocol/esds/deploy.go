package esds

import (
	"fmt"

	"github.com/synod-dev/synod/service"
)

// CheckDeployment implements automaton.DeploymentChecker: durability
// memory with more than one replica is refused unless the namespace sets
// volatile=true (package doc, "Durability memory").
func (p protocol) CheckDeployment(_ service.Service, prm map[string]string, nodes int, durability string) error {
	if durability != "memory" || nodes < 2 || prm["volatile"] == "true" {
		return nil
	}
	return fmt.Errorf("%s cannot run with durability memory on %d nodes: a replica that restarts forgets every operation it did, "+
		"so the writes it acknowledged and had not yet gossiped are lost for good, and it serves (strict reads included) from a state "+
		"that lacks writes its peers hold; seed 000 assumes replicas never fail. Use durability fsync, or set the namespace parameter "+
		"volatile=true to accept this for runs without restarts", p.Protocol, nodes)
}
