package gateway

import (
	"errors"
	"math"
	"net"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Blocking list and sorted-set commands (issue 34): BLPOP, BRPOP, BLMPOP,
// BLMOVE, BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BZMPOP, and their non-blocking
// forms LMPOP and ZMPOP; CLIENT UNBLOCK.
//
// A blocking command is served from replicated state only: every attempt
// is one KV operation sent through the namespace's protocol like any write
// (service/kv_block.go: lmpop, zmpop, blmove), so the pop is linearizable,
// runs on a follower by forwarding, and survives a leader's death like any
// other request. The gateway does the waiting, the way a Redis client
// library would poll, but without the client's round trips:
//
//   - The first attempt answers at once unless it finds every key empty
//     (WRONGTYPE and errors included), as in Redis.
//   - Otherwise the connection blocks. A blocked client is tried again when
//     a write through this gateway (any connection, MULTI/EXEC included) may
//     have changed one of its keys (the operations' keys and arguments are
//     compared with its keys: a false match costs one attempt), and every
//     pollInterval (100 ms) for writes that reached the namespace through
//     other nodes; a poll sends a read (bready) per blocked client and pops
//     only for keys that hold something. So a write through the same node wakes a blocked
//     client at once, one through another node within the interval.
//   - Blocked clients are tried one at a time in the order they blocked, so
//     the first to block on a key is served first (Redis's rule) among the
//     clients of one node: a client takes its place when its command
//     arrives, before its first attempt; a round of attempts starts again
//     from the first client whenever a write through this node is sent or
//     answered during it (a write is marked before it is sent, so a round
//     never gives a later client what a write sent before that client's
//     attempt brought). A poll only reads; the keys it finds non-empty are then
//     tried like a local write's, in blocking order. (A write through
//     another node that lands during a round may still go to a later
//     client of the round: the poll cannot see it land.) Clients blocked at different nodes race: the
//     protocol orders their pops, and each element goes to exactly one.
//   - A write through this node that touches a key a client here waits on
//     is answered after the round it started, and the rounds the served
//     clients' own pushes start (BLMOVE into a list another client waits
//     on), have run: as in Redis, where a write serves the clients it
//     unblocks before the next command runs, a client that reads after its
//     write's reply sees those pops done (awaitSettled; at most
//     settleLimit, so a chain of blocked clients that keeps serving itself
//     cannot hold a reply forever).
//   - A blocked client's attempts say wait: a key that holds another type
//     counts as empty (Redis serves a blocked client only from a key of its
//     type), except BLMOVE's destination, whose wrong type ends the command
//     with WRONGTYPE as in Redis.
//   - The timeout is counted here (0: forever); when it passes the reply is
//     nil. A client that disconnects while blocked is unblocked at once (the
//     gateway watches its socket), so no element is popped for it later.
//   - Inside MULTI (and a Lua script, when there is one) the commands do not
//     block: they are one attempt, as Redis runs them there.
//
// Cost: a blocked client sends one read per poll and one write per possible
// change; nothing is written to the log while nothing changes except the
// blocked client's own first two attempts.

// pollInterval is how often blocked clients are tried for writes that
// arrived through other nodes.
const pollInterval = 100 * time.Millisecond

func init() {
	mv := []string{"write", "blocking", "movablekeys"}
	register("list",
		&command{name: "lmpop", arity: -4, flags: []string{"write", "movablekeys"}, plan: bplan(planMPop(false, false))},
		&command{name: "blpop", arity: -3, flags: []string{"write", "blocking"}, first: 1, last: -2, step: 1,
			plan: bplan(planBPop(false, "left")), block: blockCmd(planBPop(false, "left"))},
		&command{name: "brpop", arity: -3, flags: []string{"write", "blocking"}, first: 1, last: -2, step: 1,
			plan: bplan(planBPop(false, "right")), block: blockCmd(planBPop(false, "right"))},
		&command{name: "blmpop", arity: -5, flags: mv, plan: bplan(planMPop(false, true)), block: blockCmd(planMPop(false, true))},
		&command{name: "brpoplpush", arity: 4, flags: []string{"write", "denyoom", "blocking"}, first: 1, last: 2, step: 1,
			plan: bplan(planBLMove), block: blockCmd(planBLMove)},
		&command{name: "blmove", arity: 6, flags: []string{"write", "denyoom", "blocking"}, first: 1, last: 2, step: 1,
			plan: bplan(planBLMove), block: blockCmd(planBLMove)},
	)
	register("sorted_set",
		&command{name: "zmpop", arity: -4, flags: []string{"write", "movablekeys"}, plan: bplan(planMPop(true, false))},
		&command{name: "bzpopmin", arity: -3, flags: []string{"write", "blocking", "fast"}, first: 1, last: -2, step: 1,
			plan: bplan(planBPop(true, "min")), block: blockCmd(planBPop(true, "min"))},
		&command{name: "bzpopmax", arity: -3, flags: []string{"write", "blocking", "fast"}, first: 1, last: -2, step: 1,
			plan: bplan(planBPop(true, "max")), block: blockCmd(planBPop(true, "max"))},
		&command{name: "bzmpop", arity: -5, flags: mv, plan: bplan(planMPop(true, true)), block: blockCmd(planMPop(true, true))},
	)
}

// blockPlan is a parsed blocking command: its plan (one operation, wait
// flag "0", the first argument), the keys whose change may serve it, the
// probe that tells whether one holds something, and the timeout (0:
// forever; timed: false for the non-blocking forms).
type blockPlan struct {
	plan
	keys    []string
	probe   service.Op
	timeout time.Duration
}

// parseTimeout reads a blocking command's timeout in seconds (a float).
func parseTimeout(a []byte) (time.Duration, string) {
	f, err := strconv.ParseFloat(string(a), 64)
	if err != nil || math.IsNaN(f) || math.IsInf(f, 0) {
		return 0, "ERR timeout is not a float or out of range"
	}
	if f < 0 {
		return 0, "ERR timeout is negative"
	}
	if f*1e9 > math.MaxInt64 {
		return 0, "ERR timeout is out of range"
	}
	return time.Duration(f * 1e9), ""
}

// bpopArgs builds lmpop/zmpop arguments: wait "0", where, count, the keys
// after the first.
func bpopArgs(where, count string, keys [][]byte) [][]byte {
	return append([][]byte{[]byte("0"), []byte(where), []byte(count)}, keys[1:]...)
}

// probeOp is the read a poll sends before an attempt.
func probeOp(typ string, keys [][]byte) service.Op {
	return service.Op{Kind: "bready", Key: string(keys[0]), Args: append([][]byte{[]byte(typ)}, keys[1:]...)}
}

func strs(keys [][]byte) []string {
	out := make([]string, len(keys))
	for i, k := range keys {
		out[i] = string(k)
	}
	return out
}

// nullArray is the nil reply of a blocking command and of a counted pop
// (RESP2 *-1, RESP3 _).
func nullArray() service.Result { return service.Result{Type: service.ResultNil, Err: shapeNullArray} }

// planBPop is BLPOP/BRPOP key [key ...] timeout: [key, element] | nil, and
// (zset) BZPOPMIN/BZPOPMAX key [key ...] timeout: [key, member, score] | nil.
func planBPop(zset bool, where string) func(c *conn, args [][]byte) blockPlan {
	kind, typ := "lmpop", "list"
	if zset {
		kind, typ = "zmpop", "zset"
	}
	return func(c *conn, args [][]byte) blockPlan {
		if p, ok := c.kvOnly(lower(args[0])); !ok {
			return blockPlan{plan: p}
		}
		t, msg := parseTimeout(args[len(args)-1])
		if msg != "" {
			return blockPlan{plan: errPlan("%s", msg)}
		}
		keys := args[1 : len(args)-1]
		op := service.Op{Kind: kind, Key: string(keys[0]), Args: bpopArgs(where, "1", keys)}
		return blockPlan{plan: opPlan(op, func(r service.Result) service.Result {
			if r.Type != service.ResultArray {
				return nullArray()
			}
			got := r.Elems[1].Elems
			if zset {
				return service.Array(r.Elems[0], got[0], asDouble(got[1]))
			}
			return service.Array(r.Elems[0], got[0])
		}), keys: strs(keys), probe: probeOp(typ, keys), timeout: t}
	}
}

// planMPop is [B]LMPOP and [B]ZMPOP: [timeout] numkeys key [key ...]
// LEFT|RIGHT (MIN|MAX) [COUNT count], answering [key, [element ...]]
// ([key, [[member, score] ...]]) | nil.
func planMPop(zset, blocking bool) func(c *conn, args [][]byte) blockPlan {
	return func(c *conn, args [][]byte) blockPlan {
		name := lower(args[0])
		if p, ok := c.kvOnly(name); !ok {
			return blockPlan{plan: p}
		}
		var t time.Duration
		a := args[1:]
		if blocking {
			var msg string
			if t, msg = parseTimeout(a[0]); msg != "" {
				return blockPlan{plan: errPlan("%s", msg)}
			}
			a = a[1:]
		}
		n, err := strconv.ParseInt(string(a[0]), 10, 64)
		if err != nil || n <= 0 {
			return blockPlan{plan: errPlan("ERR numkeys should be greater than 0")}
		}
		if n >= int64(len(a)-1) {
			return blockPlan{plan: errPlan("%s", arityErr(name))}
		}
		keys, rest := a[1:1+n], a[1+n:]
		where := lower(rest[0])
		ends := [2]string{"left", "right"}
		if zset {
			ends = [2]string{"min", "max"}
		}
		if where != ends[0] && where != ends[1] {
			return blockPlan{plan: errPlan("ERR syntax error")}
		}
		count := "1"
		switch rest = rest[1:]; {
		case len(rest) == 0:
		case len(rest) == 2 && lower(rest[0]) == "count":
			k, err := strconv.ParseInt(string(rest[1]), 10, 64)
			if err != nil || k <= 0 {
				return blockPlan{plan: errPlan("ERR count should be greater than 0")}
			}
			count = string(rest[1])
		default:
			return blockPlan{plan: errPlan("ERR syntax error")}
		}
		kind, typ := "lmpop", "list"
		if zset {
			kind, typ = "zmpop", "zset"
		}
		op := service.Op{Kind: kind, Key: string(keys[0]), Args: bpopArgs(where, count, keys)}
		return blockPlan{plan: opPlan(op, func(r service.Result) service.Result {
			if r.Type != service.ResultArray {
				return nullArray()
			}
			if !zset {
				return r
			}
			flat := r.Elems[1].Elems
			pairs := make([]service.Result, 0, len(flat)/2)
			for i := 0; i+1 < len(flat); i += 2 {
				pairs = append(pairs, service.Array(flat[i], asDouble(flat[i+1])))
			}
			return service.Array(r.Elems[0], service.Array(pairs...))
		}), keys: strs(keys), probe: probeOp(typ, keys), timeout: t}
	}
}

// planBLMove is BLMOVE source destination LEFT|RIGHT LEFT|RIGHT timeout and
// BRPOPLPUSH source destination timeout: the element | nil.
func planBLMove(c *conn, args [][]byte) blockPlan {
	name := lower(args[0])
	if p, ok := c.kvOnly(name); !ok {
		return blockPlan{plan: p}
	}
	from, to := "right", "left"
	if name == "blmove" {
		from, to = lower(args[3]), lower(args[4])
		for _, w := range []string{from, to} {
			if w != "left" && w != "right" {
				return blockPlan{plan: errPlan("ERR syntax error")}
			}
		}
	}
	t, msg := parseTimeout(args[len(args)-1])
	if msg != "" {
		return blockPlan{plan: errPlan("%s", msg)}
	}
	op := kvOp("blmove", args[1], []byte("0"), args[2], []byte(from), []byte(to))
	return blockPlan{plan: opPlan(op, nil), keys: []string{string(args[1])},
		probe: probeOp("list", args[1:2]), timeout: t}
}

// bplan is a blocking command's plan: one attempt (MULTI runs it so).
func bplan(f func(c *conn, args [][]byte) blockPlan) planFunc {
	return func(c *conn, args [][]byte) plan { return f(c, args).plan }
}

// blockCmd is the handler that runs a blocking command outside MULTI.
func blockCmd(parse func(c *conn, args [][]byte) blockPlan) handler {
	return func(c *conn, args [][]byte) {
		bp := parse(c, args)
		p := c.check(bp.plan)
		if len(p.ops) == 0 {
			c.writeResult(p.render(nil))
			return
		}
		// The client takes its place in the queue before its first
		// attempt: clients are served in the order their commands
		// arrived, whichever first attempt the protocol answers first.
		w := c.s.blk.enqueue(c, bp.keys)
		c.s.blk.awaitEarlier(w) // first attempts too go in arrival order
		c.blk.quiet.Store(true) // not gated: a round may be waiting for this client
		rs := c.runAll(p.ops)
		c.blk.quiet.Store(false)
		close(w.tried)
		c.settleOrdered() // writes held back for this command go on (order.go)
		if rs[0].Type != service.ResultNil || c.txn.open {
			c.s.blk.remove(w)
			if rs[0].Type != service.ResultNil {
				c.s.blk.touchKeys(append(slices.Clone(bp.keys), p.ops[0].Key), opKeys(p.ops[0])...)
			}
			c.writeResult(p.render(rs))
			return
		}
		bp.plan = p
		c.writeResult(c.s.blk.wait(w, bp))
	}
}

// blockReg is a server's blocked clients.
type blockReg struct {
	blocked atomic.Int64 // INFO blocked_clients

	mu      sync.Mutex
	waiters []*waiter // in the order they blocked
	dirty   map[string]bool
	poll    bool         // try every waiter (a poll tick)
	gen     uint64       // counts touchKeys: a round restarts when it moves
	gate    sync.RWMutex // a round holds it; writes to waited keys share it (writeGate)
	running bool         // the serving goroutine runs
	kick    chan struct{}
	settled uint64        // every gen up to this one has been served (serve)
	settle  chan struct{} // closed when settled moves or serve stops
}

// waiter is one blocked client.
type waiter struct {
	c       *conn
	keys    []string
	try     chan bool // the server asks for an attempt (true: only the probe)
	done    chan bool // the attempt's outcome: served (the probe's: a key holds something)
	gone    chan struct{}
	unblock chan bool     // CLIENT UNBLOCK (true: with an error)
	counted bool          // in blocked_clients (b.mu)
	tried   chan struct{} // closed when its first attempt is answered
}

// awaitEarlier waits until every client queued before w on one of w's
// keys has had its first attempt answered, so first attempts are made in
// the order the commands arrived.
func (b *blockReg) awaitEarlier(w *waiter) {
	for {
		var wait chan struct{}
		b.mu.Lock()
		for _, o := range b.waiters {
			if o == w {
				break
			}
			select {
			case <-o.tried:
				continue
			default:
			}
			if slices.ContainsFunc(o.keys, func(k string) bool { return slices.Contains(w.keys, k) }) {
				wait = o.tried
				break
			}
		}
		b.mu.Unlock()
		if wait == nil {
			return
		}
		<-wait
	}
}

// blockConn is a connection's blocking state.
type blockConn struct {
	quiet atomic.Bool // its own attempts wake nobody (a nil pop changes nothing)
	w     atomic.Pointer[waiter]
}

// wait blocks c until bp is served, times out, is unblocked or c's client
// goes away, and returns the reply.
func (b *blockReg) wait(w *waiter, bp blockPlan) service.Result {
	c := w.c
	op := bp.ops[0]
	op.Args = slices.Clone(op.Args)
	op.Args[0] = []byte("1") // waiting: another type counts as empty
	b.block(w)
	defer b.remove(w)
	closed, stopWatch := c.watchClose()
	defer stopWatch()
	var timeout <-chan time.Time
	if bp.timeout > 0 {
		t := time.NewTimer(bp.timeout)
		defer t.Stop()
		timeout = t.C
	}
	for {
		select {
		case probe := <-w.try:
			if probe {
				w.done <- c.probeBlocked(bp.probe)
				continue
			}
			r, served := c.attemptBlocked(op)
			if served {
				// Marked before the round hears of it, so the round
				// goes on to the clients this pop's push may serve.
				b.touchKeys(append(slices.Clone(bp.keys), string(op.Key)), opKeys(op)...)
			}
			w.done <- served
			if served {
				return bp.render([]service.Result{r})
			}
		case withErr := <-w.unblock:
			if withErr {
				return errResult("UNBLOCKED client unblocked via CLIENT UNBLOCK")
			}
			return nullArray()
		case <-timeout:
			return nullArray()
		case <-closed:
			return nullArray() // nobody reads it
		case <-c.s.ctx.Done():
			return service.Fail(synoderr.TryAgain, "node is shutting down")
		}
	}
}

// attemptBlocked is one attempt of a blocked client. served reports an
// answer other than nil.
func (c *conn) attemptBlocked(op service.Op) (service.Result, bool) {
	c.blk.quiet.Store(true)
	defer c.blk.quiet.Store(false)
	r := c.run(op, c.nextSeq())
	return r, r.Type != service.ResultNil
}

// probeBlocked is a poll's read for a blocked client: whether one of its
// keys holds something (an error counts as yes: the attempt answers it).
func (c *conn) probeBlocked(probe service.Op) bool {
	r := c.run(probe, c.nextSeq())
	return r.Type != service.ResultInt || r.Int != 0
}

// opKeys is every argument of op that may name a key (a false match costs
// one attempt).
func opKeys(op service.Op) []string {
	out := make([]string, 0, len(op.Args))
	for _, a := range op.Args {
		out = append(out, string(a))
	}
	return out
}

// enqueue gives c's blocking command its place in the queue (not yet
// blocked: its first attempt is under way, and the server waits for it).
func (b *blockReg) enqueue(c *conn, keys []string) *waiter {
	w := &waiter{c: c, keys: keys, try: make(chan bool), done: make(chan bool, 1),
		gone: make(chan struct{}), unblock: make(chan bool, 1), tried: make(chan struct{})}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.waiters = append(b.waiters, w)
	if b.dirty == nil {
		b.dirty = map[string]bool{}
		b.kick = make(chan struct{}, 1)
	}
	if !b.running {
		b.running = true
		go b.serve(c.s)
	}
	return w
}

// block counts w as blocked (its first attempt found nothing) and has it
// tried at once (a write may have landed since that attempt).
func (b *blockReg) block(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	w.counted = true
	b.blocked.Add(1)
	w.c.blk.w.Store(w)
	for _, k := range w.keys {
		b.dirty[k] = true
	}
	b.kickLocked()
}

func (b *blockReg) remove(w *waiter) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if i := slices.Index(b.waiters, w); i >= 0 {
		b.waiters = slices.Delete(b.waiters, i, i+1)
	}
	if w.counted {
		b.blocked.Add(-1)
		w.counted = false
	}
	w.c.blk.w.Store(nil)
	close(w.gone)
}

