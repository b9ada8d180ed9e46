package gateway

import (
	"errors"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// holdReads makes the connection named "held" (CLIENT SETNAME) stop before
// reading its next command, once subscribed too if subscribed is set,
// until release is called: a goroutine late to read, as one is when the
// scheduler runs another connection's first. It also raises the step's
// wait limit, so that only the assertions decide.
func holdReads(t *testing.T, s *Server, subscribed bool) (release func()) {
	t.Helper()
	oldWait, oldParse := orderWaitLimit, orderParseLimit
	orderWaitLimit, orderParseLimit = 30*time.Second, 30*time.Second
	t.Cleanup(func() { orderWaitLimit, orderParseLimit = oldWait, oldParse })
	ch := make(chan struct{})
	f := func(c *conn) {
		c.mu.Lock()
		held := c.name == "held"
		c.mu.Unlock()
		held = held && (!subscribed || len(c.sub.chans) > 0)
		if held {
			<-ch
		}
	}
	s.testBeforeRead.Store(&f)
	var once sync.Once
	release = func() { once.Do(func() { close(ch) }) }
	t.Cleanup(release) // before the server closes: a failed test leaves nothing held
	return release
}

// noReplyYet checks that c has no reply within d: the command it sent
// waits for another connection's.
func noReplyYet(t *testing.T, c *tconn, d time.Duration, what string) {
	t.Helper()
	if err := c.w.Flush(); err != nil {
		t.Fatal(err)
	}
	c.nc.SetReadDeadline(time.Now().Add(d))
	r, err := c.r.ReadReply()
	var ne net.Error
	if err == nil {
		t.Fatalf("%s answered %s before the command that arrived first on another connection was served", what, r)
	}
	if !errors.As(err, &ne) || !ne.Timeout() {
		t.Fatal(err)
	}
	c.deadline()
}

// TestOrderUnsubscribePublish: an UNSUBSCRIBE that reached the node before
// a PUBLISH on another connection takes effect first, even when its
// connection's goroutine reads it late (pubsub's "PUBLISH/SUBSCRIBE after
// UNSUBSCRIBE without arguments", order.go).
func TestOrderUnsubscribePublish(t *testing.T) {
	s, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	a, b := dial(t, addr), dial(t, addr)
	run(t, a, []step{cmd("CLIENT SETNAME held", "OK")})
	release := holdReads(t, s, true)
	a.send("SUBSCRIBE", "chan1")
	wantFrames(t, a, "subscribe chan1 1")
	// a's goroutine now waits before its next read.
	a.send("UNSUBSCRIBE")
	a.w.Flush()
	time.Sleep(20 * time.Millisecond) // the bytes reach a's socket before the PUBLISH is sent
	b.send("PUBLISH", "chan1", "hello")
	noReplyYet(t, b, 300*time.Millisecond, "PUBLISH")
	release()
	if got := b.reply().String(); got != "(integer) 0" {
		t.Fatalf("PUBLISH after the UNSUBSCRIBE that arrived first: %s, want 0", got)
	}
	wantFrames(t, a, "unsubscribe chan1 0")
}

// TestOrderBlockedThenWrite: an XREADGROUP BLOCK that reached the node
// before a DEL on another connection blocks first, so the DEL unblocks it
// with Redis's error instead of its first attempt finding no key
// (type/stream-cgroups' "Blocking XREADGROUP: key deleted"); and a
// workload that never blocked takes no step.
func TestOrderBlockedThenWrite(t *testing.T) {
	s, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	c, a := dial(t, addr), dial(t, addr)
	run(t, c, []step{
		cmd("XADD mystream 666 f v", `"666-0"`),
		cmd("XGROUP CREATE mystream mygroup $", "OK"),
	})
	if s.ord.armedUntil.Load() != 0 {
		t.Fatal("the step is armed before any blocking command")
	}
	run(t, c, []step{cmd("BLPOP nolist 0.01", "(nil)")}) // arms the step
	if s.ord.armedUntil.Load() == 0 {
		t.Fatal("a blocking command did not arm the step")
	}
	release := holdReads(t, s, false)
	run(t, a, []step{cmd("CLIENT SETNAME held", "OK")})
	// a's goroutine now waits before its next read.
	a.send("XREADGROUP", "GROUP", "mygroup", "Alice", "BLOCK", "0", "STREAMS", "mystream", ">")
	a.w.Flush()
	time.Sleep(20 * time.Millisecond)
	c.send("DEL", "mystream")
	noReplyYet(t, c, 300*time.Millisecond, "DEL")
	release()
	if got := c.reply().String(); got != "(integer) 1" {
		t.Fatalf("DEL: %s", got)
	}
	if got := a.reply().String(); got != "(error) UNBLOCKED the stream key no longer exists" {
		t.Fatalf("XREADGROUP BLOCK that arrived before the DEL: %s", got)
	}
}

func TestPeekedOrdered(t *testing.T) {
	for in, want := range map[string]bool{
		"*2\r\n$5\r\nBLPOP\r\n$1\r\nk\r\n":     true,
		"*1\r\n$11\r\nunsubscribe\r\n":         true,
		"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n":       false,
		"*4\r\n$5\r\nXREAD\r\n$7\r\nSTREAMS":   false,
		"*6\r\n$5\r\nxread\r\n$5\r\nblock\r\n": true,
		"*2\r\n$5\r\nBLP":                      false, // cut: not known yet
		"PING\r\n":                             false,
		"*1\r\n$99999999999\r\n":               false,
	} {
		if got := peekedOrdered([]byte(in)); got != want {
			t.Errorf("peekedOrdered(%q) = %v, want %v", in, got, want)
		}
	}
}
