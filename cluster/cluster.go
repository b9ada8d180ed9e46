// Package cluster starts, inspects and stops a local Synod cluster made of real
// processes on 127.0.0.1: the `synod cluster` commands and the live tests use it.
//
// A cluster lives in one directory, DIR:
//
//	DIR/cluster.yaml   the cluster file every node reads (see package config)
//	DIR/binary         the path of the synod binary the nodes were started with
//	DIR/nK.pid         the PID of node nK while it runs (absent when stopped)
//	DIR/nK.log         node nK's stdout and stderr, appended across restarts
//	DIR/data/nK/       node nK's durable state (kept by Down unless purged)
//
// Each node is a separate process, `synod node --config DIR/cluster.yaml --id nK`,
// started in its own session (setsid) so that it outlives the command that
// started it and does not receive the terminal's Ctrl-C. A node counts as ready
// when its client port answers a RESP PING with +PONG.
//
// # Safety of signals
//
// The package only ever signals the PIDs recorded in DIR's pid files, and only
// after checking /proc/PID/cmdline: the process must be a synod binary (the
// command line contains "synod") running exactly `node --config
// DIR/cluster.yaml --id nK` for that directory and that node. A pid file whose
// process is gone, is a zombie, or has been reused by an unrelated program is
// treated as stale: it is removed and nothing is signalled. This needs Linux's
// /proc; on other systems Kill and Down refuse to signal anything.
//
// # Deliberate choices
//
//   - Up on a directory that holds a stopped cluster (cluster.yaml present, no
//     node running) starts that same cluster again, with its name, ports and
//     data, provided the requested shape (node count, protocol, service,
//     transport, durability, password, base port) matches; otherwise it fails and suggests
//     `synod cluster down --purge`. Up on a directory with any node running fails.
//   - Free ports (BasePort 0) are found by binding 127.0.0.1:0 and releasing the
//     port just before the nodes start: another program could take one in
//     between, in which case Up fails with that node's log and can be retried.
//   - With BasePort N, node i (0-based) gets client port N+i, peer port N+100+i,
//     metrics port N+200+i and gRPC port N+300+i; Up checks that each is free
//     first. A stopped cluster whose file predates gRPC resumes without it.
//   - Up validates the cluster file in-process (protocol and service names
//     included, so this package links every protocol) before starting anything.
package cluster

import (
	"bufio"
	"bytes"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/synod-dev/synod/automaton"
	"maps"
	mrand "math/rand/v2"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/durability/sqlstore"
	// Up validates protocol names; link every protocol.
	_ "github.com/synod-dev/synod/protocol/all"
)

// File names inside a cluster directory.
const (
	ConfigFile = "cluster.yaml"
	BinaryFile = "binary"
	DataDir    = "data"
	// DieWithParentFile marks a cluster whose nodes die with the process
	// that started them (UpOptions.DieWithParent); Restart reads it too.
	DieWithParentFile = "die-with-parent"
)

// Timeouts.
const (
	// ReadyTimeout bounds how long Up and Restart wait for a node's first PONG.
	ReadyTimeout = 15 * time.Second
	// StopTimeout is how long Down waits after SIGTERM before it sends SIGKILL.
	StopTimeout = 5 * time.Second
	// killWait bounds how long Kill and Down wait for a SIGKILLed process to go.
	killWait = 5 * time.Second
)

