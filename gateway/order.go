package gateway

import (
	"bytes"
	"io"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/synod-dev/synod/service"
)

// Arrival order across connections (issue 34). Redis serves every client
// from one thread, so a command that reached it first is served first,
// whichever connection it came on. Redis's own tests lean on that: a
// deferring client sends XREADGROUP ... BLOCK, BLPOP or UNSUBSCRIBE and,
// without reading a reply, the test writes (DEL, SET, FLUSHALL, EXEC,
// PUBLISH) on its other connection, expecting the first command to have
// blocked, or unsubscribed, before the write. Synod reads each connection
// on its own goroutine, so the second connection's write can be read,
// sent and applied before the first connection's goroutine has even read
// its bytes.
//
// Decision: an ordering step before a write and before PUBLISH/SPUBLISH,
// for the ordered commands only (orderedCommand: the blocking commands and
// the subscription commands; they are the ones whose outcome a later
// write or publish changes). Before such a write or publish leaves, the
// connection looks at every other connection of this server:
//
//   - one whose goroutine is running an ordered command that has not
//     settled (its first attempt not yet answered, for a blocking
//     command; not yet done, for a subscription command), or has read
//     bytes it has not yet parsed, goes first: the step waits until it
//     settles;
//   - otherwise (idle in its read, or running a command that is not
//     ordered, whose reply its client may already have read) the step
//     peeks at its socket (recv with MSG_PEEK, nothing consumed) and,
//     when the bytes waiting there start an ordered command, waits until
//     that command has been read and has settled.
//
// Any command found this way had arrived before the write's step ran,
// so it is concurrent with the write: serving it first is one of the
// orders Redis could have chosen, and it is the one Redis chooses when
// it arrived first. The wait ends after orderWaitLimit (1 s) in any
// case, and after orderParseLimit (200 ms) for a connection that holds
// bytes it has not parsed, so a connection that never settles (a client
// that stalls mid-command) delays nobody for longer than that.
//
// Cost and limits, the hot path first:
//   - Writes take the step only while the step is armed: for
//     orderArmFor (60 s) after this server last served an ordered
//     command. A workload that never blocks or subscribes pays one atomic
//     load per write. PUBLISH takes it always (a subscriber may have
//     subscribed long ago).
//   - The step looks only when the server has at most orderConnsMax
//     client connections; with more it is skipped (a benchmark's hundreds
//     of clients pay one more atomic load, and are served in whatever
//     order their goroutines run, as before). Within the limit it costs
//     one recv(MSG_PEEK) system call per other connection that is not
//     itself running an ordered command, and no allocation
//     (BenchmarkServeOrdered: one by one with 3 idle connections, armed).
//   - It orders the connections of one node. Commands sent to different
//     nodes have no common arrival order to keep.
//   - The first ordered command after a minute without one is not
//     protected: nothing armed the step for the write racing it.
//   - An ordered command takes no step itself, so two ordered commands
//     on two connections keep no arrival order between them (type/list's
//     "BRPOPLPUSH with multiple blocked clients" stays skipped): two
//     such commands waiting for each other would each wait out the limit.
//   - The peek reads only what the kernel holds. Bytes a connection's
//     goroutine has read but not parsed count as "goes first" (state
//     orderUnparsed), but the instant between its read(2) returning and
//     its marking itself can still lose the race; so can a command whose
//     bytes arrive after the step looked. TLS connections are not peeked
//     (their bytes are ciphertext).
//   - Kernel receive timestamps (SO_TIMESTAMPNS, which works on TCP since
//     Linux 4.x; this code was written on 6.18) were considered: they
//     would date the bytes a goroutine reads, but only through recvmsg(2)
//     on every read (Go's net.Conn reads with read(2)), and they say
//     nothing about bytes no goroutine has read yet, which is where the
//     race is lost. The peek answers that question directly.

const (
	orderConnsMax = 16
	orderArmFor   = 60 * time.Second
	orderPeek     = 512
)

// orderWaitLimit bounds one step's wait for ordered commands to settle
// (a blocking command's first attempt goes through the log: at a loaded
// node's fsync, tens of milliseconds); orderParseLimit, for a connection
// that holds bytes it has not parsed (a large command arriving slowly is
// no race). Variables for tests, which raise them so that a loaded
// machine cannot end a wait they assert on.
var (
	orderWaitLimit  = time.Second
	orderParseLimit = 200 * time.Millisecond
)

// Connection states for the step (orderConn.state).
const (
	orderIdle     int32 = iota // in its read, nothing parsed pending
	orderUnparsed              // holds read bytes not yet parsed
	orderRunning               // running a command that is not ordered
	orderOrdered               // running an ordered command not yet settled
)

