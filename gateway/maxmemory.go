package gateway

import (
	"errors"
	"fmt"
	"runtime/metrics"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// maxmemory, save and the other CONFIG parameters Redis's introspection
// tests set (issue 34). Decisions, each per node as Redis's are per
// process:
//
//   - maxmemory is enforced with Redis's noeviction policy: while the
//     node's Go heap in use (INFO's used_memory, read at most every 100 ms)
//     is above the limit, the node refuses commands flagged denyoom, and
//     every command queued in MULTI, with Redis's OOM error; reads,
//     deletes and the rest go on. 0 (the default) is no limit. The limit
//     guards the node's process, not the namespace's size: a write refused
//     at a node over its limit is accepted at a node under its own, and
//     its value then reaches every replica.
//   - maxmemory-policy accepts noeviction only: Synod evicts no keys
//     (which keys to evict would have to be one replicated decision, and a
//     node's memory is its own). maxmemory-clients (client eviction) is
//     parsed as Redis does (bytes, or a percentage up to 100%) and accepted
//     as 0 only: Synod evicts no clients either.
//   - save: under fsync durability every write is on disk before its reply,
//     which keeps the promise of any snapshot schedule ("save 3000 5":
//     changes reach disk within 3000 s), so any well-formed schedule is
//     accepted and shown; under memory durability nothing reaches disk and
//     only save "" is accepted (config.go persistenceParams).
//   - repl-backlog-size sizes Redis's buffer for its replicas' partial
//     resynchronisation; Synod's replicas follow its log instead, so the
//     value is kept and shown and changes nothing, like the encoding
//     tunables (config.go).
//   - key-load-delay and rdb-key-save-delay are Redis's hidden debugging
//     delays of RDB loading and saving: CONFIG GET shows them (0: Synod
//     loads and saves no RDB) when named exactly, never for a pattern, and
//     CONFIG SET accepts 0 only.
//   - port is the node's address in the cluster file, which clients and
//     the other nodes use: CONFIG SET refuses another port.

// memLimit is the node's maxmemory and its view of the heap in use.
type memLimit struct {
	max    atomic.Int64 // bytes; 0: none
	mu     sync.Mutex
	at     time.Time // when used was read
	used   uint64
	sample []metrics.Sample
}

// heapInUse is the Go heap's live objects in bytes (as used_memory),
// read again when the last reading is older than 100 ms.
func (m *memLimit) heapInUse() uint64 {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.at) < 100*time.Millisecond {
		return m.used
	}
	if m.sample == nil {
		m.sample = []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	}
	metrics.Read(m.sample)
	if m.sample[0].Value.Kind() == metrics.KindUint64 {
		m.used = m.sample[0].Value.Uint64()
	}
	m.at = time.Now()
	return m.used
}

// oomErr is Redis's shared.oomerr.
const oomErr = service.OOMError

// over says whether a limit is set and the heap is above it.
func (m *memLimit) over() bool {
	max := m.max.Load()
	return max > 0 && m.heapInUse() > uint64(max)
}

// outOfMemory reports whether cmd is refused for memory now: a limit is
// set, the heap is above it, and cmd is denyoom or queued in MULTI.
func (c *conn) outOfMemory(cmd *command) bool {
	max := c.s.mem.max.Load()
	if max <= 0 {
		return false
	}
	queued := c.multi.open && !multiCommands[cmd.name]
	if !queued && !slices.Contains(cmd.flags, "denyoom") {
		return false
	}
	return c.s.mem.heapInUse() > uint64(max)
}

// refuseOOM answers Redis's OOM error for a command outOfMemory refuses
// (marking an open MULTI, as rejectCommand does).
func (c *conn) refuseOOM(cmd *command) bool {
	if !c.outOfMemory(cmd) {
		return false
	}
	c.queueError()
	c.writeError(oomErr)
	return true
}

// hiddenParams are shown by CONFIG GET only when named exactly.
var hiddenParams = map[string]string{"key-load-delay": "0", "rdb-key-save-delay": "0"}

// memoryParams are CONFIG GET's maxmemory and save values.
func (s *Server) memoryParams() map[string]string {
	p := map[string]string{"maxmemory": strconv.FormatInt(s.mem.max.Load(), 10)}
	if sv := s.saveParam.Load(); sv != nil {
		p["save"] = *sv
	}
	return p
}

// checkMemoryParam is checkOtherParam for maxmemory, maxmemory-policy,
// maxmemory-clients, save and the hidden parameters.
func (s *Server) checkMemoryParam(name, value string) (apply func(), known bool, err error) {
	switch name {
	case "maxmemory":
		v, err := config.ParseByteSize(value)
		if err != nil || v > 1<<63-1 {
			return nil, true, errors.New("argument must be a memory value")
		}
		return func() { s.mem.max.Store(int64(v)) }, true, nil
	case "maxmemory-policy":
		switch strings.ToLower(value) {
		case "noeviction":
			return nil, true, nil
		case "volatile-lru", "volatile-lfu", "volatile-random", "volatile-ttl", "allkeys-lru", "allkeys-lfu", "allkeys-random":
			return nil, true, errors.New("Synod evicts no keys (which keys to evict would have to be a replicated decision): only noeviction, which refuses writes over maxmemory")
		}
		return nil, true, errors.New("argument(s) must be one of the following: volatile-lru, volatile-lfu, volatile-random, volatile-ttl, allkeys-lru, allkeys-lfu, allkeys-random, noeviction")
	case "maxmemory-clients":
		zero := false
		if p, ok := strings.CutSuffix(value, "%"); ok {
			n, err := strconv.ParseInt(p, 10, 64)
			if err != nil || n < 0 {
				return nil, true, errors.New("argument must be a memory or percent value")
			}
			if n > 100 {
				return nil, true, errors.New("percentage argument must be less or equal to 100")
			}
			zero = n == 0
		} else {
			v, err := config.ParseByteSize(value)
			if err != nil {
				return nil, true, errors.New("argument must be a memory or percent value")
			}
			zero = v == 0
		}
		if !zero {
			return nil, true, errors.New("Synod evicts no clients: only maxmemory-clients 0 is accepted")
		}
		return nil, true, nil
	case "save":
		f := strings.Fields(value)
		if len(f)%2 != 0 {
			return nil, true, errors.New("Invalid save parameters")
		}
		for _, x := range f {
			if n, err := strconv.ParseInt(x, 10, 64); err != nil || n < 0 {
				return nil, true, errors.New("Invalid save parameters")
			}
		}
		v := strings.Join(f, " ")
		if v != "" && s.durability() != "fsync" {
			d := s.durability()
			if d == "" {
				d = "unknown"
			}
			return nil, true, fmt.Errorf("Synod takes no RDB snapshots and this node's durability (%s, the cluster file's durability field) writes nothing to disk: only save \"\" is accepted", d)
		}
		return func() { s.saveParam.Store(&v) }, true, nil
	}
	if _, ok := hiddenParams[name]; ok {
		if n, err := strconv.ParseInt(value, 10, 64); err != nil || n != 0 {
			return nil, true, fmt.Errorf("a debugging delay of Redis's RDB loading and saving; Synod loads and saves no RDB: only 0 is accepted")
		}
		return nil, true, nil
	}
	return nil, false, nil
}
