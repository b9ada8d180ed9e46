package service

import (
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// Stream consumer groups (issue 34; t_stream.c of Redis 7.0.15). The
// arguments are Redis's after the key:
//
//	xgroup create|setid|destroy|createconsumer|delconsumer group [id|consumer] [options]
//	                             W  OK | int (as Redis)
//	xreadgroup wait group consumer noack count n key2..keyn id1..idn (Op.Key the first key)
//	                             W  array of [key, entries] | nil (nothing new for ">")
//	xack group id [id ...]       W  int acknowledged
//	xpending now group [[IDLE t] start end count [consumer]] (now: kv_stream.go, timedRead)
//	                             R  summary | array of [id, consumer, idle, deliveries]
//	xclaim group consumer min-idle id ... [options]
//	                             W  array of entries (JUSTID: ids)
//	xautoclaim group consumer min-idle start [COUNT n] [JUSTID]
//	                             W  [next-start, entries, deleted ids]
//
// XREADGROUP is a write: it moves the group's last-delivered ID and its
// pending entries list. A blocked XREADGROUP (wait "1") answers Redis's
// errors for a key that is gone or no longer a stream ("UNBLOCKED ...")
// and for a group that is gone ("NOGROUP ..."), which end the blocking
// command as in Redis.

func init() {
	addKVOps(map[string]kvOp{
		"xgroup":     {min: 2, max: 7, check: unmarked(checkXGroup), run: reportConsumers((*KVState).opXGroup, 1)},
		"xreadgroup": {min: 7, max: -1, check: unmarked(checkXReadGroup), keys: func(op Op) []string { op, _ = splitReport(op); return xreadgroupKeys(op) }, run: reportConsumers((*KVState).opXReadGroup, 1)},
		"xack":       {min: 2, max: -1, run: (*KVState).opXAck},
		"xpending":   {read: true, min: 2, max: 8, check: timedRead(checkXPending), run: atReadTime((*KVState).opXPending)},
		"xclaim":     {min: 4, max: -1, run: reportConsumers((*KVState).opXClaim, 0)},
		"xautoclaim": {min: 4, max: 8, check: unmarked(checkXAutoClaim), run: reportConsumers((*KVState).opXAutoClaim, 0)},
		"xready":     {read: true, min: 2, max: -1, check: checkXReady, keys: func(op Op) []string { return xreadKeys(Op{Args: append([][]byte{nil, nil}, op.Args[1:]...)}) }, run: (*KVState).opXReady},
	})
}

// ReportMark, as the last argument of an xreadgroup, xclaim, xautoclaim
// or xgroup delconsumer operation, asks for its result to say which keys
// gained or lost the named consumer: [keys, result] instead of result
// (unless the result is an error, or nil with no key changed). The gateway
// sends it when keyspace events of class t are on (gateway/notify.go: Redis
// fires xgroup-createconsumer and xgroup-delconsumer then), so every
// replica computes the same answer from the same state; operations logged
// without it are read as before. It cannot be a Redis argument (a NUL
// byte leads it).
const ReportMark = "\x00consumers"

// splitReport removes a trailing ReportMark from op's arguments.
func splitReport(op Op) (Op, bool) {
	if n := len(op.Args); n > 0 && string(op.Args[n-1]) == ReportMark {
		op.Args = op.Args[:n-1]
		return op, true
	}
	return op, false
}

// unmarked is check applied to the operation without its ReportMark.
func unmarked(check func(Op) error) func(Op) error {
	return func(op Op) error {
		op, _ = splitReport(op)
		return check(op)
	}
}

// reportConsumers runs run without the operation's ReportMark and, when
// it had one, wraps the result with those of the operation's stream keys
// (all of xreadgroup's) whose group (argument g) gained or lost the
// consumer (argument g+1).
func reportConsumers(run func(*KVState, Op) Result, g int) func(*KVState, Op) Result {
	return func(s *KVState, op Op) Result {
		op, report := splitReport(op)
		if !report {
			return run(s, op)
		}
		keys := []string{op.Key}
		if op.Kind == "xreadgroup" {
			keys, _, _ = xreadArgs(op.Key, op.Args[5:])
		}
		group, name := string(op.Args[g]), string(op.Args[g+1])
		has := func(k string) bool {
			e, ok := s.live(k)
			if !ok || e.typ() != tStream {
				return false
			}
			gr := e.c.st.groups[group]
			return gr != nil && gr.consumers[name] != nil
		}
		before := make([]bool, len(keys))
		for i, k := range keys {
			before[i] = has(k)
		}
		r := run(s, op)
		var changed [][]byte
		for i, k := range keys {
			if has(k) != before[i] {
				changed = append(changed, []byte(k))
			}
		}
		if r.Type == ResultErr || (r.Type == ResultNil && changed == nil) {
			return r
		}
		return Array(BytesArray(changed...), r)
	}
}

// xready group n key2..keyn id1..idn (Op.Key the first key; group "" for
// XREAD) is the read a poll sends for a blocked XREAD or XREADGROUP: 1 when
// an attempt would answer something (entries above an ID, or for a group
// an error: the key or the group gone), else 0.
func checkXReady(op Op) error {
	_, _, err := xreadArgs(op.Key, op.Args[1:])
	return err
}

func (s *KVState) opXReady(op Op) Result {
	group := string(op.Args[0])
	keys, ids, _ := xreadArgs(op.Key, op.Args[1:])
	for i, k := range keys {
		st, bad := s.stream(k)
		if group != "" && (bad != nil || st == nil || st.groups[group] == nil) {
			return Int(1)
		}
		if st == nil || st.length == 0 {
			continue
		}
		var gt streamID
		switch string(ids[i]) {
		case ">":
			gt = st.groups[group].last
		case "$":
			gt = st.last
		default:
			if group != "" {
				return Int(1) // history is answered at once
			}
			gt, _, _ = parseStreamID(ids[i], 0, true, false)
		}
		if st.edge(false).cmp(gt) > 0 {
			return Int(1)
		}
	}
	return Int(0)
}

// nack is a pending entry: its consumer, last delivery time (ms) and
// delivery count.
type nack struct {
	consumer string
	time     int64
	count    uint64
}

type consumer struct {
	seen int64
	pel  map[streamID]struct{}
}

// cgroup is a consumer group: its last delivered ID, its entries-read
// counter (-1: unknown), its pending entries and consumers.
type cgroup struct {
	last      streamID
	read      int64
	pel       map[streamID]*nack
	consumers map[string]*consumer
}

func newGroup(last streamID, read int64) *cgroup {
	return &cgroup{last: last, read: read, pel: map[streamID]*nack{}, consumers: map[string]*consumer{}}
}

func (g *cgroup) clone() *cgroup {
	n := newGroup(g.last, g.read)
	for id, x := range g.pel {
		c := *x
		n.pel[id] = &c
	}
	for name, c := range g.consumers {
		n.consumers[name] = &consumer{seen: c.seen, pel: maps.Clone(c.pel)}
	}
	return n
}

func (g *cgroup) encode(w *wire.Encoder) {
	w.Uvarint(g.last.ms)
	w.Uvarint(g.last.seq)
	w.Varint(g.read)
	ids := g.pelIDs()
	w.Uvarint(uint64(len(ids)))
	for _, id := range ids {
		x := g.pel[id]
		w.Uvarint(id.ms)
		w.Uvarint(id.seq)
		w.String(x.consumer)
		w.Varint(x.time)
		w.Uvarint(x.count)
	}
	names := slices.Sorted(maps.Keys(g.consumers))
	w.Uvarint(uint64(len(names)))
	for _, n := range names {
		w.String(n)
		w.Varint(g.consumers[n].seen)
	}
}

func decodeGroup(d *wire.Decoder) *cgroup {
	g := newGroup(streamID{d.Uvarint(), d.Uvarint()}, d.Varint())
	np := d.Count(1<<40, 5)
	for i := 0; i < np && d.Err() == nil; i++ {
		id := streamID{d.Uvarint(), d.Uvarint()}
		g.pel[id] = &nack{consumer: d.String(), time: d.Varint(), count: d.Uvarint()}
	}
	nc := d.Count(1<<40, 2)
	for i := 0; i < nc && d.Err() == nil; i++ {
		name := d.String()
		g.consumers[name] = &consumer{seen: d.Varint(), pel: map[streamID]struct{}{}}
	}
	for id, x := range g.pel {
		c, ok := g.consumers[x.consumer]
		if !ok {
			d.Fail(fmt.Errorf("kv: pending entry of unknown consumer %q", x.consumer))
			break
		}
		c.pel[id] = struct{}{}
	}
	return g
}

// pelIDs is the group's pending IDs in order.
func (g *cgroup) pelIDs() []streamID {
	ids := slices.Collect(maps.Keys(g.pel))
	slices.SortFunc(ids, streamID.cmp)
	return ids
}

func sortedIDs(m map[streamID]struct{}) []streamID {
	ids := slices.Collect(maps.Keys(m))
	slices.SortFunc(ids, streamID.cmp)
	return ids
}

// consumer returns name's consumer, creating it (seen now) when create is
// set; a lookup refreshes its seen time unless noRefresh.
func (g *cgroup) consumer(name string, now int64, create, refresh bool) *consumer {
	c, ok := g.consumers[name]
	if ok {
		if refresh {
			c.seen = now
		}
		return c
	}
	if !create {
		return nil
	}
	c = &consumer{seen: now, pel: map[streamID]struct{}{}}
	g.consumers[name] = c
	return c
}

// unpend removes id from the group's and its consumer's pending lists.
func (g *cgroup) unpend(id streamID) bool {
	x, ok := g.pel[id]
	if !ok {
		return false
	}
	delete(g.pel, id)
	if c := g.consumers[x.consumer]; c != nil {
		delete(c.pel, id)
	}
	return true
}

// assign gives pending entry id (created when absent) to consumer name.
func (g *cgroup) assign(id streamID, x *nack, name string) {
	if old := g.consumers[x.consumer]; old != nil && x.consumer != name {
		delete(old.pel, id)
	}
	x.consumer = name
	g.pel[id] = x
	g.consumers[name].pel[id] = struct{}{}
}

// rangeHasTombstones is streamRangeHasTombstones from start to the end.
func (s *stream) rangeHasTombstones(start streamID) bool {
	if s.length == 0 || s.maxDel.zero() || s.first.cmp(s.maxDel) > 0 {
		return false
	}
	return start.cmp(s.maxDel) <= 0
}

// distance is streamEstimateDistanceFromFirstEverEntry (-1: unknown).
func (s *stream) distance(id streamID) int64 {
	if s.added == 0 {
		return 0
	}
	if s.length == 0 && id.cmp(s.last) < 1 {
		return int64(s.added)
	}
	switch c := id.cmp(s.last); {
	case c == 0:
		return int64(s.added)
	case c > 0:
		return -1
	}
	if s.maxDel.zero() || s.maxDel.cmp(s.first) < 0 {
		switch c := id.cmp(s.first); {
		case c < 0:
			return int64(s.added - s.length)
		case c == 0:
			return int64(s.added-s.length) + 1
		}
	}
	return -1
}

// lag is streamReplyWithCGLag: an int, or nil when unknown.
func (s *stream) lag(g *cgroup) Result {
	if s.added == 0 {
		return Int(0)
	}
	if g.read != -1 && !s.rangeHasTombstones(g.last) {
		return Int(int64(s.added) - g.read)
	}
	if r := s.distance(g.last); r != -1 {
		return Int(int64(s.added) - r)
	}
	return Nil()
}

func readResult(g *cgroup) Result {
	if g.read == -1 {
		return Nil()
	}
	return Int(g.read)
}

// --- XGROUP -------------------------------------------------------------------

type xgroupArgs struct {
	sub, group string
	mkstream   bool
	read       int64
}

func parseXGroup(op Op) (xgroupArgs, error) {
	o := xgroupArgs{sub: strings.ToLower(string(op.Args[0])), group: string(op.Args[1]), read: -1}
	argc := len(op.Args) + 2
	bad := fmt.Errorf("unknown subcommand or wrong number of arguments for '%s'. Try XGROUP HELP.", op.Args[0])
	for i := 3; i < len(op.Args); i++ {
		switch w := strings.ToLower(string(op.Args[i])); {
		case o.sub == "create" && w == "mkstream":
			o.mkstream = true
		case (o.sub == "create" || o.sub == "setid") && w == "entriesread" && i+1 < len(op.Args):
			n, ok := parseInt(op.Args[i+1])
			if !ok {
				return o, fmt.Errorf(errNotInt)
			}
			if n < 0 && n != -1 {
				return o, fmt.Errorf("value for ENTRIESREAD must be positive or -1")
			}
			o.read = n
			i++
		default:
			return o, bad
		}
	}
	switch {
	case o.sub == "create" && argc >= 5 && argc <= 8:
	case o.sub == "setid" && (argc == 5 || argc == 7):
	case o.sub == "destroy" && argc == 4:
	case (o.sub == "createconsumer" || o.sub == "delconsumer") && argc == 5:
	default:
		return o, bad
	}
	return o, nil
}

func checkXGroup(op Op) error {
	o, err := parseXGroup(op)
	if err != nil {
		return err
	}
	if o.sub == "create" || o.sub == "setid" {
		if string(op.Args[2]) != "$" {
			if _, _, err := parseStreamID(op.Args[2], 0, o.sub == "create", false); err != nil {
				return err
			}
		}
	}
	return nil
}

func (s *KVState) opXGroup(op Op) Result {
	o, _ := parseXGroup(op)
	e, c, bad := s.mutable(op.Key, tStream, o.sub == "create" && o.mkstream)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Errorf("The XGROUP subcommand requires the key to exist. Note that for CREATE you may want to use the MKSTREAM option to create an empty stream automatically.")
	}
	st := c.st
	g := st.groups[o.group]
	if g == nil && o.sub != "create" && o.sub != "destroy" {
		return Errorf("NOGROUP No such consumer group '%s' for key name '%s'", o.group, op.Key)
	}
	switch o.sub {
	case "create", "setid":
		id := st.last
		if string(op.Args[2]) != "$" {
			id, _, _ = parseStreamID(op.Args[2], 0, o.sub == "create", false)
		}
		if o.sub == "create" {
			if g != nil {
				return Errorf("BUSYGROUP Consumer Group name already exists")
			}
			if st.groups == nil {
				st.groups = map[string]*cgroup{}
			}
			st.groups[o.group] = newGroup(id, o.read)
		} else {
			g.last, g.read = id, o.read
		}
		s.store(op.Key, e, c)
		return OK()
	case "destroy":
		if g == nil {
			return Int(0)
		}
		delete(st.groups, o.group)
		s.store(op.Key, e, c)
		return Int(1)
	case "createconsumer":
		if _, ok := g.consumers[string(op.Args[2])]; ok {
			return Int(0)
		}
		g.consumer(string(op.Args[2]), s.now, true, false)
		s.store(op.Key, e, c)
		return Int(1)
	}
	// delconsumer
	cons, ok := g.consumers[string(op.Args[2])]
	if !ok {
		return Int(0)
	}
	n := len(cons.pel)
	for id := range cons.pel {
		delete(g.pel, id)
	}
	delete(g.consumers, string(op.Args[2]))
	s.store(op.Key, e, c)
	return Int(int64(n))
}

