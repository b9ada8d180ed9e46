//go:build linux

package gateway

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
	"golang.org/x/sys/unix"
)

// TestEvLoopServesLoneCommands: with the event loop on, a client that
// waits for each reply is served by the loop alone: every command is a
// step of the loop (a readable socket), none goes to a goroutine, and
// every reply is right. Fails with the loop off (no step) and when the
// loop hands its commands to the goroutine (handoffs).
func TestEvLoopServesLoneCommands(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	if s.ev == nil {
		t.Fatal("event loop off")
	}
	dial(t, addr) // another connection: the loop leaves a client alone on the server to its goroutine (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	const n = 200
	for i := range n {
		k := fmt.Sprintf("k%d", i%7)
		if got := c.do("SET", k, fmt.Sprint(i)); got != "OK" {
			t.Fatalf("SET %d: %q", i, got)
		}
		if got := c.do("GET", k); got != fmt.Sprintf("%q", fmt.Sprint(i)) {
			t.Fatalf("GET %d: %q", i, got)
		}
	}
	if h := s.ev.handoffs.Load(); h != 0 {
		t.Errorf("%d hand-offs to a goroutine, want 0", h)
	}
	if st := s.ev.steps.Load(); st < 2*n {
		t.Errorf("%d loop steps for %d commands", st, 2*n)
	}
	if sub := b.Submitted.Load(); sub != 2*n {
		t.Errorf("%d requests through SubmitReply, want %d", sub, 2*n)
	}
	// The lone client's socket, the only one in the set, is read when Go
	// wakes the loop, without an epoll_wait first (wait's -1), at least
	// once (a command that arrives before the loop parks is found by the
	// check instead, so not always).
	if sg := s.ev.singles.Load(); sg == 0 {
		t.Errorf("no command of the lone client served without an epoll_wait (%d steps)", s.ev.steps.Load())
	}
	t.Logf("steps %d, of which without an epoll_wait %d", s.ev.steps.Load(), s.ev.singles.Load())
}

// TestEvLoopLeavesLoneClient: a client alone on the server is served by
// its goroutine, not the loop (evAlone: one client's wake-up through the
// loop's nested epoll set made its paxos put slower); with a second
// connection open it goes to the loop at its next command, and when it
// is alone again it goes back to its goroutine after one more. Fails
// without evAlone (400 steps for the lone client's commands).
func TestEvLoopLeavesLoneClient(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	a := dial(t, addr)
	burst := func(what string) {
		t.Helper()
		for i := range 100 {
			if got := a.do("SET", "k", fmt.Sprint(i)); got != "OK" {
				t.Fatalf("%s: SET: %q", what, got)
			}
			if got := a.do("GET", "k"); got != fmt.Sprintf("%q", fmt.Sprint(i)) {
				t.Fatalf("%s: GET: %q", what, got)
			}
		}
	}
	burst("alone")
	if st := s.ev.steps.Load(); st != 0 {
		t.Errorf("alone: %d loop steps, want 0", st)
	}
	p := dial(t, addr)
	p.do("SET", "x", "1")
	a.do("SET", "k", "x") // a's goroutine hands a to the loop after it
	st0 := s.ev.steps.Load()
	burst("with another connection")
	if st := s.ev.steps.Load() - st0; st < 200 {
		t.Errorf("with another connection: %d loop steps for 200 commands", st)
	}
	p.nc.Close()
	waitReplyFn(t, "the other connection gone", func() bool { return s.ord.conns.Load() == 1 })
	a.do("SET", "k", "x") // the loop serves it, then gives a to its goroutine
	st0, h0 := s.ev.steps.Load(), s.ev.handoffs.Load()
	burst("alone again")
	if st := s.ev.steps.Load() - st0; st != 0 {
		t.Errorf("alone again: %d loop steps, want 0", st)
	}
	if h := s.ev.handoffs.Load() - h0; h != 0 {
		t.Errorf("alone again: %d hand-offs, want 0", h)
	}
}

