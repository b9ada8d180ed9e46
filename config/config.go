// Package config reads and validates the cluster file, one YAML document shared
// by every node of a cluster:
//
//	cluster: demo              # cluster name; peers from another cluster are refused
//	durability: fsync          # fsync (default) or memory
//	storage: wal               # engine for durability fsync: wal (default) or pebble
//	data_dir: /var/lib/synod   # each node stores under data_dir/<id>; relative to the file
//	password: ""               # when set, clients must AUTH (the "default" user)
//	secret: ""                 # peers authenticate with it; see security.go
//	tls: {dir: tls}            # mutual TLS between peers; see security.go
//	users: []                  # client accounts with per-namespace access
//	metrics_token: ""          # when set, /metrics and /debug/pprof ask for it (Bearer)
//	limits: {max_clients: 10000} # overload limits; see limits.go
//	nodes:
//	  - id: n1
//	    peer: 127.0.0.1:7001   # peer-to-peer TCP address
//	    client: 127.0.0.1:6381 # Redis-protocol address
//	    metrics: 127.0.0.1:9101 # optional: Prometheus /metrics and /debug/pprof
//	    grpc: 127.0.0.1:7401   # optional: gRPC API (api/synod.proto)
//	remotes: []                # other Synod clusters namespaces call; see remotes.go
//	namespaces:
//	  - name: default
//	    protocol: abd
//	    service: kv
//	    params: {}             # protocol-specific settings
//	    transport: tcp         # how its peer messages travel: tcp (default), grpc-unary or grpc-stream
//	    shards:                # optional: split by hash slot among replica groups (shards.go)
//	      - {name: s0, slots: 0-8191, nodes: [n1, n2, n3]}
//	      - {name: s1, slots: 8192-16383, nodes: [n4, n5, n6]}
//
// Validation errors name the offending field, for example
// `nodes[1].peer: "127.0.0.1" is not host:port`.
package config

