package seed002pbpaxos

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/experiment/seed002wan"
)

// The seed's WAN configurations (VI.C): "remote-clients" (Berkeley ->
// Princeton: every replica at one site, the clients far) and
// "wan-replicas" (the leader at UIUC, the backups at Utah and UT Austin,
// clients at Berkeley and Oregon). The seed gives only their response
// times, so the one-way link delays are derived from them (a decision, the
// seed names no link latency), by the message pattern of each request kind:
//
//	original = 2 c           (client -> leader -> client)
//	write    = 2 c + 2 p     (client -> leader, proposal and acceptance to a backup, reply)
//	read     = b + p + c     (client -> backup, its X-Paxos confirm to the leader, reply)
//
// so c (client <-> leader) = original/2, p (between replicas) =
// (write - original)/2 and b (client <-> a backup) = read - c - p. Every
// link is a seed002wan relay with that constant delay each way, between
// real `synod node` processes on loopback: each node's cluster file names
// the relay of each of its outgoing peer links (as nemesis does), and the
// client reaches every node's client and gRPC port through a relay of its
// own. What the rows measure is therefore Synod's message pattern under
// the seed's latencies: a protocol that added a round trip, or waited for
// more replicas than the seed's, would show it.
type wanConfig struct {
	name                   string
	original, read, write  float64 // the seed's mean RRT, ms
	clientLeader, replicas float64 // derived one-way delays, ms
	clientBackup           float64
}

var wanConfigs = map[string]wanConfig{
	"remote-clients": deriveWAN("remote-clients", 91.85, 92.79, 93.13),
	"wan-replicas":   deriveWAN("wan-replicas", 70.82, 75.49, 106.73),
}

func deriveWAN(name string, original, read, write float64) wanConfig {
	c := original / 2
	p := (write - original) / 2
	return wanConfig{name: name, original: original, read: read, write: write, clientLeader: c, replicas: p, clientBackup: read - c - p}
}

// chain is the link delay on a request kind's message chain (ms): the
// sum of the one-way delays its messages cross (the derivation above).
func (w wanConfig) chain(kind string) float64 {
	return map[string]float64{"original": 2 * w.clientLeader, "read": w.clientBackup + w.replicas + w.clientLeader, "write": 2*w.clientLeader + 2*w.replicas}[kind]
}

func ms(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

func (w wanConfig) String() string {
	return fmt.Sprintf("one-way client<->leader %.2f ms, client<->backup %.2f ms, replica<->replica %.2f ms (derived from the seed's %.2f/%.2f/%.2f ms original/read/write)",
		w.clientLeader, w.clientBackup, w.replicas, w.original, w.read, w.write)
}

// wanNodes starts k's cluster with the WAN configuration's delays on
// every peer link and returns its nodes (leader first) with their client
// and gRPC addresses replaced by the client's delayed links to them; stop
// stops the nodes and the links.
func wanNodes(ctx context.Context, env *experiment.Env, k kind, durability string, w wanConfig, seed uint64) (nodes []cluster.Node, stop func(), err error) {
	var links []*seed002wan.Link
	var procs []*exec.Cmd
	stop = func() {
		for _, p := range procs {
			env.Stop(p)
		}
		for _, l := range links {
			l.Close()
		}
	}
	defer func() {
		if err != nil {
			stop()
		}
	}()
	link := func(target string, d float64) (string, error) {
		l, err := seed002wan.New(target, seed002wan.Fixed(ms(d)), seed+uint64(len(links)))
		if err != nil {
			return "", err
		}
		links = append(links, l)
		return l.Addr(), nil
	}
	// A cluster directory, ports and data directories as Up makes them;
	// its nodes are stopped and started again, each with its own cluster
	// file whose peers are the delayed links.
	cl, err := env.Up("wan-"+w.name+"-"+k.clusterKey(durability), cluster.UpOptions{Nodes: k.nodes, Protocol: k.protocol, Durability: durability, Params: k.params})
	if err != nil {
		return nil, stop, err
	}
	if _, err := cl.Down(false); err != nil {
		return nil, stop, err
	}
	binB, err := os.ReadFile(filepath.Join(cl.Dir, cluster.BinaryFile))
	if err != nil {
		return nil, stop, err
	}
	bin := strings.TrimSpace(string(binB))
	for i, n := range cl.Config.Nodes {
		cfg := *cl.Config
		cfg.Nodes = append(cfg.Nodes[:0:0], cl.Config.Nodes...)
		for j := range cfg.Nodes {
			if j != i && k.nodes > 1 {
				if cfg.Nodes[j].Peer, err = link(cl.Config.Nodes[j].Peer, w.replicas); err != nil {
					return nil, stop, err
				}
			}
		}
		path := filepath.Join(cl.Dir, "cluster-"+n.ID+".yaml")
		if err := cfg.Save(path); err != nil {
			return nil, stop, err
		}
		logf, err := os.OpenFile(filepath.Join(cl.Dir, n.ID+"-wan.log"), os.O_WRONLY|os.O_CREATE|os.O_APPEND, 0o644)
		if err != nil {
			return nil, stop, err
		}
		cmd := exec.Command(bin, "node", "--config", path, "--id", n.ID)
		cmd.Dir, cmd.Stdout, cmd.Stderr = cl.Dir, logf, logf
		err = env.Start(cmd)
		logf.Close()
		if err != nil {
			return nil, stop, err
		}
		procs = append(procs, cmd)
	}
	for _, n := range cl.Nodes {
		deadline := time.Now().Add(15 * time.Second)
		for cluster.Ping(n.Client, "", 500*time.Millisecond) != nil {
			if time.Now().After(deadline) || ctx.Err() != nil {
				return nil, stop, fmt.Errorf("node %s did not answer PING on %s (log %s)", n.ID, n.Client, filepath.Join(cl.Dir, n.ID+"-wan.log"))
			}
			time.Sleep(50 * time.Millisecond)
		}
	}
	leader := ""
	if k.nodes > 1 {
		if leader, err = experiment.WaitLeader(ctx, cl, 20*time.Second); err != nil {
			return nil, stop, err
		}
	}
	for _, n := range cl.Nodes {
		d := w.clientBackup
		if n.ID == leader || k.nodes == 1 {
			d = w.clientLeader
		}
		if n.Client, err = link(n.Client, d); err != nil {
			return nil, stop, err
		}
		if n.GRPC, err = link(n.GRPC, d); err != nil {
			return nil, stop, err
		}
		if n.ID == leader {
			nodes = append([]cluster.Node{n}, nodes...)
		} else {
			nodes = append(nodes, n)
		}
	}
	return nodes, stop, nil
}