// TestEvLoopMix is TestReplyFnMix's client (lone commands, commands sent
// while a reply is pending, pipelined bursts, MULTI, errors) with the
// event loop on: replies stay the model's, in order, and the connection
// goes to its goroutine and back.
func TestEvLoopMix(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	runReplyMix(t, c, b)
	if s.ev.handoffs.Load() == 0 || s.ev.backs.Load() < 2 {
		t.Errorf("hand-offs %d, hand-backs %d: want both", s.ev.handoffs.Load(), s.ev.backs.Load())
	}
	t.Logf("steps %d, hand-offs %d, hand-backs %d", s.ev.steps.Load(), s.ev.handoffs.Load(), s.ev.backs.Load())
}

// TestEvLoopCloseAndKill: a connection the loop owns ends when another
// client kills it (its client reads EOF, CLIENT LIST drops it), and the
// server's Close ends the rest and returns. Without evNetConn's Close
// telling the loop, the killed connection stays listed.
func TestEvLoopCloseAndKill(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	idle := dial(t, addr) // not alone (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	victim := dial(t, addr)
	if got := victim.do("SET", "k", "v"); got != "OK" {
		t.Fatal(got)
	}
	id := victim.do("CLIENT", "ID")
	killer := dial(t, addr)
	killer.do("SET", "k2", "v")
	waitReplyFn(t, "both connections with the loop", func() bool { return s.ev.backs.Load() >= 2 })
	if got := killer.do("CLIENT", "KILL", "ID", strings.Trim(id, "()integer ")); got != "(integer) 1" {
		t.Fatalf("CLIENT KILL: %q", got)
	}
	victim.nc.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := victim.r.ReadReply(); err == nil {
		t.Fatal("killed client read a reply")
	}
	waitReplyFn(t, "the killed connection gone", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.conns) == 2
	})
	idle.nc.Close()
	if got := killer.do("GET", "k"); got != `"v"` {
		t.Fatalf("GET after the kill: %q", got)
	}
}

// TestEvLoopBlocking: a client blocked in BLPOP (its goroutine's) is
// woken by another client's LPUSH (which the loop gives to that client's
// goroutine: the key is waited on).
func TestEvLoopBlocking(t *testing.T) {
	b := newReplyBackend()
	_, addr := startServer(t, b, ServerOptions{EventLoop: true})
	a, p := dial(t, addr), dial(t, addr)
	p.do("SET", "x", "1")
	a.send("BLPOP", "list", "0")
	a.w.Flush()
	time.Sleep(20 * time.Millisecond) // not needed for the outcome: BLPOP may be served after the push
	if got := p.do("LPUSH", "list", "e"); got != "(integer) 1" && got != "(integer) 0" {
		t.Fatalf("LPUSH: %q", got)
	}
	if got := a.reply().String(); !strings.Contains(got, "list") || !strings.Contains(got, "e") {
		t.Fatalf("BLPOP answered %q", got)
	}
	if got := p.do("GET", "x"); got != `"1"` {
		t.Fatalf("GET: %q", got)
	}
}

// TestEvLoopServesWhileBlocked: while a client is blocked in BLPOP (and
// the arrival-order step is armed, order.go), the loop still serves the
// other clients' commands itself (evloop50: before, the loop gave each
// command to the connection's goroutine while any client was blocked and
// for the 60 s the step stays armed: 200 hand-offs here); a write to the
// key the client waits on goes to its goroutine (it may wait: writeGate,
// blockReg.touched) and unblocks the client with the element.
func TestEvLoopServesWhileBlocked(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	a, p := dial(t, addr), dial(t, addr)
	p.do("SET", "x", "0")
	a.send("BLPOP", "list", "0")
	a.w.Flush()
	waitReplyFn(t, "the client blocked", func() bool { return s.blk.blocked.Load() == 1 })
	if s.ord.armedUntil.Load() == 0 {
		t.Fatal("BLPOP did not arm the order step")
	}
	// p's goroutine hands p back once it has served a command.
	p.do("SET", "x", "1")
	steps, handoffs := s.ev.steps.Load(), s.ev.handoffs.Load()
	const n = 100
	for i := range n {
		if got := p.do("SET", "x", fmt.Sprint(i)); got != "OK" {
			t.Fatalf("SET: %q", got)
		}
		if got := p.do("GET", "x"); got != fmt.Sprintf("%q", fmt.Sprint(i)) {
			t.Fatalf("GET: %q", got)
		}
	}
	if got := s.ev.steps.Load() - steps; got < 2*n {
		t.Errorf("%d loop steps for %d commands while a client was blocked", got, 2*n)
	}
	if got := s.ev.handoffs.Load() - handoffs; got > 1 { // one: the loop may read SET x 1 before its goroutine is done
		t.Errorf("%d hand-offs to a goroutine for %d commands while a client was blocked, want none", got, 2*n)
	}
	if got := p.do("LPUSH", "list", "e"); got != "(integer) 1" && got != "(integer) 0" {
		t.Fatalf("LPUSH: %q", got)
	}
	if got := a.reply().String(); !strings.Contains(got, "list") || !strings.Contains(got, "e") {
		t.Fatalf("BLPOP answered %q", got)
	}
	if got := p.do("LLEN", "list"); got != "(integer) 0" {
		t.Fatalf("LLEN after the pop: %q", got)
	}
}

