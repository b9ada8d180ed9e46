package service

import (
	"cmp"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/wire"
)

// Keyspace operations (package documentation, "Keys" and "SCAN's cursor").

func init() {
	renameKeys := func(op Op) []string { return []string{string(op.Args[0])} }
	addKVOps(map[string]kvOp{
		"type":      {read: true, run: (*KVState).opType},
		"rename":    {min: 1, max: 1, keys: renameKeys, run: (*KVState).opRename},
		"renamenx":  {min: 1, max: 1, keys: renameKeys, run: (*KVState).opRename},
		"keys":      {read: true, min: 1, max: 2, keyspace: true, check: checkServedAt(1), run: (*KVState).opKeys},
		"scan":      {read: true, min: 1, max: 9, keyspace: true, check: checkScan, run: (*KVState).opScan},
		"dbsize":    {read: true, max: 1, keyspace: true, check: checkServedAt(0), run: (*KVState).opDBSize},
		"randomkey": {read: true, max: 1, keyspace: true, check: checkServedAt(0), run: (*KVState).opRandomKey},
		"flushdb":   {max: 1, keyspace: true, check: checkServedAt(0), run: (*KVState).opFlushDB},
		"dbinfo":    {read: true, max: 1, keyspace: true, check: checkServedAt(0), run: (*KVState).opDBInfo},
		"memusage":  {read: true, run: (*KVState).opMemUsage},
	})
}

// opMemUsage is MEMORY USAGE: an estimate of the bytes the key holds, the
// length of its key and of its value's canonical encoding (snapshots and
// deltas carry that form) plus a fixed per-key overhead; nil without a key.
// Redis counts its allocator's bytes, which Synod does not track.
func (s *KVState) opMemUsage(op Op) Result {
	e, ok := s.live(op.Key)
	if !ok {
		return Nil()
	}
	var w wire.Encoder
	e.encode(&w)
	return Int(int64(len(op.Key) + len(w.B) + memUsageOverhead))
}

// memUsageOverhead is MEMORY USAGE's fixed cost of a key: its entry in the
// keyspace map, version and deadline.
const memUsageOverhead = 48

func (s *KVState) opType(op Op) Result {
	e, ok := s.live(op.Key)
	if !ok {
		return Bytes([]byte("none"))
	}
	return Bytes([]byte(e.typ().String()))
}

// opRename is RENAME and RENAMENX: the value and its deadline move; both
// keys get new versions.
func (s *KVState) opRename(op Op) Result {
	e, ok := s.m[op.Key]
	if !ok {
		return Errorf("no such key")
	}
	dst := string(op.Args[0])
	nx := op.Kind == "renamenx"
	if dst == op.Key {
		if nx {
			return Int(0)
		}
		return OK()
	}
	if _, exists := s.m[dst]; exists && nx {
		return Int(0)
	}
	s.del(op.Key)
	if e.c != nil && e.c.own != s.tok {
		e.c = e.c.clone(s.tok)
	}
	s.put(dst, e)
	if nx {
		return Int(1)
	}
	return OK()
}

// liveKeys lists the keys present at the operation's time, sorted.
func (s *KVState) liveKeys() []string {
	out := make([]string, 0, len(s.m))
	for k, e := range s.m {
		if e.exp == 0 || e.exp > s.now {
			out = append(out, k)
		}
	}
	slices.Sort(out)
	return out
}

func (s *KVState) opKeys(op Op) Result {
	var out [][]byte
	ks := s.liveKeys
	if servedOnly(op, 1) {
		ks = s.servedLiveKeys // kv_served.go
	}
	for _, k := range ks() {
		if globMatch(op.Args[0], []byte(k)) {
			out = append(out, []byte(k))
		}
	}
	return BytesArray(out...)
}

func (s *KVState) opDBSize(op Op) Result {
	n := 0
	if servedOnly(op, 0) {
		return s.dbsizeServed() // kv_served.go
	}
	for _, e := range s.m {
		if e.exp == 0 || e.exp > s.now {
			n++
		}
	}
	return Int(int64(n))
}

// opRandomKey picks from the operation's environment (any answer is a
// valid random pick; a read changes nothing).
func (s *KVState) opRandomKey(op Op) Result {
	ks := s.liveKeys
	if servedOnly(op, 0) {
		ks = s.servedLiveKeys
	}
	return s.randomOf(ks())
}

