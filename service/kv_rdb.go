package service

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc64"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Redis's DUMP payload (issue 34): an RDB object (rdb.c rdbSaveObjectType and
// rdbSaveObject of Redis 7.0.15), then the 2-byte RDB version (little
// endian), then the CRC64 (Jones polynomial, reflected, as Redis's crc64.c)
// of what precedes, little endian (cluster.c createDumpPayload and
// verifyDumpPayload).
//
// DUMP writes the encoding Redis 7.0 would choose for the value with its
// default tunables, so a payload is byte for byte the one redis-server
// dumps for the same value where Synod knows the order Redis would keep:
// strings (integer, LZF-compressed above 20 bytes, or raw, as
// rdbSaveRawString), lists (a quicklist of listpacks of at most 8 kB,
// list-max-listpack-size -2, split as RPUSH fills them), sets of integers
// (intset), sorted sets (listpack up to 128 members of at most 64 bytes,
// else the skiplist form from the highest score down) and streams (Synod
// keeps Redis's listpack nodes). Decision: a hash's and a non-integer
// set's members go out in byte order, since Synod keeps no insertion
// (hash) or dict (set) order; Redis restores any order, so only the bytes
// differ from redis-server's DUMP for such values.
//
// RESTORE reads every encoding Redis 7.0 loads for the five data types,
// older ones included (ziplists, quicklist v1, intsets, plain lists, sets,
// hashes, zsets with string scores, RDB_TYPE_STREAM_LISTPACKS of Redis <= 6.2,
// whose entries-added and groups' entries-read are derived as rdbLoadObject
// does), from any RDB version up to 10. Module values and zipmaps are
// refused as "Bad data format".

// RDB object types (rdb.h).
const (
	rdbString           = 0
	rdbList             = 1
	rdbSet              = 2
	rdbZSet             = 3
	rdbHash             = 4
	rdbZSet2            = 5
	rdbListZiplist      = 10
	rdbSetIntset        = 11
	rdbZSetZiplist      = 12
	rdbHashZiplist      = 13
	rdbListQuicklist    = 14
	rdbStreamListpacks  = 15
	rdbHashListpack     = 16
	rdbZSetListpack     = 17
	rdbListQuicklist2   = 18
	rdbStreamListpacks2 = 19
)

// rdbVersion is Redis 7.0's RDB_VERSION.
const rdbVersion = 10

// Redis 7.0's default encoding limits.
const (
	hashMaxListpackEntries = 128
	hashMaxListpackValue   = 64
	zsetMaxListpackEntries = 128
	zsetMaxListpackValue   = 64
	setMaxIntsetEntries    = 512
	quicklistNodeMax       = 8192 // list-max-listpack-size -2
)

var crcJones = crc64.MakeTable(0x95ac9329ac4bc9b5)

// redisCRC64 is crc64.c's crc64(0, p): no inversion before or after.
func redisCRC64(p []byte) uint64 {
	return ^crc64.Update(^uint64(0), crcJones, p)
}

// errBadRDB is any payload that checks and does not load.
var errBadRDB = errors.New("bad rdb data")

// --- writing ------------------------------------------------------------

type rdbWriter struct{ b []byte }

// saveLen is rdbSaveLen.
func (w *rdbWriter) saveLen(n uint64) {
	switch {
	case n < 1<<6:
		w.b = append(w.b, byte(n))
	case n < 1<<14:
		w.b = append(w.b, byte(n>>8)|0x40, byte(n))
	case n <= math.MaxUint32:
		w.b = append(w.b, 0x80)
		w.b = binary.BigEndian.AppendUint32(w.b, uint32(n))
	default:
		w.b = append(w.b, 0x81)
		w.b = binary.BigEndian.AppendUint64(w.b, n)
	}
}

// saveString is rdbSaveRawString with rdbcompression on.
func (w *rdbWriter) saveString(s []byte) {
	if len(s) <= 11 {
		if v, ok := strictInt(s); ok && v >= math.MinInt32 && v <= math.MaxInt32 {
			switch {
			case v >= math.MinInt8 && v <= math.MaxInt8:
				w.b = append(w.b, 0xc0, byte(v))
			case v >= math.MinInt16 && v <= math.MaxInt16:
				w.b = append(w.b, 0xc1)
				w.b = binary.LittleEndian.AppendUint16(w.b, uint16(v))
			default:
				w.b = append(w.b, 0xc2)
				w.b = binary.LittleEndian.AppendUint32(w.b, uint32(v))
			}
			return
		}
	}
	if len(s) > 20 {
		if c := lzfCompress(s, len(s)-4); c != nil {
			w.b = append(w.b, 0xc3)
			w.saveLen(uint64(len(c)))
			w.saveLen(uint64(len(s)))
			w.b = append(w.b, c...)
			return
		}
	}
	w.saveLen(uint64(len(s)))
	w.b = append(w.b, s...)
}

// strictInt is string2ll: a decimal integer written as Redis writes it
// (no sign but -, no leading zeros, no -0).
func strictInt(s []byte) (int64, bool) {
	if len(s) == 0 || len(s) > 20 {
		return 0, false
	}
	v, err := strconv.ParseInt(string(s), 10, 64)
	if err != nil || strconv.FormatInt(v, 10) != string(s) {
		return 0, false
	}
	return v, true
}

func (w *rdbWriter) saveMillis(ms int64) {
	w.b = binary.LittleEndian.AppendUint64(w.b, uint64(ms))
}