// TestEvLoopOrderBlockedThenWrite: with the loop on and the order step
// armed, an XREADGROUP BLOCK that arrived before a DEL on another
// connection blocks first, and the DEL unblocks it with Redis's error
// (order.go's TestOrderBlockedThenWrite with both connections the loop's:
// the loop hands the XREADGROUP to its goroutine, and the DEL, which
// would have to wait for it, to its own).
func TestEvLoopOrderBlockedThenWrite(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	c, a := dial(t, addr), dial(t, addr)
	run(t, c, []step{
		cmd("XADD mystream 666 f v", `"666-0"`),
		cmd("XGROUP CREATE mystream mygroup $", "OK"),
		cmd("BLPOP nolist 0.01", "(nil)"), // arms the step
	})
	a.do("SET", "y", "1")
	c.do("SET", "y", "2")
	waitReplyFn(t, "both connections with the loop", func() bool {
		s.ev.mu.Lock()
		defer s.ev.mu.Unlock()
		return len(s.ev.conns) == 2
	})
	a.send("XREADGROUP", "GROUP", "mygroup", "Alice", "BLOCK", "0", "STREAMS", "mystream", ">")
	a.w.Flush()
	c.send("DEL", "mystream")
	c.w.Flush()
	if got := c.reply().String(); got != "(integer) 1" {
		t.Fatalf("DEL: %s", got)
	}
	if got := a.reply().String(); got != "(error) UNBLOCKED the stream key no longer exists" {
		t.Fatalf("XREADGROUP BLOCK that arrived before the DEL: %s", got)
	}
}

// TestRespComplete pins the loop's completeness check of a buffered
// command.
func TestRespComplete(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want int
	}{
		{"*1\r\n$4\r\nPING\r\n", evComplete},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r\n", evComplete},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\nv\r", evIncomplete},
		{"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$1\r\n", evIncomplete},
		{"*3\r\n$3\r\nSET\r\n$1", evIncomplete},
		{"*3", evIncomplete},
		{"*", evIncomplete},
		{"*2\r\n$0\r\n\r\n$0\r\n\r\n", evComplete},
		{"PING\r\n", evUnsure},
		{"*0\r\n", evUnsure},
		{"*-1\r\n", evUnsure},
		{"*1\r\n:1\r\n", evUnsure},
		{"*1\r\n$-1\r\n", evUnsure},
		{"*1\r\n$2\r\nabc\r\n", evUnsure},
		{"*1x\r\n", evUnsure},
		{"*1\r\n$4\r\nPING\r\n*1\r\n", evComplete},
	} {
		if got := respComplete([]byte(tc.in)); got != tc.want {
			t.Errorf("respComplete(%q) = %d, want %d", tc.in, got, tc.want)
		}
	}
}