// UpOptions describe a cluster to start.
type UpOptions struct {
	// Dir is the cluster directory (required). It is created if missing.
	Dir string
	// Nodes is the number of nodes (1-99), named n1..nN.
	Nodes int
	// Protocol and Service of the namespace "default" (defaults: abd, kv).
	Protocol string
	Service  string
	// Durability is "fsync" (default) or "memory".
	Durability string
	// Binary is the synod executable to run; default os.Executable().
	Binary string
	// BasePort 0 picks free ports on 127.0.0.1; see the package comment.
	BasePort int
	// Password, when set, makes clients AUTH.
	Password string
	// Params are the protocol parameters of the namespace "default" (the
	// cluster file's params; nil: the protocol's defaults).
	Params map[string]string
	// Transport is the peer transport of the namespace "default"
	// (config.Namespace.Transport: "" or tcp, grpc-unary, grpc-stream).
	Transport string
	// Extra namespaces served beside "default" (the compatibility suite
	// runs one per protocol); a resumed cluster must list the same names.
	Extra []config.Namespace
	// TLS generates a CA, node and client certificates and the cluster
	// secret into DIR/tls before the nodes start (tls.go): peers use mutual
	// TLS and the client ports speak only TLS (tls.clients: required);
	// readiness is checked over TLS. A stopped cluster without TLS is
	// given it; one with TLS keeps it even when TLS is false.
	TLS bool
	// Shards, when above 0, splits the namespace "default" by hash slot
	// into that many replica groups of Replicas nodes each (ShardLayout;
	// 0: DefaultReplicas, or every node when there are fewer).
	Shards, Replicas int
	// Spares adds that many shards owning no slots; Placement, when set,
	// turns on the placement service's decisions with its thresholds (a
	// zero value: the defaults; docs/SHARDING.md "Placement decisions").
	Spares    int
	Placement *config.Placement
	// NewGroups adds that many unplaced shards (no nodes, no slots: names
	// a split creates a new group under; they need Placement).
	NewGroups int
	// Remotes are other Synod clusters the namespaces call (the cluster
	// file's remotes; config/remotes.go).
	Remotes []config.Remote
	// DieWithParent makes the kernel kill every node (now and on Restart
	// or AddNode) when the process that started it dies (Linux's parent-
	// death signal). Test harnesses and benchmark commands set it, so a
	// binary killed by its timeout leaves no nodes running; `synod cluster
	// up` does not, its nodes outlive the command.
	DieWithParent bool
	// WALCompactMin is the cluster file's wal_compact_min: the WAL log
	// size below which a node never compacts (0: the default, 64 MiB).
	WALCompactMin int64
	// Procs is every node's GOMAXPROCS (the cluster file's procs): a
	// count, ProcsAuto (each node its share of this machine's cores,
	// AutoProcs(Nodes): all the nodes of a local cluster share one
	// machine) or ProcsGo (Go's default, written as 0). 0 means unset: a
	// new cluster gets Go's default and a resumed one keeps its file's
	// procs (any other value replaces the file's). `synod cluster up
	// --procs go` passes ProcsGo; without --procs, 0 (docs/COSTS.md
	// "GOMAXPROCS for co-located nodes": Go's default stays).
	Procs int
}

// ProcsAuto asks Up for AutoProcs(Nodes) as every node's GOMAXPROCS.
const ProcsAuto = -1

// ProcsGo asks Up for Go's default GOMAXPROCS (procs 0 in the cluster
// file), also for a resumed cluster whose file says otherwise.
const ProcsGo = -2

// AutoProcs is the GOMAXPROCS for each of nodes node processes sharing
// this machine: ceil(cores / nodes), where cores is what Go would give
// this process (runtime.GOMAXPROCS: the CPUs, or a container's limit).
func AutoProcs(nodes int) int {
	cores := runtime.GOMAXPROCS(0)
	if nodes < 1 {
		return cores
	}
	return (cores + nodes - 1) / nodes
}

// ParseProcs reads a --procs value: "go" (or "0") for ProcsGo, "auto" for
// ProcsAuto, a count, or "" for 0 (unset).
func ParseProcs(s string) (int, error) {
	switch s {
	case "":
		return 0, nil
	case "go", "0":
		return ProcsGo, nil
	case "auto":
		return ProcsAuto, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return 0, fmt.Errorf("--procs %q: want go, auto or a count of 1 or more", s)
	}
	return n, nil
}

// Node is one member of a running cluster.
type Node struct {
	ID      string
	Client  string // RESP address, host:port
	Peer    string
	Metrics string
	GRPC    string // gRPC API address ("" when the cluster file has none)
	PID     int
}

// Cluster is a cluster started (or resumed) by Up.
type Cluster struct {
	Dir    string // absolute, symlinks resolved
	Config *config.Cluster
	Nodes  []Node
	// Resumed is true when Up restarted a stopped cluster found in Dir.
	Resumed bool
}

// ClientAddrs lists the nodes' client addresses in node order.
func (c *Cluster) ClientAddrs() []string {
	out := make([]string, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = n.Client
	}
	return out
}

// Status, Kill, Restart and Down act on c.Dir.
func (c *Cluster) Status() ([]NodeStatus, error) { return Status(c.Dir) }
func (c *Cluster) Kill(id string) error          { return Kill(c.Dir, id) }
func (c *Cluster) Restart(id string) error       { return Restart(c.Dir, id) }