func appendStreamID(b []byte, id streamID) []byte {
	b = binary.BigEndian.AppendUint64(b, id.ms)
	return binary.BigEndian.AppendUint64(b, id.seq)
}

// redisDump is DUMP's payload for e.
func redisDump(e kvEntry) []byte {
	w := &rdbWriter{}
	switch e.typ() {
	case tString:
		w.b = append(w.b, rdbString)
		w.saveString(e.v)
	case tList:
		w.b = append(w.b, rdbListQuicklist2)
		dumpList(w, e.c.l)
	case tSet:
		dumpSet(w, e.c.set)
	case tHash:
		dumpHash(w, e.c.h)
	case tZSet:
		dumpZSet(w, e.c.zs)
	case tStream:
		w.b = append(w.b, rdbStreamListpacks2)
		dumpStream(w, e.c.st)
	}
	w.b = binary.LittleEndian.AppendUint16(w.b, rdbVersion)
	return binary.LittleEndian.AppendUint64(w.b, redisCRC64(w.b))
}

func dumpList(w *rdbWriter, l [][]byte) {
	var nodes [][]byte
	lp := newListpack()
	for _, x := range l {
		// _quicklistNodeAllowInsert: lpBytes + the element + 8.
		if lp.n > 0 && len(lp.b)+1+len(x)+8 > quicklistNodeMax {
			nodes = append(nodes, lp.bytes())
			lp = newListpack()
		}
		lp.appendString(x)
	}
	nodes = append(nodes, lp.bytes())
	w.saveLen(uint64(len(nodes)))
	for _, n := range nodes {
		w.saveLen(2) // QUICKLIST_NODE_CONTAINER_PACKED
		w.saveString(n)
	}
}

func dumpSet(w *rdbWriter, set map[string]struct{}) {
	members := slices.Sorted(maps.Keys(set))
	if len(members) <= setMaxIntsetEntries {
		ints := make([]int64, 0, len(members))
		for _, m := range members {
			v, ok := strictInt([]byte(m))
			if !ok {
				ints = nil
				break
			}
			ints = append(ints, v)
		}
		if ints != nil {
			w.b = append(w.b, rdbSetIntset)
			w.saveString(intsetBytes(ints))
			return
		}
	}
	w.b = append(w.b, rdbSet)
	w.saveLen(uint64(len(members)))
	for _, m := range members {
		w.saveString([]byte(m))
	}
}

// intsetBytes is an intset (intset.c) of the values, sorted.
func intsetBytes(v []int64) []byte {
	slices.Sort(v)
	width := 2
	for _, x := range v {
		switch {
		case x < math.MinInt32 || x > math.MaxInt32:
			width = 8
		case (x < math.MinInt16 || x > math.MaxInt16) && width < 4:
			width = 4
		}
	}
	b := binary.LittleEndian.AppendUint32(nil, uint32(width))
	b = binary.LittleEndian.AppendUint32(b, uint32(len(v)))
	for _, x := range v {
		switch width {
		case 2:
			b = binary.LittleEndian.AppendUint16(b, uint16(x))
		case 4:
			b = binary.LittleEndian.AppendUint32(b, uint32(x))
		default:
			b = binary.LittleEndian.AppendUint64(b, uint64(x))
		}
	}
	return b
}

func dumpHash(w *rdbWriter, h map[string][]byte) {
	fields := slices.Sorted(maps.Keys(h))
	small := len(fields) <= hashMaxListpackEntries
	for _, f := range fields {
		if len(f) > hashMaxListpackValue || len(h[f]) > hashMaxListpackValue {
			small = false
		}
	}
	if small {
		lp := newListpack()
		for _, f := range fields {
			lp.appendString([]byte(f))
			lp.appendString(h[f])
		}
		w.b = append(w.b, rdbHashListpack)
		w.saveString(lp.bytes())
		return
	}
	w.b = append(w.b, rdbHash)
	w.saveLen(uint64(len(fields)))
	for _, f := range fields {
		w.saveString([]byte(f))
		w.saveString(h[f])
	}
}

// scoreInt is double2ll.
func scoreInt(f float64) (int64, bool) {
	if f < -(math.MaxInt64/2) || f > math.MaxInt64/2 {
		return 0, false
	}
	v := int64(f)
	return v, float64(v) == f
}

func dumpZSet(w *rdbWriter, zs []zel) {
	small := len(zs) <= zsetMaxListpackEntries
	for _, z := range zs {
		if len(z.m) > zsetMaxListpackValue {
			small = false
		}
	}
	if small {
		lp := newListpack()
		for _, z := range zs {
			lp.appendString([]byte(z.m))
			if v, ok := scoreInt(z.score); ok {
				lp.appendInt(v)
			} else {
				lp.appendString(formatFloat(z.score))
			}
		}
		w.b = append(w.b, rdbZSetListpack)
		w.saveString(lp.bytes())
		return
	}
	w.b = append(w.b, rdbZSet2)
	w.saveLen(uint64(len(zs)))
	for i := len(zs) - 1; i >= 0; i-- {
		w.saveString([]byte(zs[i].m))
		w.b = binary.LittleEndian.AppendUint64(w.b, math.Float64bits(zs[i].score))
	}
}

// Stream entry flags (t_stream.c).
const (
	streamFlagDeleted    = 1
	streamFlagSameFields = 2
)