// --- XREADGROUP -----------------------------------------------------------------

func xreadgroupKeys(op Op) []string {
	return xreadKeys(Op{Args: op.Args[3:]})
}

func checkXReadGroup(op Op) error {
	if err := checkWait(op.Args[0]); err != nil {
		return err
	}
	if w := string(op.Args[3]); w != "0" && w != "1" {
		return fmt.Errorf("noack flag must be 0 or 1")
	}
	if _, ok := parseInt(op.Args[4]); !ok {
		return fmt.Errorf(errNotInt)
	}
	_, ids, err := xreadArgs(op.Key, op.Args[5:])
	if err != nil {
		return err
	}
	for _, id := range ids {
		switch string(id) {
		case ">":
			continue
		case "$":
			return fmt.Errorf("The $ ID is meaningless in the context of XREADGROUP: you want to read the history of this consumer by specifying a proper ID, or use the > ID to get new messages. The $ ID would just return an empty result set.")
		}
		if _, _, err := parseStreamID(id, 0, true, false); err != nil {
			return err
		}
	}
	return nil
}

func (s *KVState) opXReadGroup(op Op) Result {
	wait := string(op.Args[0]) == "1"
	group, name, noack := string(op.Args[1]), string(op.Args[2]), string(op.Args[3]) == "1"
	count, _ := parseInt(op.Args[4])
	count = max(count, 0)
	if wait && count == 0 {
		count = 1000
	}
	keys, ids, _ := xreadArgs(op.Key, op.Args[5:])
	type target struct {
		e kvEntry
		c *coll
	}
	ts := make([]target, len(keys))
	for i, k := range keys {
		e, c, bad := s.mutable(k, tStream, false)
		if bad != nil || c == nil {
			if wait {
				return Errorf("UNBLOCKED the stream key no longer exists")
			}
			if bad != nil {
				return *bad
			}
		}
		if c == nil || c.st.groups[group] == nil {
			if wait {
				return Errorf("NOGROUP the consumer group this client was blocked on no longer exists")
			}
			return Errorf("NOGROUP No such key '%s' or consumer group '%s' in XREADGROUP with GROUP option", k, group)
		}
		ts[i] = target{e, c}
	}
	var out []Result
	for i, t := range ts {
		st := t.c.st
		g := st.groups[group]
		history := string(ids[i]) != ">"
		var gt streamID
		switch {
		case history:
			gt, _, _ = parseStreamID(ids[i], 0, true, false)
		case st.length > 0 && st.edge(false).cmp(g.last) > 0:
			gt = g.last
		default:
			continue
		}
		start := gt
		start.incr()
		cons := g.consumer(name, s.now, true, true)
		var got []Result
		if history {
			for _, id := range sortedIDs(cons.pel) {
				if id.cmp(start) < 0 {
					continue
				}
				if count > 0 && int64(len(got)/2) >= count {
					break
				}
				if e := st.lookup(id); e != nil {
					got = append(got, entryFlat(e)...)
					x := g.pel[id]
					x.time = s.now
					x.count++
				} else {
					got = append(got, id.result(), Nil())
				}
			}
		} else {
			st.each(start, maxStreamID, false, func(e *sentry) bool {
				if e.id.cmp(g.last) > 0 {
					if g.read != -1 && !st.rangeHasTombstones(e.id) {
						g.read++
					} else if st.added > 0 {
						g.read = st.distance(e.id)
					}
					g.last = e.id
				}
				got = append(got, entryFlat(e)...)
				if !noack {
					x, ok := g.pel[e.id]
					if !ok {
						x = &nack{}
					}
					x.time, x.count = s.now, 1
					g.assign(e.id, x, name)
				}
				return count == 0 || int64(len(got)/2) < count
			})
		}
		out = append(out, Bytes([]byte(keys[i])), Array(got...))
		s.store(keys[i], t.e, t.c)
	}
	if len(out) == 0 {
		return Nil()
	}
	return Array(out...)
}

