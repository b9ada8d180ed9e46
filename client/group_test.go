package client

import (
	"errors"
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/paxos"
	"github.com/synod-dev/synod/service"
)

// groupsSent returns the operation kinds of each atomic group b received.
func groupsSent(b *gatewaytest.AutomatonBackend) []string {
	var out []string
	for _, r := range b.Log() {
		if len(r.Ops) > 0 {
			var ks []string
			for _, op := range r.Ops {
				ks = append(ks, op.Kind+" "+op.Key)
			}
			out = append(out, strings.Join(ks, "|"))
		}
	}
	return out
}

func TestGroupOverRESP(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	c := newClient(t, []string{serveBackend(t, b)}, Options{})
	ctx := tctx(t)
	if _, err := c.Do(ctx, "SET", "s", "text"); err != nil {
		t.Fatal(err)
	}
	reps, err := c.Group(ctx, []string{"SET", "a", "1"}, []string{"INCR", "a"}, []string{"INCR", "s"}, []string{"GET", "a"})
	if err != nil {
		t.Fatalf("Group: %v", err)
	}
	var got []string
	for _, r := range reps {
		got = append(got, r.String())
	}
	want := []string{"OK", "(integer) 2", "(error) ERR value is not an integer or out of range", `"2"`}
	if strings.Join(got, "\n") != strings.Join(want, "\n") {
		t.Fatalf("Group replies:\n%s\nwant\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	if g := groupsSent(b); len(g) != 1 || g[0] != "set a|incr a|incr s|get a" {
		t.Fatalf("groups sent: %q, want the four operations as one", g)
	}

	// A command that cannot be queued aborts the whole group.
	_, err = c.Group(ctx, []string{"SET", "a", "9"}, []string{"NOSUCH", "x"})
	if !errors.Is(err, ErrGroupAborted) || !strings.Contains(err.Error(), "unknown command") {
		t.Fatalf("a group with an unknown command: %v, want ErrGroupAborted naming it", err)
	}
	if v, _, err := c.Get(ctx, "a"); err != nil || string(v) != "2" {
		t.Fatalf("after the aborted group a = %q (%v), want 2", v, err)
	}
	// The transaction's own commands and connection state are refused
	// before anything is sent.
	for _, bad := range [][]string{{"MULTI"}, {"WATCH", "a"}, {"SELECT", "1"}, {}} {
		if _, err := c.Group(ctx, []string{"SET", "a", "3"}, bad); err == nil {
			t.Errorf("Group with %q: no error", bad)
		}
	}
	if n := len(groupsSent(b)); n != 1 {
		t.Fatalf("%d groups sent, want only the first", n)
	}
}

func TestGroupRefusedWithoutAtomicGroups(t *testing.T) {
	m := gatewaytest.New(config.Namespace{Name: "default", Protocol: "abd", Service: "kv"})
	c := newClient(t, []string{serveBackend(t, m)}, Options{})
	_, err := c.Group(tctx(t), []string{"SET", "a", "1"}, []string{"SET", "b", "2"})
	var e *Error
	if !errors.Is(err, ErrGroupAborted) || !errors.As(err, &e) || !strings.Contains(e.Msg, "MULTI needs a protocol that applies a group of operations atomically") {
		t.Fatalf("Group on abd: %v, want ErrGroupAborted wrapping MULTI's refusal", err)
	}
	if n := len(m.Log()); n != 0 {
		t.Fatalf("%d requests reached abd", n)
	}
}

func TestGroupOverGRPC(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	n := startGRPCOver(t, b, nil, grpcserver.Options{})
	c := newGRPC(t, []string{n.addr}, Options{})
	rs, err := c.Group(tctx(t), Op("set", "a", "1"), Op("incr", "a", "41"), Op("get", "a"))
	if err != nil {
		t.Fatalf("Group: %v", err)
	}
	if len(rs) != 3 || rs[0].Type != service.ResultOK || rs[1].Int != 42 || string(rs[2].Bytes) != "42" {
		t.Fatalf("Group results: %+v", rs)
	}
	if g := groupsSent(b); len(g) != 1 || g[0] != "set a|incr a|get a" {
		t.Fatalf("groups sent: %q", g)
	}
}
