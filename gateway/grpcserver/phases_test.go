package grpcserver

import (
	"context"
	"io"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/abd"
)

// phaseExchange sends msgs on a new Phases stream, one at a time, each
// after the previous one's replies are in (so that the test does not
// depend on the order in which concurrent messages run), then ends its
// side; it returns the replies by phase id, and checks that each message
// was answered in one reply message and that the stream ends OK.
func phaseExchange(t *testing.T, c synodpb.SynodClient, msgs ...*synodpb.PhaseRequest) map[uint64]*synodpb.PhaseReply {
	t.Helper()
	s, err := c.Phases(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	out := map[uint64]*synodpb.PhaseReply{}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetReplies()) != len(m.GetPhases()) {
			t.Fatalf("a message of %d phases answered by a message of %d replies", len(m.GetPhases()), len(r.GetReplies()))
		}
		for _, p := range r.GetReplies() {
			if _, dup := out[p.GetId()]; dup {
				t.Errorf("phase %d answered twice", p.GetId())
			}
			out[p.GetId()] = p
		}
	}
	s.CloseSend()
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("stream ended with %v, want OK", err)
	}
	return out
}

// A Phases message's phases reach the protocol as one client batch and
// are answered as the same requests over Do are (protocol/abd direct.go:
// a store installs a higher tag only, a query answers the register's tag
// and value, a tombstone has no value); a phase the checks refuse is
// answered with its own code beside the others, which run; a namespace
// whose protocol has no abd.phase refuses every phase.
func TestPhases(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "abd", "kv")
	_, c := start(t, b, Options{})
	got := phaseExchange(t, c,
		&synodpb.PhaseRequest{Phases: []*synodpb.Phase{
			{Id: 1, Key: "a", Tag: "2:1:client/x", Value: []byte("va")},
			{Id: 2, Key: "b", Tag: "1:1:client/x", Tomb: true},
			{Id: 3, Key: "c", Tag: "0:1:client/x", Value: []byte("vc")}, // TS 0: refused
			{Id: 4, Key: "d", Tag: "no-tag", Value: []byte("vd")},       // refused
			{Id: 5, Key: "e", Tag: "1:1:client/x", Value: []byte("ve")},
		}},
		&synodpb.PhaseRequest{Phases: []*synodpb.Phase{
			{Id: 6, Key: "a", Tag: "1:9:client/y", Value: []byte("old")}, // lower: acknowledged, not installed
		}},
		&synodpb.PhaseRequest{Phases: []*synodpb.Phase{
			{Id: 7, Key: "a"}, {Id: 8, Key: "b"}, {Id: 9, Key: "c"}, {Id: 10, Key: "e"},
		}},
	)
	for _, id := range []uint64{1, 2, 5, 6} {
		if r := got[id]; r.GetCode() != 0 || r.GetErr() != "" || r.GetTag() != "" || r.GetPresent() {
			t.Errorf("store %d: %v, want a bare acknowledgement", id, r)
		}
	}
	for _, id := range []uint64{3, 4} {
		if r := got[id]; codes.Code(r.GetCode()) != codes.InvalidArgument {
			t.Errorf("store %d with a bad tag: %v, want INVALID_ARGUMENT", id, r)
		}
	}
	want := map[uint64]struct {
		tag, value string
		present    bool
	}{
		7:  {"2:1:client/x", "va", true},
		8:  {"1:1:client/x", "", false},
		9:  {"", "", false},
		10: {"1:1:client/x", "ve", true},
	}
	for id, w := range want {
		r := got[id]
		if r.GetCode() != 0 || r.GetErr() != "" || r.GetTag() != w.tag || string(r.GetValue()) != w.value || r.GetPresent() != w.present {
			t.Errorf("query %d: %v, want tag %q value %q present %v", id, r, w.tag, w.value, w.present)
		}
	}
	if bs := b.Batches(); len(bs) != 3 || bs[0] != 3 || bs[1] != 1 || bs[2] != 4 {
		t.Errorf("batches stepped %v, want [3 1 4] (each message's phases that passed the checks, in one batch)", bs)
	}

	_, oc := start(t, gatewaytest.MustAutomaton(t, "paxos", "kv"), Options{})
	got = phaseExchange(t, oc, &synodpb.PhaseRequest{Phases: []*synodpb.Phase{{Id: 1, Key: "a"}, {Id: 2, Key: "b", Tag: "1:1:w", Value: []byte("v")}}})
	for id, r := range got {
		if codes.Code(r.GetCode()) != codes.InvalidArgument {
			t.Errorf("phase %d on a namespace without abd.phase: %v, want INVALID_ARGUMENT", id, r)
		}
	}
	got = phaseExchange(t, c, &synodpb.PhaseRequest{Namespace: "nope", Phases: []*synodpb.Phase{{Id: 1, Key: "a"}}})
	if r := got[1]; codes.Code(r.GetCode()) != codes.NotFound {
		t.Errorf("phase on an unknown namespace: %v, want NOT_FOUND", r)
	}
}

