package livetest

import (
	"context"
	"fmt"
	"math/rand/v2"
	"testing"
	"time"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/service"
)

// Client-driven ABD (the ABD report §3.1.2, client.ABD): the clients run both
// phases against every replica over gRPC; the replicas never talk to each
// other for them.

func grpcAddrs(c *cluster.Cluster) []string {
	var out []string
	for _, n := range c.Nodes {
		out = append(out, n.GRPC)
	}
	return out
}

// runABDClient is runClient for a client-driven ABD client.
func runABDClient(t *testing.T, r *recorder, id int, addrs, keys []string, stop <-chan struct{}) {
	rng := rand.New(rand.NewPCG(uint64(id), 7))
	g, err := client.NewGRPC(addrs, client.Options{Timeout: opTimeout})
	if err != nil {
		t.Error(err)
		return
	}
	defer g.Close()
	a := g.ABD(ns)
	proc := r.newProc()
	writeLoop(stop, func(seq int) error {
		return r.randomOp(&proc, a, rng, keys[rng.IntN(len(keys))], fmt.Sprintf("a%d-%d", id, seq))
	})
}

// readAllABD reads every key with a client-driven read, retrying within
// 20 s, and fails the test if a key with an acknowledged write reads nil.
func readAllABD(t *testing.T, r *recorder, addrs, keys []string, phase string) {
	t.Helper()
	g, err := client.NewGRPC(addrs, client.Options{Timeout: opTimeout})
	if err != nil {
		t.Fatal(err)
	}
	defer g.Close()
	a := g.ABD(ns)
	proc := r.newProc()
	deadline := time.Now().Add(20 * time.Second)
	for _, key := range keys {
		for {
			res, err := r.get(context.Background(), proc, a, key)
			if err == nil {
				if res.Type == service.ResultNil && r.keys.has(key) {
					t.Errorf("%s: client-driven GET %s is nil, but a write of %s was acknowledged", phase, key, key)
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("%s: client-driven GET %s: no majority before the deadline (last: %v)", phase, key, err)
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
}

// TestABDClientDrivenKillNodeUnderLoad runs 6 client-driven ABD clients
// and 2 node-coordinated ones (one namespace serves both modes) against a
// 3-node fsync cluster, kill -9s one node mid-run and restarts it, then
// kill -9s and restarts all three. Acknowledged writes must survive, and
// the whole history must be linearizable.
func TestABDClientDrivenKillNodeUnderLoad(t *testing.T) {
	const (
		driven, coordinated = 6, 2
		nkeys               = 20
		runFor              = 5 * time.Second
	)
	c := upCluster(t, cluster.UpOptions{Nodes: 3, Protocol: "abd", Durability: "fsync"})
	gaddrs, raddrs := grpcAddrs(c), c.ClientAddrs()
	keys := keyNames(nkeys)
	r := newRecorder(t, "abd", "fsync")

	loadKillingN2(t, c, r, driven+coordinated, runFor, func(i int, stop chan struct{}) {
		if i < driven {
			runABDClient(t, r, i, gaddrs, keys, stop)
		} else {
			runClient(t, r, i, raddrs, keys, stop)
		}
	})
	readAllABD(t, r, gaddrs, keys, "after restarting n2")
	checkHistory(t, r, "client-driven, after restarting n2")

	killAll(t, c)
	readAllABD(t, r, gaddrs, keys, "after kill -9 of all nodes")
	checkHistory(t, r, "client-driven, after kill -9 of all nodes")
}
