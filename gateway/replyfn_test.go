package gateway

import (
	"fmt"
	"math/rand"
	"net"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// newReplyBackend is the shared ReplyBackend double (gatewaytest) over a
// namespace with atomic groups (MULTI needs them).
func newReplyBackend() *gatewaytest.ReplyBackend {
	return gatewaytest.NewReply(gatewaytest.New(config.Namespace{Name: "default", Protocol: "unreplicated", Service: "kv"}))
}

// waitFor polls cond until it holds (bounded against a hang only).
func waitReplyFn(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(30 * time.Second); !cond(); {
		if time.Now().After(end) {
			t.Fatalf("waiting for %s: never", what)
		}
		time.Sleep(time.Millisecond)
	}
}

// onlyConn returns the server's one connection.
func onlyConn(t *testing.T, s *Server) *conn {
	t.Helper()
	var c *conn
	waitReplyFn(t, "the connection", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		for k := range s.conns {
			c = k
		}
		return c != nil
	})
	return c
}

// TestReplyFnOrder pins replyfn.go's order rule with a reply held by the
// Backend: a lone SET goes through SubmitReply; a PING the client sends
// before that reply is written is served only after it, so the client
// reads +OK then +PONG. Checked by mutation: without awaitReply in serve,
// the PING is answered at once and the client reads +PONG first.
func TestReplyFnOrder(t *testing.T) {
	b := newReplyBackend()
	b.Hold.Store(true)
	s, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	c.send("SET", "k", "v")
	c.w.Flush()
	waitReplyFn(t, "the SET held", func() bool { return b.Held() == 1 })
	sc := onlyConn(t, s)
	var reads atomic.Int64
	f := func(*conn) { reads.Add(1) }
	s.testBeforeRead.Store(&f)
	c.send("PING")
	c.w.Flush()
	// The connection's goroutine either waits for the SET's reply (the
	// rule) or, broken, has answered the PING and is back before a read.
	waitReplyFn(t, "the PING read", func() bool { return sc.as.state.Load() == replyWaited || reads.Load() > 0 })
	b.Release()
	if got := c.reply().String(); got != "OK" {
		t.Fatalf("first reply %q, want OK (the SET's, before the PING's)", got)
	}
	if got := c.reply().String(); got != "PONG" {
		t.Fatalf("second reply %q, want PONG", got)
	}
}

// TestReplyFnMix runs a client that mixes lone commands, commands sent
// while a reply is pending, pipelined bursts, MULTI, and commands that
// fail (an error answers its own command), with the Backend answering on
// another goroutine; every reply must be the model's, in command order.
// Lone commands go through SubmitReply, pipelined bursts do not.
func TestReplyFnMix(t *testing.T) {
	b := newReplyBackend()
	_, addr := startServer(t, b, ServerOptions{})
	runReplyMix(t, dial(t, addr), b)
}

// runReplyMix is TestReplyFnMix's client on c, served over b.
func runReplyMix(t *testing.T, c *tconn, b *gatewaytest.ReplyBackend) {
	t.Helper()
	model := map[string]string{}
	rng := rand.New(rand.NewSource(1))
	type cmdWant struct {
		args []string
		want string
	}
	next := func(i int) cmdWant {
		k := fmt.Sprintf("k%d", rng.Intn(4))
		switch rng.Intn(6) {
		case 0, 1:
			v := fmt.Sprintf("v%d", i)
			model[k] = v
			return cmdWant{[]string{"SET", k, v}, "OK"}
		case 2, 3:
			if v, ok := model[k]; ok {
				return cmdWant{[]string{"GET", k}, fmt.Sprintf("%q", v)}
			}
			return cmdWant{[]string{"GET", k}, "(nil)"}
		case 4:
			if _, ok := model[k]; ok {
				return cmdWant{[]string{"LPUSH", k, "x"}, "(error) WRONGTYPE Operation against a key holding the wrong kind of value"}
			}
			return cmdWant{[]string{"INCR", "n" + k}, ""}
		default:
			return cmdWant{[]string{"ECHO", k}, fmt.Sprintf("%q", k)}
		}
	}
	lone, bursts := 0, 0
	for i := 0; i < 400; i++ {
		var cs []cmdWant
		switch rng.Intn(4) {
		case 0: // lone
			cs = []cmdWant{next(i)}
			lone++
		case 1: // one command, then more before its reply
			cs = []cmdWant{next(i), next(i), next(i)}
			c.send(cs[0].args...)
			c.w.Flush()
		case 2: // a burst in one write
			cs = []cmdWant{next(i), next(i), next(i), next(i)}
			bursts++
		default: // MULTI around two commands
			a, d := next(i), next(i)
			cs = []cmdWant{{[]string{"MULTI"}, "OK"}, {a.args, "QUEUED"}, {d.args, "QUEUED"}, {[]string{"EXEC"}, ""}}
		}
		start := 0
		if len(cs) == 3 {
			start = 1
		}
		for _, cw := range cs[start:] {
			c.send(cw.args...)
		}
		for _, cw := range cs {
			got := c.reply().String()
			if cw.want != "" && got != cw.want {
				t.Fatalf("round %d: %v answered %q, want %q", i, cw.args, got, cw.want)
			}
			if strings.HasPrefix(got, "(error)") && !strings.HasPrefix(cw.want, "(error)") && cw.want != "" {
				t.Fatalf("round %d: %v answered %q", i, cw.args, got)
			}
		}
	}
	if b.Submitted.Load() < int64(lone)/2 {
		t.Errorf("%d requests through SubmitReply for %d lone commands", b.Submitted.Load(), lone)
	}
	t.Logf("%d lone commands, %d bursts, %d through SubmitReply", lone, bursts, b.Submitted.Load())
}

// TestReplyFnDeadlineAndClose: a reply the Backend never gives is
// answered at the request's deadline (TRYAGAIN, outcome unknown: the
// request withdrawn with Abandon), and a connection closed while its reply
// is pending does not keep the server from closing (the server's stop
// withdraws it). Checked by mutation: without replyCancel (setAfter not
// called), the first reply never comes and Close never returns.
func TestReplyFnDeadlineAndClose(t *testing.T) {
	b := newReplyBackend()
	b.Hold.Store(true)
	_, addr := startServer(t, b, ServerOptions{RequestTimeout: 50 * time.Millisecond})
	c := dial(t, addr)
	if got := c.do("SET", "k", "v"); !strings.Contains(got, "TRYAGAIN") || !strings.Contains(got, "timed out") {
		t.Fatalf("held SET answered %q, want TRYAGAIN ... timed out", got)
	}
	if b.Abandoned.Load() != 1 {
		t.Fatalf("abandoned %d, want 1", b.Abandoned.Load())
	}
	b.Release() // nothing held: a late answer has nobody to answer

	b2 := newReplyBackend()
	b2.Hold.Store(true)
	s2 := NewServer(b2, ServerOptions{RequestTimeout: time.Hour})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr2 := l.Addr().String()
	served := make(chan error, 1)
	go func() { served <- s2.Serve(l) }()
	c2 := dial(t, addr2)
	c2.send("SET", "k", "v")
	c2.w.Flush()
	waitReplyFn(t, "the SET held", func() bool { return b2.Held() == 1 })
	c2.nc.Close()
	closed := make(chan struct{})
	go func() { s2.Close(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(30 * time.Second): // a hang detector, not a timing
		t.Fatal("Close did not return with a reply pending on a closed connection")
	}
	<-served
	if b2.Abandoned.Load() != 1 {
		t.Fatalf("abandoned %d at close, want 1", b2.Abandoned.Load())
	}
}