import (
	"bytes"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"

	"gopkg.in/yaml.v3"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Durability modes.
const (
	Fsync  = "fsync"
	Memory = "memory"
)

// Storage engines (for durability fsync; see package storage).
const (
	StoragePebble = "pebble"
	StorageWAL    = "wal"
)

// Peer transports of a namespace (Namespace.Transport): how its automaton
// messages travel between nodes. Every transport uses the node's peer
// address; see package transport and transport/grpcpeer.
const (
	// TransportTCP is the framed TCP transport (package transport): one
	// connection per peer pushing frames, the seed's raw socket (the Grid Services thesis,
	// Table III.1 "Socket"). The default.
	TransportTCP = "tcp"
	// TransportGRPCUnary sends each message as one gRPC unary call to the
	// receiver (Deliver): the seed's grid service method call ("Call").
	TransportGRPCUnary = "grpc-unary"
	// TransportGRPCStream pushes each message down a server-streamed gRPC
	// call the receiver holds open to the sender (Subscribe): the seed's
	// push notification to a subscribed sink ("Notification").
	TransportGRPCStream = "grpc-stream"
)

// Transports lists the valid Namespace.Transport values, the default first.
var Transports = []string{TransportTCP, TransportGRPCUnary, TransportGRPCStream}

// Node is one member.
type Node struct {
	ID      string `yaml:"id"`
	Peer    string `yaml:"peer"`
	Client  string `yaml:"client"`
	Metrics string `yaml:"metrics,omitempty"`
	GRPC    string `yaml:"grpc,omitempty"` // optional gRPC API address
	// Procs is the node process's GOMAXPROCS (how many threads run Go
	// code at once); 0 leaves Go's default (the machine's or container's
	// CPUs, or the GOMAXPROCS environment variable). It is a co-location
	// setting: nodes sharing one machine each take their share of its
	// cores (`synod cluster up --procs auto`: ceil(cores / nodes)).
	Procs int `yaml:"procs,omitempty"`
}

// Namespace is one replicated object.
type Namespace struct {
	Name     string            `yaml:"name"`
	Protocol string            `yaml:"protocol"`
	Service  string            `yaml:"service"`
	Params   map[string]string `yaml:"params,omitempty"`
	// Transport carries the namespace's peer messages: TransportTCP (the
	// default, also spelled ""), TransportGRPCUnary or TransportGRPCStream.
	// Read it with PeerTransport.
	Transport string `yaml:"transport,omitempty"`
	// Shards, when set, splits the namespace's keys by hash slot among
	// replica groups, each on its own subset of the nodes (shards.go).
	Shards []Shard `yaml:"shards,omitempty"`
	// Placement, when set on a sharded namespace, lets the placement
	// service decide splits, merges and replacements (placement.go).
	Placement *Placement `yaml:"placement,omitempty"`
}

// PeerTransport is the namespace's transport, TransportTCP when unset.
func (ns Namespace) PeerTransport() string {
	if ns.Transport == "" {
		return TransportTCP
	}
	return ns.Transport
}

// Cluster is the whole file.
type Cluster struct {
	Cluster    string `yaml:"cluster"`
	Durability string `yaml:"durability,omitempty"`
	DataDir    string `yaml:"data_dir,omitempty"`
	Storage    string `yaml:"storage,omitempty"` // "" means wal
	// WALCompactMin is the log size in bytes below which the WAL engine
	// (storage: wal) never compacts; it compacts when its log exceeds
	// max(WALCompactMin, 2 x the live records' size). 0 means the default,
	// 64 MiB (storage.DefaultWALCompactMin). Tests and soaks set it small
	// so that compactions run every second or so under load.
	WALCompactMin int64  `yaml:"wal_compact_min,omitempty"`
	Password      string `yaml:"password,omitempty"`
	// Secret authenticates peers to each other (security.go).
	Secret string `yaml:"secret,omitempty"`
	// TLS, when set, makes peers use mutual TLS (security.go).
	TLS *TLS `yaml:"tls,omitempty"`
	// Users are client accounts besides the password's "default" user.
	Users []User `yaml:"users,omitempty"`
	// MetricsToken, when set, is the bearer token the metrics port asks
	// for (security.go).
	MetricsToken string `yaml:"metrics_token,omitempty"`
	// Limits bound what a node accepts from its clients (limits.go).
	Limits *Limits `yaml:"limits,omitempty"`
	// GRPCServer is the gRPC API's server transport: "direct"
	// (gateway/grpcserver's own HTTP/2 server) or "grpc-go" (grpc-go's
	// server); "" is the server's default (grpcserver.DefaultTransport:
	// direct).
	GRPCServer string `yaml:"grpc_server,omitempty"`
	// AllowBroken admits the deliberately broken protocol variants
	// (automaton.RegisterBroken), which exist to show that checkers catch
	// them. Never set it for data you care about.
	AllowBroken bool        `yaml:"allow_broken,omitempty"`
	Nodes       []Node      `yaml:"nodes"`
	Namespaces  []Namespace `yaml:"namespaces"`
	// Remotes are other Synod clusters whose namespaces this cluster's
	// namespaces call (remotes.go).
	Remotes []Remote `yaml:"remotes,omitempty"`

	// Path is the file the config was loaded from (not part of the YAML).
	Path string `yaml:"-"`
}

var nameRE = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)

// Load reads and validates a cluster file. Unknown fields are errors.
func Load(path string) (*Cluster, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	c, err := Parse(b)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	c.Path = path
	if c.DataDir != "" && !filepath.IsAbs(c.DataDir) {
		c.DataDir = filepath.Join(filepath.Dir(path), c.DataDir)
	}
	if c.TLS != nil && !filepath.IsAbs(c.TLS.Dir) {
		c.TLS.Dir = filepath.Join(filepath.Dir(path), c.TLS.Dir)
	}
	if err := c.resolveRemotePaths(filepath.Dir(path)); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return c, nil
}

