package compare

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/bench/peers"
	"github.com/synod-dev/synod/cluster"
)

// System is one replicated store the comparison can run.
type System struct {
	// Name is "synod", "etcd" or "zookeeper" (table and JSON key).
	Name string
	// Missing returns "" when the system can be started on this machine, or
	// the command that installs what is missing.
	Missing func() string
	// Start starts a 3-member cluster on 127.0.0.1, data and logs under
	// env.Dir, and waits until every member serves requests.
	Start func(ctx context.Context, env *Env) (*Instance, error)
}

// Env is what a System's Start gets.
type Env struct {
	// Dir is this system's own directory (created, empty).
	Dir string
	// Procs owns the processes Start launches; Run stops them all at the end.
	Procs *procGroup
	// ReadyTimeout bounds the wait for the cluster to serve.
	ReadyTimeout time.Duration
	// OpTimeout bounds one operation of the benchmark clients.
	OpTimeout time.Duration
}

// Instance is a running cluster.
type Instance struct {
	// Addrs are the members' client addresses; benchmark clients are spread
	// over them round-robin.
	Addrs []string
	// NewTarget connects one benchmark client.
	NewTarget bench.TargetFactory
	// Shareable: NewTarget's targets are safe for concurrent use, so the
	// sweep also runs clients sharing few of them (etcd's and ZooKeeper's
	// clients multiplex requests on one connection).
	Shareable bool
	// Via names how NewTarget talks ("resp", "v3", "zk"), for the
	// configuration names.
	Via string
	// Pipelined, when set, opens one pipelined RESP connection
	// (bench.PipelinedRedis): the sweep runs clients pipelining on it.
	Pipelined bench.TargetFactory
	// Follower, when set, connects one client to a member that is not the
	// leader, which forwards its requests: the sweep's one-client cells
	// also run that way (issue 28: one client's put through a follower).
	// Run drops it after the preload when it cannot connect (a leaderless
	// protocol names no leader).
	Follower bench.TargetFactory
	// GRPC, when set, opens one Synod gRPC client (safe for concurrent
	// use): the sweep runs clients multiplexed over few of them.
	GRPC bench.TargetFactory
	// GRPCPipelined, when set, opens one Synod gRPC client that pipelines
	// its callers' requests on Pipeline streams: the sweep runs clients
	// pipelining on it, as over RESP.
	GRPCPipelined bench.TargetFactory
	// Durability states what is on disk before a write is acknowledged.
	Durability string
	// Fsync is the short form printed beside every figure ("fsync on",
	// "memory", "appendfsync always").
	Fsync string
	// Version names the software (for the report).
	Version string
	// Stop, when set, stops processes that Procs does not own.
	Stop func() error
	// Pause and Resume, when set, freeze every process of the system
	// (SIGSTOP) and let them run again (SIGCONT): Run pauses every system
	// but the one it measures (package doc, "Isolation").
	Pause, Resume func() error
	// PIDs, when set, lists the system's processes, whose CPU time Run
	// reads from /proc to print each system's CPU while it serves no client.
	PIDs func() []int
}

// Members is the cluster size of every system in the comparison.
const Members = 3

// EtcdBinary and the ZooKeeper paths are where Debian's packages put them.
var (
	EtcdBinary   = "/usr/bin/etcd"
	ZooKeeperJar = "/usr/share/java/zookeeper.jar"
	// Slf4jSimpleJar, when present, sends ZooKeeper's log to its log file
	// (without a binding slf4j discards it).
	Slf4jSimpleJar = "/usr/share/java/slf4j-simple.jar"
	JavaBinary     = "java"
)

// Install commands printed when a peer is missing.
const (
	EtcdInstall      = "apt-get install -y etcd-server"
	ZooKeeperInstall = "apt-get install -y zookeeperd"
	JavaInstall      = "apt-get install -y default-jre-headless"
	RedisInstall     = "apt-get install -y redis-server"
)

// RedisBinary is where Debian's redis-server puts it.
var RedisBinary = "/usr/bin/redis-server"

