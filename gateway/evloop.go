package gateway

import (
	"context"
	"errors"
	"io"
	"net"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// The client event loop (issue 28; branch evloop48, session 48).
//
// A connection's goroutine pays, per command of a client that waits for
// each reply, a wake-up through Go's netpoller, the command's read and
// the EAGAIN read before it parks again (internal/poll resets the
// read-ready flag before every read, so Go's net.Conn cannot wait for
// readability without reading), plus the futex wake-ups between it and the
// namespace loop. Redis's ae loop pays one epoll_wait for many clients and
// one read per command. With the event loop on (ServerOptions.EventLoop,
// which the node sets since session 50, or SYNOD_GATEWAY_EVLOOP=1;
// SYNOD_GATEWAY_EVLOOP=0 turns it off; Linux only) plaintext connections
// are served that way: one goroutine waits on an epoll set (level-triggered) of the
// connections it owns, reads each ready socket once, parses, and hands a
// plain data command to the namespace with SubmitReply (replyfn.go), whose
// completing goroutine writes the reply with the direct write. Nothing
// waits on the loop: no EAGAIN read re-arms anything. The goroutine waits
// for the set in Go's netpoller (the epoll descriptor is pollable; a
// zero-timeout epoll_wait takes the events), not in a blocking epoll_wait,
// whose thread would keep its P for up to 10 ms (sysmon's retake):
// measured, one client's paxos put was 15 % slower that way (docs/COSTS.md,
// evloop48).
//
// Decision (evloop49, session 49; session 48 kept Go's descriptor and
// read it with RawConn.Read, which left the socket in Go's netpoller too,
// edge-triggered: each command woke Go's netpoller thread for nothing):
// the loop owns the socket outright. The accepted connection's descriptor
// is duplicated and the Go connection closed (evNetConn,
// evconn_linux.go), so the socket is in the loop's epoll set only. A
// goroutine that must read the connection (below) reads through a Go
// connection made then by net.FileConn, closed when it hands the
// connection back: a socket is in exactly one epoll set at a time, and
// exactly one owner reads it (evOwner): the loop removes the socket from
// its epoll set before a goroutine takes it, and the goroutine adds it
// back when it hands the connection back. A pipelining client whose
// batches the loop does not serve (below: protocols with neither atomic
// groups nor client batches, a client pipelining ahead of its replies, ...) stays with its
// goroutine for evStayPipelined commands (a Go connection costs a dozen
// system calls to make).

// What the loop serves itself: a pipeline batch whose batches go in
// flight (evBatch, "Pipelined batches on the loop" below), and a command
// that arrives alone and complete
// (a RESP array, nothing read behind it), a data command (a plan, not a
// blocking form) that replyFirst admits (the default user, replies on, no
// MULTI/WATCH, no transaction, no subscription, no request options, not in
// cluster mode), and the output buffer empty. Anything else, and anything
// the loop cannot finish without waiting (a partial write, a full output
// buffer, a read error, a protocol error, a plan replyAsync would run and
// wait for: keyspace notifications, a script, a sharded namespace, a
// Backend that took nothing; a write the arrival-order step would hold
// for another connection's ordered command, or one to a key a blocked
// client waits on: loopMayWrite), goes to the
// connection's goroutine (serveFrom) with the command already read, or
// the work exec left (detour), and the goroutine serves as before; at the
// top of its loop, when the connection is back in the state above, it
// hands the connection back (handBack). Replies stay in command order: the
// loop serves a connection's next command only once its previous reply is
// written (a reply still in flight parks the command: replyLoopWaited,
// and the writer hands the connection back to the loop).

// evResume is where a connection's goroutine starts (serveFrom).
type evResume struct {
	held    [][]byte // a command read, not yet served
	heldErr error    // a read's error, not yet met
	// heldCmd and heldPlan: held's command and checked plan, made by the
	// loop's pipelineRule (which noted the command: CLIENT LIST, the
	// access table, MONITOR), so the goroutine serves held as pipelined
	// without making them again (evBatch).
	heldCmd  *command
	heldPlan plan
	detour   func() // exec's work left for a goroutine (replyAsync); wmu held
	failed   bool   // the connection failed: end it
}

const (
	evOwnGoroutine = iota // the connection's goroutine reads it
	evOwnLoop             // the event loop reads it
)

// evConnState is a connection's part in the event loop.
type evConnState struct {
	on     bool         // the connection may be served by the loop
	key    uint32       // its key in the loop's epoll set
	owner  atomic.Int32 // evOwnGoroutine, evOwnLoop
	closed atomic.Bool  // Close was called (evNetConn)
	rd     evReader
	stay   int // commands its goroutine serves before it may hand c back (a pipelining client)
	// parked: the loop holds c's next command until c's last pipeline
	// batch is answered (evBatchWait); the batch's writer hands c back
	// (writeBatch: evUnpark).
	parked atomic.Bool
}

// evStayPipelined is how many commands a pipelining client's goroutine
// serves before it offers the connection back to the loop: each move
// from the loop to a goroutine that reads makes a Go connection
// (net.FileConn: a dozen system calls, evconn_linux.go), and a client
// that pipelines once usually keeps pipelining (redis-benchmark -P 16
// would leave the loop and come back once per batch); 64 commands (4 batches of
// -P 16) make it one move per 64 commands at most.
const evStayPipelined = 64

// errEvAgain: the loop's read found nothing more on the socket.
var errEvAgain = errors.New("gateway: event loop: nothing to read")

const (
	evPass  = iota // reads are the net.Conn's (the goroutine's, blocking)
	evOnce         // the loop's next read is one read(2)
	evSpent        // the loop read once: report errEvAgain
)

// evReader is the socket under a loop connection's bufio.Reader.
type evReader struct {
	e    *evNetConn
	raw  syscall.RawConn
	mode int
	held bool // evPass: the goroutine holds e's Go connection (evconn_linux.go)
	p    []byte
	n    int
	err  error
	fn   func(fd uintptr) bool
}

func (r *evReader) Read(p []byte) (int, error) {
	switch r.mode {
	case evPass:
		return r.e.goRead(p, &r.held)
	case evSpent:
		return 0, errEvAgain
	}
	r.mode = evSpent
	r.p, r.n, r.err = p, 0, nil
	if err := r.raw.Read(r.fn); err != nil {
		return 0, err
	}
	r.p = nil
	return r.n, r.err
}

// dropGo lets go of the Go connection the goroutine read through: the
// socket leaves Go's netpoller before it joins the loop's epoll set.
func (r *evReader) dropGo() {
	if r.held {
		r.held = false
		r.e.unhold()
	}
}

// read is one read(2) on the non-blocking descriptor (EINTR retried).
func (r *evReader) read(fd uintptr) bool {
	n, err := sockReadOnce(fd, r.p)
	switch {
	case err == syscall.EAGAIN:
		r.err = errEvAgain
	case err != nil:
		r.err = err
	default:
		r.n = n
	}
	return true // never wait for the socket
}

// sockReadOnce is one read(2) of fd into p (raw unless
// SYNOD_GATEWAY_RAWIO=0: rawio_linux.go), EINTR retried, end of stream as
// io.EOF; EAGAIN is returned as it is.
func sockReadOnce(fd uintptr, p []byte) (int, error) {
	for {
		n, err := sockRead(fd, p)
		switch {
		case err == syscall.EINTR:
			continue
		case err == nil && n == 0:
			return 0, io.EOF
		}
		return n, err
	}
}

// evSource is what c's bufio.Reader reads: the socket, through the loop's
// reader when nc is a loop connection.
func (c *conn) evSource(nc net.Conn) io.Reader {
	e, ok := nc.(*evNetConn)
	if !ok {
		return nc
	}
	raw, err := e.SyscallConn()
	if err != nil {
		return nc
	}
	e.c = c
	c.ev.on, c.ev.key = true, uint32(c.id)
	c.ev.rd = evReader{e: e, raw: raw}
	c.ev.rd.fn = c.ev.rd.read
	if c.ev.key == 0 {
		c.ev.key = 1 << 31 // 0 is the loop's wake-up
	}
	return &c.ev.rd
}

// loopMayWrite reports whether the loop may hand op, replyAsync's one
// operation, to the Backend itself, which it may unless that would wait
// (the loop never waits): when the arrival-order step (order.go) is armed,
// op writes, and another connection holds an ordered command that arrived
// first (orderAheadOf); or when a client is blocked on a key op writes
// (blocking.go's writeGate holds such a write while a round of attempts
// runs). Such a command goes to the connection's goroutine, which waits
// as before. Every other command is served by the loop while clients are
// blocked and while the step is armed (evloop50, session 50: before, the
// loop gave every connection to its goroutine for as long as any client
// was blocked or for the 60 s the step stays armed after a BLPOP, so any
// workload with a blocking command ran without the loop).
func (c *conn) loopMayWrite(op service.Op) bool {
	return !c.orderAheadOf(op) && !c.s.blk.waitedBy(c, op)
}

// waitedBy reports whether a write of op through c names a key a blocked
// client waits on (writeGate's test, which then may wait for a round).
func (b *blockReg) waitedBy(c *conn, op service.Op) bool {
	if b.blocked.Load() == 0 || c.blk.quiet.Load() || c.svc == nil || op.Kind == "" || c.svc.IsRead(op) {
		return false
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.waited(op.Key) {
		return true
	}
	for _, a := range op.Args {
		if b.waited(string(a)) {
			return true
		}
	}
	return false
}

// idle reports whether the buffer holds nothing unwritten and is open.
func (o *outBuf) idle() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.err == nil && !o.closing && len(o.buf) == 0 && o.writing == 0
}

// evFast reports whether command args, just read, may be served by the
// loop (see the top of the file).
func (c *conn) evFast(args [][]byte) bool {
	if c.r.Buffered() != 0 || !c.authed || orderedCommand(args) {
		return false
	}
	cmd, ok := c.cmds.lookup(args[0])
	if !ok || cmd.plan == nil || cmd.block != nil ||
		(cmd.arity > 0 && len(args) != cmd.arity) || (cmd.arity < 0 && len(args) < -cmd.arity) {
		return false
	}
	return c.replyFirst()
}

// mayHandBack reports whether c's goroutine may give c to the loop.
func (c *conn) mayHandBack() bool {
	return c.ev.on && !c.ev.closed.Load() && c.as.err == nil && c.owed == 0 && !c.s.evAlone() &&
		c.authed && c.replyFirst() && c.out.idle() && c.s.testBeforeRead.Load() == nil
}

// evAlone reports whether the server has one client connection (or
// none): the loop then leaves it to its goroutine (evloop50, session 50).
//
// Why: one client's paxos put and get at the leader were 7-15 % slower
// through the loop on the quiet machine (put p50 0.479 -> 0.547 ms, get
// 0.144 -> 0.171, session 50's opening probe) though the system calls per
// command were level within 0.4 (the loop's read and its zero-timeout
// epoll_wait against the goroutine's read and EAGAIN read: +1.2
// epoll_pwait, -0.85 read per SET at the leader) and CPU per command
// level at load 15-23. What differs is the wake-up: a goroutine's socket
// is in Go's epoll set and the client's write wakes the thread waiting
// there directly, as a synchronous wake-up (the waker is about to sleep
// for the reply: the kernel runs the woken thread on the waker's CPU);
// the loop's socket is in the loop's epoll set, itself in Go's, and the
// nested set passes the wake-up on as an ordinary one (fs/eventpoll.c's
// ep_poll_safewake), which on an idle machine goes to the other, idle
// CPU. That is the likely cause, not shown: on this loaded machine no
// count separates it. Alone, a client gains nothing from the loop (one
// socket: nothing to read in one turn with others), so it is not taken:
// the connection's goroutine reads it through its Go connection
// (evconn_linux.go), the same system calls and wake-ups as with the loop
// off. A second connection makes the first go to the loop at its next
// command (handBack); the loop's last connection goes back to its
// goroutine after its next command once it is alone (serve).
func (s *Server) evAlone() bool { return s.ord.conns.Load() <= 1 }

// evStep serves what the loop found for c (read: its socket is readable;
// else its previous reply was written). It returns false with where the
// goroutine starts when c must go to its goroutine.
func (c *conn) evStep(read bool) (evResume, bool) {
	if c.ev.closed.Load() {
		return evResume{}, false
	}
	if read {
		c.ev.rd.mode = evOnce
		_, err := c.br.Peek(c.br.Buffered() + 1)
		c.ev.rd.mode = evSpent
		if err != nil && err != errEvAgain {
			if c.br.Buffered() == 0 {
				// The client closed (EOF) or the socket failed, nothing
				// read before it: the goroutine ends the connection
				// with this error, without a read of its own (which
				// would first make a Go connection: a dozen system
				// calls per closed connection, evconn_linux.go).
				return evResume{heldErr: err}, false
			}
			// Commands read before it, or a command larger than the
			// buffer: the goroutine's read meets it.
			return evResume{}, false
		}
	}
	s := c.s
	for c.br.Buffered() > 0 {
		if s.testBeforeRead.Load() != nil {
			return evResume{}, false
		}
		switch c.as.state.Load() {
		case replyPending:
			if c.as.state.CompareAndSwap(replyPending, replyLoopWaited) {
				return evResume{}, true // replied hands c back (ready)
			}
			continue
		case replyLoopWaited:
			return evResume{}, true
		}
		if c.as.err != nil {
			return evResume{}, false
		}
		b, _ := c.br.Peek(c.br.Buffered())
		whole := respComplete(b)
		if whole == evIncomplete {
			return evResume{}, true
		}
		if wait, ok := c.evBatchWait(); !ok {
			return evResume{}, false
		} else if wait {
			return evResume{}, true // writeBatch hands c back (ready)
		}
		if whole == evUnsure || !c.out.idle() {
			return evResume{}, false
		}
		c.endCommand(true)
		args, err := c.r.ReadCommand()
		if err != nil {
			return evResume{heldErr: err}, false
		}
		s.totalCommands.Add(1)
		if !c.evFast(args) {
			if c.r.Buffered() == 0 {
				return evResume{held: args}, false
			}
			r, handed := c.evBatch(args)
			if !handed {
				c.ev.stay = evStayPipelined // a pipelining client: its goroutine keeps it a while
				return r, false
			}
			if r.held != nil || r.heldErr != nil {
				return r, false // the command that ended the batch: the goroutine's
			}
			continue
		}
		c.beginCommand(args)
		c.wmu.Lock()
		c.as.may, c.as.loop = true, true
		c.exec(args)
		c.as.may, c.as.loop = false, false
		if d := c.as.detour; d != nil {
			c.as.detour = nil
			return evResume{detour: d}, false
		}
		if c.as.submitted { // replied writes its reply; wmu was released
			c.as.submitted = false
			c.noteState()
		} else if err := c.finishReply(false, false); err != nil {
			return evResume{failed: true}, false
		}
		c.endCommand(c.br.Buffered() > 0)
	}
	return evResume{}, true
}

const (
	evIncomplete = iota // a RESP array not all read yet
	evComplete          // a whole RESP array of bulk strings
	evUnsure            // anything else: the goroutine's reader decides
)

// respComplete tells whether b starts with one whole command in the form
// clients send (an array of bulk strings), so that reading it cannot
// wait. Inline commands, empty arrays and anything odd are evUnsure.
func respComplete(b []byte) int {
	if len(b) == 0 || b[0] != '*' {
		return evUnsure
	}
	n, pos, st := respLen(b, 1)
	if st != evComplete {
		return st
	}
	if n < 1 || n > 1<<16 {
		return evUnsure
	}
	for ; n > 0; n-- {
		if pos >= len(b) {
			return evIncomplete
		}
		if b[pos] != '$' {
			return evUnsure
		}
		l, p, st := respLen(b, pos+1)
		if st != evComplete {
			return st
		}
		if l < 0 || l > 1<<30 {
			return evUnsure
		}
		pos = p + l + 2
		if pos > len(b) {
			return evIncomplete
		}
		if b[pos-2] != '\r' || b[pos-1] != '\n' {
			return evUnsure
		}
	}
	return evComplete
}

// respLen parses the decimal number at b[i:] up to "\r\n"; it returns the
// number, the index after "\r\n" and evComplete, or evIncomplete/evUnsure.
func respLen(b []byte, i int) (int, int, int) {
	n, digits := 0, 0
	for ; i < len(b); i++ {
		ch := b[i]
		switch {
		case ch >= '0' && ch <= '9' && digits < 10:
			n = n*10 + int(ch-'0')
			digits++
		case ch == '\r' && digits > 0:
			if i+1 >= len(b) {
				return 0, 0, evIncomplete
			}
			if b[i+1] != '\n' {
				return 0, 0, evUnsure
			}
			return n, i + 2, evComplete
		default:
			return 0, 0, evUnsure
		}
	}
	return 0, 0, evIncomplete
}

// Pipelined batches on the loop (branch pipe51, session 51).
//
// A client that pipelines (redis-benchmark -P 16: sixteen commands, then
// it waits for their sixteen replies) used to leave the loop at its
// first batch and never come back: its goroutine always had a batch in
// flight at the top of its loop (mayHandBack), and it paid, per batch,
// the read, the EAGAIN read after it (Go's net.Conn cannot wait for
// readability without reading) and a park and wake in Go's netpoller.
// Now the loop serves such a batch itself, as the goroutine would
// (serveFrom: pipelineable, then batchAsync): it reads what the socket
// holds (one read), gathers the whole commands into one batch (gather,
// which on the loop stops before a command not wholly read: the rest
// comes with the next readable event), hands the batch over in one
// request (SubmitReply, or held for the turn's one pass: submitReplyTo),
// and the batch's callback writes its replies in one write (writeBatch),
// as on the goroutine path. The socket stays in the loop's epoll set:
// its level-triggered readiness says when the next batch came.
//
// What the loop takes (evBatch), checked before the command is noted: a
// connection whose batches go in flight (batchMode with a SubmitBackend:
// protocols with atomic groups; or, since pipe52, with a
// BatchReplyBackend: protocols that step client batches, ABD and ESDS,
// whose batch goes as independent requests in one hand-off, batchIndep), replies on, no serial reply unflushed,
// nothing pipelined in flight, no client blocked and the arrival-order
// step not armed (then orderWrite and writeGate cannot wait), and a
// command pipelineRule admits; a plan that is not concurrent goes to the
// goroutine with the plan made (evResume.heldCmd: not noted twice), and
// so does the command that ended the batch (gather's next) or a read
// error (heldErr), after the batch is handed over: the goroutine's path
// drains it first, as always. Everything else goes where it went.
//
// The loop keeps at most one batch of a connection in flight, so it
// never waits for a lane or for an earlier batch on the same keys
// (awaitKeys). When the next command arrives while the last batch is in
// flight (evBatchWait): if the batch's replies are being flushed (a
// client that waited for them sent the next batch; writeBatch sets the
// flag before its flush, which never waits, and closes written right
// after), the loop
// parks the connection and the batch's writer hands it back (ready);
// otherwise the client pipelines ahead of its replies, and the
// connection goes to its goroutine, which keeps up to maxBatchesInFlight
// batches in flight as before. Order is the goroutine path's: a batch is
// handed over only once the previous one is answered, a lone command
// only once nothing is in flight (replyFirst), and anything else goes to
// the goroutine, which drains what is in flight first.

// evBatch serves pipelined command args (commands are buffered behind
// it) on the loop, as serveFrom would: true when the batch it starts was
// handed over, with the command or read error that ended it, if any, for
// the goroutine; false with where the goroutine starts.
func (c *conn) evBatch(args [][]byte) (evResume, bool) {
	s := c.s
	if c.reply != replyOn || c.owed > 0 || c.pl.inFlight() || s.blk.blocked.Load() != 0 || s.ord.armed() ||
		!c.batchMode() || !(c.bat.async || c.bat.replyIndep) {
		return evResume{held: args}, false
	}
	cmd, p, ok := c.pipelineRule(args)
	if !ok {
		return evResume{held: args}, false
	}
	if !p.concurrent() {
		return evResume{held: args, heldCmd: cmd, heldPlan: p}, false
	}
	c.beginCommand(args)
	c.as.loop = true
	next, rerr := c.batchAsync(p)
	c.as.loop = false
	c.endCommand(next != nil || c.br.Buffered() > 0)
	if next != nil && c.bat.indep {
		// A command that could not join an independent batch (ESDS: the
		// same key again) goes to the goroutine, which waits for the
		// batch (awaitIndepBatch): it keeps such a client a while, as it
		// kept it before the loop served these batches.
		c.ev.stay = evStayPipelined
	}
	return evResume{held: next, heldErr: rerr}, true
}

// evBatchWait tells what the loop does with c's next command while c's
// last pipeline batch may be in flight (see above): wait (the batch's
// writer hands c back), go on (nothing in flight), or ok false: c goes to
// its goroutine.
func (c *conn) evBatchWait() (wait, ok bool) {
	b := c.pl.lastBatch
	if b == nil || b.answered() {
		return false, true
	}
	if !b.flushed.Load() {
		return false, false
	}
	c.ev.parked.Store(true)
	if !b.answered() {
		return true, true
	}
	// Answered meanwhile: go on, unless its writer took c's parking (it
	// then hands c back).
	return !c.ev.parked.CompareAndSwap(true, false), true
}

// evUnpark hands c back to the loop if the loop parked it for a batch
// (evBatchWait); writeBatch calls it once the batch is answered.
func (c *conn) evUnpark() {
	if c.ev.parked.Load() && c.ev.parked.CompareAndSwap(true, false) {
		c.s.ev.ready(c)
	}
}

// evWhole reports whether the next buffered command is wholly read (a
// RESP array of bulk strings), so that parsing it cannot read: the loop's
// gather stops before one that is not.
func (c *conn) evWhole() bool {
	b, _ := c.br.Peek(c.br.Buffered())
	return respComplete(b) == evComplete
}

// armed reports whether writes take the arrival-order step now
// (orderStep's test).
func (o *orderReg) armed() bool {
	until := o.armedUntil.Load()
	if until == 0 {
		return false
	}
	if time.Now().UnixNano() > until {
		o.armedUntil.CompareAndSwap(until, 0)
		return false
	}
	return true
}

// handBack gives c to the loop when it may serve c's next command (top of
// serveFrom's loop); true: the goroutine ends, owning nothing.
func (c *conn) handBack() bool {
	if !c.ev.on || c.s.ev == nil {
		return false
	}
	if c.ev.stay > 0 {
		c.ev.stay--
		return false
	}
	if !c.mayHandBack() {
		return false
	}
	// Idle for the arrival-order step (order.go), as the goroutine marks
	// itself before a read: a connection left marked as running an
	// ordered command would hold other connections' writes for 1 s.
	c.endCommand(false)
	return c.s.ev.giveBack(c)
}

// submitReply hands replyAsync's request to the Backend (replyfn.go):
// held for the turn's one pass (TurnBackend: the loop calls Kick once the
// turn's ready sockets are served) when the event loop serves several
// clients in this turn, else by SubmitReply. Without holding, each
// request's pass ran on the loop's goroutine before the next client's
// command was read, one request per pass (docs/COSTS.md, evloop49).
func (c *conn) submitReply(ctx context.Context, ns string, req automaton.Request) bool {
	return c.submitReplyTo(ctx, ns, req, c.as.done)
}

// submitReplyTo is submitReply with done for the answer (a pipeline
// batch's callback: batchReply).
func (c *conn) submitReplyTo(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	if c.as.loop && c.s.ev.holding() {
		if tb, ok := c.s.b.(TurnBackend); ok {
			if !tb.SubmitReplyHeld(ctx, ns, req, done) {
				return false
			}
			c.s.ev.held(ns)
			return true
		}
	}
	return c.s.b.(ReplyBackend).SubmitReply(ctx, ns, req, done)
}