// --- XACK / XPENDING --------------------------------------------------------------

func (s *KVState) opXAck(op Op) Result {
	e, c, bad := s.mutable(op.Key, tStream, false)
	if bad != nil {
		return *bad
	}
	if c == nil || c.st.groups[string(op.Args[0])] == nil {
		return Int(0)
	}
	ids := make([]streamID, 0, len(op.Args)-1)
	for _, a := range op.Args[1:] {
		id, _, err := parseStreamID(a, 0, true, false)
		if err != nil {
			return Errorf("%v", err)
		}
		ids = append(ids, id)
	}
	g := c.st.groups[string(op.Args[0])]
	n := 0
	for _, id := range ids {
		if g.unpend(id) {
			n++
		}
	}
	if n > 0 {
		s.store(op.Key, e, c)
	}
	return Int(int64(n))
}

type xpendingArgs struct {
	summary    bool
	start, end streamID
	count      int64
	minIdle    int64
	consumer   *string
}

func parseXPending(op Op) (xpendingArgs, error) {
	o := xpendingArgs{summary: len(op.Args) == 1}
	argc := len(op.Args) + 2
	if argc != 3 && (argc < 6 || argc > 9) {
		return o, fmt.Errorf(errSyntax)
	}
	if o.summary {
		return o, nil
	}
	i := 1 // Args index of start
	if strings.EqualFold(string(op.Args[1]), "idle") {
		n, ok := parseInt(op.Args[2])
		if !ok {
			return o, fmt.Errorf(errNotInt)
		}
		o.minIdle = n
		if argc < 8 {
			return o, fmt.Errorf(errSyntax)
		}
		i += 2
	}
	n, ok := parseInt(op.Args[i+2])
	if !ok {
		return o, fmt.Errorf(errNotInt)
	}
	o.count = max(n, 0)
	var err error
	if o.start, o.end, err = parseRange(op.Args[i], op.Args[i+1]); err != nil {
		return o, err
	}
	if i+3 < len(op.Args) {
		name := string(op.Args[i+3])
		o.consumer = &name
	}
	return o, nil
}