// orderConn is a connection's part in the step.
type orderConn struct {
	state atomic.Int32
	// settled counts the ordered commands that settled on this connection
	// (settleOrdered), and its end: a step that saw an ordered command in
	// the socket waits for it to move (orderBefore).
	settled atomic.Uint64
	raw     syscall.RawConn // nil: not peekable (TLS, not a socket)
	peek    *peeker         // its steps' peek buffer (its goroutine's), made at its first step
}

// orderReg is a server's ordering step.
type orderReg struct {
	armedUntil atomic.Int64 // Unix ns; 0: never armed
	conns      atomic.Int64 // client connections open
}

// orderedNames are the ordered commands (XREAD and XREADGROUP only with
// BLOCK).
var orderedNames = []string{"blpop", "brpop", "blmove", "brpoplpush", "blmpop", "bzpopmin", "bzpopmax", "bzmpop",
	"subscribe", "unsubscribe", "psubscribe", "punsubscribe", "ssubscribe", "sunsubscribe", "xread", "xreadgroup"}

// orderedCommand reports whether the command args is ordered: a later
// write or publish changes its outcome. It allocates nothing (it runs for
// every command).
func orderedCommand(args [][]byte) bool {
	name := args[0]
	for _, o := range orderedNames {
		if len(o) != len(name) || !bytes.EqualFold(name, []byte(o)) {
			continue
		}
		if o != "xread" && o != "xreadgroup" {
			return true
		}
		for _, a := range args[1:] {
			if bytes.EqualFold(a, []byte("block")) {
				return true
			}
		}
		return false
	}
	return false
}

// arm notes that an ordered command was served: writes take the step for
// the next orderArmFor.
func (o *orderReg) arm() {
	o.armedUntil.Store(time.Now().Add(orderArmFor).UnixNano())
}

// beginCommand marks c as running command args (its goroutine, after
// parsing it).
func (c *conn) beginCommand(args [][]byte) {
	if c.s == nil || len(args) == 0 {
		return
	}
	st := orderRunning
	if orderedCommand(args) {
		c.s.ord.arm()
		st = orderOrdered
	}
	if c.ord.state.Swap(st) == orderOrdered {
		c.ord.settled.Add(1) // the previous ordered command ended unsettled
	}
}

// settleOrdered marks c's ordered command as settled: a blocking command
// whose first attempt was answered and that now waits, or any command
// that ended. Writes and publishes waiting for c go on.
func (c *conn) settleOrdered() {
	if c.ord.state.CompareAndSwap(orderOrdered, orderRunning) {
		c.ord.settled.Add(1)
	}
}

// endOrdered marks c as ended: nobody waits for it any more.
func (c *conn) endOrdered() {
	c.endCommand(false)
	c.ord.settled.Add(1 << 20)
}

// endCommand marks c as back in its loop: idle when nothing read waits,
// unparsed otherwise.
func (c *conn) endCommand(buffered bool) {
	c.settleOrdered()
	if buffered {
		c.ord.state.Store(orderUnparsed)
	} else {
		c.ord.state.Store(orderIdle)
	}
}

// orderWrite is the step before request op (or the group ops) through c
// when one of them writes (see the top of the file).
func (c *conn) orderWrite(op service.Op, group []service.Op) {
	if c.as.loop {
		return // the event loop looked before it took the command (orderAhead), and never waits
	}
	if c.orderStep(op, group) {
		c.orderBefore()
	}
}

// orderStep reports whether request op (or the group ops) through c takes
// the step: it is armed and one of them writes.
func (c *conn) orderStep(op service.Op, group []service.Op) bool {
	s := c.s
	if s == nil {
		return false
	}
	until := s.ord.armedUntil.Load()
	if until == 0 || c.ord.state.Load() == orderOrdered || c.blk.quiet.Load() || c.svc == nil {
		return false // never armed; an ordered command's own attempt; a blocked client's
	}
	if time.Now().UnixNano() > until {
		s.ord.armedUntil.CompareAndSwap(until, 0)
		return false
	}
	if len(group) == 0 {
		return op.Kind != "" && !c.svc.IsRead(op)
	}
	for _, o := range group {
		if o.Kind != "" && !c.svc.IsRead(o) {
			return true
		}
	}
	return false
}