func (b *blockReg) kickLocked() {
	select {
	case b.kick <- struct{}{}:
	default:
	}
}

// touched marks the keys a request of c may have changed (submitGroup).
func (b *blockReg) touched(c *conn, op service.Op, group []service.Op) {
	if b.blocked.Load() == 0 || c.blk.quiet.Load() || c.svc == nil {
		return
	}
	var keys []string
	if len(group) == 0 {
		group = []service.Op{op}
	}
	for _, op := range group {
		if c.svc.IsRead(op) {
			continue
		}
		keys = append(keys, op.Key)
		keys = append(keys, opKeys(op)...)
	}
	if len(keys) > 0 {
		b.mu.Lock()
		hit := slices.ContainsFunc(keys, b.waited)
		b.mu.Unlock()
		b.touchKeys(keys)
		if hit {
			b.awaitSettled(settleLimit)
		}
	}
}

// settleLimit bounds how long a write's reply waits for the clients it
// woke (awaitSettled).
const settleLimit = 2 * time.Second

// awaitSettled waits until the clients blocked at this node on what a
// write through it touched have been tried, and the clients their pops
// in turn may serve (BLMOVE into a list another client waits on), before
// the write is answered: in Redis a write serves the clients it unblocks
// before the next command runs (blocked.c, handleClientsBlockedOnKeys), so
// a client that reads after its write sees their pops done. It waits at
// most limit: a chain of blocked clients that keeps serving itself cannot
// hold a write's reply forever.
func (b *blockReg) awaitSettled(limit time.Duration) {
	t := time.NewTimer(limit)
	defer t.Stop()
	for {
		b.mu.Lock()
		if !b.running || b.settled >= b.gen {
			b.mu.Unlock()
			return
		}
		if b.settle == nil {
			b.settle = make(chan struct{})
		}
		ch := b.settle
		b.mu.Unlock()
		select {
		case <-ch:
		case <-t.C:
			return
		}
	}
}