func checkXPending(op Op) error {
	_, err := parseXPending(op)
	return err
}

func (s *KVState) opXPending(op Op) Result {
	o, _ := parseXPending(op)
	st, bad := s.stream(op.Key)
	if bad != nil {
		return *bad
	}
	var g *cgroup
	if st != nil {
		g = st.groups[string(op.Args[0])]
	}
	if g == nil {
		return Errorf("NOGROUP No such key '%s' or consumer group '%s'", op.Key, op.Args[0])
	}
	if o.summary {
		if len(g.pel) == 0 {
			return Array(Int(0), Nil(), Nil(), Nil())
		}
		ids := g.pelIDs()
		var cs []Result
		for _, name := range slices.Sorted(maps.Keys(g.consumers)) {
			if n := len(g.consumers[name].pel); n > 0 {
				cs = append(cs, Array(str(name), str(fmt.Sprint(n))))
			}
		}
		return Array(Int(int64(len(ids))), ids[0].result(), ids[len(ids)-1].result(), Array(cs...))
	}
	var ids []streamID
	if o.consumer != nil {
		c := g.consumers[*o.consumer]
		if c == nil {
			return Array()
		}
		ids = sortedIDs(c.pel)
	} else {
		ids = g.pelIDs()
	}
	var out []Result
	for _, id := range ids {
		if int64(len(out)) >= o.count || id.cmp(o.end) > 0 {
			break
		}
		if id.cmp(o.start) < 0 {
			continue
		}
		x := g.pel[id]
		if o.minIdle > 0 && s.now-x.time < o.minIdle {
			continue
		}
		out = append(out, Array(id.result(), str(x.consumer), Int(max(s.now-x.time, 0)), Int(int64(x.count))))
	}
	return Array(out...)
}

