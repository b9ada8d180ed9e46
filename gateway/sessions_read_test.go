package gateway

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/fastpaxos"
	"github.com/synod-dev/synod/protocol/paxos"
)

// A connection that only read ends no session when it closes (session
// 51): its client ids have no row in the deduplication table (paxos
// records writes only), so a SessionEnd would be a write to the log (and,
// with fsync, an fdatasync) for nothing. Each closed connection below
// sends one GET, or GET, EXISTS, MGET and a pipelined batch of GETs.
// Fails before session 51, when every client id that sent anything ended
// its session: one SessionEnd per connection of either kind (logged). A
// connection that wrote still ends its sessions.
func TestReadOnlyConnectionsEndNoSessions(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	srv, addr := startServer(t, b, ServerOptions{})
	status := func() paxos.Status { return paxosStatus(b) }
	open := func() int {
		srv.mu.Lock()
		defer srv.mu.Unlock()
		return len(srv.conns)
	}
	w := dial(t, addr) // writes, and stays open until the end
	w.send("SET", "k", "v")
	if r := w.reply(); string(r.Str) != "OK" {
		t.Fatalf("SET: %+v", r)
	}
	ended := 0
	for _, tc := range []struct {
		name string
		run  func(c *tconn)
	}{
		{"GET only", func(c *tconn) {
			c.send("GET", "k")
			if r := c.reply(); string(r.Str) != "v" {
				t.Fatalf("GET: %+v", r)
			}
		}},
		{"GET, EXISTS, MGET, a pipelined batch of 16 GETs", func(c *tconn) {
			c.send("GET", "k")
			c.send("EXISTS", "k")
			c.reply()
			c.reply()
			c.send("MGET", "k", "a", "b", "c")
			if r := c.reply(); len(r.Elems) != 4 {
				t.Fatalf("MGET: %+v", r)
			}
			for k := 0; k < 16; k++ {
				c.send("GET", fmt.Sprintf("p%d", k))
			}
			for k := 0; k < 16; k++ {
				c.reply()
			}
		}},
	} {
		for i := 0; i < 5; i++ {
			c := dial(t, addr)
			tc.run(c)
			c.nc.Close()
		}
		// Every closed connection's goroutine has ended (endSessions
		// returns before it leaves the server's set): w alone is left.
		waitSessions(t, "the read-only connections' goroutines ended", func() bool { return open() == 1 })
		st := status()
		t.Logf("%s: %d SessionEnd writes per closed connection", tc.name, (st.Ended-ended)/5)
		if st.Ended != ended {
			t.Fatalf("%s: 5 read-only connections closed, %d sessions ended through the log: want none", tc.name, st.Ended-ended)
		}
		ended = st.Ended
	}
	// A connection that wrote ends its own session.
	w.nc.Close()
	waitSessions(t, "the writing connection's session ended", func() bool { st := status(); return st.Ended == 1 && st.Sessions == 0 })
}

// Fast Paxos keeps sessions too (protocol/fastpaxos "Client sessions"):
// connections that wrote and closed leave no row on it either. Fails
// before session 51 (fastpaxos declared no sessions: 20 rows stayed).
func TestClosedConnectionsLeaveNoFastPaxosRows(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "fastpaxos", "kv")
	_, addr := startServer(t, b, ServerOptions{})
	rows := func() (n, ended int) {
		b.Inspect(func(a automaton.Automaton) { n, ended = a.(*fastpaxos.FastPaxos).SessionCounts() })
		return
	}
	for i := 0; i < 20; i++ {
		c := dial(t, addr)
		for k := 0; k < 3; k++ {
			c.send("SET", fmt.Sprintf("k%d", i), fmt.Sprint(k))
			if r := c.reply(); string(r.Str) != "OK" {
				t.Fatalf("SET: %+v", r)
			}
		}
		c.nc.Close()
	}
	waitSessions(t, "the closed connections' sessions ended", func() bool { n, ended := rows(); return n == 0 && ended == 20 })
}