// TestEvLoopOwnsSocket: a loop connection's socket is in exactly one
// epoll set at a time (evconn_linux.go): the loop's while the loop serves
// it (no Go connection made), Go's netpoller's while its goroutine reads
// it (in MULTI), and the loop's again once the goroutine
// hands it back (the Go connection closed). Not a blocking command: one
// arms the arrival-order step (order.go), which keeps every connection off
// the loop for a minute. Counted in /proc/self/fdinfo
// of every epoll descriptor of the process. Fails on session 48's loop
// (the socket also stayed in Go's netpoller: 2 sets while the loop served).
func TestEvLoopOwnsSocket(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone): a and p go to the loop at once
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	a, p := dial(t, addr), dial(t, addr)
	for _, cl := range []*tconn{a, p} {
		if got := cl.do("SET", "x", "1"); got != "OK" {
			t.Fatal(got)
		}
	}
	waitReplyFn(t, "both connections with the loop", func() bool { return s.ev.backs.Load() >= 2 })
	var ea *evNetConn
	s.mu.Lock()
	for c := range s.conns {
		if e, ok := c.nc.(*evNetConn); ok && ea == nil && c.id == 2 {
			ea = e
		}
	}
	s.mu.Unlock()
	if ea == nil {
		t.Fatal("the first connection is not the loop's")
	}
	ea.lmu.RLock()
	fd := ea.fd
	ea.lmu.RUnlock()
	if n := epollSets(t, fd); n != 1 {
		t.Errorf("served by the loop: the socket is in %d epoll sets, want 1", n)
	}
	if g := ea.gcs.Load(); g != 0 {
		t.Errorf("served by the loop: %d Go connections made, want 0", g)
	}

	if got := a.do("MULTI"); got != "OK" { // its goroutine's, which then waits in its read
		t.Fatalf("MULTI: %q", got)
	}
	waitReplyFn(t, "the goroutine reading in MULTI", func() bool {
		ea.gmu.Lock()
		defer ea.gmu.Unlock()
		return ea.gc != nil
	})
	if n := epollSets(t, fd); n != 1 {
		t.Errorf("read by its goroutine: the socket is in %d epoll sets, want 1", n)
	}
	a.do("SET", "x", "2")
	if got := a.do("EXEC"); !strings.Contains(got, "OK") {
		t.Fatalf("EXEC: %q", got)
	}
	waitReplyFn(t, "the Go connection closed at the hand-back", func() bool {
		ea.gmu.Lock()
		defer ea.gmu.Unlock()
		return ea.gc == nil
	})
	// The hand-back closes the Go connection and then adds the socket to
	// the loop's set: wait for the add (asserted at once, this failed 1
	// run in 200 under load: 0 sets), then for no second set.
	waitReplyFn(t, "the socket in the loop's set", func() bool { return epollSets(t, fd) >= 1 })
	if n := epollSets(t, fd); n != 1 {
		t.Errorf("handed back: the socket is in %d epoll sets, want 1", n)
	}
}

// epollSets counts the epoll sets of this process that watch the socket
// fd (by inode, in /proc/self/fdinfo of each eventpoll descriptor).
func epollSets(t *testing.T, fd int) int {
	t.Helper()
	var st unix.Stat_t
	if err := unix.Fstat(fd, &st); err != nil {
		t.Fatal(err)
	}
	ino := fmt.Sprintf(" ino:%x ", st.Ino)
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skip(err)
	}
	n := 0
	for _, e := range ents {
		if l, err := os.Readlink("/proc/self/fd/" + e.Name()); err != nil || l != "anon_inode:[eventpoll]" {
			continue
		}
		b, err := os.ReadFile("/proc/self/fdinfo/" + e.Name())
		if err != nil {
			continue
		}
		for _, line := range strings.Split(string(b), "\n") {
			if strings.HasPrefix(line, "tfd:") && strings.Contains(line+" ", ino) {
				n++
			}
		}
	}
	return n
}

// turnBackend is a TurnBackend double: SubmitReplyHeld keeps the request
// until Kick submits it (noKick: the broken variant, Kick drops nothing
// and submits nothing, so a held request is never answered).
type turnBackend struct {
	*gatewaytest.ReplyBackend
	mu     sync.Mutex
	held   map[string][]func()
	heldN  atomic.Int64
	kicks  atomic.Int64
	noKick bool
}

func (b *turnBackend) SubmitReplyHeld(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	b.heldN.Add(1)
	b.mu.Lock()
	b.held[ns] = append(b.held[ns], func() { b.ReplyBackend.SubmitReply(ctx, ns, req, done) })
	b.mu.Unlock()
	return true
}

func (b *turnBackend) Kick(ns string) {
	b.kicks.Add(1)
	if b.noKick {
		return
	}
	b.mu.Lock()
	fs := b.held[ns]
	b.held[ns] = nil
	b.mu.Unlock()
	for _, f := range fs {
		f()
	}
}