// nodeListpack is node n as Redis keeps it: the master entry (count,
// deleted, master fields, 0), then each entry.
func (n *snode) listpack() []byte {
	lp := newListpack()
	lp.appendInt(int64(n.live))
	lp.appendInt(int64(len(n.ents) - n.live))
	lp.appendInt(int64(len(n.mf)))
	for _, f := range n.mf {
		lp.appendString(f)
	}
	lp.appendInt(0)
	for _, e := range n.ents {
		flags := int64(0)
		if e.del {
			flags |= streamFlagDeleted
		}
		if e.same {
			flags |= streamFlagSameFields
		}
		lp.appendInt(flags)
		lp.appendInt(int64(e.id.ms - n.master.ms))
		lp.appendInt(int64(e.id.seq - n.master.seq))
		nf := len(e.fv) / 2
		cnt := nf + 3
		if !e.same {
			lp.appendInt(int64(nf))
			cnt += nf + 1
		}
		for i := 0; i < len(e.fv); i += 2 {
			if !e.same {
				lp.appendString(e.fv[i])
			}
			lp.appendString(e.fv[i+1])
		}
		lp.appendInt(int64(cnt))
	}
	return lp.bytes()
}

func dumpStream(w *rdbWriter, s *stream) {
	w.saveLen(uint64(len(s.nodes)))
	for _, n := range s.nodes {
		w.saveString(appendStreamID(nil, n.master))
		w.saveString(n.listpack())
	}
	w.saveLen(s.length)
	for _, id := range []streamID{s.last, s.first, s.maxDel} {
		w.saveLen(id.ms)
		w.saveLen(id.seq)
	}
	w.saveLen(s.added)
	names := slices.Sorted(maps.Keys(s.groups))
	w.saveLen(uint64(len(names)))
	for _, name := range names {
		g := s.groups[name]
		w.saveString([]byte(name))
		w.saveLen(g.last.ms)
		w.saveLen(g.last.seq)
		w.saveLen(uint64(g.read))
		ids := g.pelIDs()
		w.saveLen(uint64(len(ids)))
		for _, id := range ids {
			w.b = appendStreamID(w.b, id)
			w.saveMillis(g.pel[id].time)
			w.saveLen(g.pel[id].count)
		}
		cs := slices.Sorted(maps.Keys(g.consumers))
		w.saveLen(uint64(len(cs)))
		for _, cn := range cs {
			c := g.consumers[cn]
			w.saveString([]byte(cn))
			w.saveMillis(c.seen)
			pel := sortedIDs(c.pel)
			w.saveLen(uint64(len(pel)))
			for _, id := range pel {
				w.b = appendStreamID(w.b, id)
			}
		}
	}
}

// --- listpacks (listpack.c) -----------------------------------------------

type listpack struct {
	b []byte // header (6 bytes) and entries, without the end byte
	n int
}

func newListpack() *listpack { return &listpack{b: make([]byte, 6, 64)} }

func (lp *listpack) bytes() []byte {
	b := append(lp.b, 0xff)
	binary.LittleEndian.PutUint32(b, uint32(len(b)))
	n := lp.n
	if n > 65535 {
		n = 65535
	}
	binary.LittleEndian.PutUint16(b[4:], uint16(n))
	return b
}

// backlen is lpEncodeBacklen: the entry's length, read from its end.
func (lp *listpack) backlen(l int) {
	switch {
	case l <= 127:
		lp.b = append(lp.b, byte(l))
	case l < 16383:
		lp.b = append(lp.b, byte(l>>7), byte(l&127)|128)
	case l < 2097151:
		lp.b = append(lp.b, byte(l>>14), byte((l>>7)&127)|128, byte(l&127)|128)
	case l < 268435455:
		lp.b = append(lp.b, byte(l>>21), byte((l>>14)&127)|128, byte((l>>7)&127)|128, byte(l&127)|128)
	default:
		lp.b = append(lp.b, byte(l>>28), byte((l>>21)&127)|128, byte((l>>14)&127)|128, byte((l>>7)&127)|128, byte(l&127)|128)
	}
}

func (lp *listpack) appendInt(v int64) {
	start := len(lp.b)
	switch {
	case v >= 0 && v <= 127:
		lp.b = append(lp.b, byte(v))
	case v >= -4096 && v <= 4095:
		u := uint64(v) & 0x1fff
		lp.b = append(lp.b, byte(u>>8)|0xc0, byte(u))
	case v >= math.MinInt16 && v <= math.MaxInt16:
		lp.b = append(lp.b, 0xf1)
		lp.b = binary.LittleEndian.AppendUint16(lp.b, uint16(v))
	case v >= -(1<<23) && v <= 1<<23-1:
		u := uint32(v)
		lp.b = append(lp.b, 0xf2, byte(u), byte(u>>8), byte(u>>16))
	case v >= math.MinInt32 && v <= math.MaxInt32:
		lp.b = append(lp.b, 0xf3)
		lp.b = binary.LittleEndian.AppendUint32(lp.b, uint32(v))
	default:
		lp.b = append(lp.b, 0xf4)
		lp.b = binary.LittleEndian.AppendUint64(lp.b, uint64(v))
	}
	lp.backlen(len(lp.b) - start)
	lp.n++
}

// appendString is lpAppend: an integer when the string is one.
func (lp *listpack) appendString(s []byte) {
	if v, ok := strictInt(s); ok {
		lp.appendInt(v)
		return
	}
	start := len(lp.b)
	switch {
	case len(s) <= 63:
		lp.b = append(lp.b, byte(len(s))|0x80)
	case len(s) <= 4095:
		lp.b = append(lp.b, byte(len(s)>>8)|0xe0, byte(len(s)))
	default:
		lp.b = append(lp.b, 0xf0)
		lp.b = binary.LittleEndian.AppendUint32(lp.b, uint32(len(s)))
	}
	lp.b = append(lp.b, s...)
	lp.backlen(len(lp.b) - start)
	lp.n++
}