// PID is the process id of node id, or 0 when it is not running (its pid
// file checked against the running process, as Kill does).
func (c *Cluster) PID(id string) (int, error) { return nodePID(c.Dir, id) }
func (c *Cluster) Down(purge bool) ([]string, error) {
	return Down(c.Dir, purge)
}

// Up starts a cluster in opts.Dir and waits until every node answers PING. On
// failure it stops every process it started and returns an error quoting the
// end of the failing node's log.
func Up(opts UpOptions) (*Cluster, error) {
	if opts.Dir == "" {
		return nil, errors.New("cluster: no directory given")
	}
	if opts.Nodes < 1 || opts.Nodes > 99 {
		return nil, fmt.Errorf("cluster: --nodes %d: must be 1-99", opts.Nodes)
	}
	if opts.Protocol == "" {
		opts.Protocol = automaton.DefaultProtocol
	}
	if opts.Service == "" {
		opts.Service = "kv"
	}
	if opts.Durability == "" {
		opts.Durability = config.Fsync
	}
	// setProcs: the file's procs is to be replaced (by opts.Procs, 0 for
	// Go's default) when the cluster is resumed.
	setProcs := opts.Procs != 0
	switch {
	case opts.Procs == ProcsAuto:
		opts.Procs = AutoProcs(opts.Nodes)
	case opts.Procs == ProcsGo:
		opts.Procs = 0
	case opts.Procs < 0:
		return nil, fmt.Errorf("cluster: --procs %d: want a count, ProcsAuto or ProcsGo", opts.Procs)
	}
	if opts.BasePort < 0 || (opts.BasePort > 0 && opts.BasePort+300+opts.Nodes > 65535) {
		return nil, fmt.Errorf("cluster: --base-port %d: ports %d-%d must lie in 1-65535", opts.BasePort, opts.BasePort, opts.BasePort+300+opts.Nodes)
	}
	if opts.Binary == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, fmt.Errorf("cluster: cannot find the synod binary: %w", err)
		}
		opts.Binary = exe
	}
	bin, err := filepath.Abs(opts.Binary)
	if err != nil {
		return nil, err
	}
	if st, err := os.Stat(bin); err != nil {
		return nil, fmt.Errorf("cluster: synod binary: %w", err)
	} else if st.IsDir() || st.Mode()&0o111 == 0 {
		return nil, fmt.Errorf("cluster: synod binary %s is not an executable file", bin)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	dir, err := canonDir(opts.Dir)
	if err != nil {
		return nil, err
	}
	if running, err := runningNodes(dir); err != nil {
		return nil, err
	} else if len(running) > 0 {
		return nil, fmt.Errorf("cluster: %s already has a running cluster (%s); stop it first with `synod cluster down --dir %s`",
			dir, strings.Join(running, ", "), dir)
	}

	cfgPath := filepath.Join(dir, ConfigFile)
	resumed := false
	var cfg *config.Cluster
	if _, err := os.Stat(cfgPath); err == nil {
		cfg, err = loadConfig(dir)
		if err != nil {
			return nil, err
		}
		if err := compatible(cfg, opts, dir); err != nil {
			return nil, err
		}
		if opts.TLS && cfg.TLS == nil {
			if err := enableTLS(dir, cfg); err != nil {
				return nil, err
			}
			if err := cfg.Validate(); err != nil {
				return nil, fmt.Errorf("cluster: %s with TLS: %w", cfgPath, err)
			}
			if err := writeFileAtomic(cfgPath, mustMarshal(cfg)); err != nil {
				return nil, fmt.Errorf("cluster: %w", err)
			}
		}
		if setProcs && cfg.Nodes[0].Procs != opts.Procs {
			for i := range cfg.Nodes {
				cfg.Nodes[i].Procs = opts.Procs
			}
			if err := writeFileAtomic(cfgPath, mustMarshal(cfg)); err != nil {
				return nil, fmt.Errorf("cluster: %w", err)
			}
		}
		if err := cfg.Validate(); err != nil {
			return nil, fmt.Errorf("cluster: %s: %w", cfgPath, err)
		}
		resumed = true
	} else {
		cfg, err = newConfig(dir, opts)
		if err != nil {
			return nil, err
		}
		if opts.TLS {
			if err := enableTLS(dir, cfg); err != nil {
				os.RemoveAll(filepath.Join(dir, TLSDir))
				return nil, err
			}
		}
		if err := cfg.Validate(); err != nil {
			os.RemoveAll(filepath.Join(dir, TLSDir))
			return nil, fmt.Errorf("cluster: %w", err)
		}
		if err := writeFileAtomic(cfgPath, mustMarshal(cfg)); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	}
	if err := checkPortsFree(cfg); err != nil {
		if !resumed {
			os.Remove(cfgPath)
			os.RemoveAll(filepath.Join(dir, TLSDir))
		}
		return nil, err
	}
	tc, err := ClientTLS(cfg)
	if err != nil {
		return nil, err
	}
	if err := writeFileAtomic(filepath.Join(dir, BinaryFile), []byte(bin+"\n")); err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	if opts.DieWithParent {
		if err := writeFileAtomic(filepath.Join(dir, DieWithParentFile), nil); err != nil {
			return nil, fmt.Errorf("cluster: %w", err)
		}
	} else {
		os.Remove(filepath.Join(dir, DieWithParentFile))
	}

	// Start every node, then wait for all of them together.
	var started []*proc
	fail := func(err error) (*Cluster, error) {
		for _, p := range started {
			p.stop()
			os.Remove(pidPath(dir, p.id))
		}
		if !resumed {
			// Nothing was ever acknowledged by this cluster: leave the logs
			// for diagnosis, remove the rest so the next Up starts clean.
			os.Remove(cfgPath)
			os.RemoveAll(filepath.Join(dir, DataDir))
			os.RemoveAll(filepath.Join(dir, TLSDir)) // certificates name this cluster only
		}
		return nil, err
	}
	for _, n := range cfg.Nodes {
		p, err := startNode(dir, bin, n.ID)
		if err != nil {
			return fail(err)
		}
		started = append(started, p)
	}
	errs := make(chan error, len(started))
	for i, p := range started {
		go func() { errs <- p.waitReady(cfg.Nodes[i].Client, cfg.Password, tc, ReadyTimeout) }()
	}
	var first error
	for range started {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	if first != nil {
		return fail(first)
	}
	c := &Cluster{Dir: dir, Config: cfg, Resumed: resumed}
	for i, n := range cfg.Nodes {
		c.Nodes = append(c.Nodes, Node{ID: n.ID, Client: n.Client, Peer: n.Peer, Metrics: n.Metrics, GRPC: n.GRPC, PID: started[i].cmd.Process.Pid})
	}
	return c, nil
}

// newConfig builds a fresh cluster file for opts.
func newConfig(dir string, opts UpOptions) (*config.Cluster, error) {
	var rb [4]byte
	if _, err := rand.Read(rb[:]); err != nil {
		return nil, err
	}
	cfg := &config.Cluster{
		Cluster:       "local-" + hex.EncodeToString(rb[:]),
		Durability:    opts.Durability,
		DataDir:       filepath.Join(dir, DataDir),
		Password:      opts.Password,
		WALCompactMin: opts.WALCompactMin,
		Namespaces:    append([]config.Namespace{{Name: "default", Protocol: opts.Protocol, Service: opts.Service, Params: opts.Params, Transport: opts.Transport}}, opts.Extra...),
		Remotes:       opts.Remotes,
	}
	for i := range cfg.Namespaces {
		shareDatabase(&cfg.Namespaces[i], dir, opts.Nodes)
	}
	if opts.Shards > 0 {
		replicas := opts.Replicas
		if replicas == 0 {
			replicas = min(DefaultReplicas, opts.Nodes)
		}
		shards, err := ShardLayoutSpares(opts.Nodes, opts.Shards, opts.Spares, replicas)
		if err != nil {
			return nil, err
		}
		for i := 0; i < opts.NewGroups; i++ {
			shards = append(shards, config.Shard{Name: fmt.Sprintf("s%d", len(shards))})
		}
		cfg.Namespaces[0].Shards = shards
		cfg.Namespaces[0].Placement = opts.Placement
	}
	var ports []int
	if opts.BasePort == 0 {
		var err error
		if ports, err = freePorts(4 * opts.Nodes); err != nil {
			return nil, err
		}
	}
	for i := 0; i < opts.Nodes; i++ {
		var client, peer, metrics, grpc int
		if opts.BasePort == 0 {
			client, peer, metrics, grpc = ports[4*i], ports[4*i+1], ports[4*i+2], ports[4*i+3]
		} else {
			client, peer, metrics, grpc = opts.BasePort+i, opts.BasePort+100+i, opts.BasePort+200+i, opts.BasePort+300+i
		}
		cfg.Nodes = append(cfg.Nodes, config.Node{
			ID:      fmt.Sprintf("n%d", i+1),
			Client:  hostPort(client),
			Peer:    hostPort(peer),
			Metrics: hostPort(metrics),
			GRPC:    hostPort(grpc),
			Procs:   opts.Procs,
		})
	}
	return cfg, nil
}

// shareDatabase gives a namespace whose protocol keeps objects in a
// database (pbdurable: the durability_dsn parameter) and whose cluster
// file names none one SQLite file that every node shares,
// DIR/data/durability-<namespace>.db (issue 29). Without it each node
// would open its own file and a new primary would recover from an empty
// one; configuration validation refuses that (automaton.DeploymentChecker).
func shareDatabase(ns *config.Namespace, dir string, nodes int) {
	ns.Params = sqlstore.SharedParams(ns.Protocol, ns.Name, ns.Params, filepath.Join(dir, DataDir), nodes)
}

// compatible checks that a stopped cluster found in dir has the shape opts ask for.
func compatible(cfg *config.Cluster, opts UpOptions, dir string) error {
	var diffs []string
	if len(cfg.Nodes) != opts.Nodes {
		diffs = append(diffs, fmt.Sprintf("it has %d nodes, not %d", len(cfg.Nodes), opts.Nodes))
	}
	if len(cfg.Namespaces) == 0 || cfg.Namespaces[0].Protocol != opts.Protocol || cfg.Namespaces[0].Service != opts.Service {
		diffs = append(diffs, fmt.Sprintf("its default namespace is not protocol %s, service %s", opts.Protocol, opts.Service))
	}
	if len(cfg.Namespaces) > 0 && !maps.Equal(cfg.Namespaces[0].Params, opts.Params) {
		diffs = append(diffs, "its protocol parameters differ")
	}
	if len(cfg.Namespaces) > 0 && cfg.Namespaces[0].PeerTransport() != (config.Namespace{Transport: opts.Transport}).PeerTransport() {
		diffs = append(diffs, fmt.Sprintf("its default namespace's transport is %s", cfg.Namespaces[0].PeerTransport()))
	}
	if wantShards := opts.Shards + (opts.Spares+opts.NewGroups)*min(opts.Shards, 1); len(cfg.Namespaces) > 0 && len(cfg.Namespaces[0].Shards) != wantShards {
		diffs = append(diffs, fmt.Sprintf("its default namespace has %d shards, not %d", len(cfg.Namespaces[0].Shards), wantShards))
	}
	var extra, want []string
	for i, ns := range cfg.Namespaces {
		if i > 0 {
			extra = append(extra, ns.Name)
		}
	}
	for _, ns := range opts.Extra {
		want = append(want, ns.Name)
	}
	if !slices.Equal(extra, want) {
		diffs = append(diffs, fmt.Sprintf("its other namespaces are [%s], not [%s]", strings.Join(extra, " "), strings.Join(want, " ")))
	}
	dur := cfg.Durability
	if dur == "" {
		dur = config.Fsync
	}
	if dur != opts.Durability {
		diffs = append(diffs, fmt.Sprintf("its durability is %s, not %s", dur, opts.Durability))
	}
	if cfg.Password != opts.Password {
		diffs = append(diffs, "its password differs")
	}
	if opts.BasePort != 0 && (len(cfg.Nodes) == 0 || cfg.Nodes[0].Client != hostPort(opts.BasePort)) {
		diffs = append(diffs, fmt.Sprintf("its first client address is not %s", hostPort(opts.BasePort)))
	}
	if len(diffs) > 0 {
		return fmt.Errorf("cluster: %s holds a stopped cluster %q that does not match: %s; remove it with `synod cluster down --purge --dir %s` or choose another --dir",
			dir, cfg.Cluster, strings.Join(diffs, "; "), dir)
	}
	return nil
}

func hostPort(p int) string { return net.JoinHostPort("127.0.0.1", strconv.Itoa(p)) }

// freePorts reserves n distinct free ports on 127.0.0.1 and releases them.
//
// The ports are a run of consecutive free ones from a random start below
// the kernel's ephemeral range (net.ipv4.ip_local_port_range), not ports
// the kernel hands out for port 0. A node keeps its ports for life: after
// a kill -9 it must bind the same ones again, and a port of the ephemeral
// range may by then be the source port of any outgoing connection on the
// machine (seen in CI: "bind: address already in use" on a restart). A
// port below the range is taken only by a listener that asks for it. When
// the range leaves no room below it, port 0 is used as before.
func freePorts(n int) ([]int, error) {
	var ls []net.Listener
	defer func() {
		for _, l := range ls {
			l.Close()
		}
	}()
	var ports []int
	if lo, hi := fixedPortRange(); hi-lo >= 16*n {
		start := lo + mrand.IntN(hi-lo)
		for i := 0; i < hi-lo && len(ports) < n; i++ {
			p := lo + (start-lo+i)%(hi-lo)
			l, err := net.Listen("tcp", hostPort(p))
			if err != nil {
				continue
			}
			ls = append(ls, l)
			ports = append(ports, p)
		}
		if len(ports) == n {
			return ports, nil
		}
	}
	for len(ports) < n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cluster: finding a free port: %w", err)
		}
		ls = append(ls, l)
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// fixedPortRange is where freePorts looks first: from 20000 up to the
// start of the ephemeral range (empty when that starts at or below 20000
// or cannot be read).
func fixedPortRange() (lo, hi int) {
	b, err := os.ReadFile("/proc/sys/net/ipv4/ip_local_port_range")
	if err != nil {
		return 0, 0
	}
	f := strings.Fields(string(b))
	if len(f) != 2 {
		return 0, 0
	}
	eph, err := strconv.Atoi(f[0])
	if err != nil || eph <= 20000 {
		return 0, 0
	}
	return 20000, eph
}

// checkPortsFree fails naming the first address of cfg that cannot be bound.
func checkPortsFree(cfg *config.Cluster) error {
	for _, n := range cfg.Nodes {
		for _, a := range []struct{ name, addr string }{{"client", n.Client}, {"peer", n.Peer}, {"metrics", n.Metrics}, {"grpc", n.GRPC}} {
			if a.addr == "" {
				continue
			}
			l, err := net.Listen("tcp", a.addr)
			if err != nil {
				return fmt.Errorf("cluster: %s %s address %s is not free: %w", n.ID, a.name, a.addr, err)
			}
			l.Close()
		}
	}
	return nil
}

// loadConfig reads DIR/cluster.yaml without validating protocol names, so that
// Status, Kill and Down work even with a binary that lost a protocol.
func loadConfig(dir string) (*config.Cluster, error) {
	path := filepath.Join(dir, ConfigFile)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("cluster: no cluster in %s (%s is missing); start one with `synod cluster up --dir %s`", dir, ConfigFile, dir)
	}
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	var cfg config.Cluster
	if err := yaml.Unmarshal(b, &cfg); err != nil {
		return nil, fmt.Errorf("cluster: %s: %w", path, err)
	}
	cfg.Path = path
	return &cfg, nil
}