// TestEvLoopHeldTurn: with several clients' commands ready in one turn,
// the loop submits them held (TurnBackend.SubmitReplyHeld) and kicks the
// namespace once the turn's sockets are served; every client gets its own
// replies, in order. Fails with a Kick that steps nothing (the broken
// variant: clients time out) and when nothing is held (heldN 0).
func TestEvLoopHeldTurn(t *testing.T) {
	b := &turnBackend{ReplyBackend: newReplyBackend(), held: map[string][]func(){}}
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	const clients, n = 16, 150
	errs := make(chan error, clients)
	var wg sync.WaitGroup
	for i := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs <- heldClient(addr, i, n)
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	if b.heldN.Load() == 0 || b.kicks.Load() == 0 {
		t.Errorf("held %d, kicks %d: want both (%d steps)", b.heldN.Load(), b.kicks.Load(), s.ev.steps.Load())
	}
	t.Logf("held %d, kicks %d, steps %d", b.heldN.Load(), b.kicks.Load(), s.ev.steps.Load())
}

// heldClient runs one client of TestEvLoopHeldTurn: n SETs and GETs of
// its own key, each reply checked.
func heldClient(addr string, id, n int) error {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer nc.Close()
	r, w := resp.NewReader(bufio.NewReader(nc), resp.Limits{}), resp.NewWriter(nc)
	do := func(args ...string) (string, error) {
		b := make([][]byte, len(args))
		for i, a := range args {
			b[i] = []byte(a)
		}
		w.WriteCommand(b)
		if err := w.Flush(); err != nil {
			return "", err
		}
		nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		rep, err := r.ReadReply()
		return rep.String(), err
	}
	k := fmt.Sprintf("k%d", id)
	for j := range n {
		v := fmt.Sprintf("v%d-%d", id, j)
		if got, err := do("SET", k, v); err != nil || got != "OK" {
			return fmt.Errorf("client %d SET %d: %q %v", id, j, got, err)
		}
		if got, err := do("GET", k); err != nil || got != fmt.Sprintf("%q", v) {
			return fmt.Errorf("client %d GET %d: %q %v", id, j, got, err)
		}
	}
	return nil
}

// BenchmarkEvLoopLone: one client that waits for each reply (SET and GET
// of 100-byte values), loop on and off, the Backend answering inline (as
// the node's inline pass answers a leader's read) or on a goroutine of its
// own (as a committer or a peer reader answers a replicated write).
func BenchmarkEvLoopLone(b *testing.B) {
	for _, inline := range []bool{true, false} {
		for _, ev := range []bool{false, true} {
			b.Run(fmt.Sprintf("inline=%v/loop=%v", inline, ev), func(b *testing.B) {
				rb := newReplyBackend()
				rb.Inline.Store(inline)
				s := NewServer(rb, ServerOptions{EventLoop: ev})
				l, err := net.Listen("tcp", "127.0.0.1:0")
				if err != nil {
					b.Fatal(err)
				}
				go s.Serve(l)
				defer s.Close()
				nc, err := net.Dial("tcp", l.Addr().String())
				if err != nil {
					b.Fatal(err)
				}
				defer nc.Close()
				val := strings.Repeat("v", 100)
				set := fmt.Appendf(nil, "*3\r\n$3\r\nSET\r\n$5\r\nkey:1\r\n$%d\r\n%s\r\n", len(val), val)
				get := []byte("*2\r\n$3\r\nGET\r\n$5\r\nkey:1\r\n")
				r := resp.NewReader(bufio.NewReader(nc), resp.Limits{})
				b.ReportAllocs()
				b.ResetTimer()
				for i := range b.N {
					cmd := set
					if i%2 == 1 {
						cmd = get
					}
					if _, err := nc.Write(cmd); err != nil {
						b.Fatal(err)
					}
					if _, err := r.ReadReply(); err != nil {
						b.Fatal(err)
					}
				}
				b.StopTimer()
				if ev {
					st := s.EventLoopStats()
					b.ReportMetric(float64(st.Steps)/float64(b.N), "steps/op")
					b.ReportMetric(float64(st.Waits)/float64(b.N), "waits/op")
				}
			})
		}
	}
}
