//go:build linux

package gateway

import (
	"fmt"
	"strings"
	"testing"
	"time"
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
}

// TestEvLoopMix is TestReplyFnMix's client (lone commands, commands sent
// while a reply is pending, pipelined bursts, MULTI, errors) with the
// event loop on: replies stay the model's, in order, and the connection
// goes to its goroutine and back.
func TestEvLoopMix(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
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
		return len(s.conns) == 1
	})
	if got := killer.do("GET", "k"); got != `"v"` {
		t.Fatalf("GET after the kill: %q", got)
	}
}

// TestEvLoopBlocking: a client blocked in BLPOP (its goroutine's) is
// woken by another client's LPUSH while the loop serves that client; the
// loop hands it to its goroutine while a client is blocked.
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