// settledLocked records that every touch up to gen has been served (b.mu
// held) and wakes the writes waiting for it.
func (b *blockReg) settledLocked(gen uint64) {
	if gen > b.settled {
		b.settled = gen
	}
	if b.settle != nil {
		close(b.settle)
		b.settle = nil
	}
}

func (b *blockReg) touchKeys(keys []string, more ...string) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.dirty == nil {
		return
	}
	b.gen++
	for _, k := range keys {
		b.dirty[k] = true
	}
	for _, k := range more {
		b.dirty[k] = true
	}
	b.kickLocked()
}

// serve tries blocked clients, in the order they blocked, when a key of
// theirs may have changed and at every poll, until none is left.
func (b *blockReg) serve(s *Server) {
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		select {
		case <-b.kick:
		case <-tick.C:
			b.mu.Lock()
			b.poll = true
			b.mu.Unlock()
		case <-s.ctx.Done():
			b.mu.Lock()
			b.running = false
			b.settledLocked(b.gen)
			b.mu.Unlock()
			return
		}
		for {
			b.mu.Lock()
			if len(b.waiters) == 0 {
				b.running = false
				b.settledLocked(b.gen)
				b.mu.Unlock()
				return
			}
			dirty, poll, gen := b.dirty, b.poll, b.gen
			b.dirty, b.poll = map[string]bool{}, false
			ws := slices.Clone(b.waiters)
			if len(dirty) == 0 && !poll {
				b.settledLocked(gen)
				b.mu.Unlock()
				break
			}
			b.mu.Unlock()
			b.gate.Lock()
			b.round(ws, dirty, poll, gen)
			b.gate.Unlock()
		}
	}
}