func mustMarshal(cfg *config.Cluster) []byte {
	b, err := cfg.Marshal()
	if err != nil {
		panic(err) // a plain struct of strings always marshals
	}
	return b
}

func writeFileAtomic(path string, b []byte) error {
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, path)
}

// canonDir makes dir absolute with symlinks resolved, so that the --config
// argument recorded in a node's command line is the same whichever way the
// directory is named later.
func canonDir(dir string) (string, error) {
	abs, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	real, err := filepath.EvalSymlinks(abs)
	if err != nil {
		return "", fmt.Errorf("cluster: %w", err)
	}
	return real, nil
}

// existingDir is canonDir for a directory that must already exist.
func existingDir(dir string) (string, error) {
	if dir == "" {
		return "", errors.New("cluster: no directory given")
	}
	st, err := os.Stat(dir)
	if err != nil {
		return "", fmt.Errorf("cluster: no cluster in %s: %w", dir, err)
	}
	if !st.IsDir() {
		return "", fmt.Errorf("cluster: %s is not a directory", dir)
	}
	return canonDir(dir)
}

// logTail returns the last lines of a node's log written since its latest start.
func logTail(path string, maxLines int) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return fmt.Sprintf("(cannot read %s: %v)", path, err)
	}
	if i := bytes.LastIndex(b, []byte(startMarker)); i >= 0 {
		if j := bytes.IndexByte(b[i:], '\n'); j >= 0 {
			b = b[i+j+1:]
		}
	}
	var lines []string
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		lines = append(lines, sc.Text())
		if len(lines) > maxLines {
			lines = lines[1:]
		}
	}
	if len(lines) == 0 {
		return "(log is empty)"
	}
	return strings.Join(lines, "\n")
}
