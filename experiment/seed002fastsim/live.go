package seed002fastsim

import (
	"context"
	"fmt"
	"net"
	"os"
	"sort"
	"strconv"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/daemon"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/experiment/seed002pb"
	"github.com/synod-dev/synod/experiment/seed002wan"
	"github.com/synod-dev/synod/node"
	"github.com/synod-dev/synod/protocol/fastpaxos"
)

// Live loopback throughput (issue 12, "Figures for the closing note"):
// fastpaxos on 3t+1 = 4 nodes against paxos on 2t+1 = 3, fsync on, closed-
// loop writers, with the Go client (gRPC; on fastpaxos it fans each request
// out to every acceptor: clients as proposers) and with RESP (the client
// reaches one node; on fastpaxos that node's gateway proposes, on paxos a
// follower forwards to the leader). The nodes run in this process
// (daemon.New, listeners on 127.0.0.1), so that fastpaxos's Recorder sees
// every node's counters: the conflict rate of a cell is the leader's
// Collisions (a classic quorum of disagreeing fast votes: coordinated
// recovery) over the instances the leader learned, and the recovered rate
// its Recovered over the same (any recovery round: collisions, stuck
// instances). Each cell starts a fresh cluster and removes it.

var (
	livePaths   = []string{"grpc", "resp"}
	liveClients = []string{"1", "4", "16"}
)

// The live WAN-client link: one-way Pareto(1.8, 20 ms), the seed's α_w =
// 1.8 with the scale cut from 100 ms to 20 ms so that a cell's few seconds
// hold a few hundred operations.
const (
	wanAlpha   = 1.8
	wanScaleMs = 20.0
)

// liveDurabilities: the seed's chapter V wrote nothing to stable storage
// (memory), and Synod's default (fsync per write) beside it.
var liveDurabilities = []string{config.Memory, config.Fsync}

func liveWANCell(protocol, path, durability string) experiment.Cell {
	return experiment.NewCell("case", "live-wan", "protocol", protocol, "path", path, "clients", "1", "durability", durability)
}

func liveCell(protocol, path, clients, durability string) experiment.Cell {
	return experiment.NewCell("case", "live-loopback", "protocol", protocol, "path", path, "clients", clients, "durability", durability)
}

const (
	mLiveTput     = "live_throughput_ops_s"
	mLiveP50      = "live_p50_ms"
	mLiveP99      = "live_p99_ms"
	mLiveConflict = "live_conflict_rate"
	mLiveRecov    = "live_recovered_rate"
	mLiveErrors   = "live_errors"
	mLiveMean     = "live_mean_ms"
	mLiveInNode   = "live_in_node_ms"    // mean time a node held a client request (submitted to released)
	mLiveSubmits  = "live_node_requests" // client requests the nodes took per operation
)

// nodesRequestDuration sums the nodes' synod_request_duration_seconds
// (seconds) and counts.
func nodesRequestDuration(ctx context.Context, metricsAddrs []string) (sum, count float64, err error) {
	for _, a := range metricsAddrs {
		s, k, err := seed002pb.RequestDuration(ctx, a)
		if err != nil {
			return 0, 0, err
		}
		sum, count = sum+s, count+k
	}
	return sum, count, nil
}

// liveNodes starts n in-process nodes of protocol with the durability
// (config.Memory or config.Fsync) in dir; stop stops them (by closing each
// node and waiting for its Run).
func liveNodes(ctx context.Context, protocol string, n int, dir string, params map[string]string, durability string) (grpcAddrs, respAddrs []string, stop func(), err error) {
	grpcAddrs, respAddrs, _, stop, err = liveNodesMetrics(ctx, protocol, n, dir, params, durability)
	return
}

