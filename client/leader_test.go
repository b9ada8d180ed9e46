package client

import (
	"context"
	"net"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// leaderBackend names a fixed leader (SYNOD LEADER), or none.
type leaderBackend struct {
	*gatewaytest.MemBackend
	id, addr string
}

func (b *leaderBackend) Leader(string) (automaton.NodeID, string, error) {
	return automaton.NodeID(b.id), b.addr, nil
}

func serveBackend(t *testing.T, b gateway.Backend) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := gateway.NewServer(b, gateway.ServerOptions{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return l.Addr().String()
}

// Leader parses SYNOD LEADER; PreferLeader moves the next requests to the
// named node when it is one of the client's addresses, and stays otherwise.
func TestPreferLeader(t *testing.T) {
	ctx := context.Background()
	lb := &leaderBackend{MemBackend: gatewaytest.KV()}
	follower := serveBackend(t, lb)
	leader := start(t, gatewaytest.KV(), gateway.ServerOptions{})
	c := newClient(t, []string{follower, leader.addr}, Options{})

	if id, addr, err := c.Leader(ctx); id != "" || addr != "" || err != nil {
		t.Fatalf("no leader known: %q %q %v", id, addr, err)
	}
	if moved, err := c.PreferLeader(ctx); moved || err != nil {
		t.Fatalf("PreferLeader without a leader: %v %v", moved, err)
	}
	lb.id, lb.addr = "n2", leader.addr
	if id, addr, err := c.Leader(ctx); id != "n2" || addr != leader.addr || err != nil {
		t.Fatalf("Leader: %q %q %v", id, addr, err)
	}
	if moved, err := c.PreferLeader(ctx); !moved || err != nil {
		t.Fatalf("PreferLeader: %v %v", moved, err)
	}
	if err := c.Set(ctx, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
	if n := len(leader.b.Log()); n != 1 {
		t.Fatalf("the leader got %d requests, want the set", n)
	}
	lb.addr = "127.0.0.1:1" // not one of the client's addresses
	c.prefer(0)
	if moved, err := c.PreferLeader(ctx); moved || err != nil {
		t.Fatalf("PreferLeader to a stranger: %v %v", moved, err)
	}
	// A server that knows no leaders at all refuses the command.
	if _, _, err := newClient(t, []string{leader.addr}, Options{}).Leader(ctx); err == nil {
		t.Fatal("Leader at a server without leaders: no error")
	}
}