// --- XCLAIM / XAUTOCLAIM -----------------------------------------------------------

func (s *KVState) opXClaim(op Op) Result {
	e, c, bad := s.mutable(op.Key, tStream, false)
	if bad != nil {
		return *bad
	}
	var g *cgroup
	if c != nil {
		g = c.st.groups[string(op.Args[0])]
	}
	if g == nil {
		return Errorf("NOGROUP No such key '%s' or consumer group '%s'", op.Key, op.Args[0])
	}
	st := c.st
	minIdle, ok := parseInt(op.Args[2])
	if !ok {
		return Errorf("Invalid min-idle-time argument for XCLAIM")
	}
	minIdle = max(minIdle, 0)
	j := 3
	var ids []streamID
	for ; j < len(op.Args); j++ {
		id, _, err := parseStreamID(op.Args[j], 0, true, false)
		if err != nil {
			break
		}
		ids = append(ids, id)
	}
	now := s.now
	var last streamID
	retry, delivery := int64(-1), int64(-1)
	force, justid := false, false
	for ; j < len(op.Args); j++ {
		more := len(op.Args) - 1 - j
		switch w := strings.ToLower(string(op.Args[j])); {
		case w == "force":
			force = true
		case w == "justid":
			justid = true
		case w == "idle" && more > 0:
			n, ok := parseInt(op.Args[j+1])
			if !ok {
				return Errorf("Invalid IDLE option argument for XCLAIM")
			}
			delivery = now - n
			j++
		case w == "time" && more > 0:
			n, ok := parseInt(op.Args[j+1])
			if !ok {
				return Errorf("Invalid TIME option argument for XCLAIM")
			}
			delivery = n
			j++
		case w == "retrycount" && more > 0:
			n, ok := parseInt(op.Args[j+1])
			if !ok {
				return Errorf("Invalid RETRYCOUNT option argument for XCLAIM")
			}
			retry = n
			j++
		case w == "lastid" && more > 0:
			id, _, err := parseStreamID(op.Args[j+1], 0, true, false)
			if err != nil {
				return Errorf("%v", err)
			}
			last = id
			j++
		default:
			return Errorf("Unrecognized XCLAIM option '%s'", op.Args[j])
		}
	}
	changed := false
	if last.cmp(g.last) > 0 {
		g.last, changed = last, true
	}
	if delivery == -1 || delivery < 0 || delivery > now {
		delivery = now
	}
	name := string(op.Args[1])
	var cons *consumer
	var out []Result
	for _, id := range ids {
		x := g.pel[id]
		ent := st.lookup(id)
		if ent == nil {
			if x != nil {
				g.unpend(id)
				changed = true
			}
			continue
		}
		fresh := false
		if force && x == nil {
			x, fresh = &nack{time: now, count: 1}, true
		}
		if x == nil {
			continue
		}
		if !fresh && minIdle > 0 && now-x.time < minIdle {
			continue
		}
		if cons == nil {
			cons = g.consumer(name, now, true, true)
		}
		x.time = delivery
		if retry >= 0 {
			x.count = uint64(retry)
		} else if !justid {
			x.count++
		}
		g.assign(id, x, name)
		changed = true
		if justid {
			out = append(out, id.result())
		} else {
			out = append(out, entryFlat(ent)...)
		}
	}
	if changed {
		s.store(op.Key, e, c)
	}
	return Array(out...)
}