// lpElem is one element read from a listpack or ziplist.
type lpElem struct {
	s     []byte
	v     int64
	isInt bool
}

func (e lpElem) bytes() []byte {
	if e.isInt {
		return strconv.AppendInt(nil, e.v, 10)
	}
	return bytes.Clone(e.s)
}

func signExtend(u uint64, bits uint) int64 {
	return int64(u<<(64-bits)) >> (64 - bits)
}

// readListpack reads a listpack's elements.
func readListpack(b []byte) ([]lpElem, error) {
	if len(b) < 7 || int(binary.LittleEndian.Uint32(b)) != len(b) || b[len(b)-1] != 0xff {
		return nil, errBadRDB
	}
	var out []lpElem
	p := b[6 : len(b)-1]
	for len(p) > 0 {
		var e lpElem
		var n int // the encoding's length, before the backlen
		c := p[0]
		need := func(k int) bool { return len(p) >= k }
		switch {
		case c&0x80 == 0:
			e, n = lpElem{v: int64(c & 0x7f), isInt: true}, 1
		case c&0xc0 == 0x80:
			l := int(c & 0x3f)
			if !need(1 + l) {
				return nil, errBadRDB
			}
			e, n = lpElem{s: p[1 : 1+l]}, 1+l
		case c&0xe0 == 0xc0:
			if !need(2) {
				return nil, errBadRDB
			}
			e, n = lpElem{v: signExtend(uint64(c&0x1f)<<8|uint64(p[1]), 13), isInt: true}, 2
		case c&0xf0 == 0xe0:
			if !need(2) {
				return nil, errBadRDB
			}
			l := int(c&0x0f)<<8 | int(p[1])
			if !need(2 + l) {
				return nil, errBadRDB
			}
			e, n = lpElem{s: p[2 : 2+l]}, 2+l
		case c == 0xf0:
			if !need(5) {
				return nil, errBadRDB
			}
			l := int(binary.LittleEndian.Uint32(p[1:]))
			if l < 0 || !need(5+l) {
				return nil, errBadRDB
			}
			e, n = lpElem{s: p[5 : 5+l]}, 5+l
		case c >= 0xf1 && c <= 0xf4:
			w := map[byte]int{0xf1: 2, 0xf2: 3, 0xf3: 4, 0xf4: 8}[c]
			if !need(1 + w) {
				return nil, errBadRDB
			}
			var u uint64
			for i := w; i >= 1; i-- {
				u = u<<8 | uint64(p[i])
			}
			e, n = lpElem{v: signExtend(u, uint(8*w)), isInt: true}, 1+w
		default:
			return nil, errBadRDB
		}
		bl := lpBacklen(n)
		if !need(n + bl) {
			return nil, errBadRDB
		}
		p = p[n+bl:]
		out = append(out, e)
	}
	return out, nil
}

// readZiplist reads a ziplist's (ziplist.c) elements.
func readZiplist(b []byte) ([]lpElem, error) {
	if len(b) < 11 || int(binary.LittleEndian.Uint32(b)) != len(b) || b[len(b)-1] != 0xff {
		return nil, errBadRDB
	}
	var out []lpElem
	p := b[10 : len(b)-1]
	for len(p) > 0 {
		if p[0] == 0xfe {
			if len(p) < 5 {
				return nil, errBadRDB
			}
			p = p[5:]
		} else {
			p = p[1:]
		}
		if len(p) == 0 {
			return nil, errBadRDB
		}
		c := p[0]
		var e lpElem
		var n int
		intAt := func(w int) bool {
			if len(p) < 1+w {
				return false
			}
			var u uint64
			for i := w; i >= 1; i-- {
				u = u<<8 | uint64(p[i])
			}
			e, n = lpElem{v: signExtend(u, uint(8*w)), isInt: true}, 1+w
			return true
		}
		ok := true
		switch {
		case c>>6 == 0:
			l := int(c & 0x3f)
			ok = len(p) >= 1+l
			if ok {
				e, n = lpElem{s: p[1 : 1+l]}, 1+l
			}
		case c>>6 == 1:
			ok = len(p) >= 2
			if ok {
				l := int(c&0x3f)<<8 | int(p[1])
				ok = len(p) >= 2+l
				if ok {
					e, n = lpElem{s: p[2 : 2+l]}, 2+l
				}
			}
		case c == 0x80:
			ok = len(p) >= 5
			if ok {
				l := int(binary.BigEndian.Uint32(p[1:]))
				ok = l >= 0 && len(p) >= 5+l
				if ok {
					e, n = lpElem{s: p[5 : 5+l]}, 5+l
				}
			}
		case c == 0xc0:
			ok = intAt(2)
		case c == 0xd0:
			ok = intAt(4)
		case c == 0xe0:
			ok = intAt(8)
		case c == 0xf0:
			ok = intAt(3)
		case c == 0xfe:
			ok = intAt(1)
		case c >= 0xf1 && c <= 0xfd:
			e, n = lpElem{v: int64(c&0x0f) - 1, isInt: true}, 1
		default:
			ok = false
		}
		if !ok {
			return nil, errBadRDB
		}
		out = append(out, e)
		p = p[n:]
	}
	return out, nil
}

