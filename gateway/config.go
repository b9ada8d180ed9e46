package gateway

import (
	"fmt"
	"net"
	"slices"
	"strconv"
	"strings"
	"sync"

	"github.com/synod-dev/synod/config"
)

// Redis configuration parameters beside the limits (limits.go).
//
// Encoding tunables (*-max-listpack-*, their *-max-ziplist-* aliases,
// list-compress-depth, set-max-intset-entries, stream-node-max-*,
// hll-sparse-max-bytes): Redis uses them to choose a compact encoding for
// small values. Synod has one encoding per type (service/kv_types.go), so
// they change nothing here, except hll-sparse-max-bytes: HyperLogLogs keep
// Redis's two encodings, and each PFADD and PFMERGE carries this node's
// value in its operation (hll.go). CONFIG SET checks and keeps them per node and
// CONFIG GET shows them, as other Redis-compatible servers do, so that
// clients and test suites that tune them work unchanged. The table also
// holds busy-reply-threshold (alias lua-time-limit), in milliseconds: each
// EVAL and FCALL carries the busy mark it gives (script.go).
//
// Persistence: Synod writes every change through its log, fsynced before
// the reply when the cluster file says durability: fsync. So CONFIG GET
// appendonly answers yes (appendfsync always) under fsync and no under
// memory. CONFIG SET of these accepts the value they already have and
// refuses any other, naming the cluster file's durability as the place to
// change it. save answers "" (Synod takes no RDB snapshots) until CONFIG
// SET sets a schedule, which only fsync durability keeps (maxmemory.go).

// tunable is one parameter of the table.
type tunable struct {
	name    string
	aliases []string
	def     string
	// memory: the value may carry Redis's units (1k, 2mb, ...).
	memory   bool
	min, max int64
}

var tunables = []tunable{
	{name: "hash-max-listpack-entries", aliases: []string{"hash-max-ziplist-entries"}, def: "128", min: 0, max: 1<<63 - 1},
	{name: "hash-max-listpack-value", aliases: []string{"hash-max-ziplist-value"}, def: "64", memory: true, min: 0, max: 1<<63 - 1},
	{name: "list-max-listpack-size", aliases: []string{"list-max-ziplist-size"}, def: "-2", min: -1 << 31, max: 1<<31 - 1},
	{name: "list-compress-depth", def: "0", min: 0, max: 1<<31 - 1},
	{name: "set-max-intset-entries", def: "512", min: 0, max: 1<<63 - 1},
	{name: "zset-max-listpack-entries", aliases: []string{"zset-max-ziplist-entries"}, def: "128", min: 0, max: 1<<63 - 1},
	{name: "zset-max-listpack-value", aliases: []string{"zset-max-ziplist-value"}, def: "64", memory: true, min: 0, max: 1<<63 - 1},
	{name: "stream-node-max-bytes", def: "4096", memory: true, min: 0, max: 1<<63 - 1},
	{name: "stream-node-max-entries", def: "100", min: 0, max: 1<<63 - 1},
	{name: "hll-sparse-max-bytes", def: "3000", memory: true, min: 0, max: 1<<63 - 1},
	// Not an encoding: the time after which a script is busy (script.go
	// turns it into the eval operation's busy mark, service/kv_script_busy.go).
	{name: "busy-reply-threshold", aliases: []string{"lua-time-limit"}, def: "5000", min: 0, max: 1<<63 - 1},
	// Not an encoding either: Redis's replication backlog (maxmemory.go).
	{name: "repl-backlog-size", def: "1048576", memory: true, min: 1, max: 1<<63 - 1},
}

// tunableByName maps every name and alias to its entry.
var tunableByName = func() map[string]*tunable {
	m := map[string]*tunable{}
	for i := range tunables {
		t := &tunables[i]
		m[t.name] = t
		for _, a := range t.aliases {
			m[a] = t
		}
	}
	return m
}()

// tunableValues holds a server's current values (defaults until set).
type tunableValues struct {
	mu sync.Mutex
	v  map[string]string // canonical name -> value
}

func (tv *tunableValues) get(name string) string {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	if v, ok := tv.v[name]; ok {
		return v
	}
	return tunableByName[name].def
}

func (tv *tunableValues) set(name, value string) {
	tv.mu.Lock()
	defer tv.mu.Unlock()
	if tv.v == nil {
		tv.v = map[string]string{}
	}
	tv.v[name] = value
}