// orderAheadOf reports whether a write of op through c would wait in the
// step for another connection's ordered command: the step's look without
// its wait, for the event loop, which must not wait (evloop.go) and gives
// such a write to the connection's goroutine, whose step waits.
func (c *conn) orderAheadOf(op service.Op) bool {
	if !c.orderStep(op, nil) {
		return false
	}
	s := c.s
	if n := s.ord.conns.Load(); n <= 1 || n > orderConnsMax {
		return false
	}
	if c.ord.peek == nil {
		c.ord.peek = newPeeker()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	for o := range s.conns {
		if o == c {
			continue
		}
		if ahead, _ := o.orderedAhead(c.ord.peek); ahead {
			return true
		}
	}
	return false
}

// orderPublish is the step before PUBLISH or SPUBLISH, armed or not (a
// subscriber may have subscribed long ago).
func (c *conn) orderPublish() {
	if c.s != nil {
		c.orderBefore()
	}
}

// orderBefore lets the ordered commands of other connections that arrived
// go first: it finds them under the server's lock (a state load, and a
// peek for an idle connection) and then waits for each to settle.
func (c *conn) orderBefore() {
	s := c.s
	if n := s.ord.conns.Load(); n <= 1 || n > orderConnsMax {
		return
	}
	if c.ord.peek == nil {
		c.ord.peek = newPeeker()
	}
	var buf [4]orderAhead
	wait := buf[:0]
	s.mu.Lock()
	for o := range s.conns {
		if o == c {
			continue
		}
		settled := o.ord.settled.Load()
		if ahead, owed := o.orderedAhead(c.ord.peek); ahead {
			wait = append(wait, orderAhead{o, settled + owed})
		}
	}
	s.mu.Unlock()
	if len(wait) == 0 {
		return
	}
	start := time.Now()
	for _, w := range wait {
		o := w.o
		pause := 20 * time.Microsecond
		for {
			if ahead, _ := o.orderedAhead(c.ord.peek); !ahead && o.ord.settled.Load() >= w.settled {
				break
			}
			waited := time.Since(start)
			if waited > orderWaitLimit || (waited > orderParseLimit && o.ord.state.Load() == orderUnparsed) {
				break
			}
			time.Sleep(pause)
			pause = min(2*pause, time.Millisecond)
		}
	}
}

// orderAhead is a connection a step waits for, and the count its settled
// ordered commands must reach (or it ends) before the step goes on: the
// count when the step found it, plus one for the ordered command it was
// running, plus one for the ordered command found in its socket.
//
// A command found in the socket is waited for until it has settled, not
// only until the socket no longer holds it: between o's read(2) taking
// the bytes and o marking itself unparsed (orderReader) the connection
// looks idle with an empty socket, and a step that looked then went ahead
// of the command it had seen (TestOrderBlockedThenWrite failed about 1
// run in 100 under load that way: the DEL ran before XREADGROUP's first
// attempt, NOGROUP; TestOrderUnsubscribePublish 2 in 200, PUBLISH ahead
// of the UNSUBSCRIBE, its connection found still running SUBSCRIBE).
type orderAhead struct {
	o       *conn
	settled uint64
}

// orderedAhead reports whether o holds an ordered command that arrived and
// has not settled: one it runs, bytes it read and has not parsed, or an
// ordered command waiting in its socket; and how many of them must still
// settle (the one it runs, the one in its socket). The socket is peeked
// whatever o's state: its goroutine may not yet have marked itself idle
// after its last reply (a client that read that reply may already have
// sent the next command), and one running an ordered command may have
// the next behind it.
func (o *conn) orderedAhead(p *peeker) (ahead bool, owed uint64) {
	st := o.ord.state.Load()
	if st == orderOrdered {
		owed++
	}
	if o.peekOrdered(p) {
		owed++
	}
	return owed > 0 || st == orderUnparsed || o.ord.state.Load() != st, owed
}

// orderReader is a connection's socket as its bufio.Reader reads it: a
// read that returns bytes marks an idle connection unparsed at once, so a
// step does not take it for idle while it parses them.
type orderReader struct {
	c *conn
	r io.Reader
}

func (r orderReader) Read(p []byte) (int, error) {
	n, err := r.r.Read(p)
	if n > 0 {
		r.c.ord.state.CompareAndSwap(orderIdle, orderUnparsed)
	}
	return n, err
}

// peekedOrdered reports whether b, the start of a connection's unread
// input, begins an ordered command: a RESP array whose first bulk string
// names one (XREAD and XREADGROUP only with BLOCK among what was peeked).
func peekedOrdered(b []byte) bool {
	if len(b) < 4 || b[0] != '*' {
		return false
	}
	i := bytes.Index(b, []byte("\r\n"))
	if i < 0 || i+2 >= len(b) || b[i+2] != '$' {
		return false
	}
	b = b[i+2:]
	j := bytes.Index(b, []byte("\r\n"))
	if j < 0 {
		return false
	}
	n := 0
	for _, ch := range b[1:j] {
		if ch < '0' || ch > '9' || n > 64 {
			return false
		}
		n = n*10 + int(ch-'0')
	}
	if j+2+n > len(b) {
		return false
	}
	name := b[j+2 : j+2+n]
	if bytes.EqualFold(name, []byte("xread")) || bytes.EqualFold(name, []byte("xreadgroup")) {
		return bytes.Contains(bytes.ToLower(b[j+2+n:]), []byte("\r\nblock\r\n"))
	}
	return orderedCommand([][]byte{name})
}