// Parse decodes and validates YAML.
func Parse(b []byte) (*Cluster, error) {
	dec := yaml.NewDecoder(bytes.NewReader(b))
	dec.KnownFields(true)
	var c Cluster
	if err := dec.Decode(&c); err != nil {
		return nil, fmt.Errorf("bad cluster file: %w", err)
	}
	if err := c.Validate(); err != nil {
		return nil, err
	}
	return &c, nil
}

// Marshal encodes the config as YAML.
func (c *Cluster) Marshal() ([]byte, error) { return yaml.Marshal(c) }

// Save writes the config as YAML to path.
func (c *Cluster) Save(path string) error {
	b, err := c.Marshal()
	if err != nil {
		return err
	}
	return os.WriteFile(path, b, 0o644)
}

// Validate checks every field and applies defaults (Durability = fsync).
func (c *Cluster) Validate() error {
	var errs []error
	bad := func(field, f string, a ...any) { errs = append(errs, fmt.Errorf(field+": "+f, a...)) }
	if !nameRE.MatchString(c.Cluster) {
		bad("cluster", "%q must be 1-63 letters, digits, '_', '.' or '-'", c.Cluster)
	}
	switch c.Durability {
	case "":
		c.Durability = Fsync
	case Fsync, Memory:
	default:
		bad("durability", "%q must be %q or %q", c.Durability, Fsync, Memory)
	}
	switch c.Storage {
	case "", StoragePebble, StorageWAL:
	default:
		bad("storage", "%q must be %q or %q", c.Storage, StoragePebble, StorageWAL)
	}
	switch c.GRPCServer {
	case "", "grpc-go", "direct":
	default:
		bad("grpc_server", "%q must be %q or %q", c.GRPCServer, "grpc-go", "direct")
	}
	if c.WALCompactMin < 0 {
		bad("wal_compact_min", "%d must be 0 (the default) or a size in bytes", c.WALCompactMin)
	}
	if c.Durability == Fsync && c.DataDir == "" {
		bad("data_dir", "required when durability is fsync")
	}
	if len(c.Nodes) == 0 {
		bad("nodes", "at least one node is required")
	}
	ids := map[string]bool{}
	addrs := map[string]string{}
	for i, n := range c.Nodes {
		f := fmt.Sprintf("nodes[%d]", i)
		if !nameRE.MatchString(n.ID) {
			bad(f+".id", "%q must be 1-63 letters, digits, '_', '.' or '-'", n.ID)
		} else if ids[n.ID] {
			bad(f+".id", "duplicate node id %q", n.ID)
		}
		ids[n.ID] = true
		if n.Procs < 0 {
			bad(f+".procs", "%d must be 0 (Go's default) or more", n.Procs)
		}
		for _, a := range []struct{ name, v string }{{"peer", n.Peer}, {"client", n.Client}, {"metrics", n.Metrics}, {"grpc", n.GRPC}} {
			if a.v == "" && (a.name == "metrics" || a.name == "grpc") {
				continue
			}
			if err := checkAddr(a.v); err != nil {
				bad(f+"."+a.name, "%v", err)
				continue
			}
			if prev, dup := addrs[a.v]; dup {
				bad(f+"."+a.name, "address %s already used by %s", a.v, prev)
			}
			addrs[a.v] = f + "." + a.name
		}
	}
	if len(c.Namespaces) == 0 {
		bad("namespaces", "at least one namespace is required")
	}
	nss := map[string]bool{}
	for i, ns := range c.Namespaces {
		f := fmt.Sprintf("namespaces[%d]", i)
		if !nameRE.MatchString(ns.Name) {
			bad(f+".name", "%q must be 1-63 letters, digits, '_', '.' or '-'", ns.Name)
		} else if nss[ns.Name] {
			bad(f+".name", "duplicate namespace %q", ns.Name)
		}
		nss[ns.Name] = true
		switch ns.Transport {
		case "", TransportTCP, TransportGRPCUnary, TransportGRPCStream:
		default:
			bad(f+".transport", "%q must be %q, %q or %q", ns.Transport, TransportTCP, TransportGRPCUnary, TransportGRPCStream)
		}
		lookup := automaton.Lookup
		if c.AllowBroken {
			lookup = automaton.LookupAny
		}
		_, perr := lookup(ns.Protocol)
		if perr != nil {
			bad(f+".protocol", "%v", perr)
		}
		svc, serr := service.Lookup(ns.Service)
		if serr != nil {
			bad(f+".service", "%v", serr)
		}
		if perr == nil && serr == nil {
			if err := automaton.CheckService(ns.Protocol, svc); err != nil {
				bad(f+".service", "%v", err)
			} else if len(ns.Shards) == 0 {
				if err := automaton.CheckDeployment(ns.Protocol, svc, ns.Params, len(c.Nodes), c.Durability); err != nil {
					bad(f+".params", "%v", err)
				}
			}
		}
	}
	c.validateShards(bad)
	c.validateRemotes(bad)
	c.validateCallees(bad)
	c.validateSecurity(bad)
	c.validateLimits(bad)
	return errors.Join(errs...)
}