// round tries the waiters ws whose keys are dirty (all of them, probing
// first, on a poll), in order, under the write gate.
func (b *blockReg) round(ws []*waiter, dirty map[string]bool, poll bool, gen uint64) {
	{
		{
			for _, w := range ws {
				hit := slices.ContainsFunc(w.keys, func(k string) bool { return dirty[k] })
				if !hit && !poll {
					continue
				}
				// A write since this round began (another client's, or a
				// pop of this round): the round starts again from the
				// first client, so a later client never takes what an
				// earlier one was owed.
				b.mu.Lock()
				restart := b.gen != gen
				if restart {
					for k := range dirty {
						b.dirty[k] = true
					}
				}
				b.mu.Unlock()
				if restart {
					break
				}
				probe := !hit // a poll only reads: the pops follow in order (below)
				select {
				case w.try <- probe:
					if ready := <-w.done; probe && ready {
						b.touchKeys(w.keys)
					}
				case <-w.gone:
				}
			}
		}
	}
}

// writeGate holds back a write through this node that names a key a
// client is blocked on while a round of attempts runs, so a round sees
// no local write land half-way (the first blocked client gets what such
// a write brings). Blocked clients' own attempts are not gated.
func (b *blockReg) writeGate(c *conn, op service.Op, group []service.Op) func() {
	if b.blocked.Load() == 0 || c.blk.quiet.Load() || c.svc == nil {
		return func() {}
	}
	if len(group) == 0 {
		group = []service.Op{op}
	}
	b.mu.Lock()
	hit := false
	for _, o := range group {
		if c.svc.IsRead(o) {
			continue
		}
		hit = hit || b.waited(o.Key)
		for _, a := range o.Args {
			hit = hit || b.waited(string(a))
		}
	}
	b.mu.Unlock()
	if !hit {
		return func() {}
	}
	b.gate.RLock()
	b.mu.Lock()
	b.gen++ // a write on its way: a round under way starts again
	b.mu.Unlock()
	return b.gate.RUnlock
}