type xautoclaimArgs struct {
	minIdle int64
	start   streamID
	count   int64
	justid  bool
}

func parseXAutoClaim(op Op) (xautoclaimArgs, error) {
	o := xautoclaimArgs{count: 100}
	n, ok := parseInt(op.Args[2])
	if !ok {
		return o, fmt.Errorf("Invalid min-idle-time argument for XAUTOCLAIM")
	}
	o.minIdle = max(n, 0)
	start, ex, err := parseIntervalID(op.Args[3], 0)
	if err != nil {
		return o, err
	}
	if ex && !start.incr() {
		return o, fmt.Errorf("invalid start ID for the interval")
	}
	o.start = start
	a := op.Args[4:]
	for j := 0; j < len(a); j++ {
		switch w := strings.ToLower(string(a[j])); {
		case w == "count" && j+1 < len(a):
			n, ok := parseInt(a[j+1])
			if !ok || n < 1 || n > (1<<63-1)/16 {
				return o, fmt.Errorf("ERR COUNT must be > 0")
			}
			o.count = n
			j++
		case w == "justid":
			o.justid = true
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	return o, nil
}

func checkXAutoClaim(op Op) error {
	_, err := parseXAutoClaim(op)
	return err
}

func (s *KVState) opXAutoClaim(op Op) Result {
	o, _ := parseXAutoClaim(op)
	e, c, bad := s.mutable(op.Key, tStream, false)
	if bad != nil {
		return *bad
	}
	var g *cgroup
	if c != nil {
		g = c.st.groups[string(op.Args[0])]
	}
	if g == nil {
		return Errorf("NOGROUP No such key '%s' or consumer group '%s'", op.Key, op.Args[0])
	}
	st, now, name := c.st, s.now, string(op.Args[1])
	ids := g.pelIDs()
	i, _ := slices.BinarySearchFunc(ids, o.start, streamID.cmp)
	attempts, count := o.count*10, o.count
	var got, deleted []Result
	changed := false
	for ; attempts > 0 && count > 0 && i < len(ids); i++ {
		attempts--
		id := ids[i]
		x := g.pel[id]
		ent := st.lookup(id)
		if ent == nil {
			g.unpend(id)
			deleted = append(deleted, id.result())
			count--
			changed = true
			continue
		}
		if o.minIdle > 0 && now-x.time < o.minIdle {
			continue
		}
		g.consumer(name, now, true, true)
		x.time = now
		if !o.justid {
			x.count++
		}
		g.assign(id, x, name)
		changed = true
		if o.justid {
			got = append(got, id.result())
		} else {
			got = append(got, entryFlat(ent)...)
		}
		count--
	}
	next := streamID{}
	if i < len(ids) {
		next = ids[i]
	}
	if changed {
		s.store(op.Key, e, c)
	}
	return Array(next.result(), Array(got...), Array(deleted...))
}

// --- XINFO GROUPS / CONSUMERS / STREAM FULL ----------------------------------------

func (st *stream) infoGroups() Result {
	var out []Result
	for _, name := range slices.Sorted(maps.Keys(st.groups)) {
		g := st.groups[name]
		out = append(out, Array(
			str("name"), str(name),
			str("consumers"), Int(int64(len(g.consumers))),
			str("pending"), Int(int64(len(g.pel))),
			str("last-delivered-id"), g.last.result(),
			str("entries-read"), readResult(g),
			str("lag"), st.lag(g),
		))
	}
	return Array(out...)
}

func (s *KVState) infoConsumers(st *stream, key, group string) Result {
	g := st.groups[group]
	if g == nil {
		return Errorf("NOGROUP No such consumer group '%s' for key name '%s'", group, key)
	}
	var out []Result
	for _, name := range slices.Sorted(maps.Keys(g.consumers)) {
		c := g.consumers[name]
		out = append(out, Array(str("name"), str(name), str("pending"), Int(int64(len(c.pel))), str("idle"), Int(max(s.now-c.seen, 0))))
	}
	return Array(out...)
}

// infoGroupsFull is XINFO STREAM FULL's groups, flat (see entryFlat): per
// group its name, last-delivered-id, entries-read, lag, pel-count, its
// pending entries as [id, consumer, delivery time, count, id, ...], and its
// consumers as [name, seen-time, pel-count, n, then n times id, delivery
// time, count, name, ...].
func (st *stream) infoGroupsFull(count int64) Result {
	var out []Result
	for _, name := range slices.Sorted(maps.Keys(st.groups)) {
		g := st.groups[name]
		var pend []Result
		for _, id := range g.pelIDs() {
			if count > 0 && int64(len(pend)/4) >= count {
				break
			}
			x := g.pel[id]
			pend = append(pend, id.result(), str(x.consumer), Int(x.time), Int(int64(x.count)))
		}
		var cons []Result
		for _, cn := range slices.Sorted(maps.Keys(g.consumers)) {
			c := g.consumers[cn]
			var cp []Result
			for _, id := range sortedIDs(c.pel) {
				if count > 0 && int64(len(cp)/3) >= count {
					break
				}
				x := g.pel[id]
				cp = append(cp, id.result(), Int(x.time), Int(int64(x.count)))
			}
			cons = append(cons, str(cn), Int(c.seen), Int(int64(len(c.pel))), Int(int64(len(cp)/3)))
			cons = append(cons, cp...)
		}
		out = append(out, str(name), g.last.result(), readResult(g), st.lag(g), Int(int64(len(g.pel))), Array(pend...), Array(cons...))
	}
	return Array(out...)
}
