package service

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// Streams (issue 34), ported from Redis 7.0.15's t_stream.c: the same
// IDs, trimming, errors and consumer-group bookkeeping (kv_stream_group.go).
// Every command is one KV operation, so it is atomic wherever it runs:
//
//	xadd maxentries maxbytes [nomkstream] [maxlen|minid [=|~] n [limit n]] id|* field value ...
//	                             W  bytes id | nil (NOMKSTREAM, no key)
//	xrange start end [count n] / xrevrange end start [count n]
//	                             R  array of [id, [field, value ...]]
//	xlen                         R  int
//	xdel id [id ...]             W  int deleted
//	xtrim maxentries maxlen|minid [=|~] n [limit n]
//	                             W  int deleted
//	xsetid id [entriesadded n] [maxdeletedid id]
//	                             W  OK
//	xread wait count n key2..keyn id1..idn (Op.Key the first key)
//	                             R  array of [key, entries] | nil
//	xlastid [key ...]            R  array of ids (0-0 for a missing key): XREAD's $
//	xinfo now stream|groups|consumers args...  R  (flat maps; the gateway shapes them)
//
// The Redis arguments after the key are passed as they came (options in any
// case); maxentries and maxbytes are the serving node's
// stream-node-max-entries and stream-node-max-bytes, put into the
// operation by the gateway as hll-sparse-max-bytes is for PFADD, so every
// replica cuts the stream into the same nodes.
//
// Decisions (Redis is the reference; the seeds are silent):
//
//   - The ID of XADD * takes its millisecond part from the operation's
//     time (Env.Time, stamped by the leader before the operation is
//     ordered: kv_doc.go "Expiry"), never from a replica's clock; as in
//     Redis, a time not above the last ID's gives last ID + 1. Without an
//     ordered time (register protocols) XADD * is refused.
//   - Nodes. Redis keeps a stream in radix-tree nodes of listpacks, and
//     MAXLEN/MINID ~ trims only whole nodes, so XLEN after an approximate
//     trim depends on where nodes end. The state keeps the same nodes: a
//     node ends when it holds stream-node-max-entries entries (deleted
//     ones included) or when its listpack would reach stream-node-max-bytes;
//     the listpack's size is computed from Redis's listpack encoding
//     (lpBytes below), so approximate trims match redis-server's counts.
//     Entries deleted by XDEL or by an exact trim stay in their node,
//     flagged, as in Redis.
//   - Times in consumer groups (delivery time, seen time, idle) are the
//     operation's time (KVState.now), so every replica records the same.
//   - radix-tree-nodes in XINFO STREAM is the node count (Redis counts its
//     radix tree's internal nodes, a memory-layout detail).

func init() {
	addKVOps(map[string]kvOp{
		"xadd":      {min: 4, max: -1, check: checkXAdd, run: (*KVState).opXAdd},
		"xrange":    {read: true, min: 2, max: 4, check: checkXRange, run: (*KVState).opXRange},
		"xrevrange": {read: true, min: 2, max: 4, check: checkXRange, run: (*KVState).opXRange},
		"xlen":      {read: true, run: (*KVState).opXLen},
		"xdel":      {min: 1, max: -1, check: checkXDel, run: (*KVState).opXDel},
		"xtrim":     {min: 3, max: -1, check: checkXTrim, run: (*KVState).opXTrim},
		"xsetid":    {min: 1, max: 5, check: checkXSetID, run: (*KVState).opXSetID},
		"xread":     {read: true, min: 4, max: -1, check: checkXRead, keys: xreadKeys, run: (*KVState).opXRead},
		"xlastid":   {read: true, max: -1, keys: func(op Op) []string { return argStrings(op.Args) }, run: (*KVState).opXLastID},
		"xinfo":     {read: true, min: 2, max: 5, check: timedRead(checkXInfo), run: atReadTime((*KVState).opXInfo)},
	})
}

// timedRead and atReadTime serve the reads that show idle times (XPENDING,
// XINFO CONSUMERS): their first argument is the serving node's time (Unix
// ms), and the read is evaluated at the later of it and the state's time.
// A read changes nothing, so the serving node's clock decides only what it
// answers; the leader's time, which stamps deliveries, may lag the node's
// by up to a heartbeat (LeaderClock), and an idle time taken from it would
// lag as much.
func timedRead(check func(Op) error) func(Op) error {
	return func(op Op) error {
		if n, ok := parseInt(op.Args[0]); !ok || n < 0 {
			return fmt.Errorf("read time must be a non-negative integer")
		}
		if check == nil {
			return nil
		}
		op.Args = op.Args[1:]
		return check(op)
	}
}

func atReadTime(run func(*KVState, Op) Result) func(*KVState, Op) Result {
	return func(s *KVState, op Op) Result {
		n, _ := parseInt(op.Args[0])
		s.now = max(s.now, n)
		op.Args = op.Args[1:]
		return run(s, op)
	}
}

// --- IDs -------------------------------------------------------------------