// --- LZF (lzf_c.c and lzf_d.c, with Redis's lzfP.h settings: HLOG 16,
// VERY_FAST) ---------------------------------------------------------------

// lzfCompress compresses in into at most outLen bytes, nil when it does not
// fit. The hash table starts empty (Redis leaves it uninitialised; a stale
// slot only adds matches that the bounds checks accept, so Redis's output
// is this one unless such a stale slot happens to match).
func lzfCompress(in []byte, outLen int) []byte {
	const (
		hlog   = 16
		hsize  = 1 << hlog
		maxLit = 1 << 5
		maxOff = 1 << 13
		maxRef = (1 << 8) + (1 << 3)
	)
	if len(in) == 0 || outLen <= 0 {
		return nil
	}
	htab := make([]int32, hsize) // offsets into in; 0 is empty (Redis's NULL slot)
	idx := func(h uint32) uint32 { return ((h >> (3*8 - hlog)) - h*5) & (hsize - 1) }
	if len(in) < 3 {
		return nil
	}
	out := make([]byte, outLen+8) // writes past outEnd are checked below, as lzf_c.c's
	ip, op := 0, 0
	inEnd, outEnd := len(in), outLen
	lit := 0
	op++
	hval := uint32(in[0])<<8 | uint32(in[1])
	for ip < inEnd-2 {
		hval = hval<<8 | uint32(in[ip+2])
		slot := &htab[idx(hval)]
		ref := int(*slot)
		*slot = int32(ip)
		off := ip - ref - 1
		if ref > 0 && off >= 0 && off < maxOff && in[ref+2] == in[ip+2] && in[ref] == in[ip] && in[ref+1] == in[ip+1] {
			l := 2
			maxlen := inEnd - ip - l
			if maxlen > maxRef {
				maxlen = maxRef
			}
			if op+3+1 >= outEnd {
				nl := 0
				if lit == 0 {
					nl = 1
				}
				if op-nl+3+1 >= outEnd {
					return nil
				}
			}
			out[op-lit-1] = byte(lit - 1)
			if lit == 0 {
				op--
			}
			matched := false // lzf_c.c's unrolled loop, then its do-while
			if maxlen > 16 {
				for k := 0; k < 16; k++ {
					l++
					if in[ref+l] != in[ip+l] {
						matched = true
						break
					}
				}
			}
			for !matched {
				l++
				if !(l < maxlen && in[ref+l] == in[ip+l]) {
					break
				}
			}
			l -= 2
			ip++
			if l < 7 {
				out[op] = byte(off>>8) + byte(l<<5)
				op++
			} else {
				out[op] = byte(off>>8) + (7 << 5)
				out[op+1] = byte(l - 7)
				op += 2
			}
			out[op] = byte(off)
			op++
			lit = 0
			op++
			ip += l + 1
			if ip >= inEnd-2 {
				break
			}
			ip -= 2
			hval = uint32(in[ip])<<8 | uint32(in[ip+1])
			hval = hval<<8 | uint32(in[ip+2])
			htab[idx(hval)] = int32(ip)
			ip++
			hval = hval<<8 | uint32(in[ip+2])
			htab[idx(hval)] = int32(ip)
			ip++
		} else {
			if op >= outEnd {
				return nil
			}
			lit++
			out[op] = in[ip]
			op++
			ip++
			if lit == maxLit {
				out[op-lit-1] = byte(lit - 1)
				lit = 0
				op++
			}
		}
	}
	if op+3 > outEnd {
		return nil
	}
	for ip < inEnd {
		lit++
		out[op] = in[ip]
		op++
		ip++
		if lit == maxLit {
			out[op-lit-1] = byte(lit - 1)
			lit = 0
			op++
		}
	}
	out[op-lit-1] = byte(lit - 1)
	if lit == 0 {
		op--
	}
	return out[:op]
}

// lzfDecompress is lzf_decompress into exactly n bytes.
func lzfDecompress(in []byte, n int) ([]byte, error) {
	out := make([]byte, 0, n)
	for ip := 0; ip < len(in); {
		ctrl := int(in[ip])
		ip++
		if ctrl < 1<<5 {
			ctrl++
			if ip+ctrl > len(in) || len(out)+ctrl > n {
				return nil, errBadRDB
			}
			out = append(out, in[ip:ip+ctrl]...)
			ip += ctrl
			continue
		}
		l := ctrl >> 5
		if l == 7 {
			if ip >= len(in) {
				return nil, errBadRDB
			}
			l += int(in[ip])
			ip++
		}
		if ip >= len(in) {
			return nil, errBadRDB
		}
		ref := len(out) - ((ctrl & 0x1f) << 8) - 1 - int(in[ip])
		ip++
		l += 2
		if ref < 0 || len(out)+l > n {
			return nil, errBadRDB
		}
		for i := 0; i < l; i++ {
			out = append(out, out[ref+i])
		}
	}
	if len(out) != n {
		return nil, errBadRDB
	}
	return out, nil
}

// --- reading --------------------------------------------------------------

type rdbReader struct{ b []byte }

func (r *rdbReader) take(n int) ([]byte, error) {
	if n < 0 || len(r.b) < n {
		return nil, errBadRDB
	}
	p := r.b[:n]
	r.b = r.b[n:]
	return p, nil
}