// parse checks value for t as Redis does and returns the value CONFIG GET
// then shows (Redis shows numbers without their units).
func (t *tunable) parse(value string) (string, error) {
	var n int64
	if t.memory {
		v, err := config.ParseByteSize(value)
		if err != nil || v > 1<<63-1 {
			return "", fmt.Errorf("argument must be a memory value")
		}
		n = int64(v)
	} else {
		v, err := strconv.ParseInt(value, 10, 64)
		if err != nil {
			return "", fmt.Errorf("argument couldn't be parsed into an integer")
		}
		n = v
	}
	if n < t.min || n > t.max {
		return "", fmt.Errorf("argument must be between %d and %d inclusive", t.min, t.max)
	}
	return strconv.FormatInt(n, 10), nil
}

// durability is the node's durability as INFO's synod section reports it
// ("fsync" or "memory"; "" when the backend does not say).
func (s *Server) durability() string {
	return s.b.Info()["synod"]["durability"]
}

// persistenceParams are save, appendonly and appendfsync as they follow
// from the durability.
func (s *Server) persistenceParams() map[string]string {
	aof, fsync := "no", "no"
	if s.durability() == "fsync" {
		aof, fsync = "yes", "always"
	}
	return map[string]string{"save": "", "appendonly": aof, "appendfsync": fsync}
}

// configParams is CONFIG GET's table: fixed facts, the limits, the
// persistence parameters and the tunables (under every alias). The facts:
// one database; no idle timeout; no eviction (maxmemory-policy
// noeviction, maxmemory-clients 0; maxmemory-samples is Redis's default and
// selects nothing here; maxmemory and save: maxmemory.go); bind and port are the
// addresses this node's RESP listeners serve; replicaof (slaveof) is empty,
// as a Synod node is no Redis replica. CONFIG SET accepts each of them set
// to the value shown (limits.go).
func (c *conn) configParams() map[string]string {
	_, port, _ := net.SplitHostPort(c.nc.LocalAddr().String())
	p := map[string]string{
		"databases":         "1",
		"timeout":           "0",
		"maxmemory":         "0",
		"maxmemory-policy":  "noeviction",
		"maxmemory-clients": "0",
		"maxmemory-samples": "5",
		"bind":              strings.Join(c.s.listenHosts(), " "),
		"port":              port,
		"replicaof":         "",
		"slaveof":           "",
	}
	for k, v := range c.s.limitParams() {
		p[k] = v
	}
	for k, v := range c.s.persistenceParams() {
		p[k] = v
	}
	for name, t := range tunableByName {
		p[name] = c.s.tun.get(t.name)
	}
	p["notify-keyspace-events"] = notifyFlagsString(int(c.s.notify.flags.Load()))
	for k, v := range c.s.memoryParams() {
		p[k] = v
	}
	return p
}

// checkOtherParam checks CONFIG SET name value for a parameter that is not
// a limit. It returns the function that applies it (nil: nothing to keep),
// or false when name is not one of them, or the error to answer.
func (s *Server) checkOtherParam(name, value string) (apply func(), known bool, err error) {
	if name == "notify-keyspace-events" {
		f, err := parseNotifyFlags(value)
		if err != nil {
			return nil, true, err
		}
		return func() { s.notify.flags.Store(int64(f)) }, true, nil
	}
	if apply, known, err := s.checkMemoryParam(name, value); known {
		return apply, known, err
	}
	if t, ok := tunableByName[name]; ok {
		v, err := t.parse(value)
		if err != nil {
			return nil, true, err
		}
		return func() { s.tun.set(t.name, v) }, true, nil
	}
	if cur, ok := s.persistenceParams()[name]; ok {
		if strings.EqualFold(strings.Join(strings.Fields(value), " "), cur) {
			return nil, true, nil
		}
		d := s.durability()
		if d == "" {
			d = "unknown"
		}
		return nil, true, fmt.Errorf("Synod's persistence is its replicated log, set by the cluster file's durability field (this node: %s, which is %s %s); it cannot be changed by CONFIG SET", d, name, cur)
	}
	return nil, false, nil
}

// listenHosts are the hosts of the server's listeners, sorted, once each.
func (s *Server) listenHosts() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for l := range s.listeners {
		if h, _, err := net.SplitHostPort(l.Addr().String()); err == nil && !slices.Contains(out, h) {
			out = append(out, h)
		}
	}
	slices.Sort(out)
	return out
}