// The gateway names protocol/abd's client-driven options itself (it
// imports no protocol): the names must be abd's.
func TestPhaseOptionNames(t *testing.T) {
	if optPhase != abd.OptPhase || optTag != abd.OptTag || phaseQuery != abd.PhaseQuery || phaseStore != abd.PhaseStore {
		t.Fatalf("gateway's %q %q %q %q, protocol/abd's %q %q %q %q", optPhase, optTag, phaseQuery, phaseStore, abd.OptPhase, abd.OptTag, abd.PhaseQuery, abd.PhaseStore)
	}
}

// replyBackend is an AutomatonBackend that also answers batches through
// callbacks (gateway.BatchReplyBackend, as node.Node does): a batch runs
// through the inner DoBatch on a goroutine of its own, or, while hold is
// set, is held unanswered until Abandon withdraws its requests.
type replyBackend struct {
	*gatewaytest.AutomatonBackend
	mu        sync.Mutex
	hold      bool
	submitted int                          // batches SubmitReplyBatch took
	held      map[automaton.RequestID]bool // held, not yet withdrawn
	abandoned []automaton.RequestID        // withdrawn by Abandon
}

func (b *replyBackend) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	r, err := b.Do(ctx, ns, req)
	return func() (automaton.Response, error) { return r, err }
}

func (b *replyBackend) SubmitReply(context.Context, string, automaton.Request, func(automaton.Response, error)) bool {
	return false
}

func (b *replyBackend) SubmitReplyBatch(ctx context.Context, ns string, reqs []automaton.Request, _ bool, done func(int, automaton.Response, error)) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.submitted++
	if b.hold {
		for _, r := range reqs {
			b.held[r.ID] = true
		}
		return true
	}
	go func() {
		resps, errs := b.DoBatch(ctx, ns, reqs)
		for i := range reqs {
			done(i, resps[i], errs[i])
		}
	}()
	return true
}

func (b *replyBackend) Abandon(_ string, id automaton.RequestID) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	if !b.held[id] {
		return false
	}
	delete(b.held, id)
	b.abandoned = append(b.abandoned, id)
	return true
}

