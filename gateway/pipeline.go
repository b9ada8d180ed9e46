package gateway

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Pipelining.
//
// A client that pipelines (sends commands without waiting for replies)
// gets several of them executed at once, while its replies still go out in
// command order and each command observes the effects of every earlier
// command of the connection that it could observe in Redis. The rule:
//
//   - A command is pipelined (runs concurrently with earlier commands of
//     its connection) only when it is a data command of exactly one key
//     (COMMAND INFO first = last = 1) that plans to exactly one operation
//     without guards, and the connection has no MULTI open, no interactive
//     transaction open, no WATCHed key, no subscription, no request option
//     set (sticky or pending), and is authenticated. It starts only when
//     the connection already has commands in flight or more commands are
//     waiting in its read buffer; a lone command runs as before, in the
//     connection's goroutine.
//   - A pipelined command waits, before its operation is sent, until every
//     earlier in-flight command of the connection on the same key has
//     completed (the conflict rule): operations on one key are sent one
//     after the other in command order, so SET k / GET k / INCR k return
//     what serial execution returns. Operations on different keys may be
//     in flight together and take effect in either order; no client can
//     tell the difference through the keys' values except a third party
//     reading both keys in between, which serial execution on a Redis
//     cluster allows as well (keys on different shards).
//   - Every other command (multi-key commands, keyless ones, MULTI/EXEC,
//     WATCH, SUBSCRIBE, SYNOD ..., CONFIG, AUTH, QUIT, unknown commands)
//     first waits until every in-flight command has completed and its
//     reply is written, then runs serially as before: it observes the
//     effects of every earlier command.
//
// Each in-flight command has a lane (a client id of its own, as runAll's in
// commands.go) so that no client id has two requests in flight; a lane is
// free again once its command's reply is written. At most maxPipelined
// commands of a connection are in flight; the reader then stops reading.
// A replier goroutine writes the replies in command order and flushes once
// per batch of ready replies (when the next reply is not yet ready).

// Batches.
//
// Where the namespace's protocol applies atomic groups (TxnSupport.Atomic:
// Multi-Paxos, primary-backup, PB-Paxos, unreplicated), a pipeline is not
// run command by command: the commands one read of the connection returned
// are one batch, sent to the Backend as one atomic group (one request, one
// hand-off to the namespace loop, one log command), and their replies are
// written together and flushed once. A batch is the run of commands that
// may be pipelined (the rule above) and plan to one operation without
// guards, or to none (a parse or validation error: it replies its error
// and sends nothing), taken while more commands are buffered, at most
// maxBatch, about maxBatchBytes of arguments, and at most the connection's
// pipeline limit. The first other
// command ends the batch and runs after it, serially, as above.
//
// The group keeps every promise of the rule above and more: its operations
// take effect in command order with nothing interleaved (automaton.Request
// Ops), so same-key commands need no waiting and different keys are
// ordered too. An operation's error answers its own command only
// (automaton.ApplyGroup applies every operation and answers each). A
// failure of the group as a whole (a timeout: outcome unknown; the node
// stopping; not a member) answers each of its commands that had an
// operation. A batch is used only by the default user (an ACL user's
// permission is checked per request, and a group holding one forbidden
// write would refuse its other commands).

// Where the protocol instead steps client batches (automaton.BatchStepper,
// without atomic groups: ABD, ESDS), a batch is run as independent
// requests, all sent at once (runAll: one lane each, at most maxLanes, so
// that they reach the namespace loop together and it steps them as one
// automaton.ClientBatch, sharing its rounds), and their replies are again
// written together and flushed once. Nothing orders independent requests,
// so such a batch holds at most one command per key: a command on a key
// already in the batch ends it and starts the next one once this one is
// answered (the conflict rule above: same-key commands one after the
// other, in command order). Each command answers its own result. Where
// the protocol also applies a batch's same-key requests in batch order
// (automaton.OrdersKeyRuns: ABD's key runs) and the Backend hands a batch
// to the loop in one ordered hand-off (BatchBackend: the node), the batch
// goes that way (runOrdered) and may hold several commands per key, so a
// pipelined SET k a; GET k; SET k b; GET k shares one round and still
// answers a, b; not for a connection whose reads are not linearizable
// (SYNOD READ regular or local: such a read does not join its key's run).
// On the event loop such a batch goes without a goroutine that waits for
// it (batchIndep, "Independent batches in flight" below).

// maxBatch bounds the commands of one batch, and maxBatchBytes the
// arguments of its operations: a batch becomes one request, one log
// command and one peer message (a follower forwards it whole), which must
// stay well inside a peer frame (transport.DefaultMaxFrame, 64 MB) and
// cheap to persist. The first command always goes, whatever its size.
const (
	maxBatch      = 256
	maxBatchBytes = 1 << 20
)