// liveNodesMetrics is liveNodes with each node's metrics address.
func liveNodesMetrics(ctx context.Context, protocol string, n int, dir string, params map[string]string, durability string) (grpcAddrs, respAddrs, metricsAddrs []string, stop func(), err error) {
	cfg := &config.Cluster{Cluster: "seed002fast", Durability: durability, DataDir: dir,
		Namespaces: []config.Namespace{{Name: "default", Protocol: protocol, Service: "kv", Params: params}}}
	type lns struct{ peer, client, metrics, grpc net.Listener }
	var ls []lns
	closeAll := func() {
		for _, l := range ls {
			for _, x := range []net.Listener{l.peer, l.client, l.metrics, l.grpc} {
				if x != nil {
					x.Close()
				}
			}
		}
	}
	for i := range n {
		var l lns
		for _, p := range []*net.Listener{&l.peer, &l.client, &l.metrics, &l.grpc} {
			if *p, err = net.Listen("tcp", "127.0.0.1:0"); err != nil {
				closeAll()
				return nil, nil, nil, nil, err
			}
		}
		ls = append(ls, l)
		cfg.Nodes = append(cfg.Nodes, config.Node{ID: "n" + strconv.Itoa(i+1), Peer: l.peer.Addr().String(),
			Client: l.client.Addr().String(), Metrics: l.metrics.Addr().String(), GRPC: l.grpc.Addr().String()})
		grpcAddrs = append(grpcAddrs, l.grpc.Addr().String())
		respAddrs = append(respAddrs, l.client.Addr().String())
		metricsAddrs = append(metricsAddrs, l.metrics.Addr().String())
	}
	if err := cfg.Validate(); err != nil {
		closeAll()
		return nil, nil, nil, nil, err
	}
	type running struct {
		n    *node.Node
		done chan error
	}
	var rs []running
	stop = func() {
		for _, r := range rs {
			r.n.Close()
			<-r.done
		}
	}
	for i, nc := range cfg.Nodes {
		nd, err := daemon.New(cfg, nc.ID, node.Options{PeerListener: ls[i].peer, ClientListener: ls[i].client,
			MetricsListener: ls[i].metrics, GRPCListener: ls[i].grpc})
		if err != nil {
			stop()
			closeAll()
			return nil, nil, nil, nil, err
		}
		r := running{nd, make(chan error, 1)}
		go func() { r.done <- nd.Run(context.Background()) }()
		rs = append(rs, r)
		select {
		case <-nd.Ready():
		case err := <-r.done:
			r.done <- err
			stop()
			return nil, nil, nil, nil, fmt.Errorf("node %s: %v", nc.ID, err)
		case <-time.After(10 * time.Second):
			stop()
			return nil, nil, nil, nil, fmt.Errorf("node %s not ready", nc.ID)
		}
	}
	return grpcAddrs, respAddrs, metricsAddrs, stop, nil
}

