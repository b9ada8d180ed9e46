package gateway

import (
	"hash/maphash"
	"sync"
	"time"
)

// Key access times for OBJECT IDLETIME and TOUCH (issue 34).
//
// Decision: a key's last access time is this node's, kept by its gateway,
// not replicated state. Redis keeps it in the key's object (the LRU clock)
// and a Redis replica keeps its own, which the master's reads do not
// update; Synod's replicated state machine has no clock (protocol code is
// pure) and reads need not reach the log, so the gateway notes, per
// namespace and key, when it last ran a command naming the key. As in
// Redis, TYPE, TTL, PTTL, EXPIRETIME, PEXPIRETIME, EXISTS, OBJECT and
// MEMORY do not count as an access (Redis's LOOKUP_NOTOUCH) and TOUCH does.
// So OBJECT IDLETIME answers the seconds since a command through this node
// named the key; a key no command through this node named (written through
// another node, or forgotten below) answers the seconds since the table
// began: this node's start, or its last clearing. A shard gives at most
// maxAccessKeys keys an entry and is cleared when it has (a key dropped
// by DEL or UNLINK keeps its entry's slot until then), and by FLUSHALL
// and FLUSHDB; DEL and UNLINK drop their keys.
//
// OBJECT FREQ answers Redis's error for a server whose maxmemory-policy is
// not LFU: Synod evicts nothing (maxmemory-policy noeviction).
//
// A key's entry is found by a 64-bit seeded hash of its namespace and
// name (accessTable.hash, which also picks the shard), not by the name:
// every command naming a key notes it, and the string map's lookup (the
// name copied into a scratch key, hashed again by the map, compared byte
// by byte) was the gateway's largest piece of CPU outside system calls
// under SET at 64 clients (2.3 % of a 3-node ESDS cluster's CPU; issue
// 28, session 59). Two keys whose hashes collide (about n²/2⁶⁵ for n
// keys) share an entry: OBJECT IDLETIME of one reads the other's last
// access, and a DEL of one forgets the other's; nothing else reads it.

const (
	accessShards  = 16
	maxAccessKeys = 1 << 16 // per shard
)

type accessTable struct {
	now    func() int64 // unix seconds (a test's clock)
	seed   maphash.Seed
	shards [accessShards]accessShard
}

type accessShard struct {
	mu    sync.Mutex
	m     map[uint64]int32 // hash of namespace and key (accessTable.hash) -> its entry in at
	at    []int64          // by entry: unix seconds of the key's last access
	since int64            // unix seconds when m began
}

func newAccessTable() *accessTable {
	t := &accessTable{seed: maphash.MakeSeed(), now: func() int64 { return time.Now().Unix() }}
	now := t.now()
	for i := range t.shards {
		t.shards[i].since = now
	}
	return t
}

// noTouch are the commands that name keys without accessing them.
var noTouch = map[string]bool{"type": true, "ttl": true, "pttl": true, "expiretime": true,
	"pexpiretime": true, "exists": true, "object": true, "memory": true}

// hash identifies key of namespace ns in the table (its shard and its
// entry there; see the top of this file for collisions).
func (t *accessTable) hash(ns string, key []byte) uint64 {
	var h maphash.Hash
	h.SetSeed(t.seed)
	h.WriteString(ns)
	h.WriteByte(0)
	h.Write(key)
	return h.Sum64()
}

func (t *accessTable) shard(h uint64) *accessShard { return &t.shards[h%accessShards] }

// note records a call of cmd on namespace ns. Called before it runs.
func (t *accessTable) note(ns string, cmd *command, args [][]byte) { t.noteAt(ns, cmd, args, t.now()) }

// noteAt is note at now, unix seconds from t.now (a pipelined batch reads
// it once for all its commands).
func (t *accessTable) noteAt(ns string, cmd *command, args [][]byte, now int64) {
	switch {
	case cmd.name == "flushall" || cmd.name == "flushdb":
		t.clear()
		return
	case noTouch[cmd.name] || (cmd.first <= 0 && cmd.getkeys == nil):
		return
	}
	drop := cmd.name == "del" || cmd.name == "unlink"
	each := func(key []byte) {
		h := t.hash(ns, key)
		s := t.shard(h)
		s.mu.Lock()
		switch {
		case drop:
			delete(s.m, h)
		default:
			if s.m == nil || len(s.at) >= maxAccessKeys {
				s.m, s.at, s.since = make(map[uint64]int32), s.at[:0], now
			}
			// A key with an entry has its time set there (storing the
			// time in the map made a new key string for every command on
			// a key noted in an earlier second, when the map was keyed by
			// name: one allocation per SET of redis-benchmark -r 10000).
			if i, ok := s.m[h]; ok {
				s.at[i] = now
			} else {
				s.m[h] = int32(len(s.at))
				s.at = append(s.at, now)
			}
		}
		s.mu.Unlock()
	}
	if cmd.getkeys != nil {
		for _, k := range cmd.getkeys(args) {
			each(k)
		}
		return
	}
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
	for i := cmd.first; i <= last && i < len(args); i += max(cmd.step, 1) {
		each(args[i])
	}
}

// idle is the seconds since key of ns was last accessed through this node.
func (t *accessTable) idle(ns string, key []byte) int64 {
	h := t.hash(ns, key)
	s := t.shard(h)
	s.mu.Lock()
	at := s.since
	if i, ok := s.m[h]; ok {
		at = s.at[i]
	}
	s.mu.Unlock()
	return max(t.now()-at, 0)
}

func (t *accessTable) clear() {
	now := t.now()
	for i := range t.shards {
		s := &t.shards[i]
		s.mu.Lock()
		s.m, s.at, s.since = nil, nil, now
		s.mu.Unlock()
	}
}
