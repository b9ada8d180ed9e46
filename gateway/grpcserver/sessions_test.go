package grpcserver

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/paxos"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
)

// Client sessions over gRPC (sessions.go): a client that tells its lowest
// unanswered request leaves one outcome in paxos's table instead of 64; a
// retry of a forgotten write is refused, not executed, and a retry of the
// latest write gets its first outcome; end_session removes the client's
// row and later writes under its id are refused. A client that tells
// nothing (an earlier release's) keeps the window of 64. Run on paxos and
// on paxos-broken-dropearly, which drops the latest write's own outcome:
// its retry runs again (caught). Before session 51 the fields did not
// exist: every client kept 64 outcomes and its row for good.
func TestGRPCSessions(t *testing.T) {
	if bad := grpcSessions(t, "paxos"); bad != "" {
		t.Fatalf("paxos: %s", bad)
	}
	if bad := grpcSessions(t, paxos.BrokenDropEarly); bad == "" {
		t.Fatalf("%s not caught: a retry of the latest write was not executed twice", paxos.BrokenDropEarly)
	} else {
		t.Logf("%s caught: %s", paxos.BrokenDropEarly, bad)
	}
}

// grpcSessions runs the scenario on protocol proto and returns what went
// wrong ("" when nothing did).
func grpcSessions(t *testing.T, proto string) string {
	b := gatewaytest.MustAutomaton(t, proto, "kv")
	_, c := start(t, b, Options{})
	cx := ctx(t)
	st := func() (s paxos.Status) {
		b.Inspect(func(a automaton.Automaton) { s = a.(*paxos.Paxos).Status() })
		return s
	}
	nss, err := c.Namespaces(cx, &synodpb.NamespacesRequest{})
	if err != nil || !nss.GetNamespaces()[0].GetSessions() {
		t.Fatalf("Namespaces = %v, %v: want sessions set for %s", nss, err, proto)
	}
	do := func(in *synodpb.Request) *synodpb.Result {
		t.Helper()
		r, err := c.Do(cx, in)
		if err != nil {
			t.Fatalf("%v: %v", in, err)
		}
		return r.GetResult()
	}
	set := func(client, seq, unanswered uint64, v string) *synodpb.Result {
		return do(&synodpb.Request{ClientId: client, Seq: seq, Unanswered: unanswered, Op: op("set", "k", v)})
	}
	get := func() string { return string(do(&synodpb.Request{Op: op("get", "k")}).GetBytes()) }
	const old, client = 1, 2
	for seq := uint64(1); seq <= 100; seq++ {
		set(old, seq, 0, "old")
	}
	if s := st(); s.Sessions != 1 || s.Outcomes != 64 {
		return fmt.Sprintf("a client without unanswered, 100 writes: %d rows, %d outcomes; want 1 row of the window's 64", s.Sessions, s.Outcomes)
	}
	for seq := uint64(1); seq <= 100; seq++ {
		set(client, seq, seq, fmt.Sprint("v", seq))
	}
	if s := st(); s.Sessions != 2 || s.Outcomes != 65 {
		return fmt.Sprintf("a client telling unanswered, 100 writes: %d rows, %d outcomes in all; want 2 rows, 64+1 outcomes", s.Sessions, s.Outcomes)
	}
	if r := set(client, 50, 50, "again"); !strings.Contains(r.GetErr(), "not executed") {
		return fmt.Sprintf("a retry of forgotten write 50 = %v, want refused, not executed", r)
	}
	if r := set(client, 100, 100, "again"); r.GetOk() == nil {
		return fmt.Sprintf("a retry of the latest write = %v, want its first outcome (ok)", r)
	}
	if v := get(); v != "v100" {
		return fmt.Sprintf("after the retries k = %q, want v100: a retry executed again", v)
	}
	if r := do(&synodpb.Request{ClientId: client, Seq: 101, EndSession: true}); r.GetOk() == nil {
		return fmt.Sprintf("end_session = %v", r)
	}
	if s := st(); s.Sessions != 1 || s.Ended != 1 {
		return fmt.Sprintf("after end_session: %d rows, %d ended; want the old client's row alone and 1 ended", s.Sessions, s.Ended)
	}
	if r := set(client, 102, 102, "late"); !strings.Contains(r.GetErr(), "session ended") {
		return fmt.Sprintf("a write after end_session = %v, want refused", r)
	}
	if r := set(client, 100, 100, "late"); !strings.Contains(r.GetErr(), "session ended") {
		return fmt.Sprintf("a retry of the latest write after end_session = %v, want refused", r)
	}
	if v := get(); v != "v100" {
		return fmt.Sprintf("after the refused writes k = %q, want v100", v)
	}
	return ""
}