// opBytes is the size of an operation's key and arguments.
func opBytes(ops []service.Op) int {
	n := 0
	for _, op := range ops {
		n += len(op.Key)
		for _, a := range op.Args {
			n += len(a)
		}
	}
	return n
}

// batchConn is a connection's batch state (connection goroutine only).
type batchConn struct {
	known  bool   // atomic and indep are known for proto
	proto  string // the protocol atomic was looked up for
	atomic bool
	indep  bool // not atomic, steps client batches: independent requests
	// ordered: indep, and the protocol orders a batch's same-key requests
	// (automaton.OrdersKeyRuns) and the Backend hands a batch over in order
	// (BatchBackend): same-key commands may share a batch.
	ordered bool
	// async: atomic, and the Backend hands a request over without
	// waiting (SubmitBackend): batches go in flight together (batchAsync).
	async bool
	// replyIndep: indep, and the Backend hands an independent batch over
	// with callbacks (BatchReplyBackend): the event loop serves such
	// batches (batchIndep).
	replyIndep bool
	plans      []plan // reused across batches
	ops        []service.Op
	keys       map[string]struct{} // an independent batch's keys
}

// groupsPipelines reports whether the connection's pipelines go to the
// Backend as batches (see above).
func (c *conn) groupsPipelines() bool {
	return !c.pl.inFlight() && c.batchMode()
}

// batchMode is groupsPipelines without its condition that no command be
// in flight; it looks up the protocol's batch state (c.bat).
func (c *conn) batchMode() bool {
	if c.user != nil || c.sharded() {
		return false // a sharded namespace's batch could span groups (cluster.go)
	}
	proto := c.protocol()
	b := &c.bat
	if !b.known || b.proto != proto {
		b.known, b.proto, b.atomic = true, proto, automaton.TransactionsOf(proto).Atomic
		b.indep = !b.atomic && automaton.StepsClientBatches(proto)
		_, bb := c.s.b.(BatchBackend)
		b.ordered = b.indep && bb && automaton.OrdersKeyRuns(proto)
		_, sb := c.s.b.(SubmitBackend)
		b.async = b.atomic && sb
		_, rb := c.s.b.(BatchReplyBackend)
		b.replyIndep = b.indep && rb && !c.s.noReplyFn
	}
	return b.atomic || b.indep
}

// batchesInFlight reports whether the connection's pipeline batches go in
// flight one after another (batchAsync): groupsPipelines' conditions, but
// with commands in flight allowed (they are batches: a connection whose
// batches go in flight never pipelines command by command, see serve).
func (c *conn) batchesInFlight() bool {
	if c.pl.inFlight() && len(c.pl.last) > 0 {
		return false // commands pipelined one by one are in flight
	}
	return c.batchMode() && c.bat.async
}

// batch runs a batch whose first command is the pipelineable, concurrent
// plan first, reading the further buffered commands that join it, and
// writes and flushes every reply. It returns the command that ended the
// batch, or the read error that did, for the caller to serve next, and
// false when the connection failed.
func (c *conn) batch(first plan) (next [][]byte, rerr error, ok bool) {
	b := &c.bat
	plans, next, rerr := c.gather(append(b.plans[:0], first))
	ops := b.ops[:0]
	for _, p := range plans {
		ops = append(ops, p.ops...)
	}
	var rs []service.Result
	var fail service.Result
	switch len(ops) {
	case 0:
	case 1:
		rs = []service.Result{c.run(ops[0], c.nextSeq())}
	default:
		if bb, ok := c.s.b.(BatchBackend); ok && b.ordered && c.readMode() == automaton.ReadDefault {
			rs = c.runOrdered(bb, ops) // in one ordered hand-off, each answering itself
		} else if !b.atomic {
			rs = c.runAll(ops) // all at once, each answering itself
		} else {
			rs, _, fail = c.runGroup(nil, ops)
		}
	}
	c.wmu.Lock()
	for i, k := 0, 0; i < len(plans); i++ {
		c.writeResult(renderNext(plans[i], rs, &k, fail))
	}
	err := c.w.Flush()
	c.out.addReplies(c.owed + len(plans))
	c.owed = 0
	c.wmu.Unlock()
	clear(plans)
	clear(ops)
	b.plans, b.ops = plans[:0], ops[:0]
	return next, rerr, err == nil
}

// readMode is the connection's read mode (SYNOD READ).
func (c *conn) readMode() automaton.ReadMode {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.read
}

// renderNext returns the reply of a batch's next command, plan p: rs
// answers the batch's operations in order, those of p (if any) from
// rs[*k], and renderNext moves *k past them (a command of none replies its
// own error), unless fail, an error, answers the batch as a whole (each
// command that had an operation). The writers render a batch's replies
// one by one into the connection's writer, with no list of replies to
// allocate per batch.
func renderNext(p plan, rs []service.Result, k *int, fail service.Result) service.Result {
	n := len(p.ops)
	switch {
	case n == 0:
		return p.render(nil)
	case fail.Type == service.ResultErr:
		return fail
	}
	r := p.render(rs[*k : *k+n])
	*k += n
	return r
}