// waited reports whether a blocked client waits on key (b.mu held).
func (b *blockReg) waited(key string) bool {
	for _, w := range b.waiters {
		if slices.Contains(w.keys, key) {
			return true
		}
	}
	return false
}

// unblockClient is CLIENT UNBLOCK id [TIMEOUT|ERROR]: 1 when the client was
// blocked.
func (b *blockReg) unblockClient(s *Server, id int64, withErr bool) bool {
	s.mu.Lock()
	var target *conn
	for o := range s.conns {
		if o.id == id {
			target = o
		}
	}
	s.mu.Unlock()
	if target == nil {
		return false
	}
	w := target.blk.w.Load()
	if w == nil {
		return false
	}
	select {
	case w.unblock <- withErr:
		return true
	default:
		return false
	}
}

// cmdClientUnblock is CLIENT UNBLOCK.
func cmdClientUnblock(c *conn, args [][]byte) {
	if len(args) < 3 || len(args) > 4 {
		c.writeError(arityErr("client|unblock"))
		return
	}
	id, err := strconv.ParseInt(string(args[2]), 10, 64)
	if err != nil {
		c.writeError("ERR value is not an integer or out of range")
		return
	}
	withErr := false
	if len(args) == 4 {
		switch lower(args[3]) {
		case "timeout":
		case "error":
			withErr = true
		default:
			c.writeError("ERR CLIENT UNBLOCK reason should be TIMEOUT or ERROR")
			return
		}
	}
	if c.s.blk.unblockClient(c.s, id, withErr) {
		c.w.WriteInt(1)
	} else {
		c.w.WriteInt(0)
	}
}

// watchClose reports, while c is blocked, that its client closed the
// connection: a goroutine peeks at the socket (a command sent meanwhile
// stays buffered for later). stop ends the watch before the connection
// reads again.
func (c *conn) watchClose() (closed <-chan struct{}, stop func()) {
	if c.br == nil || c.r.Buffered() > 0 {
		return nil, func() {}
	}
	ch := make(chan struct{})
	done := make(chan struct{})
	go func() {
		defer close(done)
		_, err := c.br.Peek(1)
		var ne net.Error
		if err != nil && !(errors.As(err, &ne) && ne.Timeout()) {
			close(ch)
		}
	}()
	return ch, func() {
		c.nc.SetReadDeadline(time.Now()) // ends the peek
		<-done
		c.nc.SetReadDeadline(time.Time{})
	}
}
