package seed002pbpaxos

import (
	"context"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/service"
)

// kind is one request kind of the seed's tables, and what serves it here.
type kind struct {
	name     string
	protocol string
	nodes    int
	read     bool
	mode     automaton.ReadMode
	doc      string
}

var kinds = []kind{
	{"original", "unreplicated", 1, false, automaton.ReadDefault, "the unreplicated service: one server answers at once"},
	{"read", "pbpaxos", 3, true, automaton.ReadDefault, "pbpaxos read: X-Paxos confirms"},
	{"write", "pbpaxos", 3, false, automaton.ReadDefault, "pbpaxos write: the basic protocol"},
	{"paxos-quorum-read", "paxos", 3, true, automaton.ReadQuorum, "Multi-Paxos read: the leader confirms leadership with a majority"},
	{"paxos-lease-read", "paxos", 3, true, automaton.ReadLease, "Multi-Paxos read under the leader's lease"},
	{"paxos-write", "paxos", 3, false, automaton.ReadDefault, "Multi-Paxos write through the log"},
}

func kindNamed(n string) (kind, bool) {
	for _, k := range kinds {
		if k.name == n {
			return k, true
		}
	}
	return kind{}, false
}

func kindNames() []string {
	var out []string
	for _, k := range kinds {
		out = append(out, k.name)
	}
	return out
}

// liveAddrs starts (or reuses) the cluster of protocol p and returns its
// gRPC addresses, the leader's first when p has one.
func liveAddrs(ctx context.Context, env *experiment.Env, p string, nodes int, durability string) ([]string, error) {
	if _, err := automaton.Lookup(p); err != nil {
		return nil, experiment.Unavailable("protocol %q not available in this binary (registered: %s)", p, strings.Join(automaton.Names(), ", "))
	}
	cl, err := env.Cluster(fmt.Sprintf("%s-n%d-%s", p, nodes, durability), cluster.UpOptions{Nodes: nodes, Protocol: p, Durability: durability})
	if err != nil {
		return nil, err
	}
	leader, _ := experiment.WaitLeader(ctx, cl, 10*time.Second) // "": no leader, any order serves
	addrs := make([]string, 0, len(cl.Nodes))
	for _, n := range cl.Nodes {
		if n.ID == leader {
			addrs = append([]string{n.GRPC}, addrs...)
		} else {
			addrs = append(addrs, n.GRPC)
		}
	}
	return addrs, nil
}

// liveCluster is liveAddrs with a gRPC client on them.
func liveCluster(ctx context.Context, env *experiment.Env, p string, nodes int, durability string) (*client.GRPC, error) {
	addrs, err := liveAddrs(ctx, env, p, nodes, durability)
	if err != nil {
		return nil, err
	}
	return newClient(addrs)
}

func newClient(addrs []string) (*client.GRPC, error) {
	return client.NewGRPC(addrs, client.Options{Timeout: 10 * time.Second})
}

// request runs one request of kind k on key.
func request(ctx context.Context, c *client.GRPC, k kind, key string, val []byte) error {
	op := service.Op{Kind: "set", Key: key, Args: [][]byte{val}}
	if k.read {
		op = service.Op{Kind: "get", Key: key}
	}
	res, _, err := c.DoOp(ctx, "", op, client.OpOptions{Read: k.mode})
	if err == nil && res.IsErr() {
		err = fmt.Errorf("%s", res.Err)
	}
	return err
}

// ci99 returns the mean and the half-width of its 99% confidence interval
// (normal approximation, z = 2.576, as for the seed's "hundreds of samples").
func ci99(xs []float64) (mean, half float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	for _, x := range xs {
		mean += x
	}
	mean /= float64(len(xs))
	if len(xs) < 2 {
		return mean, 0
	}
	var ss float64
	for _, x := range xs {
		ss += (x - mean) * (x - mean)
	}
	sd := math.Sqrt(ss / float64(len(xs)-1))
	return mean, 2.576 * sd / math.Sqrt(float64(len(xs)))
}