// gather completes a batch whose first command is plans[0] with the
// further buffered commands that may join it (see above), and returns it
// with the command that ended it, or the read error that did, for the
// caller to serve next.
func (c *conn) gather(plans []plan) (_ []plan, next [][]byte, rerr error) {
	b := &c.bat
	first := plans[0]
	limit := min(maxBatch, int(c.s.lim.pipeline.Load()))
	indep := !b.atomic
	// Same-key commands share an ordered batch only with linearizable reads
	// (a regular or local read does not join its key's run: it could miss
	// the batch's earlier write).
	c.mu.Lock()
	ordered := b.ordered && c.read == automaton.ReadDefault
	c.mu.Unlock()
	if indep {
		limit = min(limit, maxLanes)
		if b.keys == nil {
			b.keys = make(map[string]struct{}, maxLanes)
		}
		clear(b.keys)
		b.keys[first.ops[0].Key] = struct{}{}
	}
	size := opBytes(first.ops)
	var clk batchClock
	for len(plans) < limit && size < maxBatchBytes && c.r.Buffered() > 0 {
		if c.as.loop && !c.evWhole() {
			break // the event loop reads the rest later; it never waits (evloop.go, evBatch)
		}
		args, err := c.r.ReadCommand()
		if err != nil {
			rerr = err
			break
		}
		c.s.totalCommands.Add(1)
		if clk.now.IsZero() {
			clk = batchClock{time.Now(), c.s.acc.now()}
		}
		_, p, pipelined := c.pipelineRuleAt(args, clk)
		if !pipelined || p.noMulti != "" || !(p.concurrent() || (len(p.ops) == 0 && len(p.guards) == 0)) {
			next = args
			break
		}
		if indep && len(p.ops) == 1 {
			if _, dup := b.keys[p.ops[0].Key]; dup && !ordered {
				next = args // the same key: after this batch's answers
				break
			}
			b.keys[p.ops[0].Key] = struct{}{}
		}
		plans = append(plans, p)
		size += opBytes(p.ops)
	}
	return plans, next, rerr
}

// Batches in flight.
//
// Where the Backend can also hand a request over without waiting for its
// answer (SubmitBackend: the node), a batch of atomic groups does not wait
// for the previous one's answers (batchAsync): the connection goroutine
// hands each batch to the namespace loop and reads on, up to
// maxBatchesInFlight batches, each on a lane of its own (so no client id
// has two requests in flight), and the goroutine that completes a batch
// (ReplyBackend's callback, batchCall) or awaits its answer writes its
// replies after the previous batch's, in command order.
// Batches keep the conflict rule of the commands pipelined one by one
// (above): a batch waits, before it is handed over, until every earlier
// batch of the connection in flight that names one of its keys is
// answered, so same-key commands take effect in command order whatever
// the protocol and its leader do (a log would order batches handed over
// in order, but not across a change of leader, where an earlier batch
// not yet chosen may be proposed again after a later one); batches on
// different keys may take effect in either order, as pipelined commands
// on different keys may.
//
// maxBatchesInFlight bounds a connection's batches in flight. Two: a
// batch read while another is in flight goes at once instead of waiting
// for its answers (a command then waits for at most the round of the
// batch ahead of it, not for that round and its own after it), while
// batches stay large (the commands that arrive while two are in flight
// make one batch). Measured against 8 (synod-lab costs --protocols paxos
// --clients 256 --conns pipeline:16 --read-ratio 0, five alternated
// rounds, fsync, load 22-24): 2 gave median 25.4k puts/s and 25.9 us of
// the servers' CPU per put, 8 19.1k and 29.1 us, one batch (before) 19.2k
// and 31.1 us.
const maxBatchesInFlight = 2

