package client

import (
	"fmt"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	"github.com/synod-dev/synod/protocol/paxos"
)

// The Go client's sessions (sessions.go) on a paxos namespace: 8
// goroutines writing at once (so several lanes) leave one outcome per
// client id in the table, not up to 64, and Close ends every id's session:
// no row stays. A client that only read ends nothing. Fails before
// session 51 (the client sent no bound and never ended a session: 20
// outcomes per lane, every row left after Close).
func TestGRPCClientSessions(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	n := startGRPCOver(t, b, nil, grpcserver.Options{})
	st := func() (s paxos.Status) {
		b.Inspect(func(a automaton.Automaton) { s = a.(*paxos.Paxos).Status() })
		return s
	}
	ctx := tctx(t)
	c := newGRPC(t, []string{n.addr}, Options{})
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 20; i++ {
				if err := c.Set(ctx, fmt.Sprintf("k%d", g), []byte(fmt.Sprint(i))); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	s := st()
	t.Logf("8 writers x 20 sets: %d rows, %d outcomes", s.Sessions, s.Outcomes)
	if s.Sessions == 0 || s.Outcomes != s.Sessions {
		t.Fatalf("%d rows hold %d outcomes: want one outcome per row", s.Sessions, s.Outcomes)
	}
	rows := s.Sessions
	c.Close()
	if s := st(); s.Sessions != 0 || s.Ended != rows {
		t.Fatalf("after Close: %d rows, %d ended; want 0 rows, %d ended", s.Sessions, s.Ended, rows)
	}
	r := newGRPC(t, []string{n.addr}, Options{})
	for i := 0; i < 5; i++ {
		if _, _, err := r.Get(ctx, "k0"); err != nil {
			t.Fatal(err)
		}
	}
	r.Close()
	if s := st(); s.Ended != rows {
		t.Fatalf("a client that only read ended %d sessions", s.Ended-rows)
	}
}
