package gateway

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/paxos"
)

// Connections that write and close leave nothing in paxos's deduplication
// table (protocol/paxos "Client sessions"): each closing connection ends
// its client ids' sessions through the log (endSessions), and each
// request tells the table that nothing below it is waited for
// (Unanswered), so a pipelining connection's lanes hold one outcome each,
// not 64. Fails without endSessions (n rows stay: before session 50 the
// table never forgot a closed connection) and without Unanswered (64
// outcomes per lane).
func TestClosedConnectionsLeaveNoSessions(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	_, addr := startServer(t, b, ServerOptions{})
	status := func() paxos.Status { return paxosStatus(b) }
	const n = 20
	for i := 0; i < n; i++ {
		c := dial(t, addr)
		for k := 0; k < 3; k++ {
			c.send("SET", fmt.Sprintf("k%d", i), fmt.Sprint(k))
			if r := c.reply(); string(r.Str) != "OK" {
				t.Fatalf("SET: %+v", r)
			}
		}
		c.nc.Close()
	}
	// A pipelining connection, kept open: 10 rounds of 16 SETs in one
	// write (redis-benchmark -P 16), each round one group or a lane each.
	p := dial(t, addr)
	for round := 0; round < 10; round++ {
		for k := 0; k < 16; k++ {
			p.send("SET", fmt.Sprintf("p%d", k), fmt.Sprint(round))
		}
		for k := 0; k < 16; k++ {
			if r := p.reply(); string(r.Str) != "OK" {
				t.Fatalf("pipelined SET %d of round %d: %+v", k, round, r)
			}
		}
	}
	waitSessions(t, "the closed connections' sessions ended", func() bool { return status().Ended >= n })
	st := status()
	t.Logf("open pipelining connection: %d rows, %d outcomes; %d ended sessions", st.Sessions, st.Outcomes, st.Ended)
	if st.Ended != n || st.Outcomes > st.Sessions {
		t.Fatalf("%d rows holding %d outcomes, %d ended sessions: want the open connection's rows only, one outcome each, and %d ended", st.Sessions, st.Outcomes, st.Ended, n)
	}
	p.nc.Close()
	waitSessions(t, "the pipelining connection's sessions ended", func() bool { return status().Sessions == 0 })
}

// waitSessions waits for cond: a connection's sessions end after its
// goroutine sees the close (a condition, not a speed: bounded by a minute
// only against a hang).
func waitSessions(t *testing.T, what string, cond func() bool) {
	t.Helper()
	for end := time.Now().Add(time.Minute); !cond(); time.Sleep(5 * time.Millisecond) {
		if time.Now().After(end) {
			t.Fatalf("%s: not within a minute", what)
		}
	}
}

// paxosStatus is the paxos automaton's Status, read on its backend's
// goroutine (the session tests' table counts).
func paxosStatus(b *gatewaytest.AutomatonBackend) (st paxos.Status) {
	b.Inspect(func(a automaton.Automaton) { st = a.(*paxos.Paxos).Status() })
	return st
}