func (s *KVState) randomOf(ks []string) Result {
	if len(ks) == 0 {
		return Nil()
	}
	return Bytes([]byte(ks[s.env.Rand().IntN(len(ks))]))
}

// opFlushDB deletes every key in one write: one new version, the oldest a
// delta can start from (the deleted keys leave no tombstones); gone rises
// above every key's version (kv_version.go).
func (s *KVState) opFlushDB(op Op) Result {
	if servedOnly(op, 0) {
		return s.flushServed() // kv_served.go
	}
	s.version++
	for _, e := range s.m {
		s.gone = max(s.gone, e.gen+1)
	}
	s.flushWT()
	s.m = map[string]kvEntry{}
	s.exps, s.expsShared = nil, false
	s.tomb, s.tombShared, s.tq, s.journal = nil, false, nil, nil
	s.floor = s.version
	if s.tree != nil {
		s.tree, s.treeShared, s.unhashed = NewMerkleTree(s.leaves), false, nil
	}
	return OK()
}

// opDBInfo answers INFO keyspace's figures: keys, keys with a deadline and
// their mean remaining time in ms (0 without any).
func (s *KVState) opDBInfo(op Op) Result {
	var keys, expires, ttl int64
	sign := int64(1)
	count := func(_ string, e kvEntry) {
		if e.exp != 0 && e.exp <= s.now {
			return
		}
		keys += sign
		if e.exp != 0 {
			expires += sign
			ttl += sign * (e.exp - s.now)
		}
	}
	if servedOnly(op, 0) {
		// A shard group's part (kv_served.go): its served keys, the
		// unserved slots' keys taken back out in a second pass.
		if st := s.walk(count); st.skip != nil {
			sign = -1
			for k, e := range s.m {
				if !shard.Reserved(k) && st.unserved(k) {
					count(k, e)
				}
			}
		}
	} else {
		for k, e := range s.m {
			count(k, e)
		}
	}
	avg := int64(0)
	if expires > 0 {
		avg = ttl / expires
	}
	return Array(Int(keys), Int(expires), Int(avg))
}

// scanPos is a key's SCAN position: a 62-bit hash of the key (the Merkle
// leaf hash before reduction).
func scanPos(key string) uint64 { return leafHash(key) }

func leafHash(key string) uint64 { return uint64(leafOf(key, 1<<62)) }

type scanArgs struct {
	cursor      uint64
	match       []byte
	count       int
	typ         string
	slots       bool // "slots FIRST-LAST": a cluster-wide scan's part (kv_served.go)
	first, last int
	cut         bool // the range ends before an unserved slot
}

func parseScan(op Op) (scanArgs, error) {
	a := scanArgs{count: 10}
	c, err := strconv.ParseUint(string(op.Args[0]), 10, 64)
	if err != nil {
		return a, fmt.Errorf("invalid cursor")
	}
	a.cursor = c
	for i := 1; i < len(op.Args); i += 2 {
		if i+1 >= len(op.Args) {
			return a, fmt.Errorf(errSyntax)
		}
		v := op.Args[i+1]
		switch strings.ToLower(string(op.Args[i])) {
		case "match":
			a.match = v
		case "count":
			n, ok := parseInt(v)
			if !ok {
				return a, fmt.Errorf(errNotInt)
			}
			if n < 1 {
				return a, fmt.Errorf(errSyntax)
			}
			a.count = int(min(n, 1<<30))
		case "type":
			a.typ = strings.ToLower(string(v))
		case "slots":
			r, err := shard.ParseSlots(string(v))
			if err != nil || len(r) != 1 {
				return a, fmt.Errorf(errSyntax)
			}
			a.slots, a.first, a.last = true, r[0].First, r[0].Last
		default:
			return a, fmt.Errorf(errSyntax)
		}
	}
	return a, nil
}

func checkScan(op Op) error {
	_, err := parseScan(op)
	return err
}

// pk is a key with its scan position (scanPos, or the slot-ordered
// position of a served scan): a SCAN page is a prefix of these in order.
type pk struct {
	p uint64
	k string
}