// RedisSystem runs one redis-server (Debian's redis-server) on a free
// port: "redis" without persistence (save off, appendonly off), or with
// aof "redis-aof", appendonly yes and appendfsync always (the AOF fsynced
// before a write is answered, Redis's strongest durability). One server,
// not replicated: it is the single-machine bound ABD and ESDS are held
// against (issue 18), not a peer with the same guarantees. Clients speak
// RESP, one connection each or pipelining.
func RedisSystem(aof bool) System {
	name := "redis"
	if aof {
		name = "redis-aof"
	}
	return System{
		Name: name,
		Missing: func() string {
			if !isExecutable(RedisBinary) {
				return RedisInstall
			}
			return ""
		},
		Start: func(ctx context.Context, env *Env) (*Instance, error) { return startRedis(ctx, env, name, aof) },
	}
}

func startRedis(ctx context.Context, env *Env, name string, aof bool) (*Instance, error) {
	ports, err := freePorts(1)
	if err != nil {
		return nil, err
	}
	addr := hostPort(ports[0])
	argv := []string{RedisBinary, "--port", strconv.Itoa(ports[0]), "--bind", "127.0.0.1",
		"--dir", env.Dir, "--save", "", "--daemonize", "no", "--protected-mode", "no"}
	inst := &Instance{Addrs: []string{addr}, Via: "resp",
		Durability: "none: one server, nothing on disk (save off, appendonly off)", Fsync: "memory"}
	if aof {
		argv = append(argv, "--appendonly", "yes", "--appendfsync", "always")
		inst.Durability = "fsync: one server, AOF fsynced before a write is answered (appendfsync always)"
		inst.Fsync = "appendfsync always"
	} else {
		argv = append(argv, "--appendonly", "no")
	}
	p, err := env.Procs.start(name, argv, nil, filepath.Join(env.Dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	ro := bench.RedisOptions{Timeout: env.OpTimeout}
	inst.NewTarget = bench.RedisFactory(ro)
	inst.Pipelined = bench.PipelinedRedisFactory(ro)
	inst.Pause, inst.Resume, inst.PIDs = procControls([]*proc{p})
	err = waitReady(ctx, name, env.ReadyTimeout, []*proc{p}, func(ctx context.Context) error {
		return probe(ctx, inst.NewTarget, inst.Addrs)
	})
	if err != nil {
		return nil, err
	}
	inst.Version = commandVersion(RedisBinary, "--version")
	if v, _, ok := strings.Cut(inst.Version, " sha="); ok {
		inst.Version = v
	}
	return inst, nil
}

// SynodSystem runs a 3-node Synod cluster with package cluster, durability
// "fsync" or "memory", the namespace "default" replicated by protocol,
// reads in the protocol's linearizable mode when it is linearizable (SYNOD
// READ linearizable on every connection; for paxos a quorum-confirmed
// read), else in its default mode (ESDS: non-strict). Each client connection moves to the
// leader the server it first reaches names (SYNOD LEADER; protocols without a
// leader stay spread over the nodes); the peers' clients are spread over
// their members and rely on the server forwarding to the leader, as their
// standard clients do.
// binary is the synod executable ("" means this one).
func SynodSystem(protocol, binary, durability string) System {
	return SynodSystemParams(protocol, binary, durability, nil, 0)
}

// SynodSystemParams is SynodSystem with the namespace's protocol
// parameters (for example esds reads=local) and the nodes' GOMAXPROCS
// (cluster.UpOptions.Procs: 0 or cluster.ProcsGo Go's default,
// cluster.ProcsAuto each co-located node's share of the cores, or a count).
func SynodSystemParams(protocol, binary, durability string, params map[string]string, procs int) System {
	if durability == "" {
		durability = "fsync"
	}
	return System{
		Name:    "synod",
		Missing: func() string { return "" },
		Start: func(ctx context.Context, env *Env) (*Instance, error) {
			c, err := cluster.Up(cluster.UpOptions{
				Dir: env.Dir, Nodes: Members, Protocol: protocol, Durability: durability, Binary: binary, Params: params,
				DieWithParent: true, Procs: procs,
			})
			if err != nil {
				return nil, err
			}
			readMode := ""
			if m, err := automaton.ConsistencyOf(protocol); err == nil && m == automaton.Linearizable {
				readMode = "linearizable"
			}
			ro := bench.RedisOptions{ReadMode: readMode, Leader: true, Timeout: env.OpTimeout}
			var grpcAddrs []string
			for _, n := range c.Nodes {
				if n.GRPC != "" {
					grpcAddrs = append(grpcAddrs, n.GRPC)
				}
			}
			inst := &Instance{
				Addrs:      c.ClientAddrs(),
				NewTarget:  bench.RedisFactory(ro),
				Via:        "resp",
				Pipelined:  bench.PipelinedRedisFactory(ro),
				Follower:   bench.FollowerRedisFactory(ro, c.ClientAddrs()),
				Durability: "fsync: records on disk (WAL engine, fdatasync, group commit) before a reply",
				Fsync:      "fsync on",
				Version:    "synod, protocol " + protocol + procsLabel(c.Config.Nodes[0].Procs, "node"),
				Stop: func() error {
					_, err := cluster.Down(c.Dir, false)
					return err
				},
				// Each node's verified PID is signalled (cluster.Pause).
				Pause:  func() error { return eachNode(c, cluster.Pause) },
				Resume: func() error { return eachNode(c, cluster.Resume) },
				PIDs: func() []int {
					var pids []int
					for _, n := range c.Nodes {
						pids = append(pids, n.PID)
					}
					return pids
				},
			}
			if durability == "memory" {
				inst.Durability, inst.Fsync = "memory: nothing on disk (storage engine memory)", "memory"
			}
			if len(grpcAddrs) == len(c.Nodes) {
				o := bench.GRPCOptions{Addrs: grpcAddrs, ReadMode: readMode, Timeout: env.OpTimeout}
				inst.GRPC = bench.GRPCFactory(o)
				o.Pipeline = true
				inst.GRPCPipelined = bench.GRPCFactory(o)
			}
			return inst, nil
		},
	}
}

// eachNode applies f (cluster.Pause or cluster.Resume) to every node of c.
func eachNode(c *cluster.Cluster, f func(dir, id string) error) error {
	var errs []error
	for _, n := range c.Nodes {
		errs = append(errs, f(c.Dir, n.ID))
	}
	return errors.Join(errs...)
}

// EtcdSystem runs 3 etcd members (Debian's etcd-server) on free ports.
// etcd's defaults are kept: its WAL is fsynced before an entry counts as
// persisted, so a put is acknowledged after a majority fsynced it. Clients use
// the v3 API (peers.EtcdTarget): puts and linearizable gets. The members run
// with Go's default GOMAXPROCS (EtcdSystemProcs sets it).
func EtcdSystem() System {
	return EtcdSystemProcs(0)
}

// EtcdSystemProcs is EtcdSystem with every member's GOMAXPROCS set as
// SynodSystemParams sets Synod's nodes' (MembersProcs): etcd is a Go program and its three members
// share this machine's cores as Synod's three nodes do, so a comparison
// that gives one side fewer Ps gives the other the same. The count is
// passed in each member's environment (GOMAXPROCS=N) and named in the
// report's version line.
func EtcdSystemProcs(procs int) System {
	n := MembersProcs(procs)
	return System{
		Name: "etcd",
		Missing: func() string {
			if !isExecutable(EtcdBinary) {
				return EtcdInstall
			}
			return ""
		},
		Start: func(ctx context.Context, env *Env) (*Instance, error) { return startEtcd(ctx, env, n) },
	}
}

// MembersProcs is the GOMAXPROCS each of a comparison's Members co-located
// processes runs with for a cluster.UpOptions.Procs value p:
// cluster.AutoProcs(Members) for cluster.ProcsAuto, p for a count, else 0
// (Go's default: 0 or cluster.ProcsGo).
func MembersProcs(p int) int {
	switch {
	case p == cluster.ProcsAuto:
		return cluster.AutoProcs(Members)
	case p > 0:
		return p
	}
	return 0
}

// procsLabel is the version line's note of a GOMAXPROCS set by --procs
// ("" for Go's default).
func procsLabel(n int, per string) string {
	if n <= 0 {
		return ""
	}
	return fmt.Sprintf(", GOMAXPROCS %d per %s", n, per)
}

// etcdEnv is an etcd member's environment: environ without ETCD_*
// variables (they would conflict with the flags: etcd refuses to start)
// and without GOMAXPROCS, then GOMAXPROCS=procs when procs is above 0.
func etcdEnv(environ []string, procs int) []string {
	var env []string
	for _, kv := range environ {
		if strings.HasPrefix(kv, "ETCD_") || strings.HasPrefix(kv, "GOMAXPROCS=") {
			continue
		}
		env = append(env, kv)
	}
	if procs > 0 {
		env = append(env, "GOMAXPROCS="+strconv.Itoa(procs))
	}
	return env
}

func startEtcd(ctx context.Context, env *Env, nprocs int) (*Instance, error) {
	ports, err := freePorts(2 * Members)
	if err != nil {
		return nil, err
	}
	url := func(p int) string { return "http://" + hostPort(p) }
	var initial []string
	for i := 0; i < Members; i++ {
		initial = append(initial, fmt.Sprintf("e%d=%s", i+1, url(ports[2*i+1])))
	}
	token := fmt.Sprintf("synod-compare-%d-%d", os.Getpid(), time.Now().UnixNano())
	childEnv := etcdEnv(os.Environ(), nprocs)
	var procs []*proc
	var addrs []string
	for i := 0; i < Members; i++ {
		name := fmt.Sprintf("e%d", i+1)
		client, peer := ports[2*i], ports[2*i+1]
		argv := []string{EtcdBinary,
			"--name", name,
			"--data-dir", filepath.Join(env.Dir, name),
			"--listen-client-urls", url(client),
			"--advertise-client-urls", url(client),
			"--listen-peer-urls", url(peer),
			"--initial-advertise-peer-urls", url(peer),
			"--initial-cluster", strings.Join(initial, ","),
			"--initial-cluster-token", token,
			"--initial-cluster-state", "new",
			"--logger", "zap",
			"--log-outputs", "stderr",
		}
		p, err := env.Procs.start("etcd "+name, argv, childEnv, filepath.Join(env.Dir, name+".log"))
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		addrs = append(addrs, hostPort(client))
	}
	pause, resume, pids := procControls(procs)
	factory := peers.EtcdFactory(peers.EtcdOptions{Timeout: env.OpTimeout})
	// Ready when every member answers a linearizable get (a leader exists and
	// the member reaches it).
	err = waitReady(ctx, "etcd", env.ReadyTimeout, procs, func(ctx context.Context) error {
		return probe(ctx, factory, addrs)
	})
	if err != nil {
		return nil, err
	}
	return &Instance{
		Addrs:      addrs,
		NewTarget:  factory,
		Shareable:  true,
		Via:        "v3",
		Pause:      pause,
		Resume:     resume,
		PIDs:       pids,
		Durability: "fsync: WAL fsynced before a put is acknowledged (etcd default)",
		Fsync:      "fsync on",
		Version:    strings.Replace(commandVersion(EtcdBinary, "--version"), "etcd Version:", "etcd", 1) + procsLabel(nprocs, "member"),
	}, nil
}

// ZooKeeperSystem runs a 3-server ZooKeeper ensemble (Debian's zookeeper
// 3.8 jar) with java directly: one QuorumPeerMain per server, each with its
// own zoo.cfg, dataDir and myid, ports free on 127.0.0.1. forceSync=yes (the
// default, written out) fsyncs the transaction log before a write is
// acknowledged. maxClientCnxns=0 lifts the per-IP limit of 60 connections
// (all benchmark clients come from 127.0.0.1), and the AdminServer (port 8080
// by default) is off. Clients: peers.ZooKeeperTarget (setData, sync+getData).
func ZooKeeperSystem() System {
	return System{
		Name: "zookeeper",
		Missing: func() string {
			if _, err := os.Stat(ZooKeeperJar); err != nil {
				return ZooKeeperInstall
			}
			if _, err := exec.LookPath(JavaBinary); err != nil {
				return JavaInstall
			}
			return ""
		},
		Start: startZooKeeper,
	}
}

// zooCfg renders server id's zoo.cfg; ports holds client, quorum and election
// ports for each server in turn.
func zooCfg(dataDir string, id int, ports []int) string {
	var b strings.Builder
	fmt.Fprintf(&b, "tickTime=2000\ninitLimit=10\nsyncLimit=5\n")
	fmt.Fprintf(&b, "dataDir=%s\n", dataDir)
	fmt.Fprintf(&b, "clientPort=%d\nclientPortAddress=127.0.0.1\n", ports[3*(id-1)])
	fmt.Fprintf(&b, "forceSync=yes\nmaxClientCnxns=0\nadmin.enableServer=false\n4lw.commands.whitelist=srvr\n")
	for i := 0; i < len(ports)/3; i++ {
		fmt.Fprintf(&b, "server.%d=127.0.0.1:%d:%d\n", i+1, ports[3*i+1], ports[3*i+2])
	}
	return b.String()
}

func startZooKeeper(ctx context.Context, env *Env) (*Instance, error) {
	ports, err := freePorts(3 * Members)
	if err != nil {
		return nil, err
	}
	cp := ZooKeeperJar
	if _, err := os.Stat(Slf4jSimpleJar); err == nil {
		cp += ":" + Slf4jSimpleJar
	}
	var procs []*proc
	var addrs []string
	for id := 1; id <= Members; id++ {
		dir := filepath.Join(env.Dir, fmt.Sprintf("zk%d", id))
		data := filepath.Join(dir, "data")
		if err := os.MkdirAll(data, 0o755); err != nil {
			return nil, err
		}
		if err := os.WriteFile(filepath.Join(data, "myid"), []byte(strconv.Itoa(id)+"\n"), 0o644); err != nil {
			return nil, err
		}
		cfg := filepath.Join(dir, "zoo.cfg")
		if err := os.WriteFile(cfg, []byte(zooCfg(data, id, ports)), 0o644); err != nil {
			return nil, err
		}
		argv := []string{JavaBinary, "-Xms256m", "-Xmx1g",
			"-Dzookeeper.log.dir=" + dir,
			"-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
			"-cp", cp, "org.apache.zookeeper.server.quorum.QuorumPeerMain", cfg}
		p, err := env.Procs.start(fmt.Sprintf("zookeeper %d", id), argv, nil, filepath.Join(dir, "zookeeper.log"))
		if err != nil {
			return nil, err
		}
		procs = append(procs, p)
		addrs = append(addrs, hostPort(ports[3*(id-1)]))
	}
	pause, resume, pids := procControls(procs)
	factory := peers.ZooKeeperFactory(peers.ZooKeeperOptions{Timeout: env.OpTimeout})
	var version string
	err = waitReady(ctx, "zookeeper", env.ReadyTimeout, procs, func(ctx context.Context) error {
		for _, a := range addrs {
			v, err := zkServing(ctx, a)
			if err != nil {
				return err
			}
			version = v
		}
		return probe(ctx, factory, addrs)
	})
	if err != nil {
		return nil, err
	}
	return &Instance{
		Addrs:      addrs,
		NewTarget:  factory,
		Shareable:  true,
		Via:        "zk",
		Pause:      pause,
		Resume:     resume,
		PIDs:       pids,
		Durability: "fsync: transaction log fsynced before a write is acknowledged (forceSync=yes)",
		Fsync:      "fsync on",
		Version:    version,
	}, nil
}

// zkServing asks a ZooKeeper server "srvr" and succeeds when it reports
// itself leader or follower; it returns the version line's value.
func zkServing(ctx context.Context, addr string) (string, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(2 * time.Second))
	if _, err := c.Write([]byte("srvr")); err != nil {
		return "", err
	}
	var version, mode string
	sc := bufio.NewScanner(c)
	for sc.Scan() {
		line := sc.Text()
		if v, ok := strings.CutPrefix(line, "Zookeeper version: "); ok {
			// "3.8.0-${mvngit.commit.id}, built on ..." in Debian's build.
			v, _, _ = strings.Cut(v, ",")
			v, _, _ = strings.Cut(v, "-")
			version = "zookeeper " + v
		}
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			mode = m
		}
		if strings.Contains(line, "not currently serving") {
			return "", fmt.Errorf("%s: %s", addr, line)
		}
	}
	if mode != "leader" && mode != "follower" {
		return "", fmt.Errorf("%s: not serving yet (mode %q)", addr, mode)
	}
	return version, nil
}

// probe connects one client to each address and reads a key through it.
func probe(ctx context.Context, factory bench.TargetFactory, addrs []string) error {
	for i, a := range addrs {
		t, err := factory(ctx, a, i)
		if err != nil {
			return err
		}
		res, err := t.Do(ctx, readyOp)
		t.Close()
		if err != nil {
			return fmt.Errorf("%s: %w", a, err)
		}
		if res.IsErr() {
			return fmt.Errorf("%s: %s", a, res.Err)
		}
	}
	return nil
}

func hostPort(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

func isExecutable(path string) bool {
	st, err := os.Stat(path)
	return err == nil && !st.IsDir() && st.Mode()&0o111 != 0
}

// commandVersion returns the first line of `bin args...`, or bin's base name.
func commandVersion(bin string, args ...string) string {
	out, err := exec.Command(bin, args...).Output()
	first, _, _ := strings.Cut(strings.TrimSpace(string(out)), "\n")
	if err != nil || first == "" {
		return filepath.Base(bin)
	}
	return first
}