// validateCallees refuses a namespace that calls (automaton.Caller) a
// namespace this cluster does not have, or one whose protocol does not
// serve nested requests (automaton.NestedCallee): its calls could only
// fail, and its clients would be answered errors for every call.
func (c *Cluster) validateCallees(bad func(field, f string, a ...any)) {
	protocols := map[string]string{}
	for _, ns := range c.Namespaces {
		protocols[ns.Name] = ns.Protocol
	}
	for i, ns := range c.Namespaces {
		for _, callee := range automaton.Callees(ns.Protocol, ns.Params) {
			f := fmt.Sprintf("namespaces[%d].params", i)
			if remote, rns, ok := strings.Cut(callee, "/"); ok {
				// A namespace of another cluster: its protocol is checked
				// by that cluster when the call arrives (SYNOD CALL).
				if _, listed := c.Remote(remote); !listed {
					bad(f, "namespace %q (%s) calls %q, but this cluster file lists no remote cluster %q: add it under remotes (name, nodes' client addresses)",
						ns.Name, ns.Protocol, callee, remote)
				}
				if !nameRE.MatchString(rns) {
					bad(f, "namespace %q (%s) calls %q: %q is not a namespace name", ns.Name, ns.Protocol, callee, rns)
				}
				continue
			}
			p, ok := protocols[callee]
			switch {
			case !ok:
				bad(f, "namespace %q (%s) calls namespace %q, which this cluster does not have: add a namespace %q with a protocol that serves nested requests (paxos), or set the callee parameter",
					ns.Name, ns.Protocol, callee, callee)
			case !automaton.ServesNested(p):
				why := ""
				if r := automaton.NestedRefusal(p); r != "" {
					why = ": " + r
				}
				bad(f, "namespace %q (%s) calls namespace %q, whose protocol %s does not serve nested requests%s", ns.Name, ns.Protocol, callee, p, why)
			}
		}
	}
}

func checkAddr(a string) error {
	host, port, err := net.SplitHostPort(a)
	if err != nil {
		return fmt.Errorf("%q is not host:port", a)
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 1 || p > 65535 {
		return fmt.Errorf("%q: port must be 1-65535", a)
	}
	if host == "" {
		return fmt.Errorf("%q: host is empty", a)
	}
	return nil
}

// Node returns the node with the given id.
func (c *Cluster) Node(id string) (Node, error) {
	for _, n := range c.Nodes {
		if n.ID == id {
			return n, nil
		}
	}
	return Node{}, fmt.Errorf("node %q is not in cluster %q (members: %v)", id, c.Cluster, c.NodeIDs())
}

// NodeIDs lists member ids in file order.
func (c *Cluster) NodeIDs() []automaton.NodeID {
	out := make([]automaton.NodeID, len(c.Nodes))
	for i, n := range c.Nodes {
		out[i] = automaton.NodeID(n.ID)
	}
	return out
}

// NodeDataDir is where node id keeps its data.
func (c *Cluster) NodeDataDir(id string) string { return filepath.Join(c.DataDir, id) }