// scanPageLen sorts cand by position (then key) and returns how many of
// them make the page: at least count, extended so that keys sharing the
// last position are never split across two pages (the next cursor is that
// position + 1).
func scanPageLen(cand []pk, count int) int {
	slices.SortFunc(cand, func(x, y pk) int {
		if x.p != y.p {
			return cmp.Compare(x.p, y.p)
		}
		return strings.Compare(x.k, y.k)
	})
	n := min(count, len(cand))
	for n < len(cand) && n > 0 && cand[n].p == cand[n-1].p {
		n++
	}
	return n
}

// opScan answers one SCAN page: the keys at positions from the cursor on,
// COUNT of them and every key sharing the last one's position, filtered by
// MATCH and TYPE, and the next cursor (0 at the end).
func (s *KVState) opScan(op Op) Result {
	a, _ := parseScan(op)
	if a.slots {
		return s.scanSlots(a) // kv_served.go
	}
	var cand []pk
	for k, e := range s.m {
		if e.exp != 0 && e.exp <= s.now {
			continue
		}
		if p := scanPos(k); p >= a.cursor {
			cand = append(cand, pk{p, k})
		}
	}
	n := scanPageLen(cand, a.count)
	next := uint64(0)
	if n < len(cand) {
		next = cand[n-1].p + 1
	}
	var keys [][]byte
	for _, c := range cand[:n] {
		if a.match != nil && !globMatch(a.match, []byte(c.k)) {
			continue
		}
		if a.typ != "" && s.m[c.k].typ().String() != a.typ {
			continue
		}
		keys = append(keys, []byte(c.k))
	}
	return Array(Bytes([]byte(strconv.FormatUint(next, 10))), BytesArray(keys...))
}

// globMatch is Redis's glob (stringmatchlen): * any run, ? any byte,
// [abc] [^abc] [a-z] classes, \ escapes the next byte. As Redis 7.0.15
// (CVE-2022-36021) it stops trying longer matches of a * once the rest of
// the pattern failed against the whole remaining string, so that a pattern
// like a*a*a*...b costs polynomial time, not exponential: an operation in
// the log must not stall every replica.
func globMatch(p, s []byte) bool {
	var skipLonger bool
	return globMatchImpl(p, s, &skipLonger, 0)
}

// globMaxNesting bounds the * recursion depth, as Redis does (1000).
const globMaxNesting = 1000

func globMatchImpl(p, s []byte, skipLonger *bool, nesting int) bool {
	if nesting > globMaxNesting {
		return false
	}
	for len(p) > 0 {
		switch p[0] {
		case '*':
			for len(p) > 1 && p[1] == '*' {
				p = p[1:]
			}
			if len(p) == 1 {
				return true
			}
			for ; len(s) > 0; s = s[1:] {
				if globMatchImpl(p[1:], s, skipLonger, nesting+1) {
					return true
				}
				if *skipLonger {
					return false
				}
			}
			*skipLonger = true
			return false
		case '?':
			if len(s) == 0 {
				return false
			}
			s = s[1:]
		case '[':
			if len(s) == 0 {
				return false
			}
			p = p[1:]
			not := len(p) > 0 && p[0] == '^'
			if not {
				p = p[1:]
			}
			match := false
			for len(p) > 0 && p[0] != ']' {
				switch {
				case p[0] == '\\' && len(p) >= 2:
					if p[1] == s[0] {
						match = true
					}
					p = p[2:]
				case len(p) >= 3 && p[1] == '-':
					lo, hi := p[0], p[2]
					if lo > hi {
						lo, hi = hi, lo
					}
					if s[0] >= lo && s[0] <= hi {
						match = true
					}
					p = p[3:]
				default:
					if p[0] == s[0] {
						match = true
					}
					p = p[1:]
				}
			}
			if match == not {
				return false
			}
			s = s[1:]
			if len(p) == 0 {
				return len(s) == 0
			}
		case '\\':
			if len(p) >= 2 {
				p = p[1:]
			}
			fallthrough
		default:
			if len(s) == 0 || p[0] != s[0] {
				return false
			}
			s = s[1:]
		}
		p = p[1:]
	}
	return len(s) == 0
}

// GlobMatch reports whether s matches Redis's glob pattern p (KEYS, SCAN
// MATCH; the gateway's SSCAN, HSCAN and ZSCAN MATCH).
func GlobMatch(p, s []byte) bool { return globMatch(p, s) }