// batchAsync is batch for a connection whose batches go in flight
// (batchesInFlight): it gathers the batch, hands it to the Backend and
// returns without waiting for its answer. The goroutine that completes it
// (batchCall.done, where the Backend answers through callbacks: no
// wake-up of a goroutine of the batch's own), or else a goroutine that
// waits for the answer, writes the batch's replies, after the previous
// batch's (a chain, c.pl.lastBatch), and flushes them.
func (c *conn) batchAsync(first plan) (next [][]byte, rerr error) {
	pb := planBufs.Get().(*planBuf) // back to the pool once the replies are written (writeBatch)
	plans, next, rerr := c.gather(append(pb.p[:0], first))
	ops := make([]service.Op, 0, len(plans))
	for _, p := range plans {
		ops = append(ops, p.ops...)
	}
	c.mu.Lock()
	ns, svc, read := c.ns, c.svc, c.read
	c.mu.Unlock()
	l := c.takeLaneOf(maxBatchesInFlight)
	indep := !c.bat.atomic && c.bat.replyIndep
	var bc *batchCall
	var b *batchSlot
	if len(ops) == 0 || svc == nil || indep {
		b = new(batchSlot)
	} else {
		bc = new(batchCall) // the batch's slot in the same allocation (batchCall.slot)
		b = &bc.slot
	}
	*b = batchSlot{written: make(chan struct{}), lane: l, prev: c.pl.lastBatch, pb: pb, indep: indep}
	c.pl.lastBatch = b
	c.awaitKeys(ops, b)
	if len(ops) == 0 || svc == nil {
		fail := service.Result{}
		if len(ops) > 0 {
			fail = errResult("ERR this node serves no namespace")
		}
		go c.writeBatch(b, plans, nil, fail)
		return next, rerr
	}
	if b.indep {
		c.batchIndep(b, plans, ops, ns.Name, svc, read)
		return next, rerr
	}
	id := c.laneID(l, true)
	l.note(svc, service.Op{}, ops)
	req := automaton.Request{ID: id, Opts: c.requestOptions(read, id), Checked: true, Unanswered: id.Seq} // validated in check
	if len(ops) == 1 {
		req.Op = ops[0]
	} else {
		req.Ops = ops
	}
	ctx, cancel := c.batchDeadline()                 // deadline.go
	c.orderWrite(req.Op, req.Ops)                    // arrived ordered commands first (order.go)
	release := c.s.blk.writeGate(c, req.Op, req.Ops) // no write to a waited key during a round (blocking.go)
	bc.c, bc.b, bc.plans, bc.n, bc.req, bc.ns, bc.release, bc.end = c, b, plans, len(ops), req, ns.Name, release, cancel
	if c.batchReply(ctx, bc) {
		return next, rerr
	}
	await := c.s.b.(SubmitBackend).Submit(ctx, ns.Name, req)
	go func() {
		res, err := await()
		bc.finish(res, err)
	}()
	return next, rerr
}

// Independent batches in flight (branch pipe52, session 52; issue 28
// item 2).
//
// Where the protocol steps client batches without atomic groups (ABD,
// ESDS) and the Backend hands an independent batch over with callbacks
// (BatchReplyBackend: the node), the event loop serves a pipelined read
// as it serves an atomic one (evBatch): the batch's commands, gathered as
// batch gathers them (one per key, or same-key runs where the protocol
// orders them: gather), go to the namespace loop as one hand-off, one
// automaton.ClientBatch of independent requests on the connection's lanes
// (c.lanes, one client id each, as runOrdered's), held for the turn's one
// pass with the other sockets' requests where the loop holds; each
// request's callback notes its answer, and the last one writes the
// batch's replies in one write (writeBatch). Each command answers its own
// result, as with runOrdered. Only the loop takes this path, with at most
// one batch of the connection in flight (evBatchWait), so the lanes are
// free when it starts; a goroutine that takes the connection while such a
// batch is in flight waits for its replies before it serves anything
// (serveFrom: awaitIndepBatch), so that the next command observes the
// batch, as after runOrdered. Without a free deadline slot, or when the
// Backend takes nothing (SubmitReplyBatch false), a goroutine runs the
// batch with DoBatch (or Do each) and writes its replies.

// indepCall is an independent batch in flight and what its answers need.
type indepCall struct {
	c     *conn
	b     *batchSlot
	plans []plan
	reqs  []automaton.Request
	resps []automaton.Response // the answers, in op order
	errs  []error
	left  atomic.Int32 // answers still to come
	ns    string
	end   func() // the deadline
}