// The session fields' refusals (INVALID_ARGUMENT, nothing executed), and
// end_session on a namespace whose protocol keeps no sessions
// (FAILED_PRECONDITION, nothing submitted).
func TestGRPCSessionFieldsChecked(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	_, c := start(t, b, Options{})
	cx := ctx(t)
	for _, in := range []*synodpb.Request{
		{ClientId: 7, Seq: 3, Unanswered: 4, Op: op("set", "k", "v")},
		{Unanswered: 1, Op: op("set", "k", "v")},
		{ClientId: 7, Seq: 3, EndSession: true, Op: op("set", "k", "v")},
		{ClientId: 7, Seq: 3, EndSession: true, Unanswered: 3},
		{EndSession: true},
	} {
		if _, err := c.Do(cx, in); status.Code(err) != codes.InvalidArgument {
			t.Errorf("%v: %v, want INVALID_ARGUMENT", in, err)
		}
	}
	if n := len(b.Log()); n != 0 {
		t.Fatalf("refused requests reached the protocol: %v", b.Log())
	}
	m := gatewaytest.New(config.Namespace{Name: "default", Protocol: "memory", Service: "kv"})
	_, mc := start(t, m, Options{})
	if _, err := mc.Do(cx, &synodpb.Request{ClientId: 7, Seq: 1, EndSession: true}); status.Code(err) != codes.FailedPrecondition {
		t.Fatalf("end_session where the protocol keeps no sessions: %v, want FAILED_PRECONDITION", err)
	}
	if n := len(m.Log()); n != 0 {
		t.Fatalf("end_session on memory submitted %d requests", n)
	}
}

// TestPipelineStreamsLeaveNoSessions: a Pipeline stream's own identities
// (the stream's client id, chosen by the server) are bounded and ended as
// a RESP connection's are (sessions.go): streams that wrote and ended
// leave no row in paxos's table, a stream that only read ends nothing (no
// write to the log), and an open stream's id holds one outcome, not one
// per batch. Fails without endSessions (no session ends: before session
// 52 a stream's id stayed until the table's bound evicted it) and without
// Unanswered (the open stream's row keeps its 10 batches' outcomes).
func TestPipelineStreamsLeaveNoSessions(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	_, c := start(t, b, Options{})
	st := func() (s paxos.Status) {
		b.Inspect(func(a automaton.Automaton) { s = a.(*paxos.Paxos).Status() })
		return s
	}
	calls := func(round int, kind string) *synodpb.PipelineRequest {
		m := &synodpb.PipelineRequest{}
		for k := range 16 {
			args := []string{fmt.Sprint(round)}
			if kind == "get" {
				args = nil
			}
			m.Calls = append(m.Calls, &synodpb.Call{Id: uint64(round*16 + k), Request: &synodpb.Request{Op: op(kind, fmt.Sprintf("k%d", k), args...)}})
		}
		return m
	}
	const n = 10
	for i := range n {
		got := exchange(t, c, calls(0, "set"), calls(1, "set"), calls(2, "set"))
		if len(got) != 48 {
			t.Fatalf("stream %d: %d replies to 48 calls", i, len(got))
		}
	}
	if got := exchange(t, c, calls(0, "get"), calls(1, "get")); len(got) != 32 {
		t.Fatalf("a reading stream: %d replies to 32 calls", len(got))
	}
	// An open stream: 10 rounds of 16 sets, each answered before the next.
	s, err := c.Pipeline(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for round := range 10 {
		if err := s.Send(calls(round, "set")); err != nil {
			t.Fatal(err)
		}
		for got := 0; got < 16; {
			m, err := s.Recv()
			if err != nil {
				t.Fatalf("round %d: %v", round, err)
			}
			for _, r := range m.GetReplies() {
				if r.GetResponse().GetResult().GetOk() == nil {
					t.Fatalf("round %d: %v", round, r)
				}
			}
			got += len(m.GetReplies())
		}
	}
	waitFor(t, "the ended streams' sessions ended", func() bool { return st().Ended >= n })
	sn := st()
	t.Logf("open stream: %d rows, %d outcomes; %d ended sessions", sn.Sessions, sn.Outcomes, sn.Ended)
	if sn.Ended != n || sn.Sessions != 1 || sn.Outcomes != 1 {
		t.Fatalf("%d rows holding %d outcomes, %d ended sessions: want the open stream's row alone, one outcome, and %d ended (the reading stream ends none)", sn.Sessions, sn.Outcomes, sn.Ended, n)
	}
	s.CloseSend()
	if _, err := collect(t, s); err != nil {
		t.Fatalf("the open stream ended with %v", err)
	}
	waitFor(t, "the open stream's session ended", func() bool { return st().Sessions == 0 })
}
