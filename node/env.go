package node

import (
	"math/rand/v2"
	"time"

	"github.com/synod-dev/synod/service"
)

// newEnv observes the environment of a request as it arrives (service/env.go):
// the wall clock and fresh randomness. The protocol decides whose
// environment the replicas use; deterministic services never read it.
func newEnv() service.Env {
	return service.Env{Time: time.Now().UnixNano(), Seed: rand.Uint64()}
}