// batchIndep hands batch b (plans, whose operations are ops) over as
// independent requests (see above); its answers write its replies.
func (c *conn) batchIndep(b *batchSlot, plans []plan, ops []service.Op, ns string, svc service.Service, read automaton.ReadMode) {
	for len(c.lanes) < len(ops) {
		c.lanes = append(c.lanes, &lane{client: randomClientID()})
	}
	reqs := make([]automaton.Request, len(ops))
	for i, op := range ops {
		id := c.laneID(c.lanes[i], i == len(ops)-1)
		c.lanes[i].note(svc, op, nil) // sessions.go
		reqs[i] = automaton.Request{ID: id, Op: op, Opts: c.requestOptions(read, id), Checked: true, Unanswered: id.Seq}
	}
	ctx, cancel := c.batchDeadline() // deadline.go
	ic := &indepCall{c: c, b: b, plans: plans, reqs: reqs, resps: make([]automaton.Response, len(ops)), errs: make([]error, len(ops)), ns: ns, end: cancel}
	ic.left.Store(int32(len(ops)))
	// evBatch takes the batch only with no client blocked and the
	// arrival-order step not armed: orderWrite and writeGate would pass.
	rb := c.s.b.(BatchReplyBackend)
	cc, slot := ctx.(*cmdCtx)
	held := false
	if c.as.loop && c.s.ev.holding() {
		_, held = c.s.b.(TurnBackend)
	}
	if slot && rb.SubmitReplyBatch(ctx, ns, reqs, held, ic.done) {
		if held {
			c.s.ev.held(ns)
		}
		cc.setAfter(func(_ *cmdCtx, _ uint64, err error) { // the deadline passed, or the server stops
			for i, req := range ic.reqs {
				if rb.Abandon(ns, req.ID) {
					ic.done(i, automaton.Response{}, fmt.Errorf("request %s: outcome unknown: %w", req.ID, err))
				}
			}
		})
		return
	}
	go func() {
		if bb, ok := c.s.b.(BatchBackend); ok {
			resps, errs := bb.DoBatch(ctx, ns, reqs)
			for i := range reqs {
				ic.done(i, resps[i], errs[i])
			}
			return
		}
		for i, req := range reqs {
			r, err := c.s.b.Do(ctx, ns, req)
			ic.done(i, r, err)
		}
	}()
}

// done is request i's answer; the last one writes the batch's replies,
// here when that cannot block, else on a goroutine of their own (as
// batchCall.done).
func (ic *indepCall) done(i int, res automaton.Response, err error) {
	c := ic.c
	ic.resps[i], ic.errs[i] = res, err
	if ic.left.Add(-1) != 0 {
		return
	}
	if c.s.blk.blocked.Load() != 0 || (ic.b.prev != nil && !ic.b.prev.answered()) ||
		!c.out.hasRoom(int(c.s.lim.pipeline.Load())) {
		go ic.finish()
		return
	}
	ic.finish()
}

// finish ends the batch's deadline and writes its replies.
func (ic *indepCall) finish() {
	ic.end()
	c := ic.c
	rs := make([]service.Result, len(ic.reqs))
	for i, req := range ic.reqs {
		rs[i], _ = c.answered(req, ic.resps[i], ic.errs[i]) // wakes blocked clients (blocking.go)
	}
	c.writeBatch(ic.b, ic.plans, rs, service.Result{})
}

// awaitIndepBatch waits until an independent batch the event loop
// handed over (batchIndep) is answered: the connection's goroutine then
// serves its next command after it (see above).
func (c *conn) awaitIndepBatch() {
	if b := c.pl.lastBatch; b != nil && b.indep {
		<-b.written
		c.pl.lastBatch = nil
	}
}

// Batch replies by callback (branch pxs47, session 47).
//
// Where the Backend answers through a callback (ReplyBackend: the node), a
// batch in flight is handed over with one (batchCall.done) instead of a
// goroutine that waits for its answer: the goroutine that completes the
// batch (the committer's release, run aside with the rest of its commit's
// answers, or a peer reader's pass) writes its replies, as replyfn.go's
// lone commands are written, so a batch costs no goroutine and no wake-up
// of its own. The callback must not block: when the batch's replies cannot
// be written at once (the previous batch's are not written yet, the output
// buffer has no room: the client does not read; or clients are blocked on
// keys, whose wake-up (blockReg.touched) may wait), it hands them to a
// goroutine that writes them as before. Order, the conflict rule and the
// output buffer's limits are writeBatch's, unchanged. The deadline is the
// batch's slot (conn.bdl): its after-hook withdraws a request the Backend
// still holds (Abandon) and answers it as Submit's await would (TRYAGAIN,
// outcome unknown); without a free slot (a context.WithTimeout) the batch
// takes the waiting goroutine.

// batchCall is one batch in flight and what its answer needs.
type batchCall struct {
	c       *conn
	b       *batchSlot // &slot
	slot    batchSlot  // b, allocated with the call: one allocation per batch instead of two
	plans   []plan
	n       int // the batch's operations
	req     automaton.Request
	ns      string
	release func() // the write gate (blocking.go)
	end     func() // the deadline
}

// batchReply hands bc's request over with bc.done for its answer, and
// reports whether it did; false: nothing was handed over (the caller
// submits it as before).
func (c *conn) batchReply(ctx context.Context, bc *batchCall) bool {
	rb, ok := c.s.b.(ReplyBackend)
	cc, slot := ctx.(*cmdCtx)
	if !ok || !slot || c.s.noReplyFn {
		return false
	}
	// Read before the hand-over: bc.done may run, and finish clear bc.req,
	// before submitReplyTo returns.
	id := bc.req.ID
	if !c.submitReplyTo(ctx, bc.ns, bc.req, bc.done) { // evloop.go: held for the turn's pass on the event loop
		return false
	}
	cc.setAfter(func(_ *cmdCtx, _ uint64, err error) { // the deadline passed, or the server stops
		if rb.Abandon(bc.ns, id) {
			bc.done(automaton.Response{}, fmt.Errorf("request %s: outcome unknown: %w", id, err))
		}
	})
	return true
}

