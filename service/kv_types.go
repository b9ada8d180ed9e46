package service

import (
	"crypto/sha256"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// The values a key holds (package documentation, "The KV data model").

// kvType is a value's type; its byte is part of the snapshot, delta and
// hash encodings.
type kvType uint8

const (
	tString kvType = iota
	tHash
	tList
	tSet
	tZSet
	tStream // kv_stream.go
)

var kvTypeNames = [...]string{"string", "hash", "list", "set", "zset", "stream"}

func (t kvType) String() string {
	if int(t) < len(kvTypeNames) {
		return kvTypeNames[t]
	}
	return fmt.Sprintf("kvType(%d)", t)
}

// WrongType is Redis's error for an operation on a key of another type.
const WrongType = "WRONGTYPE Operation against a key holding the wrong kind of value"

func wrongType() Result { return Result{Type: ResultErr, Err: WrongType} }

// kvEntry is a stored value, the version of its last change and its
// deadline (Unix ms, 0 for none), and its generation. A string's bytes are in v (c nil); every
// other type's content is in c.
type kvEntry struct {
	v   []byte
	c   *coll
	at  uint64
	gen uint64 // the key's version for WATCH (kv_version.go)
	exp int64
}

func (e kvEntry) typ() kvType {
	if e.c == nil {
		return tString
	}
	return e.c.t
}

// coll is a hash, list, set or sorted set. A state changes it in place only
// when own is the state's token (kv_clone.go); otherwise it copies it first
// (KVState.mutable).
type coll struct {
	own *int
	t   kvType
	h   map[string][]byte   // hash: field -> value
	l   [][]byte            // list
	set map[string]struct{} // set
	z   map[string]float64  // sorted set: member -> score
	zs  []zel               // sorted set in (score, member) order
	st  *stream             // stream (kv_stream.go)
}

// zel is one sorted-set element.
type zel struct {
	score float64
	m     string
}

func zless(a, b zel) int {
	switch {
	case a.score < b.score:
		return -1
	case a.score > b.score:
		return 1
	}
	return strings.Compare(a.m, b.m)
}

func newColl(t kvType, own *int) *coll {
	c := &coll{own: own, t: t}
	switch t {
	case tHash:
		c.h = map[string][]byte{}
	case tSet:
		c.set = map[string]struct{}{}
	case tZSet:
		c.z = map[string]float64{}
	case tStream:
		c.st = &stream{}
	}
	return c
}

func (c *coll) clone(own *int) *coll {
	n := &coll{own: own, t: c.t, h: maps.Clone(c.h), set: maps.Clone(c.set), z: maps.Clone(c.z)}
	n.l = slices.Clone(c.l)
	n.zs = slices.Clone(c.zs)
	if c.st != nil {
		n.st = c.st.clone()
	}
	return n
}

// size is the element count (fields, elements, members).
func (c *coll) size() int {
	switch c.t {
	case tHash:
		return len(c.h)
	case tList:
		return len(c.l)
	case tSet:
		return len(c.set)
	case tZSet:
		return len(c.zs)
	case tStream:
		return int(c.st.length)
	}
	return 0
}

// live returns key's value unless it is absent or expired at the
// operation's time.
func (s *KVState) live(key string) (kvEntry, bool) {
	e, ok := s.m[key]
	if !ok || (e.exp != 0 && e.exp <= s.now) {
		return kvEntry{}, false
	}
	return e, true
}

// liveOf returns key's collection of type t: nil without a key, a
// WRONGTYPE error for another type.
func (s *KVState) liveOf(key string, t kvType) (kvEntry, *coll, *Result) {
	e, ok := s.live(key)
	if !ok {
		return e, nil, nil
	}
	if e.typ() != t {
		r := wrongType()
		return e, nil, &r
	}
	return e, e.c, nil
}

// mutable returns key's collection of type t for changing in place,
// creating an empty one when create is set and the key is absent (nil
// otherwise), copying it first when another state may share it. The
// caller ends with s.store(key, e, c).
func (s *KVState) mutable(key string, t kvType, create bool) (kvEntry, *coll, *Result) {
	e, c, bad := s.liveOf(key, t)
	if bad != nil {
		return e, nil, bad
	}
	if c == nil {
		if !create {
			return e, nil, nil
		}
		return kvEntry{}, newColl(t, s.tok), nil
	}
	if c.own != s.tok {
		c = c.clone(s.tok)
	}
	return e, c, nil
}

// removeMembers removes each argument from key's collection of type t
// with del (true when it was there) and answers how many were (HDEL, SREM,
// ZREM).
func (s *KVState) removeMembers(op Op, t kvType, del func(c *coll, m string) bool) Result {
	e, c, bad := s.mutable(op.Key, t, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	n := 0
	for _, m := range op.Args {
		if del(c, string(m)) {
			n++
		}
	}
	if n > 0 {
		s.store(op.Key, e, c)
	}
	return Int(int64(n))
}

// store records a changed collection (its version, hash, deadline kept),
// or deletes the key when the collection became empty.
func (s *KVState) store(key string, e kvEntry, c *coll) {
	if c.size() == 0 && c.t != tStream { // an empty stream stays, as in Redis
		if _, ok := s.m[key]; ok {
			s.del(key)
		}
		return
	}
	e.c, e.v = c, nil
	s.put(key, e)
}

// encode appends the value's canonical form: its type, then the string's
// bytes or the collection's elements in order (fields and set members
// sorted, list in order, sorted set by score then member).
func (e kvEntry) encode(w *wire.Encoder) {
	t := e.typ()
	w.Byte(byte(t))
	switch t {
	case tString:
		w.Bytes(e.v)
	case tHash:
		ks := slices.Sorted(maps.Keys(e.c.h))
		w.Uvarint(uint64(len(ks)))
		for _, k := range ks {
			w.String(k)
			w.Bytes(e.c.h[k])
		}
	case tList:
		w.Uvarint(uint64(len(e.c.l)))
		for _, x := range e.c.l {
			w.Bytes(x)
		}
	case tSet:
		ks := slices.Sorted(maps.Keys(e.c.set))
		w.Uvarint(uint64(len(ks)))
		for _, k := range ks {
			w.String(k)
		}
	case tZSet:
		w.Uvarint(uint64(len(e.c.zs)))
		for _, z := range e.c.zs {
			w.String(z.m)
			w.Uvarint(math.Float64bits(z.score))
		}
	case tStream:
		e.c.st.encode(w)
	}
}

// decodeValue reads encode's output into an entry owned by own.
func decodeValue(d *wire.Decoder, own *int) kvEntry {
	t := kvType(d.Byte())
	if d.Err() != nil {
		return kvEntry{}
	}
	switch t {
	case tString:
		v := d.BytesCopy()
		if v == nil {
			v = []byte{}
		}
		return kvEntry{v: v}
	case tHash, tList, tSet, tZSet:
	case tStream:
		return kvEntry{c: &coll{own: own, t: tStream, st: decodeStream(d)}}
	default:
		d.Fail(fmt.Errorf("kv: value type %d", t))
		return kvEntry{}
	}
	c := newColl(t, own)
	n := d.Count(1<<40, 1)
	for i := 0; i < n && d.Err() == nil; i++ {
		switch t {
		case tHash:
			k := d.String()
			c.h[k] = nonNil(d.BytesCopy())
		case tList:
			c.l = append(c.l, nonNil(d.BytesCopy()))
		case tSet:
			c.set[d.String()] = struct{}{}
		case tZSet:
			m, sc := d.String(), math.Float64frombits(d.Uvarint())
			if math.IsNaN(sc) {
				d.Fail(fmt.Errorf("kv: NaN score"))
			}
			c.z[m] = sc
			c.zs = append(c.zs, zel{sc, m})
		}
	}
	if t == tZSet {
		slices.SortFunc(c.zs, zless)
		if len(c.zs) != len(c.z) {
			d.Fail(fmt.Errorf("kv: duplicate sorted set member"))
		}
	}
	if d.Err() == nil && c.size() == 0 {
		d.Fail(fmt.Errorf("kv: empty %v", t))
	}
	return kvEntry{c: c}
}

func nonNil(b []byte) []byte {
	if b == nil {
		return []byte{}
	}
	return b
}

// tagTyped separates the entry hashes of typed values (and strings with a
// deadline) from EntryHash's (tag 0x00, merkle.go).
const tagTyped = 0x03

// hash is the entry's Merkle entry hash: a string without a deadline as
// before typed values existed (EntryHash of its bytes), everything else
// SHA-256(0x03 ‖ uvarint len(key) ‖ key ‖ varint deadline ‖ encoding).
func (e kvEntry) hash(key string) [32]byte {
	if e.c == nil && e.exp == 0 {
		return EntryHash(key, e.v)
	}
	w := wire.Encoder{B: []byte{tagTyped}}
	w.String(key)
	w.Varint(e.exp)
	e.encode(&w)
	return sha256.Sum256(w.B)
}

// Argument parsing shared by the types.

const errNotInt = "value is not an integer or out of range"
const errNotFloat = "value is not a valid float"
const errSyntax = "syntax error"

func parseInt(b []byte) (int64, bool) {
	n, err := strconv.ParseInt(string(b), 10, 64)
	return n, err == nil
}

// parseFloat parses a float as Redis does (inf, +inf, -inf accepted; NaN
// refused).
func parseFloat(b []byte) (float64, bool) {
	s := strings.ToLower(string(b))
	switch s {
	case "inf", "+inf", "infinity", "+infinity":
		return math.Inf(1), true
	case "-inf", "-infinity":
		return math.Inf(-1), true
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil || math.IsNaN(f) || s == "" || strings.ContainsAny(s, " \t") {
		return 0, false
	}
	return f, true
}

// formatFloat formats a score as Redis 7.0 does (printf's %.17g: 3.5,
// 0.10000000000000001, 1e+20), "inf" and "-inf". (Redis 7.2 prints the
// shortest form instead; the compatibility suite compares with the
// redis-server Debian ships, 7.0.)
func formatFloat(f float64) []byte {
	switch {
	case math.IsInf(f, 1):
		return []byte("inf")
	case math.IsInf(f, -1):
		return []byte("-inf")
	}
	return []byte(strconv.FormatFloat(f, 'g', 17, 64))
}

// span turns Redis's inclusive start and stop indexes (negative from the
// end) over n elements into a half-open [lo, hi), empty when out of range.
func span(start, stop int64, n int) (int, int) {
	ln := int64(n)
	if start < 0 {
		start += ln
	}
	if stop < 0 {
		stop += ln
	}
	start = max(start, 0)
	if stop >= ln {
		stop = ln - 1
	}
	if start > stop || start >= ln {
		return 0, 0
	}
	return int(start), int(stop) + 1
}

// argInts parses the arguments at the given indexes as integers.
func argInts(op Op, idx ...int) ([]int64, bool) {
	out := make([]int64, len(idx))
	for i, j := range idx {
		n, ok := parseInt(op.Args[j])
		if !ok {
			return nil, false
		}
		out[i] = n
	}
	return out, true
}

// checkInts is a Validate check: the arguments at idx are integers.
func checkInts(idx ...int) func(Op) error {
	return func(op Op) error {
		for _, j := range idx {
			if j < len(op.Args) {
				if _, ok := parseInt(op.Args[j]); !ok {
					return fmt.Errorf(errNotInt)
				}
			}
		}
		return nil
	}
}

// pickIndex is a deterministic pseudo-random index in [0, n) drawn from the
// state's version and the key (SPOP: every replica must remove the same
// member).
func (s *KVState) pickIndex(key string, i, n int) int {
	h := leafHash(key) ^ (s.version+uint64(i))*0x9e3779b97f4a7c15
	h ^= h >> 29
	h *= 0xbf58476d1ce4e5b9
	h ^= h >> 32
	return int(h % uint64(n))
}