// loadLen is rdbLoadLenByRef: the length, or an encoding (enc true).
func (r *rdbReader) loadLen() (n uint64, enc bool, err error) {
	p, err := r.take(1)
	if err != nil {
		return 0, false, err
	}
	c := p[0]
	switch c >> 6 {
	case 0:
		return uint64(c & 0x3f), false, nil
	case 1:
		q, err := r.take(1)
		if err != nil {
			return 0, false, err
		}
		return uint64(c&0x3f)<<8 | uint64(q[0]), false, nil
	case 3:
		return uint64(c & 0x3f), true, nil
	}
	switch c {
	case 0x80:
		q, err := r.take(4)
		if err != nil {
			return 0, false, err
		}
		return uint64(binary.BigEndian.Uint32(q)), false, nil
	case 0x81:
		q, err := r.take(8)
		if err != nil {
			return 0, false, err
		}
		return binary.BigEndian.Uint64(q), false, nil
	}
	return 0, false, errBadRDB
}

func (r *rdbReader) length() (uint64, error) {
	n, enc, err := r.loadLen()
	if err == nil && enc {
		err = errBadRDB
	}
	return n, err
}

// count is a length that must fit what is left (each item at least one
// byte), so a damaged count cannot allocate much.
func (r *rdbReader) count() (int, error) {
	n, err := r.length()
	if err == nil && n > uint64(len(r.b)) {
		err = errBadRDB
	}
	return int(n), err
}

// loadString is rdbGenericLoadStringObject.
func (r *rdbReader) loadString() ([]byte, error) {
	n, enc, err := r.loadLen()
	if err != nil {
		return nil, err
	}
	if enc {
		switch n {
		case 0, 1, 2:
			w := 1 << n
			p, err := r.take(w)
			if err != nil {
				return nil, err
			}
			var u uint64
			for i := w - 1; i >= 0; i-- {
				u = u<<8 | uint64(p[i])
			}
			return strconv.AppendInt(nil, signExtend(u, uint(8*w)), 10), nil
		case 3:
			cl, err := r.length()
			if err != nil {
				return nil, err
			}
			l, err := r.length()
			if err != nil || l > 1<<32 || cl > uint64(len(r.b)) {
				return nil, errBadRDB
			}
			p, _ := r.take(int(cl))
			return lzfDecompress(p, int(l))
		}
		return nil, errBadRDB
	}
	if n > uint64(len(r.b)) {
		return nil, errBadRDB
	}
	p, _ := r.take(int(n))
	return bytes.Clone(p), nil
}

func (r *rdbReader) millis() (int64, error) {
	p, err := r.take(8)
	if err != nil {
		return 0, err
	}
	return int64(binary.LittleEndian.Uint64(p)), nil
}

func (r *rdbReader) rawID() (streamID, error) {
	p, err := r.take(16)
	if err != nil {
		return streamID{}, err
	}
	return streamID{binary.BigEndian.Uint64(p), binary.BigEndian.Uint64(p[8:])}, nil
}

// loadScore is rdbLoadDoubleValue (RDB_TYPE_ZSET's scores as strings).
func (r *rdbReader) loadScore() (float64, error) {
	p, err := r.take(1)
	if err != nil {
		return 0, err
	}
	switch p[0] {
	case 253:
		return math.NaN(), nil
	case 254:
		return math.Inf(1), nil
	case 255:
		return math.Inf(-1), nil
	}
	q, err := r.take(int(p[0]))
	if err != nil {
		return 0, err
	}
	return strconv.ParseFloat(string(q), 64)
}

// checkRedisPayload is verifyDumpPayload: the version and the CRC.
func checkRedisPayload(p []byte) bool {
	if len(p) < 10 {
		return false
	}
	f := p[len(p)-10:]
	if binary.LittleEndian.Uint16(f) > rdbVersion {
		return false
	}
	return redisCRC64(p[:len(p)-8]) == binary.LittleEndian.Uint64(f[2:])
}

// redisUndump loads a checked payload's object (rdbLoadObjectType and
// rdbLoadObject), owned by own.
func redisUndump(p []byte, own *int) (kvEntry, error) {
	r := &rdbReader{b: p[:len(p)-10]}
	t, err := r.take(1)
	if err != nil {
		return kvEntry{}, err
	}
	e, err := r.loadObject(t[0], own)
	if err == nil && len(r.b) != 0 {
		err = errBadRDB
	}
	if err == nil && e.c != nil && e.c.t != tStream && e.c.size() == 0 {
		err = errBadRDB // RDB_LOAD_ERR_EMPTY_KEY
	}
	return e, err
}