// done is the batch's answer (run once, by the goroutine that completes
// it): it writes the replies here when that cannot block, else on a
// goroutine of their own.
func (bc *batchCall) done(res automaton.Response, err error) {
	c := bc.c
	if c.s.blk.blocked.Load() != 0 || (bc.b.prev != nil && !bc.b.prev.answered()) ||
		!c.out.hasRoom(int(c.s.lim.pipeline.Load())) {
		go bc.finish(res, err)
		return
	}
	bc.finish(res, err)
}

// finish ends the batch's deadline and write gate and writes its replies
// from its answer (res, err), after the previous batch's.
func (bc *batchCall) finish(res automaton.Response, err error) {
	c := bc.c
	bc.release()
	bc.end()
	r, results := c.answered(bc.req, res, err)
	switch {
	case bc.n == 1:
		c.writeBatch(bc.b, bc.plans, []service.Result{r}, service.Result{})
	case r.Type == service.ResultErr:
		c.writeBatch(bc.b, bc.plans, nil, r)
	case len(results) != bc.n:
		c.writeBatch(bc.b, bc.plans, nil, errResult("ERR internal error: a group of %d operations answered %d results", bc.n, len(results)))
	default:
		for i := range results {
			if results[i].Type == service.ResultErr {
				results[i].Err = withCode(results[i].Err)
			}
		}
		c.writeBatch(bc.b, bc.plans, results, service.Result{})
	}
	// The slot stays reachable (c.pl.batchKeys, until pruned) and holds
	// the call with it: drop the batch's operations and plans.
	bc.req, bc.plans = automaton.Request{}, nil
}

// awaitKeys waits until every earlier batch in flight that names one of
// ops' keys is answered (the conflict rule), then notes b as the last
// batch on each of them.
func (c *conn) awaitKeys(ops []service.Op, b *batchSlot) {
	pl := &c.pl
	if pl.batchKeys == nil {
		pl.batchKeys = make(map[string]*batchSlot)
	} else if len(pl.batchKeys) >= 4*maxBatch*maxBatchesInFlight {
		for k, o := range pl.batchKeys {
			if o.answered() {
				delete(pl.batchKeys, k)
			}
		}
	}
	for _, op := range ops {
		if o := pl.batchKeys[op.Key]; o != nil && o != b {
			<-o.written
		}
		pl.batchKeys[op.Key] = b
	}
}

// batchSlot is a batch in flight (batchAsync).
type batchSlot struct {
	written chan struct{} // closed once its replies are written and flushed
	indep   bool          // independent requests (batchIndep), handed over by the event loop
	flushed atomic.Bool   // its replies are being flushed (written follows at once; evloop.go's evBatchWait)
	lane    *lane
	prev    *batchSlot // the connection's previous batch, nil once written
	pb      *planBuf   // the pooled list the batch's plans were gathered into
}

// planBuf is a batch's list of plans, recycled through planBufs: a plan is
// 176 bytes with pointers, so a batch of 16 allocated (and cleared) 3 KiB,
// 11 % of a leader's allocated bytes under redis-benchmark -P 16
// (docs/costs/s50-pxs50.md). A list returns to the pool once its batch's
// replies are written (writeBatch): nothing reads a batch's plans after
// that (its callback runs once; its deadline's after-hook answers only a
// request the Backend still held, which was then never written).
type planBuf struct{ p []plan }

// maxPooledPlans bounds the lists kept in planBufs (a batch of maxBatch
// plans would keep 45 KiB per pooled list).
const maxPooledPlans = 64

var planBufs = sync.Pool{New: func() any { return &planBuf{p: make([]plan, 0, 16)} }}

// recyclePlans clears plans (the batch's, gathered into pb) and returns
// the list to planBufs.
func recyclePlans(pb *planBuf, plans []plan) {
	if pb == nil || cap(plans) > maxPooledPlans {
		return
	}
	clear(plans)
	pb.p = plans[:0]
	planBufs.Put(pb)
}

// answered reports whether b's replies are written.
func (b *batchSlot) answered() bool {
	select {
	case <-b.written:
		return true
	default:
		return false
	}
}

