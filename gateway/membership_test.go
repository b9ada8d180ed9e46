package gateway

import (
	"context"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"
)

// memberBackend is a MemBackend that also implements MembershipBackend: it
// keeps a membership that only ChangeMembership (the SYNOD MEMBER path)
// changes, and records every change it is asked for.
type memberBackend struct {
	*gatewaytest.MemBackend
	mu      sync.Mutex
	members []string
	changes []service.Op
}

func (b *memberBackend) ChangeMembership(ctx context.Context, ns string, op service.Op) (service.Result, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.changes = append(b.changes, op)
	id := string(op.Args[0])
	switch op.Key {
	case "add":
		b.members = append(b.members, id)
	case "remove":
		b.members = slices.DeleteFunc(b.members, func(m string) bool { return m == id })
	}
	return service.OK(), nil
}

func (b *memberBackend) state() ([]string, int) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return slices.Clone(b.members), len(b.changes)
}

// An ordinary client cannot submit a membership change: SYNOD OP with the
// reserved kind is refused by the service validation in the gateway before
// the backend sees it, and the membership stays; the administrative SYNOD
// MEMBER on the same connection does reach the backend.
func TestSynodOpCannotChangeMembership(t *testing.T) {
	b := &memberBackend{MemBackend: gatewaytest.KV(), members: []string{"n1", "n2", "n3"}}
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	for _, args := range [][]string{
		{"SYNOD", "OP", automaton.MemberOpKind, "add", "n4", "127.0.0.1:7004", "127.0.0.1:6384"},
		{"SYNOD", "OP", strings.ToUpper(automaton.MemberOpKind), "remove", "n1"},
		{"SYNOD", "OP", automaton.MemberOpKind, "remove", "n2"},
	} {
		if got := c.do(args...); !strings.HasPrefix(got, "(error) ERR") {
			t.Errorf("%q: got %s, want an ERR reply", args, got)
		}
	}
	for _, r := range b.Log() {
		if automaton.IsMemberOp(r.Req.Op) {
			t.Errorf("the backend received a membership operation from SYNOD OP: %+v", r.Req)
		}
	}
	if members, n := b.state(); n != 0 || !slices.Equal(members, []string{"n1", "n2", "n3"}) {
		t.Fatalf("after SYNOD OP: members %v, %d changes; want n1 n2 n3 and none", members, n)
	}
	// The connection still works, and the admin path changes the membership.
	if got := c.do("SET", "k", "v"); got != "OK" {
		t.Fatalf("SET after the refusals: %s", got)
	}
	if got := c.do("SYNOD", "MEMBER", "REMOVE", "n1"); got != "OK" {
		t.Fatalf("SYNOD MEMBER REMOVE n1: %s", got)
	}
	if members, n := b.state(); n != 1 || !slices.Equal(members, []string{"n2", "n3"}) {
		t.Fatalf("after SYNOD MEMBER REMOVE n1: members %v, %d changes", members, n)
	}
}