func (r *rdbReader) loadObject(t byte, own *int) (kvEntry, error) {
	switch t {
	case rdbString:
		s, err := r.loadString()
		return kvEntry{v: s}, err
	case rdbList, rdbSet:
		n, err := r.count()
		if err != nil {
			return kvEntry{}, err
		}
		c := newColl(tList, own)
		if t == rdbSet {
			c = newColl(tSet, own)
		}
		for i := 0; i < n; i++ {
			s, err := r.loadString()
			if err != nil {
				return kvEntry{}, err
			}
			if t == rdbSet {
				c.set[string(s)] = struct{}{}
			} else {
				c.l = append(c.l, s)
			}
		}
		return kvEntry{c: c}, nil
	case rdbZSet, rdbZSet2:
		n, err := r.count()
		if err != nil {
			return kvEntry{}, err
		}
		c := newColl(tZSet, own)
		for i := 0; i < n; i++ {
			m, err := r.loadString()
			if err != nil {
				return kvEntry{}, err
			}
			var sc float64
			if t == rdbZSet {
				sc, err = r.loadScore()
			} else {
				var q []byte
				q, err = r.take(8)
				if err == nil {
					sc = math.Float64frombits(binary.LittleEndian.Uint64(q))
				}
			}
			if err != nil || math.IsNaN(sc) {
				return kvEntry{}, errBadRDB
			}
			c.z[string(m)] = sc
		}
		return kvEntry{c: zsetFrom(c)}, nil
	case rdbHash:
		n, err := r.count()
		if err != nil {
			return kvEntry{}, err
		}
		c := newColl(tHash, own)
		for i := 0; i < n; i++ {
			f, err := r.loadString()
			if err != nil {
				return kvEntry{}, err
			}
			v, err := r.loadString()
			if err != nil {
				return kvEntry{}, err
			}
			c.h[string(f)] = v
		}
		return kvEntry{c: c}, nil
	case rdbListQuicklist, rdbListQuicklist2:
		n, err := r.count()
		if err != nil {
			return kvEntry{}, err
		}
		c := newColl(tList, own)
		for i := 0; i < n; i++ {
			container := uint64(2)
			if t == rdbListQuicklist2 {
				if container, err = r.length(); err != nil {
					return kvEntry{}, err
				}
			}
			blob, err := r.loadString()
			if err != nil {
				return kvEntry{}, err
			}
			switch {
			case container == 1: // QUICKLIST_NODE_CONTAINER_PLAIN
				c.l = append(c.l, blob)
				continue
			case container != 2:
				return kvEntry{}, errBadRDB
			}
			var els []lpElem
			if t == rdbListQuicklist {
				els, err = readZiplist(blob)
			} else {
				els, err = readListpack(blob)
			}
			if err != nil || len(els) == 0 {
				return kvEntry{}, errBadRDB
			}
			for _, x := range els {
				c.l = append(c.l, x.bytes())
			}
		}
		return kvEntry{c: c}, nil
	case rdbListZiplist, rdbZSetZiplist, rdbHashZiplist, rdbZSetListpack, rdbHashListpack:
		blob, err := r.loadString()
		if err != nil {
			return kvEntry{}, err
		}
		var els []lpElem
		if t == rdbZSetListpack || t == rdbHashListpack {
			els, err = readListpack(blob)
		} else {
			els, err = readZiplist(blob)
		}
		if err != nil {
			return kvEntry{}, err
		}
		switch t {
		case rdbListZiplist:
			c := newColl(tList, own)
			for _, x := range els {
				c.l = append(c.l, x.bytes())
			}
			return kvEntry{c: c}, nil
		case rdbHashZiplist, rdbHashListpack:
			if len(els)%2 != 0 {
				return kvEntry{}, errBadRDB
			}
			c := newColl(tHash, own)
			for i := 0; i < len(els); i += 2 {
				f := string(els[i].bytes())
				if _, dup := c.h[f]; dup {
					return kvEntry{}, errBadRDB
				}
				c.h[f] = els[i+1].bytes()
			}
			return kvEntry{c: c}, nil
		default:
			if len(els)%2 != 0 {
				return kvEntry{}, errBadRDB
			}
			c := newColl(tZSet, own)
			for i := 0; i < len(els); i += 2 {
				sc := float64(els[i+1].v)
				if !els[i+1].isInt {
					sc, err = strconv.ParseFloat(string(els[i+1].s), 64)
					if err != nil && !errors.Is(err, strconv.ErrRange) || math.IsNaN(sc) {
						return kvEntry{}, errBadRDB
					}
				}
				c.z[string(els[i].bytes())] = sc
			}
			return kvEntry{c: zsetFrom(c)}, nil
		}
	case rdbSetIntset:
		blob, err := r.loadString()
		if err != nil {
			return kvEntry{}, err
		}
		if len(blob) < 8 {
			return kvEntry{}, errBadRDB
		}
		w, n := int(binary.LittleEndian.Uint32(blob)), int(binary.LittleEndian.Uint32(blob[4:]))
		if (w != 2 && w != 4 && w != 8) || len(blob) != 8+w*n {
			return kvEntry{}, errBadRDB
		}
		c := newColl(tSet, own)
		for i := 0; i < n; i++ {
			var u uint64
			for j := w - 1; j >= 0; j-- {
				u = u<<8 | uint64(blob[8+i*w+j])
			}
			c.set[strconv.FormatInt(signExtend(u, uint(8*w)), 10)] = struct{}{}
		}
		return kvEntry{c: c}, nil
	case rdbStreamListpacks, rdbStreamListpacks2:
		st, err := r.loadStream(t)
		if err != nil {
			return kvEntry{}, err
		}
		c := newColl(tStream, own)
		c.st = st
		return kvEntry{c: c}, nil
	}
	return kvEntry{}, errBadRDB
}

// zsetFrom fills c.zs from c.z.
func zsetFrom(c *coll) *coll {
	for m, sc := range c.z {
		c.zs = append(c.zs, zel{sc, m})
	}
	slices.SortFunc(c.zs, zless)
	return c
}

