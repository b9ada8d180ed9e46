package seed002pbpaxos

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/service"
)

// How a kind's client reaches the cluster (issue 13 item 2: "clients send
// to all replicas, only the leader replies; RESP clients reach one node,
// which forwards; both paths measured").
const (
	pathFanout       = ""              // Go gRPC client: every replica (Request.Fanout); one-node protocols: that node
	pathGRPCLeader   = "grpc-leader"   // Go gRPC client, Options.NoFanout, to the leader only
	pathRESPLeader   = "resp-leader"   // RESP (redis-cli's path) to the leader
	pathRESPFollower = "resp-follower" // RESP to a follower, which forwards to the leader
)

// kind is one request kind of the seed's tables, and what serves it here.
type kind struct {
	name     string
	protocol string
	nodes    int
	read     bool
	mode     automaton.ReadMode
	path     string
	params   map[string]string // protocol parameters of the cluster (nil: defaults)
	doc      string
}

var kinds = []kind{
	{"original", "unreplicated", 1, false, automaton.ReadDefault, pathFanout, nil, "the unreplicated service: one server answers at once"},
	{"read", "pbpaxos", 3, true, automaton.ReadDefault, pathFanout, nil, "pbpaxos read: X-Paxos confirms"},
	{"write", "pbpaxos", 3, false, automaton.ReadDefault, pathFanout, nil, "pbpaxos write: the basic protocol"},
	{"paxos-quorum-read", "paxos", 3, true, automaton.ReadQuorum, pathFanout, nil, "Multi-Paxos read: the leader confirms leadership with a majority"},
	{"paxos-lease-read", "paxos", 3, true, automaton.ReadLease, pathFanout, nil, "Multi-Paxos read under the leader's lease"},
	{"paxos-write", "paxos", 3, false, automaton.ReadDefault, pathFanout, nil, "Multi-Paxos write through the log"},
	// Pipelining (VI.A.2: "the leader never tries to propose more than one
	// proposal simultaneously"; pipeline=1, the default, is that).
	{"write-window8", "pbpaxos", 3, false, automaton.ReadDefault, pathFanout, map[string]string{"pipeline": "8"}, "pbpaxos write, 8 proposals outstanding (chained deltas)"},
	{"write-window32", "pbpaxos", 3, false, automaton.ReadDefault, pathFanout, map[string]string{"pipeline": "32"}, "pbpaxos write, 32 proposals outstanding (chained deltas)"},
	// Client paths.
	{"write-grpc-leader", "pbpaxos", 3, false, automaton.ReadDefault, pathGRPCLeader, nil, "pbpaxos write, gRPC to the leader only (no fan-out)"},
	{"write-resp-leader", "pbpaxos", 3, false, automaton.ReadDefault, pathRESPLeader, nil, "pbpaxos write, RESP to the leader"},
	{"write-resp-follower", "pbpaxos", 3, false, automaton.ReadDefault, pathRESPFollower, nil, "pbpaxos write, RESP to a follower, which forwards"},
	{"read-grpc-leader", "pbpaxos", 3, true, automaton.ReadDefault, pathGRPCLeader, nil, "pbpaxos X-Paxos read, gRPC to the leader only (the leader sends the reads)"},
	{"read-resp-follower", "pbpaxos", 3, true, automaton.ReadDefault, pathRESPFollower, nil, "pbpaxos X-Paxos read, RESP to a follower, which forwards"},
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

// checkKinds refuses unknown kind names.
func checkKinds(names []string) error {
	for _, n := range names {
		if _, ok := kindNamed(n); !ok {
			return fmt.Errorf("--kinds: unknown kind %q (known: %s)", n, strings.Join(kindNames(), ", "))
		}
	}
	return nil
}

// clusterKey names k's cluster: kinds with the same protocol, size,
// durability and parameters share one.
func (k kind) clusterKey(durability string) string {
	key := fmt.Sprintf("%s-n%d-%s", k.protocol, k.nodes, durability)
	names := make([]string, 0, len(k.params))
	for n := range k.params {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		key += "-" + n + k.params[n]
	}
	return key
}

// liveNodes starts (or reuses) k's cluster and returns its nodes, the
// leader's first when the protocol has one.
func liveNodes(ctx context.Context, env *experiment.Env, k kind, durability string) ([]cluster.Node, error) {
	if _, err := automaton.Lookup(k.protocol); err != nil {
		return nil, experiment.Unavailable("protocol %q not available in this binary (registered: %s)", k.protocol, strings.Join(automaton.Names(), ", "))
	}
	cl, err := env.Cluster(k.clusterKey(durability), cluster.UpOptions{Nodes: k.nodes, Protocol: k.protocol, Durability: durability, Params: k.params})
	if err != nil {
		return nil, err
	}
	leader, _ := experiment.WaitLeader(ctx, cl, 10*time.Second) // "": no leader, any order serves
	nodes := make([]cluster.Node, 0, len(cl.Nodes))
	for _, n := range cl.Nodes {
		if n.ID == leader {
			nodes = append([]cluster.Node{n}, nodes...)
		} else {
			nodes = append(nodes, n)
		}
	}
	return nodes, nil
}

// requester is one client connection of a kind's path: do runs one
// request of the kind, write one write (to create the key).
type requester struct {
	write func(ctx context.Context, key string, val []byte) error
	read  func(ctx context.Context, key string) error
	reads bool
	close func() error
}

func (r requester) do(ctx context.Context, key string, val []byte) error {
	if r.reads {
		return r.read(ctx, key)
	}
	return r.write(ctx, key, val)
}

// newRequester connects a client of k's path to nodes (leader first).
func newRequester(k kind, nodes []cluster.Node) (requester, error) {
	switch k.path {
	case pathRESPLeader, pathRESPFollower:
		n := nodes[0]
		if k.path == pathRESPFollower {
			if len(nodes) < 2 {
				return requester{}, fmt.Errorf("%s: a one-node cluster has no follower", k.name)
			}
			n = nodes[1]
		}
		c, err := client.New([]string{n.Client}, client.Options{Timeout: 10 * time.Second})
		if err != nil {
			return requester{}, err
		}
		return requester{
			write: func(ctx context.Context, key string, val []byte) error { return c.Set(ctx, key, val) },
			read: func(ctx context.Context, key string) error {
				_, _, err := c.Get(ctx, key)
				return err
			},
			reads: k.read, close: c.Close,
		}, nil
	}
	addrs := grpcAddrs(nodes)
	opts := client.Options{Timeout: 10 * time.Second}
	if k.path == pathGRPCLeader {
		addrs, opts.NoFanout = addrs[:1], true
	}
	c, err := client.NewGRPC(addrs, opts)
	if err != nil {
		return requester{}, err
	}
	return requester{
		write: func(ctx context.Context, key string, val []byte) error {
			return grpcDo(ctx, c, service.Op{Kind: "set", Key: key, Args: [][]byte{val}}, automaton.ReadDefault)
		},
		read: func(ctx context.Context, key string) error {
			return grpcDo(ctx, c, service.Op{Kind: "get", Key: key}, k.mode)
		},
		reads: k.read, close: c.Close,
	}, nil
}

func grpcAddrs(nodes []cluster.Node) []string {
	addrs := make([]string, len(nodes))
	for i, n := range nodes {
		addrs[i] = n.GRPC
	}
	return addrs
}

// grpcDo runs op through c with read mode m.
func grpcDo(ctx context.Context, c *client.GRPC, op service.Op, m automaton.ReadMode) error {
	res, _, err := c.DoOp(ctx, "", op, client.OpOptions{Read: m})
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