// runLive measures one live cell.
func (e *Sim) runLive(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	proto, path := c.Get("protocol"), c.Get("path")
	clients, _ := strconv.Atoi(c.Get("clients"))
	dur := 5 * time.Second
	if c.Get("case") == "live-wan" {
		dur = 15 * time.Second
	}
	if env.Options.Quick {
		dur = time.Second
	}
	n := 3
	params := map[string]string{}
	var rec *fastpaxos.Recorder
	if proto == "fastpaxos" {
		n = 4
		name := "seed002fastsim-live-" + strconv.FormatInt(recorderSeq.Add(1), 10)
		rec = fastpaxos.NewRecorder(name)
		defer fastpaxos.DropRecorder(name)
		params["observe"] = name
	}
	dir, err := mkTemp(env)
	if err != nil {
		return experiment.Outcome{}, err
	}
	durability := c.Get("durability")
	if durability == "" {
		durability = config.Fsync
	}
	grpcAddrs, respAddrs, metricsAddrs, stop, err := liveNodesMetrics(ctx, proto, n, dir, params, durability)
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer os.RemoveAll(dir)
	defer stop()
	if c.Get("case") == "live-wan" {
		// Clients behind a WAN-like link to every node (seed002wan).
		for _, addrs := range [][]string{grpcAddrs, respAddrs} {
			for i, a := range addrs {
				l, err := seed002wan.New(a, seed002wan.Pareto(wanAlpha, wanScaleMs), uint64(e.RunSeed)*100+uint64(i))
				if err != nil {
					return experiment.Outcome{}, err
				}
				defer l.Close()
				addrs[i] = l.Addr()
			}
		}
	}
	cfg := bench.Config{Addrs: respAddrs, Duration: dur, Clients: clients, Keys: 1000, ValueSize: 64,
		ReadRatio: 0, Dist: "uniform", Seed: e.RunSeed, OpTimeout: 10 * time.Second, DurabilityLabel: durability}
	if path == "grpc" {
		cfg.NewTarget = bench.GRPCFactory(bench.GRPCOptions{Addrs: grpcAddrs, Timeout: 10 * time.Second})
		cfg.TargetName = bench.TargetGRPC
	}
	// Wait for a leader: a first write through the same path.
	if err := warmUp(ctx, cfg); err != nil {
		return experiment.Outcome{}, err
	}
	var before map[string]fastpaxos.Stats
	if rec != nil {
		before = statsByNode(rec)
	}
	sum0, count0, err := nodesRequestDuration(ctx, metricsAddrs)
	if err != nil {
		return experiment.Outcome{}, err
	}
	rep, err := bench.Run(ctx, cfg, env.Progress())
	if err != nil {
		return experiment.Outcome{}, err
	}
	sum1, count1, err := nodesRequestDuration(ctx, metricsAddrs)
	if err != nil {
		return experiment.Outcome{}, err
	}
	met := map[string]float64{mLiveTput: rep.All.Throughput, mLiveP50: rep.All.P50Ms, mLiveP99: rep.All.P99Ms, mLiveErrors: float64(rep.All.Errors)}
	if count1 > count0 && rep.All.Count > 0 {
		// Where a request's time goes: how many nodes took it as a client
		// request (fastpaxos's clients send to every acceptor) and how long
		// each held it (submitted to response released), against the
		// client's mean latency.
		met[mLiveInNode] = (sum1 - sum0) / (count1 - count0) * 1000
		met[mLiveSubmits] = (count1 - count0) / float64(rep.All.Count)
		met[mLiveMean] = rep.All.MeanMs
	}
	if rec != nil {
		conflict, recovered := conflictRates(before, statsByNode(rec))
		met[mLiveConflict], met[mLiveRecov] = conflict, recovered
	}
	return experiment.Outcome{Metrics: met, Labels: map[string]string{"durability": durability}, Detail: rep}, nil
}

// warmUp runs a few writes until one succeeds (the first election).
func warmUp(ctx context.Context, cfg bench.Config) error {
	w := cfg
	w.Duration, w.Ops, w.Clients, w.HistoryPath = 0, 20, 1, ""
	var last error
	for range 50 {
		rep, err := bench.Run(ctx, w, nil)
		if err == nil && rep.All.Errors == 0 && rep.All.Count > 0 {
			return nil
		}
		last = err
		if rep != nil && len(rep.ErrorSamples) > 0 {
			last = fmt.Errorf("%s", rep.ErrorSamples[0])
		}
		time.Sleep(200 * time.Millisecond)
	}
	return fmt.Errorf("live cluster never served a write: %v", last)
}

func sortedKeys(m map[string]fastpaxos.Stats) []string {
	var ks []string
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}

// mkTemp makes the cell's data directory under the run's scratch space.
func mkTemp(env *experiment.Env) (string, error) { return os.MkdirTemp(env.Work, "fastpaxos-live-") }

func statsByNode(rec *fastpaxos.Recorder) map[string]fastpaxos.Stats {
	out := map[string]fastpaxos.Stats{}
	for k, v := range rec.Nodes() {
		out[string(k)] = v
	}
	return out
}

// conflictRates are the leader's Collisions and Recovered over the
// instances it learned, between two snapshots; the leader is the node that
// recovered or collided the most (only a leader counts either), else any.
func conflictRates(before, after map[string]fastpaxos.Stats) (conflict, recovered float64) {
	var best fastpaxos.Stats
	var learned uint64
	first := true
	for _, id := range sortedKeys(after) {
		a, b := after[id], before[id]
		d := fastpaxos.Stats{Collisions: a.Collisions - b.Collisions, Recovered: a.Recovered - b.Recovered}
		l := (a.FastLearned + a.ClassicLearned + a.CaughtUp) - (b.FastLearned + b.ClassicLearned + b.CaughtUp)
		if first || d.Recovered+d.Collisions > best.Recovered+best.Collisions {
			best, learned, first = d, l, false
		}
	}
	if learned == 0 {
		return 0, 0
	}
	return float64(best.Collisions) / float64(learned), float64(best.Recovered) / float64(learned)
}