// writeBatch writes batch b's replies, those of plans answered by rs or
// fail (renderNext), once the previous batch's are written, flushes them,
// frees b's lane and marks b written. The replies are rendered as they
// are written (no list of them per batch), unless a plan of the batch
// notes its result (keyspace notifications, plan.note): then the whole
// batch is rendered at once, as its answer arrives, as before, so that its
// events wait neither for the previous batch's replies nor for room in the
// output buffer of a client that does not read them.
func (c *conn) writeBatch(b *batchSlot, plans []plan, rs []service.Result, fail service.Result) {
	var early []service.Result
	for _, p := range plans {
		if p.note != nil {
			early = make([]service.Result, 0, len(plans))
			for i, k := 0, 0; i < len(plans); i++ {
				early = append(early, renderNext(plans[i], rs, &k, fail))
			}
			break
		}
	}
	if b.prev != nil {
		<-b.prev.written
		b.prev = nil
	}
	// Backpressure as the reader's (limits.go): replies go to the output
	// buffer only while it has room.
	c.out.waitRoom(int(c.s.lim.pipeline.Load()))
	c.wmu.Lock()
	for i, k := 0, 0; i < len(plans); i++ {
		if early != nil {
			c.writeResult(early[i])
		} else {
			c.writeResult(renderNext(plans[i], rs, &k, fail))
		}
	}
	b.flushed.Store(true) // before the flush: a client may answer its replies at once
	c.w.Flush()           // a failure fails out; the reader then ends the connection
	c.out.addReplies(len(plans))
	c.wmu.Unlock()
	recyclePlans(b.pb, plans)
	b.pb = nil
	c.pl.free <- b.lane
	close(b.written)
	c.evUnpark() // evloop.go: the loop holds the next command for this batch
}

// maxPipelined bounds a connection's pipelined commands in flight.
const maxPipelined = 64

// pipeSlot is one pipelined command: its reply once done is closed. One
// allocation carries the command's plan and request id to its goroutine.
type pipeSlot struct {
	done chan struct{}
	res  service.Result
	lane *lane
	p    plan
	id   automaton.RequestID
	prev *pipeSlot // the same key's earlier command still in flight, if any
}

// pipeConn is a connection's pipelining state; only the connection's
// goroutine touches it, except the channels.
type pipeConn struct {
	fifo  chan *pipeSlot // slots in command order, to the replier
	free  chan *lane     // lanes not in flight
	made  int            // lanes created (at most maxPipelined)
	busy  int            // lanes taken and not yet seen back (drain)
	last  map[string]*pipeSlot
	ended chan struct{} // closed when the replier ends
	// lastBatch is the last batch handed over (batchAsync), whose replies
	// the next batch's are written after; batchKeys the last batch handed
	// over on each key (the conflict rule).
	lastBatch *batchSlot
	batchKeys map[string]*batchSlot
}

// inFlight reports whether pipelined commands may be outstanding.
func (p *pipeConn) inFlight() bool { return p.made > 0 && len(p.free) < p.made }

// pipelineable returns the command's checked plan when the command may be
// pipelined (see above): the connection has commands in flight or more
// waiting, and the command and connection meet the rule. ok false leaves
// the command to exec, untouched.
func (c *conn) pipelineable(args [][]byte) (cmd *command, p plan, ok bool) {
	if !c.pl.inFlight() && c.r.Buffered() == 0 {
		return nil, plan{}, false
	}
	return c.pipelineRule(args)
}

// pipelineRule is pipelineable without its first condition: the command
// and the connection meet the rule.
func (c *conn) pipelineRule(args [][]byte) (cmd *command, p plan, ok bool) {
	return c.pipelineRuleAt(args, batchClock{time.Now(), c.s.acc.now()})
}

// batchClock is the time a batch's commands are noted at (CLIENT LIST's
// last command, OBJECT IDLETIME's access table): read once per batch
// (gather), as Redis reads its clock once per event loop turn; two clock
// reads per command were ~2 % of a leader's CPU under pipelined SETs.
type batchClock struct {
	now time.Time
	sec int64 // accessTable.now
}

func (c *conn) pipelineRuleAt(args [][]byte, clk batchClock) (cmd *command, p plan, ok bool) {
	cmd, found := c.cmds.lookup(args[0])
	if !found || cmd.plan == nil || cmd.first != 1 || cmd.last != 1 || !c.authed ||
		(cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) ||
		c.multi.open || len(c.multi.watch) > 0 || c.txn.open || c.sub.count() > 0 ||
		len(c.opts.sticky) > 0 || len(c.opts.pending) > 0 || c.cluster.aware || c.outOfMemory(cmd) {
		return nil, plan{}, false
	}
	if c.opts.cur != nil {
		c.opts.cur = nil // a previous command's options (optBegin); none in flight reads them
	}
	c.mu.Lock()
	c.lastCmd = cmd.name
	c.noteCommandAt(cmd.name, args, clk.now)
	ns := c.ns.Name
	c.mu.Unlock()
	c.s.acc.noteAt(ns, cmd, args, clk.sec) // access.go
	c.feedMonitors(cmd.name, args)         // monitor.go
	return cmd, c.check(c.planOf(cmd, args)), true
}