// streamID is an entry ID, ms-seq.
type streamID struct{ ms, seq uint64 }

var maxStreamID = streamID{math.MaxUint64, math.MaxUint64}

func (a streamID) cmp(b streamID) int {
	switch {
	case a.ms != b.ms:
		if a.ms < b.ms {
			return -1
		}
		return 1
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

func (a streamID) String() string {
	return strconv.FormatUint(a.ms, 10) + "-" + strconv.FormatUint(a.seq, 10)
}

func (a streamID) result() Result { return Bytes([]byte(a.String())) }

func (a streamID) zero() bool { return a.ms == 0 && a.seq == 0 }

// incr is streamIncrID: false when a was the largest ID (it wraps to 0-0).
func (a *streamID) incr() bool {
	switch {
	case a.seq < math.MaxUint64:
		a.seq++
	case a.ms < math.MaxUint64:
		a.ms, a.seq = a.ms+1, 0
	default:
		*a = streamID{}
		return false
	}
	return true
}

// decr is streamDecrID: false when a was 0-0 (it wraps to the largest).
func (a *streamID) decr() bool {
	switch {
	case a.seq > 0:
		a.seq--
	case a.ms > 0:
		a.ms, a.seq = a.ms-1, math.MaxUint64
	default:
		*a = maxStreamID
		return false
	}
	return true
}

const errStreamID = "Invalid stream ID specified as stream command argument"

// parseStreamID is streamGenericParseIDOrReply: "-" and "+" (unless
// strict), ms, ms-seq and, with star, ms-* (seqGiven false).
func parseStreamID(b []byte, missingSeq uint64, strict, star bool) (id streamID, seqGiven bool, err error) {
	bad := fmt.Errorf(errStreamID)
	s := string(b)
	if len(s) > 127 {
		return id, false, bad
	}
	if strict && (s == "-" || s == "+") {
		return id, false, bad
	}
	switch s {
	case "-":
		return streamID{}, true, nil
	case "+":
		return maxStreamID, true, nil
	}
	msPart, seqPart, dash := strings.Cut(s, "-")
	ms, ok := parseU64(msPart)
	if !ok {
		return id, false, bad
	}
	seq := missingSeq
	seqGiven = true
	if dash {
		if star && seqPart == "*" {
			seq, seqGiven = 0, false
		} else if seq, ok = parseU64(seqPart); !ok {
			return id, false, bad
		}
	}
	return streamID{ms, seq}, seqGiven, nil
}

// parseU64 is string2ull for the forms clients send (decimal digits).
func parseU64(s string) (uint64, bool) {
	if s == "" || s[0] == '-' {
		return 0, false
	}
	n, err := strconv.ParseUint(strings.TrimPrefix(s, "+"), 10, 64)
	return n, err == nil
}

// parseIntervalID is streamParseIntervalIDOrReply: a leading "(" excludes.
func parseIntervalID(b []byte, missingSeq uint64) (streamID, bool, error) {
	if len(b) > 1 && b[0] == '(' {
		id, _, err := parseStreamID(b[1:], missingSeq, true, false)
		return id, true, err
	}
	id, _, err := parseStreamID(b, missingSeq, false, false)
	return id, false, err
}

// parseRange reads XRANGE's start and end (inclusive bounds after
// exclusions), as xrangeGenericCommand.
func parseRange(a, b []byte) (start, end streamID, err error) {
	start, ex, err := parseIntervalID(a, 0)
	if err != nil {
		return
	}
	if ex && !start.incr() {
		return start, end, fmt.Errorf("invalid start ID for the interval")
	}
	end, ex, err = parseIntervalID(b, math.MaxUint64)
	if err != nil {
		return
	}
	if ex && !end.decr() {
		return start, end, fmt.Errorf("invalid end ID for the interval")
	}
	return start, end, nil
}

// --- the stream value ------------------------------------------------------

// sentry is one entry: its ID, fields and values alternating, whether it is
// flagged deleted, and whether its fields are its node's master fields.
type sentry struct {
	id   streamID
	fv   [][]byte
	del  bool
	same bool
}

// snode is one radix-tree node of Redis's stream: a listpack whose master
// entry holds the first entry's ID and fields.
type snode struct {
	master streamID
	mf     [][]byte
	ents   []sentry
	live   int
	ebytes int // listpack bytes of the entries (lpBytes adds the rest)
}

// stream is a stream value (t_stream.c's stream).
type stream struct {
	nodes  []*snode
	length uint64
	last   streamID
	first  streamID // recorded-first-entry-id
	maxDel streamID // max-deleted-entry-id
	added  uint64   // entries-added
	groups map[string]*cgroup
}

func (s *stream) clone() *stream {
	n := *s
	n.nodes = make([]*snode, len(s.nodes))
	for i, x := range s.nodes {
		c := *x
		c.ents = slices.Clone(x.ents)
		n.nodes[i] = &c
	}
	if s.groups != nil {
		n.groups = make(map[string]*cgroup, len(s.groups))
		for k, g := range s.groups {
			n.groups[k] = g.clone()
		}
	}
	return &n
}

// Listpack sizes (listpack.c), for the node byte limit.

func lpBacklen(l int) int {
	switch {
	case l <= 127:
		return 1
	case l < 16383:
		return 2
	case l < 2097151:
		return 3
	case l < 268435455:
		return 4
	}
	return 5
}

func lpInt(v int64) int {
	var enc int
	switch {
	case v >= 0 && v <= 127:
		enc = 1
	case v >= -4096 && v <= 4095:
		enc = 2
	case v >= math.MinInt16 && v <= math.MaxInt16:
		enc = 3
	case v >= -(1<<23) && v <= 1<<23-1:
		enc = 4
	case v >= math.MinInt32 && v <= math.MaxInt32:
		enc = 5
	default:
		enc = 9
	}
	return enc + lpBacklen(enc)
}

// lpStr is the size of a string element: an integer when it reads as one
// (lpStringToInt64), else its bytes with a length header.
func lpStr(b []byte) int {
	if len(b) > 0 && len(b) <= 20 {
		if v, err := strconv.ParseInt(string(b), 10, 64); err == nil && strconv.FormatInt(v, 10) == string(b) {
			return lpInt(v)
		}
	}
	var enc int
	switch {
	case len(b) <= 63:
		enc = 1 + len(b)
	case len(b) <= 4095:
		enc = 2 + len(b)
	default:
		enc = 5 + len(b)
	}
	return enc + lpBacklen(enc)
}

func (n *snode) lpBytes() int {
	b := 6 + 1 + lpInt(int64(n.live)) + lpInt(int64(len(n.ents)-n.live)) + lpInt(int64(len(n.mf))) + lpInt(0)
	for _, f := range n.mf {
		b += lpStr(f)
	}
	return b + n.ebytes
}

// entryBytes is the listpack size of entry e in node n.
func (n *snode) entryBytes(e sentry) int {
	nf := len(e.fv) / 2
	b := lpInt(2) + lpInt(int64(e.id.ms-n.master.ms)) + lpInt(int64(e.id.seq-n.master.seq))
	cnt := nf + 3
	if !e.same {
		b += lpInt(int64(nf))
		cnt += nf + 1
	}
	for i := 0; i < len(e.fv); i += 2 {
		if !e.same {
			b += lpStr(e.fv[i])
		}
		b += lpStr(e.fv[i+1])
	}
	return b + lpInt(int64(cnt))
}

// streamListpackMax is STREAM_LISTPACK_MAX_SIZE.
const streamListpackMax = 1 << 30

// appendEntry is streamAppendItem's storing part: id is already checked to
// be above the last ID.
func (s *stream) appendEntry(id streamID, fv [][]byte, maxEntries, maxBytes int64) {
	tot := 0
	for _, x := range fv {
		tot += len(x)
	}
	var n *snode
	if len(s.nodes) > 0 {
		n = s.nodes[len(s.nodes)-1]
		limit := maxBytes
		if limit <= 0 || limit > streamListpackMax {
			limit = streamListpackMax
		}
		if int64(n.lpBytes()+tot) >= limit || (maxEntries > 0 && int64(len(n.ents)) >= maxEntries) {
			n = nil
		}
	}
	e := sentry{id: id, fv: fv}
	if n == nil {
		n = &snode{master: id}
		for i := 0; i < len(fv); i += 2 {
			n.mf = append(n.mf, fv[i])
		}
		s.nodes = append(s.nodes, n)
		e.same = true
	} else if len(n.mf) == len(fv)/2 {
		e.same = true
		for i, f := range n.mf {
			if !bytes.Equal(f, fv[2*i]) {
				e.same = false
				break
			}
		}
	}
	n.ebytes += n.entryBytes(e)
	n.ents = append(n.ents, e)
	n.live++
	s.length++
	s.added++
	s.last = id
	if s.length == 1 {
		s.first = id
	}
}

// edge is streamGetEdgeID skipping deleted entries: the first (or last)
// entry's ID, or the largest (smallest) ID when empty.
func (s *stream) edge(first bool) streamID {
	var out streamID
	found := false
	s.each(streamID{}, maxStreamID, !first, func(e *sentry) bool {
		out, found = e.id, true
		return false
	})
	if !found {
		if first {
			return maxStreamID
		}
		return streamID{}
	}
	return out
}

// each calls f with every live entry from start to end (inclusive), in
// order (rev: backwards), until f answers false.
func (s *stream) each(start, end streamID, rev bool, f func(e *sentry) bool) {
	if start.cmp(end) > 0 {
		return
	}
	if !rev {
		// the first node that may hold start: the last whose master <= start
		i, _ := slices.BinarySearchFunc(s.nodes, start, func(n *snode, id streamID) int {
			if n.master.cmp(id) <= 0 {
				return -1
			}
			return 1
		})
		for i = max(i-1, 0); i < len(s.nodes); i++ {
			n := s.nodes[i]
			if n.master.cmp(end) > 0 {
				return
			}
			for j := range n.ents {
				e := &n.ents[j]
				if e.del || e.id.cmp(start) < 0 {
					continue
				}
				if e.id.cmp(end) > 0 {
					return
				}
				if !f(e) {
					return
				}
			}
		}
		return
	}
	for i := len(s.nodes) - 1; i >= 0; i-- {
		n := s.nodes[i]
		if len(n.ents) > 0 && n.ents[len(n.ents)-1].id.cmp(start) < 0 {
			return
		}
		for j := len(n.ents) - 1; j >= 0; j-- {
			e := &n.ents[j]
			if e.del || e.id.cmp(end) > 0 {
				continue
			}
			if e.id.cmp(start) < 0 {
				return
			}
			if !f(e) {
				return
			}
		}
	}
}

// lookup returns the live entry id, or nil.
func (s *stream) lookup(id streamID) *sentry {
	var out *sentry
	s.each(id, id, false, func(e *sentry) bool { out = e; return false })
	return out
}

// remove flags entry id deleted (streamIteratorRemoveEntry): the node goes
// when it was its last live entry. It answers whether id was there.
func (s *stream) remove(id streamID) bool {
	for i, n := range s.nodes {
		if n.master.cmp(id) > 0 {
			return false
		}
		j, ok := slices.BinarySearchFunc(n.ents, id, func(e sentry, id streamID) int { return e.id.cmp(id) })
		if !ok || n.ents[j].del {
			continue
		}
		if n.live == 1 {
			s.nodes = slices.Delete(s.nodes, i, i+1)
		} else {
			n.ents[j].del = true
			n.live--
		}
		s.length--
		return true
	}
	return false
}

// trimArgs are XADD's and XTRIM's trimming options.
type trimArgs struct {
	strategy int // 0 none, 1 maxlen, 2 minid
	approx   bool
	limit    int64
	maxlen   int64
	minid    streamID
}

// trim is streamTrim: the number of entries removed.
func (s *stream) trim(a trimArgs) int64 {
	if a.strategy == 0 {
		return 0
	}
	var deleted int64
	for len(s.nodes) > 0 {
		if a.strategy == 1 && int64(s.length) <= a.maxlen {
			break
		}
		n := s.nodes[0]
		entries := int64(n.live)
		if a.limit > 0 && deleted+entries > a.limit {
			break
		}
		var remove bool
		if a.strategy == 1 {
			remove = int64(s.length)-entries >= a.maxlen
		} else {
			remove = n.ents[len(n.ents)-1].id.cmp(a.minid) < 0
		}
		if remove {
			s.nodes = s.nodes[1:]
			s.length -= uint64(entries)
			deleted += entries
			continue
		}
		if a.approx {
			break
		}
		for j := range n.ents {
			e := &n.ents[j]
			var stop bool
			if a.strategy == 1 {
				stop = int64(s.length) <= a.maxlen
			} else {
				stop = e.id.cmp(a.minid) >= 0
			}
			if stop {
				break
			}
			if !e.del {
				e.del = true
				n.live--
				s.length--
				deleted++
			}
		}
		break
	}
	if s.length == 0 {
		s.first = streamID{}
	} else if deleted > 0 {
		s.first = s.edge(true)
	}
	return deleted
}

// encode appends the stream's canonical form (kvEntry.encode): its
// counters, its nodes with every entry (deleted ones flagged), then its
// groups by name.
func (s *stream) encode(w *wire.Encoder) {
	w.Uvarint(s.length)
	for _, id := range []streamID{s.last, s.first, s.maxDel} {
		w.Uvarint(id.ms)
		w.Uvarint(id.seq)
	}
	w.Uvarint(s.added)
	w.Uvarint(uint64(len(s.nodes)))
	for _, n := range s.nodes {
		w.Uvarint(uint64(len(n.ents)))
		for _, e := range n.ents {
			w.Uvarint(e.id.ms)
			w.Uvarint(e.id.seq)
			w.Bool(e.del)
			w.Uvarint(uint64(len(e.fv)))
			for _, x := range e.fv {
				w.Bytes(x)
			}
		}
	}
	names := slices.Sorted(maps.Keys(s.groups))
	w.Uvarint(uint64(len(names)))
	for _, name := range names {
		w.String(name)
		s.groups[name].encode(w)
	}
}

// decodeStream reads encode's output, rebuilding each node's master entry
// and sizes from its first entry.
func decodeStream(d *wire.Decoder) *stream {
	s := &stream{length: d.Uvarint()}
	ids := make([]streamID, 3)
	for i := range ids {
		ids[i] = streamID{d.Uvarint(), d.Uvarint()}
	}
	s.last, s.first, s.maxDel = ids[0], ids[1], ids[2]
	s.added = d.Uvarint()
	nn := d.Count(1<<40, 1)
	var live uint64
	prev, any := streamID{}, false
	for i := 0; i < nn && d.Err() == nil; i++ {
		ne := d.Count(1<<40, 4)
		if ne == 0 {
			d.Fail(fmt.Errorf("kv: empty stream node"))
			break
		}
		n := &snode{}
		for j := 0; j < ne && d.Err() == nil; j++ {
			e := sentry{id: streamID{d.Uvarint(), d.Uvarint()}, del: d.Bool()}
			nf := d.Count(1<<40, 1)
			if nf%2 != 0 {
				d.Fail(fmt.Errorf("kv: odd stream entry"))
				break
			}
			for k := 0; k < nf && d.Err() == nil; k++ {
				e.fv = append(e.fv, nonNil(d.BytesCopy()))
			}
			if any && e.id.cmp(prev) <= 0 {
				d.Fail(fmt.Errorf("kv: stream IDs out of order"))
			}
			prev, any = e.id, true
			if j == 0 {
				n.master = e.id
				for k := 0; k < len(e.fv); k += 2 {
					n.mf = append(n.mf, e.fv[k])
				}
				e.same = true
			} else if len(n.mf) == len(e.fv)/2 {
				e.same = true
				for k, f := range n.mf {
					if !bytes.Equal(f, e.fv[2*k]) {
						e.same = false
					}
				}
			}
			n.ebytes += n.entryBytes(e)
			if !e.del {
				n.live++
			}
			n.ents = append(n.ents, e)
		}
		live += uint64(n.live)
		s.nodes = append(s.nodes, n)
	}
	ng := d.Count(1<<40, 2)
	for i := 0; i < ng && d.Err() == nil; i++ {
		if s.groups == nil {
			s.groups = map[string]*cgroup{}
		}
		name := d.String()
		s.groups[name] = decodeGroup(d)
	}
	if d.Err() == nil && live != s.length {
		d.Fail(fmt.Errorf("kv: stream length %d, %d live entries", s.length, live))
	}
	return s
}

// --- results ----------------------------------------------------------------

// Results nest at most MaxArrayDepth arrays deep (EXEC's array
// included), so stream replies travel flat: a list of entries is [id,
// [field, value ...], id, [...], ...] (a deleted entry of a consumer's
// history has nil for its fields), and XREAD's reply is [key, entries,
// key, entries, ...]. The gateway (gateway/stream.go) nests them as Redis
// does.

// entryFlat is one entry of a flat list: its ID and its fields.
func entryFlat(e *sentry) []Result {
	return []Result{e.id.result(), BytesArray(e.fv...)}
}

// rangeResult is XRANGE's reply, flat: up to count entries (0: all).
func (s *stream) rangeResult(start, end streamID, count int64, rev bool) []Result {
	var out []Result
	s.each(start, end, rev, func(e *sentry) bool {
		out = append(out, entryFlat(e)...)
		return count == 0 || int64(len(out)/2) < count
	})
	return out
}

// stream returns key's stream (nil when absent), or WRONGTYPE.
func (s *KVState) stream(key string) (*stream, *Result) {
	_, c, bad := s.liveOf(key, tStream)
	if bad != nil || c == nil {
		return nil, bad
	}
	return c.st, nil
}

// --- XADD / XTRIM -----------------------------------------------------------

// addTrim is streamParseAddOrTrimArgsOrReply's result.
type addTrim struct {
	trimArgs
	id         streamID
	idGiven    bool
	seqGiven   bool
	noMkStream bool
	idPos      int
}

// parseAddTrim parses a (the arguments after the key) as XADD (xadd) or
// XTRIM does; maxEntries sets the default LIMIT of an approximate trim.
func parseAddTrim(a [][]byte, xadd bool, maxEntries int64) (addTrim, error) {
	var o addTrim
	limitGiven := false
	i := 0
	for ; i < len(a); i++ {
		more := len(a) - 1 - i
		opt := strings.ToLower(string(a[i]))
		switch {
		case xadd && opt == "*":
			o.idPos = i
			return o, o.finish(xadd, limitGiven, maxEntries)
		case (opt == "maxlen" || opt == "minid") && more > 0:
			if o.strategy != 0 {
				return o, fmt.Errorf("syntax error, MAXLEN and MINID options at the same time are not compatible")
			}
			o.approx = false
			if next := string(a[i+1]); more >= 2 && (next == "~" || next == "=") {
				o.approx = next == "~"
				i++
			}
			if opt == "maxlen" {
				n, ok := parseInt(a[i+1])
				if !ok {
					return o, fmt.Errorf(errNotInt)
				}
				if n < 0 {
					return o, fmt.Errorf("The MAXLEN argument must be >= 0.")
				}
				o.maxlen, o.strategy = n, 1
			} else {
				id, _, err := parseStreamID(a[i+1], 0, true, false)
				if err != nil {
					return o, err
				}
				o.minid, o.strategy = id, 2
			}
			i++
		case opt == "limit" && more > 0:
			n, ok := parseInt(a[i+1])
			if !ok {
				return o, fmt.Errorf(errNotInt)
			}
			if n < 0 {
				return o, fmt.Errorf("The LIMIT argument must be >= 0.")
			}
			o.limit, limitGiven = n, true
			i++
		case xadd && opt == "nomkstream":
			o.noMkStream = true
		case xadd:
			id, seqGiven, err := parseStreamID(a[i], 0, true, true)
			if err != nil {
				return o, err
			}
			o.id, o.idGiven, o.seqGiven, o.idPos = id, true, seqGiven, i
			return o, o.finish(xadd, limitGiven, maxEntries)
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	o.idPos = i
	return o, o.finish(xadd, limitGiven, maxEntries)
}

func (o *addTrim) finish(xadd, limitGiven bool, maxEntries int64) error {
	if o.limit != 0 && o.strategy == 0 {
		return fmt.Errorf("syntax error, LIMIT cannot be used without specifying a trimming strategy")
	}
	if !xadd && o.strategy == 0 {
		return fmt.Errorf("syntax error, XTRIM must be called with a trimming strategy")
	}
	switch {
	case limitGiven && !o.approx:
		return fmt.Errorf("syntax error, LIMIT cannot be used without the special ~ option")
	case !limitGiven && o.approx:
		o.limit = 100 * maxEntries
		if o.limit <= 0 {
			o.limit = 10000
		}
		o.limit = min(o.limit, 1000000)
	case !limitGiven:
		o.limit = 0
	}
	return nil
}

// nodeLimits reads the leading stream-node-max-entries and -bytes.
func nodeLimits(a [][]byte) (int64, int64, bool) {
	e, ok1 := parseInt(a[0])
	b, ok2 := parseInt(a[1])
	return e, b, ok1 && ok2 && e >= 0 && b >= 0
}

func checkXAdd(op Op) error {
	me, _, ok := nodeLimits(op.Args)
	if !ok {
		return fmt.Errorf("xadd: bad node limits")
	}
	a := op.Args[2:]
	o, err := parseAddTrim(a, true, me)
	if err != nil {
		return err
	}
	if n := len(a) - o.idPos - 1; n < 2 || n%2 == 1 {
		return fmt.Errorf("%w for 'xadd' command", ErrArity)
	}
	if o.idGiven && o.seqGiven && o.id.zero() {
		return fmt.Errorf("The ID specified in XADD must be greater than 0-0")
	}
	return nil
}

const errXAddSmaller = "The ID specified in XADD is equal or smaller than the target stream top item"

// errStreamNoTime refuses XADD * where operations carry no time.
const errStreamNoTime = "automatic stream IDs (XADD *) need a protocol that orders time (paxos, pbpaxos, pb, unreplicated)"

func (s *KVState) opXAdd(op Op) Result {
	me, mb, _ := nodeLimits(op.Args)
	a := op.Args[2:]
	o, _ := parseAddTrim(a, true, me)
	e, c, bad := s.mutable(op.Key, tStream, !o.noMkStream)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Nil()
	}
	st := c.st
	if st.last == maxStreamID {
		return Errorf("The stream has exhausted the last possible ID, unable to add more items")
	}
	var id streamID
	switch {
	case !o.idGiven:
		if !s.timed {
			return Errorf(errStreamNoTime)
		}
		if ms := uint64(max(s.now, 0)); ms > st.last.ms {
			id = streamID{ms, 0}
		} else {
			id = st.last
			id.incr()
		}
	case o.seqGiven:
		id = o.id
	default:
		if st.last.ms == o.id.ms {
			if st.last.seq == math.MaxUint64 {
				return Errorf(errXAddSmaller)
			}
			id = streamID{st.last.ms, st.last.seq + 1}
		} else {
			id = o.id
		}
	}
	if id.cmp(st.last) <= 0 {
		return Errorf(errXAddSmaller)
	}
	st.appendEntry(id, slices.Clone(a[o.idPos+1:]), me, mb)
	st.trim(o.trimArgs)
	s.store(op.Key, e, c)
	return id.result()
}

func checkXTrim(op Op) error {
	me, ok := parseInt(op.Args[0])
	if !ok {
		return fmt.Errorf("xtrim: bad node limit")
	}
	_, err := parseAddTrim(op.Args[1:], false, me)
	return err
}

func (s *KVState) opXTrim(op Op) Result {
	me, _ := parseInt(op.Args[0])
	o, _ := parseAddTrim(op.Args[1:], false, me)
	e, c, bad := s.mutable(op.Key, tStream, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	n := c.st.trim(o.trimArgs)
	if n > 0 {
		s.store(op.Key, e, c)
	}
	return Int(n)
}

// --- XRANGE / XLEN / XDEL / XSETID -------------------------------------------

func parseXRangeArgs(op Op) (start, end streamID, count int64, err error) {
	a, b := op.Args[0], op.Args[1]
	if op.Kind == "xrevrange" {
		a, b = b, a
	}
	if start, end, err = parseRange(a, b); err != nil {
		return
	}
	count = -1
	rest := op.Args[2:]
	for j := 0; j < len(rest); j++ {
		if strings.EqualFold(string(rest[j]), "count") && j+1 < len(rest) {
			n, ok := parseInt(rest[j+1])
			if !ok {
				return start, end, 0, fmt.Errorf(errNotInt)
			}
			count = max(n, 0)
			j++
			continue
		}
		return start, end, 0, fmt.Errorf(errSyntax)
	}
	return
}

func checkXRange(op Op) error {
	_, _, _, err := parseXRangeArgs(op)
	return err
}

func (s *KVState) opXRange(op Op) Result {
	start, end, count, _ := parseXRangeArgs(op)
	st, bad := s.stream(op.Key)
	if bad != nil {
		return *bad
	}
	if st == nil {
		return Array()
	}
	if count == 0 {
		return Nil()
	}
	return Array(st.rangeResult(start, end, max(count, 0), op.Kind == "xrevrange")...)
}

func (s *KVState) opXLen(op Op) Result {
	st, bad := s.stream(op.Key)
	if bad != nil {
		return *bad
	}
	if st == nil {
		return Int(0)
	}
	return Int(int64(st.length))
}

func checkXDel(op Op) error {
	for _, a := range op.Args {
		if _, _, err := parseStreamID(a, 0, true, false); err != nil {
			return err
		}
	}
	return nil
}

func (s *KVState) opXDel(op Op) Result {
	e, c, bad := s.mutable(op.Key, tStream, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	st := c.st
	n, firstGone := 0, false
	for _, a := range op.Args {
		id, _, _ := parseStreamID(a, 0, true, false)
		if st.remove(id) {
			firstGone = firstGone || id == st.first
			if id.cmp(st.maxDel) > 0 {
				st.maxDel = id
			}
			n++
		}
	}
	if n > 0 {
		if st.length == 0 {
			st.first = streamID{}
		} else if firstGone {
			st.first = st.edge(true)
		}
		s.store(op.Key, e, c)
	}
	return Int(int64(n))
}

type xsetidArgs struct {
	id, maxDel streamID
	added      int64
}

func parseXSetID(op Op) (xsetidArgs, error) {
	o := xsetidArgs{added: -1}
	id, _, err := parseStreamID(op.Args[0], 0, true, false)
	if err != nil {
		return o, err
	}
	o.id = id
	a := op.Args[1:]
	for i := 0; i < len(a); i++ {
		more := len(a) - 1 - i
		switch w := strings.ToLower(string(a[i])); {
		case w == "entriesadded" && more > 0:
			n, ok := parseInt(a[i+1])
			if !ok {
				return o, fmt.Errorf(errNotInt)
			}
			if n < 0 {
				return o, fmt.Errorf("entries_added must be positive")
			}
			o.added = n
			i++
		case w == "maxdeletedid" && more > 0:
			m, _, err := parseStreamID(a[i+1], 0, true, false)
			if err != nil {
				return o, err
			}
			if o.id.cmp(m) < 0 {
				return o, fmt.Errorf("The ID specified in XSETID is smaller than the provided max_deleted_entry_id")
			}
			o.maxDel = m
			i++
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	return o, nil
}

func checkXSetID(op Op) error {
	_, err := parseXSetID(op)
	return err
}

func (s *KVState) opXSetID(op Op) Result {
	o, _ := parseXSetID(op)
	e, c, bad := s.mutable(op.Key, tStream, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Errorf("no such key")
	}
	st := c.st
	if st.length > 0 {
		if o.id.cmp(st.edge(false)) < 0 {
			return Errorf("The ID specified in XSETID is smaller than the target stream top item")
		}
		if o.added != -1 && st.length > uint64(o.added) {
			return Errorf("The entries_added specified in XSETID is smaller than the target stream length")
		}
	}
	st.last = o.id
	if o.added != -1 {
		st.added = uint64(o.added)
	}
	if !o.maxDel.zero() {
		st.maxDel = o.maxDel
	}
	s.store(op.Key, e, c)
	return OK()
}

// --- XREAD ------------------------------------------------------------------

// xreadKeys are xread's keys after the first: Args[3 : 3+n-1].
func xreadKeys(op Op) []string {
	n, ok := parseInt(op.Args[2])
	if !ok || n < 1 || int(n-1) > len(op.Args)-3 {
		return nil
	}
	return argStrings(op.Args[3 : 3+n-1])
}

// xreadArgs splits xread's or xreadgroup's tail (n, key2..keyn, id1..idn).
func xreadArgs(key string, a [][]byte) ([]string, [][]byte, error) {
	n, ok := parseInt(a[0])
	if !ok || n < 1 || int64(len(a)-1) != 2*n-1 {
		return nil, nil, fmt.Errorf("Unbalanced XREAD list of streams: for each stream key an ID or '$' must be specified.")
	}
	keys := append([]string{key}, argStrings(a[1:n])...)
	return keys, a[n:], nil
}

func checkXRead(op Op) error {
	if err := checkWait(op.Args[0]); err != nil {
		return err
	}
	if _, ok := parseInt(op.Args[1]); !ok {
		return fmt.Errorf(errNotInt)
	}
	_, ids, err := xreadArgs(op.Key, op.Args[2:])
	if err != nil {
		return err
	}
	for _, id := range ids {
		if string(id) == "$" {
			continue
		}
		if string(id) == ">" {
			return fmt.Errorf("The > ID can be specified only when calling XREADGROUP using the GROUP <group> <consumer> option.")
		}
		if _, _, err := parseStreamID(id, 0, true, false); err != nil {
			return err
		}
	}
	return nil
}

// opXRead is XREAD: for each stream with entries above its ID, [key,
// entries]; nil when none has any. With wait "1" (a blocked client) a key
// of another type counts as empty, and COUNT 0 is Redis's 1000 for a
// served blocked client.
func (s *KVState) opXRead(op Op) Result {
	wait := string(op.Args[0]) == "1"
	count, _ := parseInt(op.Args[1])
	count = max(count, 0)
	if wait && count == 0 {
		count = 1000
	}
	keys, ids, _ := xreadArgs(op.Key, op.Args[2:])
	sts := make([]*stream, len(keys))
	for i, k := range keys {
		st, bad := s.stream(k)
		if bad != nil && !wait {
			return *bad
		}
		sts[i] = st
	}
	var out []Result
	for i, st := range sts {
		if st == nil || st.length == 0 {
			continue
		}
		var gt streamID
		if string(ids[i]) == "$" {
			gt = st.last
		} else {
			gt, _, _ = parseStreamID(ids[i], 0, true, false)
		}
		if st.edge(false).cmp(gt) <= 0 {
			continue
		}
		start := gt
		start.incr()
		out = append(out, Bytes([]byte(keys[i])), Array(st.rangeResult(start, maxStreamID, count, false)...))
	}
	if len(out) == 0 {
		return Nil()
	}
	return Array(out...)
}

// opXLastID answers each key's last ID (0-0 when absent or not a stream):
// XREAD BLOCK's $, resolved before the client blocks.
func (s *KVState) opXLastID(op Op) Result {
	keys := append([]string{op.Key}, argStrings(op.Args)...)
	out := make([]Result, len(keys))
	for i, k := range keys {
		id := streamID{}
		if st, _ := s.stream(k); st != nil {
			id = st.last
		}
		out[i] = id.result()
	}
	return Array(out...)
}

// --- XINFO ------------------------------------------------------------------

func checkXInfo(op Op) error {
	switch sub := strings.ToLower(string(op.Args[0])); {
	case sub == "stream":
		a := op.Args[1:]
		if len(a) == 0 {
			return nil
		}
		if (len(a) != 1 && len(a) != 3) || !strings.EqualFold(string(a[0]), "full") || (len(a) == 3 && !strings.EqualFold(string(a[1]), "count")) {
			return fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try XINFO HELP.", op.Args[0])
		}
		if len(a) == 3 {
			if _, ok := parseInt(a[2]); !ok {
				return fmt.Errorf(errNotInt)
			}
		}
		return nil
	case sub == "groups" && len(op.Args) == 1, sub == "consumers" && len(op.Args) == 2:
		return nil
	}
	return fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try XINFO HELP.", op.Args[0])
}

func str(s string) Result { return Bytes([]byte(s)) }

func (s *KVState) opXInfo(op Op) Result {
	st, bad := s.stream(op.Key)
	if bad != nil {
		return *bad
	}
	if st == nil {
		return Errorf("no such key")
	}
	switch strings.ToLower(string(op.Args[0])) {
	case "groups":
		return st.infoGroups()
	case "consumers":
		return s.infoConsumers(st, op.Key, string(op.Args[1]))
	}
	full := len(op.Args) > 1
	count := int64(10)
	if len(op.Args) == 4 {
		if count, _ = parseInt(op.Args[3]); count < 0 {
			count = 10
		}
	}
	out := []Result{
		str("length"), Int(int64(st.length)),
		str("radix-tree-keys"), Int(int64(len(st.nodes))),
		str("radix-tree-nodes"), Int(int64(len(st.nodes))),
		str("last-generated-id"), st.last.result(),
		str("max-deleted-entry-id"), st.maxDel.result(),
		str("entries-added"), Int(int64(st.added)),
		str("recorded-first-entry-id"), st.first.result(),
	}
	if !full {
		first, last := Nil(), Nil()
		if r := st.rangeResult(streamID{}, maxStreamID, 1, false); len(r) > 0 {
			first = Array(r...)
		}
		if r := st.rangeResult(streamID{}, maxStreamID, 1, true); len(r) > 0 {
			last = Array(r...)
		}
		out = append(out, str("groups"), Int(int64(len(st.groups))), str("first-entry"), first, str("last-entry"), last)
		return Array(out...)
	}
	out = append(out, str("entries"), Array(st.rangeResult(streamID{}, maxStreamID, count, false)...),
		str("groups"), st.infoGroupsFull(count))
	return Array(out...)
}