// Where the Backend answers batches through callbacks (the node), a
// message's phases go over in one SubmitReplyBatch and are answered as
// over DoBatch; a batch not answered within RequestTimeout is withdrawn
// (Abandon, each phase) and its phases answered DEADLINE_EXCEEDED.
// RequestTimeout is 3 s, so that a loaded machine does not time out the
// phases that run (the held ones wait for it).
func TestPhasesReplyBackend(t *testing.T) {
	b := &replyBackend{AutomatonBackend: gatewaytest.MustAutomaton(t, "abd", "kv"), held: map[automaton.RequestID]bool{}}
	_, c := start(t, b, Options{RequestTimeout: 3 * time.Second})
	got := phaseExchange(t, c,
		&synodpb.PhaseRequest{Phases: []*synodpb.Phase{
			{Id: 1, Key: "a", Tag: "2:1:client/x", Value: []byte("va")},
			{Id: 2, Key: "b", Tag: "0:1:client/x", Value: []byte("vb")}, // TS 0: refused, not handed over
		}},
		&synodpb.PhaseRequest{Phases: []*synodpb.Phase{{Id: 3, Key: "a"}, {Id: 4, Key: "b"}}},
	)
	if r := got[1]; r.GetCode() != 0 || r.GetErr() != "" {
		t.Errorf("store 1: %v, want a bare acknowledgement", r)
	}
	if r := got[2]; codes.Code(r.GetCode()) != codes.InvalidArgument {
		t.Errorf("store 2 with TS 0: %v, want INVALID_ARGUMENT", r)
	}
	if r := got[3]; r.GetCode() != 0 || r.GetTag() != "2:1:client/x" || string(r.GetValue()) != "va" || !r.GetPresent() {
		t.Errorf("query 3: %v, want 2:1:client/x va", r)
	}
	if r := got[4]; r.GetCode() != 0 || r.GetTag() != "" || r.GetPresent() {
		t.Errorf("query 4: %v, want a register never written", r)
	}
	b.mu.Lock()
	n := b.submitted
	b.mu.Unlock()
	if n != 2 {
		t.Fatalf("SubmitReplyBatch took %d batches, want 2 (one per message)", n)
	}
	if bs := b.Batches(); len(bs) != 2 || bs[0] != 1 || bs[1] != 2 {
		t.Errorf("batches stepped %v, want [1 2]", bs)
	}
	// The workers' scratch, reused message after message on one stream:
	// messages refused whole between messages that run, of varied sizes.
	var msgs []*synodpb.PhaseRequest
	id := uint64(100)
	for r := range 12 {
		m := &synodpb.PhaseRequest{}
		if r%3 == 1 {
			m.Namespace = "nope"
		}
		for range 1 + r%4 {
			id++
			m.Phases = append(m.Phases, &synodpb.Phase{Id: id, Key: "a"})
		}
		msgs = append(msgs, m)
	}
	got = phaseExchange(t, c, msgs...)
	for _, m := range msgs {
		for _, p := range m.GetPhases() {
			r := got[p.GetId()]
			if m.GetNamespace() == "nope" {
				if codes.Code(r.GetCode()) != codes.NotFound {
					t.Errorf("phase %d on an unknown namespace: %v, want NOT_FOUND", p.GetId(), r)
				}
			} else if r.GetCode() != 0 || r.GetTag() != "2:1:client/x" || string(r.GetValue()) != "va" {
				t.Errorf("query %d: %v, want 2:1:client/x va", p.GetId(), r)
			}
		}
	}
	b.mu.Lock()
	b.hold = true
	b.mu.Unlock()
	got = phaseExchange(t, c, &synodpb.PhaseRequest{Phases: []*synodpb.Phase{{Id: 5, Key: "a"}, {Id: 6, Key: "c", Tag: "1:1:client/x", Value: []byte("vc")}}})
	for _, id := range []uint64{5, 6} {
		if r := got[id]; codes.Code(r.GetCode()) != codes.DeadlineExceeded {
			t.Errorf("held phase %d: %v, want DEADLINE_EXCEEDED", id, r)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.abandoned) != 2 || len(b.held) != 0 {
		t.Errorf("withdrew %v, still held %v: want both phases withdrawn", b.abandoned, b.held)
	}
}

// parseTag answers as the tag spec's Parse does: the same list or the
// same refusal, for good, bad and oversized tags.
func TestPhaseParseTagAsParse(t *testing.T) {
	spec, err := automaton.FindOption("abd", optTag)
	if err != nil {
		t.Fatal(err)
	}
	for _, v := range []string{"1:2:client/x", "0:1:client/x", "no-tag", "", "1:2:" + strings.Repeat("w", automaton.MaxOptionBytes)} {
		got, gerr := parseTag(spec, []string{v})
		want, werr := spec.Parse([]string{v})
		if !slices.Equal(got, want) || (gerr == nil) != (werr == nil) || (gerr != nil && gerr.Error() != werr.Error()) {
			t.Errorf("tag %.40q: parseTag %q %v, Parse %q %v", v, got, gerr, want, werr)
		}
	}
}

// The direct transport's read turn (h2server.go) lets a Phases stream's
// receiving worker read the connection itself; when every worker is
// running a held message nobody receives, and the connection must still
// be read (phaser.work's keepReading): here the caller's cancellation,
// which withdraws the held phases (Abandon) long before RequestTimeout.
// Fails (the phases stay held until the deadline) when the workers keep
// the turn without the promise.
func TestPhasesAllWorkersBusy(t *testing.T) {
	b := &replyBackend{AutomatonBackend: gatewaytest.MustAutomaton(t, "abd", "kv"), held: map[automaton.RequestID]bool{}, hold: true}
	_, c := start(t, b, Options{RequestTimeout: time.Minute})
	sctx, cancel := context.WithCancel(ctx(t))
	defer cancel()
	s, err := c.Phases(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range maxPhaseMsgs {
		if err := s.Send(&synodpb.PhaseRequest{Phases: []*synodpb.Phase{{Id: uint64(i + 1), Key: "a"}}}); err != nil {
			t.Fatal(err)
		}
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(5 * time.Millisecond) {
			b.mu.Lock()
			done := ok()
			b.mu.Unlock()
			if done {
				return
			}
			if time.Now().After(deadline) {
				t.Fatalf("after 10 s: %s (submitted %d, held %d, withdrawn %d)", what, b.submitted, len(b.held), len(b.abandoned))
			}
		}
	}
	wait("not every worker running a held message", func() bool { return b.submitted == maxPhaseMsgs })
	cancel()
	wait("the held phases not withdrawn after the caller cancelled", func() bool { return len(b.abandoned) == maxPhaseMsgs })
}