// concurrent reports whether a pipelineable command's plan runs
// concurrently: one operation, no guards. Other plans (a parse error's
// reply, several operations) run serially after draining.
//
// A plan whose result reports consumers (notify.go consumerEvents) runs
// serially too: in an atomic batch its wrapped result would nest one array
// deeper than a result may.
func (p plan) concurrent() bool { return len(p.ops) == 1 && len(p.guards) == 0 && p.reported == nil }

// pipeline starts a pipelined command of one operation; the replier writes
// its reply.
func (c *conn) pipeline(p plan) {
	l := c.takeLane()
	l.seq++
	l.note(c.svc, p.ops[0], nil) // sessions.go
	id := automaton.RequestID{Client: l.client, Seq: l.seq}
	c.mu.Lock()
	c.opts.lastLane = id // LASTOPT names the last command's operation (options.go)
	c.mu.Unlock()
	key := p.ops[0].Key
	s := &pipeSlot{done: make(chan struct{}), lane: l, p: p, id: id}
	if prev := c.pl.last[key]; prev != nil && !isDone(prev) {
		s.prev = prev
	}
	if c.pl.last == nil {
		c.pl.last = make(map[string]*pipeSlot, maxPipelined)
	} else if len(c.pl.last) >= 4*maxPipelined {
		for k, o := range c.pl.last {
			if isDone(o) {
				delete(c.pl.last, k)
			}
		}
	}
	c.pl.last[key] = s
	c.pl.fifo <- s // never blocks: at most maxPipelined slots, one per lane
	go c.runSlot(s)
}

// runSlot runs a pipelined command's operation, after the same key's
// earlier command (the conflict rule).
func (c *conn) runSlot(s *pipeSlot) {
	if s.prev != nil {
		<-s.prev.done
		s.prev = nil
	}
	r := [1]service.Result{c.runID(s.p.ops[0], s.id)}
	s.res = s.p.render(r[:])
	s.p = plan{}
	close(s.done)
}

func isDone(s *pipeSlot) bool {
	select {
	case <-s.done:
		return true
	default:
		return false
	}
}

// takeLane returns a free pipelining lane, creating one while fewer than
// maxPipelined exist, else waiting for one (the replier frees it).
func (c *conn) takeLane() *lane { return c.takeLaneOf(maxPipelined) }

// takeLaneOf is takeLane with at most most lanes.
func (c *conn) takeLaneOf(most int) *lane {
	pl := &c.pl
	if pl.fifo == nil {
		pl.fifo = make(chan *pipeSlot, maxPipelined)
		pl.free = make(chan *lane, maxPipelined)
		pl.ended = make(chan struct{})
		go c.replier()
	}
	select {
	case l := <-pl.free:
		return l
	default:
	}
	if pl.made < most {
		pl.made++
		return &lane{client: randomClientID()}
	}
	return <-pl.free
}

// drainPipeline waits until every pipelined command's reply is written
// (and flushed to the output buffer).
func (c *conn) drainPipeline() {
	pl := &c.pl
	if !pl.inFlight() {
		return
	}
	ls := make([]*lane, 0, pl.made)
	for range pl.made {
		ls = append(ls, <-pl.free)
	}
	for _, l := range ls {
		pl.free <- l
	}
	clear(pl.last)
	clear(pl.batchKeys)
	pl.lastBatch = nil
}

// endPipeline drains the pipeline and stops the replier (connection end).
func (c *conn) endPipeline() {
	if c.pl.fifo == nil {
		return
	}
	c.drainPipeline()
	close(c.pl.fifo)
	<-c.pl.ended
}

// replier writes pipelined replies in command order, flushes once per
// batch of ready replies (when the next one is not ready, or none is
// queued), and frees each slot's lane once its reply is flushed.
func (c *conn) replier() {
	defer close(c.pl.ended)
	owed := 0
	var held []*lane // lanes of written replies not yet flushed
	flush := func() {
		c.w.Flush() // a failure fails out; the reader then ends the connection
		c.out.addReplies(owed)
		owed = 0
		c.wmu.Unlock()
		for _, l := range held {
			c.pl.free <- l
		}
		held = held[:0]
	}
	s, ok := <-c.pl.fifo
	for ok {
		if owed > 0 && !isDone(s) {
			flush()
		}
		<-s.done
		// Backpressure as the reader's (limits.go): a reply goes to the
		// output buffer only while it has room.
		c.out.waitRoom(int(c.s.lim.pipeline.Load()))
		if owed == 0 {
			c.wmu.Lock()
		}
		c.writeResult(s.res)
		owed++
		held = append(held, s.lane)
		select {
		case s, ok = <-c.pl.fifo:
		default:
			flush()
			s, ok = <-c.pl.fifo
		}
	}
	if owed > 0 {
		flush()
	}
}