func (r *rdbReader) loadStream(t byte) (*stream, error) {
	// err is the first error; the reads after it answer zeros.
	var err error
	keep := func(e error) {
		if err == nil {
			err = e
		}
	}
	ln := func() uint64 { n, e := r.length(); keep(e); return n }
	cnt := func() int { n, e := r.count(); keep(e); return n }
	str := func() []byte { b, e := r.loadString(); keep(e); return b }
	ms := func() int64 { v, e := r.millis(); keep(e); return v }
	rid := func() streamID { id, e := r.rawID(); keep(e); return id }
	id := func() streamID { return streamID{ln(), ln()} }

	s := &stream{}
	var live uint64
	for i, nn := 0, cnt(); i < nn && err == nil; i++ {
		key, blob := str(), str()
		if err != nil || len(key) != 16 {
			return nil, errBadRDB
		}
		n, e := streamNode(streamID{binary.BigEndian.Uint64(key), binary.BigEndian.Uint64(key[8:])}, blob)
		if e != nil {
			return nil, e
		}
		if len(s.nodes) > 0 {
			prev := s.nodes[len(s.nodes)-1]
			if n.ents[0].id.cmp(prev.ents[len(prev.ents)-1].id) <= 0 {
				return nil, errBadRDB
			}
		}
		live += uint64(n.live)
		s.nodes = append(s.nodes, n)
	}
	s.length = ln()
	s.last = id()
	if t == rdbStreamListpacks2 {
		s.first, s.maxDel, s.added = id(), id(), ln()
	} else {
		s.added = s.length
		s.first = s.edge(true)
	}
	if err != nil || live != s.length {
		return nil, errBadRDB
	}
	for i, ng := 0, cnt(); i < ng && err == nil; i++ {
		name := string(str())
		last := id()
		read := int64(-2)
		if t == rdbStreamListpacks2 {
			read = int64(ln())
		}
		if err != nil {
			break
		}
		if read == -2 {
			read = s.distance(last)
		}
		g := newGroup(last, read)
		for j, np := 0, cnt(); j < np && err == nil; j++ {
			pid := rid()
			g.pel[pid] = &nack{time: ms(), count: ln()}
		}
		for j, nc := 0, cnt(); j < nc && err == nil; j++ {
			cn := string(str())
			c := &consumer{seen: ms(), pel: map[streamID]struct{}{}}
			for q, k := 0, cnt(); q < k && err == nil; q++ {
				pid := rid()
				x := g.pel[pid]
				if x == nil || x.consumer != "" {
					keep(errBadRDB)
					break
				}
				x.consumer = cn
				c.pel[pid] = struct{}{}
			}
			if g.consumers[cn] != nil {
				keep(errBadRDB)
			}
			g.consumers[cn] = c
		}
		for _, x := range g.pel {
			if x.consumer == "" {
				keep(errBadRDB) // a pending entry of no consumer
			}
		}
		if s.groups == nil {
			s.groups = map[string]*cgroup{}
		}
		if s.groups[name] != nil {
			keep(errBadRDB)
		}
		s.groups[name] = g
	}
	if err != nil {
		return nil, err
	}
	return s, nil
}

// streamNode reads one listpack node of a stream (t_stream.c's layout).
func streamNode(master streamID, blob []byte) (*snode, error) {
	els, err := readListpack(blob)
	if err != nil {
		return nil, err
	}
	p := 0
	next := func() (lpElem, error) {
		if p >= len(els) {
			return lpElem{}, errBadRDB
		}
		p++
		return els[p-1], nil
	}
	nextInt := func() (int64, error) {
		e, err := next()
		if err == nil && !e.isInt {
			err = errBadRDB
		}
		return e.v, err
	}
	count, err := nextInt()
	if err != nil {
		return nil, err
	}
	deleted, err := nextInt()
	if err != nil {
		return nil, err
	}
	nmf, err := nextInt()
	if err != nil || nmf < 0 || nmf > int64(len(els)) {
		return nil, errBadRDB
	}
	n := &snode{master: master}
	for i := int64(0); i < nmf; i++ {
		f, err := next()
		if err != nil {
			return nil, err
		}
		n.mf = append(n.mf, f.bytes())
	}
	if z, err := nextInt(); err != nil || z != 0 {
		return nil, errBadRDB
	}
	for p < len(els) {
		flags, err := nextInt()
		if err != nil {
			return nil, err
		}
		dms, err := nextInt()
		if err != nil {
			return nil, err
		}
		dseq, err := nextInt()
		if err != nil {
			return nil, err
		}
		e := sentry{id: streamID{master.ms + uint64(dms), master.seq + uint64(dseq)}, del: flags&streamFlagDeleted != 0, same: flags&streamFlagSameFields != 0}
		nf := nmf
		if !e.same {
			if nf, err = nextInt(); err != nil || nf < 0 || nf > int64(len(els)) {
				return nil, errBadRDB
			}
		}
		for i := int64(0); i < nf; i++ {
			if e.same {
				e.fv = append(e.fv, n.mf[i])
			} else {
				f, err := next()
				if err != nil {
					return nil, err
				}
				e.fv = append(e.fv, f.bytes())
			}
			v, err := next()
			if err != nil {
				return nil, err
			}
			e.fv = append(e.fv, v.bytes())
		}
		if _, err := nextInt(); err != nil { // lp-count
			return nil, err
		}
		if len(n.ents) > 0 && e.id.cmp(n.ents[len(n.ents)-1].id) <= 0 {
			return nil, errBadRDB
		}
		n.ebytes += n.entryBytes(e)
		if !e.del {
			n.live++
		}
		n.ents = append(n.ents, e)
	}
	if len(n.ents) == 0 || int64(n.live) != count || int64(len(n.ents)-n.live) != deleted {
		return nil, fmt.Errorf("%w: stream node counts", errBadRDB)
	}
	return n, nil
}
