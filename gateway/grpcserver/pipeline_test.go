package grpcserver

import (
	"context"
	"fmt"
	"io"
	"math/rand"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/service"
)

// collect reads replies until the stream ends and returns them by id with
// the stream's end (nil for a clean end).
func collect(t *testing.T, s synodpb.Synod_PipelineClient) (map[uint64]*synodpb.CallReply, error) {
	t.Helper()
	out := map[uint64]*synodpb.CallReply{}
	for {
		m, err := s.Recv()
		if err == io.EOF {
			return out, nil
		}
		if err != nil {
			return out, err
		}
		for _, r := range m.GetReplies() {
			if _, dup := out[r.GetId()]; dup {
				t.Errorf("call %d answered twice", r.GetId())
			}
			out[r.GetId()] = r
		}
	}
}

// TestPipelineRefusalsAndConflictRule: on a namespace without atomic
// groups, a stream's calls run concurrently (the backend sees several at
// once) yet each key's calls take effect in the order sent; calls the
// checks refuse are answered with their own code, beside the others; the
// stream ends cleanly once the caller closed its side and every call was

// exchange sends msgs on a new stream, ends its side and returns the
// replies by call id; the stream must end OK.
func exchange(t *testing.T, c synodpb.SynodClient, msgs ...*synodpb.PipelineRequest) map[uint64]*synodpb.CallReply {
	t.Helper()
	s, err := c.Pipeline(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if err := s.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	s.CloseSend()
	got, err := collect(t, s)
	if err != nil {
		t.Fatalf("stream ended with %v", err)
	}
	return got
}

// answered.
func TestPipelineRefusalsAndConflictRule(t *testing.T) {
	b := twoNamespaces() // default: abd (no atomic groups)
	var inFlight, most atomic.Int64
	var mu sync.Mutex
	rng := rand.New(rand.NewSource(1))
	// The first call (on key a) waits until a call on another key has
	// started: it can only if calls run concurrently (bounded, so that a
	// serial server fails the test instead of hanging it).
	var firstA atomic.Bool
	other := make(chan struct{})
	var otherOnce sync.Once
	var concurrent atomic.Bool
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if req.Op.Key == "a" && firstA.CompareAndSwap(false, true) {
			select {
			case <-other:
				concurrent.Store(true)
			case <-time.After(10 * time.Second):
			}
		} else if req.Op.Key != "a" {
			otherOnce.Do(func() { close(other) })
		}
		n := inFlight.Add(1)
		defer inFlight.Add(-1)
		for {
			m := most.Load()
			if n <= m || most.CompareAndSwap(m, n) {
				break
			}
		}
		mu.Lock()
		d := time.Duration(rng.Intn(3000)) * time.Microsecond
		mu.Unlock()
		time.Sleep(d)
		return nil
	})
	_, c := start(t, b, Options{})
	s, err := c.Pipeline(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	var calls []*synodpb.Call
	keys := []string{"a", "b", "c"}
	for i := range 90 {
		calls = append(calls, &synodpb.Call{Id: uint64(i), Request: &synodpb.Request{Op: op("append", keys[i%3], "x")}})
	}
	refused := map[uint64]codes.Code{
		1000: codes.InvalidArgument, // client_id set
		1001: codes.InvalidArgument, // a transaction step
		1002: codes.InvalidArgument, // fanout
		1003: codes.InvalidArgument, // no request
		1004: codes.NotFound,        // unknown namespace
		1005: codes.InvalidArgument, // unknown operation
	}
	bad := []*synodpb.Call{
		{Id: 1000, Request: &synodpb.Request{ClientId: 9, Seq: 1, Op: op("get", "a")}},
		{Id: 1001, Request: &synodpb.Request{Txn: &synodpb.TxnStep{Action: synodpb.TxnStep_BEGIN}}},
		{Id: 1002, Request: &synodpb.Request{Fanout: true, Op: op("get", "a")}},
		{Id: 1003},
		{Id: 1004, Request: &synodpb.Request{Namespace: "nowhere", Op: op("get", "a")}},
		{Id: 1005, Request: &synodpb.Request{Op: op("nosuch", "a")}},
	}
	// Refusals in the middle, the rest in messages of various sizes.
	msgs := [][]*synodpb.Call{calls[:7], bad, calls[7:40], calls[40:41], calls[41:]}
	for _, m := range msgs {
		if err := s.Send(&synodpb.PipelineRequest{Calls: m}); err != nil {
			t.Fatal(err)
		}
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	got, err := collect(t, s)
	if err != nil {
		t.Fatalf("stream ended with %v, want a clean end", err)
	}
	if len(got) != len(calls)+len(bad) {
		t.Fatalf("%d replies to %d calls", len(got), len(calls)+len(bad))
	}
	for id, code := range refused {
		if r := got[id]; codes.Code(r.GetCode()) != code || r.GetResponse() != nil {
			t.Errorf("call %d: code %v (%s), want %v without a response", id, codes.Code(r.GetCode()), r.GetMessage(), code)
		}
	}
	// APPEND answers the new length: in the order sent, each key's calls
	// answer 1, 2, 3, ...
	next := map[string]int64{}
	for i, call := range calls {
		r := got[uint64(i)]
		res, err := synodpb.ToResult(r.GetResponse().GetResult())
		k := call.Request.Op.Key
		next[k]++
		if r.GetCode() != 0 || err != nil || res.Type != service.ResultInt || res.Int != next[k] {
			t.Fatalf("call %d (append %s): code %d %s, result %v; want length %d (the key's calls in order)", i, k, r.GetCode(), r.GetMessage(), res, next[k])
		}
	}
	if !concurrent.Load() {
		t.Errorf("no call started while the first was in flight: the stream did not run calls concurrently")
	}
	t.Logf("at most %d calls in flight", most.Load())
}

// TestPipelineBatchesAtomic: on a Multi-Paxos namespace, one message's
// calls reach the protocol as atomic groups of at most maxBatch
// operations, in the order sent, and each call gets its own operation's
// result.
func TestPipelineBatchesAtomic(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	_, c := start(t, b, Options{})
	var calls []*synodpb.Call
	for i := range 300 {
		o := op("incr", "n", "1")
		if i == 150 {
			o = op("append", "n", "x") // makes the value a string: later INCRs fail
		}
		calls = append(calls, &synodpb.Call{Id: uint64(i), Request: &synodpb.Request{Op: o}})
	}
	got := exchange(t, c, &synodpb.PipelineRequest{Calls: calls})
	if len(got) != len(calls) {
		t.Fatalf("%d replies to %d calls", len(got), len(calls))
	}
	for i := range calls {
		res, _ := synodpb.ToResult(got[uint64(i)].GetResponse().GetResult())
		switch {
		case i < 150 && (res.Type != service.ResultInt || res.Int != int64(i+1)):
			t.Fatalf("call %d: %v, want %d", i, res, i+1)
		case i > 150 && res.Type != service.ResultErr:
			t.Fatalf("call %d: %v, want an error (INCR of a string)", i, res)
		}
	}
	log := withoutSessionEnds(b.Log())
	if len(log) != 2 || len(log[0].Ops) != maxBatch || len(log[1].Ops) != 300-maxBatch {
		var sizes []int
		for _, r := range log {
			sizes = append(sizes, len(r.Ops))
		}
		t.Fatalf("the protocol saw groups of %v operations, want [%d %d]", sizes, maxBatch, 300-maxBatch)
	}
}

// TestPipelineCancelAndClose: cancelling a stream cuts short the calls in
// flight (the backend's context ends); closing the server ends a stream
// with UNAVAILABLE.
func TestPipelineCancelAndClose(t *testing.T) {
	b := twoNamespaces()
	entered := make(chan struct{}, 4)
	ended := make(chan struct{}, 4)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		entered <- struct{}{}
		<-ctx.Done()
		ended <- struct{}{}
		return ctx.Err()
	})
	srv, c := start(t, b, Options{})
	x, cancel := context.WithCancel(ctx(t))
	s, err := c.Pipeline(x)
	if err != nil {
		t.Fatal(err)
	}
	s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: 1, Request: &synodpb.Request{Op: op("set", "k", "v")}}}})
	<-entered
	cancel()
	select {
	case <-ended:
	case <-time.After(10 * time.Second):
		t.Fatal("cancelling the stream did not end the call in flight")
	}

	s2, err := c.Pipeline(ctx(t))
	if err != nil {
		t.Fatal(err)
	}
	s2.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: 1, Request: &synodpb.Request{Op: op("set", "k", "v")}}}})
	<-entered
	go srv.Close()
	got, err := collect(t, s2)
	if r := got[1]; r != nil && codes.Code(r.GetCode()) != codes.Unavailable {
		t.Errorf("call cut short by shutdown answered %v %s, want UNAVAILABLE", codes.Code(r.GetCode()), r.GetMessage())
	}
	if err == nil {
		t.Errorf("stream ended cleanly at shutdown, want UNAVAILABLE")
	}
}

// TestPipelineNamedMessages: a message that names its group (client_id,
// seq) runs as one atomic group under that identity, after the calls sent
// before it and before those sent after, each call answered by its own
// operation; the same ops sent again with that identity (through Do, or
// another stream) are answered with the first outcome and applied once
// (Multi-Paxos's session table). A named message that breaks the rule, or
// holds a call Do's checks refuse, runs nothing.
func TestPipelineNamedMessages(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "paxos", "kv")
	_, c := start(t, b, Options{})
	call := func(id uint64, o *synodpb.Op) *synodpb.Call {
		return &synodpb.Call{Id: id, Request: &synodpb.Request{Op: o}}
	}
	named := func(client, seq uint64) *synodpb.PipelineRequest {
		return &synodpb.PipelineRequest{ClientId: client, Seq: seq, Calls: []*synodpb.Call{
			call(2, op("rpush", "l", "a")), call(3, op("rpush", "l", "b")), call(4, op("incr", "n", "1"))}}
	}
	ints := func(got map[uint64]*synodpb.CallReply, want map[uint64]int64) {
		t.Helper()
		for id, w := range want {
			r := got[id]
			res, _ := synodpb.ToResult(r.GetResponse().GetResult())
			if r.GetCode() != 0 || res.Type != service.ResultInt || res.Int != w {
				t.Errorf("call %d: code %d %s, result %v; want %d", id, r.GetCode(), r.GetMessage(), res, w)
			}
		}
	}
	got := exchange(t, c,
		&synodpb.PipelineRequest{Calls: []*synodpb.Call{call(1, op("rpush", "l", "x"))}},
		named(77, 1),
		&synodpb.PipelineRequest{Calls: []*synodpb.Call{call(5, op("rpush", "l", "y"))}},
	)
	ints(got, map[uint64]int64{1: 1, 2: 2, 3: 3, 4: 1, 5: 4})
	groups := 0
	for _, r := range b.Log() {
		if r.ID == (automaton.RequestID{Client: 77, Seq: 1}) {
			groups++
			if len(r.Ops) != 3 || r.Ops[0].Key != "l" || r.Ops[2].Key != "n" {
				t.Errorf("the named group reached the protocol as %+v", r)
			}
		}
	}
	if groups != 1 {
		t.Fatalf("the named message reached the protocol %d times, want once", groups)
	}

	// Resent: on a new stream, and through Do as the Go client does.
	ints(exchange(t, c, named(77, 1)), map[uint64]int64{2: 2, 3: 3, 4: 1})
	resp, err := c.Do(ctx(t), &synodpb.Request{ClientId: 77, Seq: 1, Ops: []*synodpb.Op{op("rpush", "l", "a"), op("rpush", "l", "b"), op("incr", "n", "1")}})
	if err != nil || len(resp.GetResults()) != 3 || resp.GetResults()[1].GetInt() != 3 {
		t.Fatalf("Do of the named group again: %v %v, want its first results", resp, err)
	}
	lr, err := c.Do(ctx(t), &synodpb.Request{Op: op("lrange", "l", "0", "-1")})
	if err != nil {
		t.Fatal(err)
	}
	res, _ := synodpb.ToResult(lr.GetResult())
	var items []string
	for _, e := range res.Elems {
		items = append(items, string(e.Bytes))
	}
	if strings.Join(items, ",") != "x,a,b,y" {
		t.Fatalf("list l is %v, want x,a,b,y (the named group applied once, in stream order)", items)
	}

	// Refused messages run nothing.
	before := len(withoutSessionEnds(b.Log()))
	withOpt := named(78, 1)
	withOpt.Calls[1].Request.Options = map[string]*synodpb.OptionValues{"x": {Values: []string{"1"}}}
	noSeq := named(79, 0)
	for i, c := range append(withOpt.Calls, noSeq.Calls...) {
		c.Id = uint64(10 + i)
	}
	badOp := named(80, 1)
	badOp.Calls[2] = call(4, op("nosuch", "n"))
	got = exchange(t, c, withOpt, noSeq, badOp)
	if len(got) != 9 {
		t.Fatalf("%d replies to 9 calls", len(got))
	}
	for id, r := range got {
		if code := codes.Code(r.GetCode()); code == codes.OK || (id >= 10 && code != codes.InvalidArgument) {
			t.Errorf("call %d of a refused named message answered %v %s", id, code, r.GetMessage())
		}
	}
	if code := codes.Code(got[4].GetCode()); code != codes.InvalidArgument {
		t.Errorf("the refused call answered %v %s, want INVALID_ARGUMENT", code, got[4].GetMessage())
	}
	if code := codes.Code(got[2].GetCode()); code != codes.FailedPrecondition {
		t.Errorf("a call beside the refused one answered %v %s, want FAILED_PRECONDITION", code, got[2].GetMessage())
	}
	if n := len(withoutSessionEnds(b.Log())); n != before {
		t.Fatalf("refused named messages reached the protocol (%d requests)", n-before)
	}
}

// replyBytes, the size the stream's writer counts for a reply, is at least
// the reply's encoded size (else a message could outgrow its limit).
func TestReplyBytesBoundsSize(t *testing.T) {
	big := make([]byte, 5000)
	arr := &synodpb.Result{Value: &synodpb.Result_Array{Array: &synodpb.ResultArray{Elems: []*synodpb.Result{
		{Value: &synodpb.Result_Bytes{Bytes: big}}, {Value: &synodpb.Result_Int{Int: -1 << 62}}}}}}
	for _, r := range []*synodpb.CallReply{
		{},
		{Id: ^uint64(0), Code: 14, Message: "unavailable: the stream failed"},
		{Id: ^uint64(0), Response: &synodpb.Response{Result: arr, OpId: "0123456789abcdef-99", Silent: true,
			Results: []*synodpb.Result{arr, {Value: &synodpb.Result_Err{Err: "ERR no"}}},
			Options: map[string]*synodpb.OptionValues{"abd.phase": {Values: []string{"store"}}, "abd.tag": {Values: []string{"1:2:client/0123456789abcdef", ""}}, "x": {}}}},
	} {
		if got, want := replyBytes(r), proto.Size(r); got < want {
			t.Errorf("replyBytes %d < encoded size %d of %v", got, want, r)
		}
	}
}

// Where the Backend hands batches over and the protocol steps them (abd),
// a message's concurrent calls on distinct keys reach the protocol as one
// client batch, each answered as itself; a repeated key ends the group
// (the conflict rule) and its call runs after the earlier one on the key.
func TestPipelineConcurrentGroups(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "abd", "kv")
	_, c := start(t, b, Options{})
	var calls []*synodpb.Call
	for i, k := range []string{"a", "b", "c", "d", "a"} {
		calls = append(calls, &synodpb.Call{Id: uint64(i + 1), Request: &synodpb.Request{Op: op("set", k, fmt.Sprintf("v%d", i+1))}})
	}
	calls = append(calls, &synodpb.Call{Id: 6, Request: &synodpb.Request{Op: op("get", "a")}})
	got := exchange(t, c, &synodpb.PipelineRequest{Calls: calls})
	for id := uint64(1); id <= 5; id++ {
		if r := got[id]; r.GetCode() != 0 || r.GetResponse().GetResult().GetOk() == nil {
			t.Errorf("call %d: %v, want OK", id, r)
		}
	}
	if v := got[6].GetResponse().GetResult().GetBytes(); string(v) != "v5" {
		t.Errorf("get a after set a v1, set a v5: %q, want v5", v)
	}
	if bs := b.Batches(); len(bs) == 0 || bs[0] != 4 {
		t.Fatalf("batches stepped %v, want the first of the 4 calls on distinct keys", bs)
	}
	ids := map[automaton.RequestID]bool{}
	for _, r := range b.Log() {
		if ids[r.ID] {
			t.Errorf("two calls shared request id %v", r.ID)
		}
		ids[r.ID] = true
	}
}

// Request.terse leaves the op id and the options out of the reply, on Do
// and on every Pipeline path (a call run alone, grouped concurrent calls),
// and changes nothing else: the same request without it gets them.
func TestTerseReplies(t *testing.T) {
	_, c := start(t, optionNamespaces(), Options{})
	x := ctx(t)
	for _, terse := range []bool{false, true} {
		resp, err := c.Do(x, &synodpb.Request{Namespace: "ev", Op: op("set", "k", "v"), Options: optionMap("strict", []string{"on"}), Terse: terse})
		if err != nil {
			t.Fatal(err)
		}
		if got := resp.GetOpId() == "" && len(resp.GetOptions()) == 0; got != terse {
			t.Errorf("Do, terse %v: op id %q, options %v", terse, resp.GetOpId(), resp.GetOptions())
		}
		if resp.GetResult().GetOk() == nil {
			t.Errorf("Do, terse %v: result %v, want OK", terse, resp.GetResult())
		}
	}
	b := gatewaytest.MustAutomaton(t, "abd", "kv")
	_, ac := start(t, b, Options{})
	phase := optionMap(abd.OptPhase, []string{abd.PhaseQuery})
	var calls []*synodpb.Call
	for i, k := range []string{"a", "b", "a", "c"} {
		calls = append(calls, &synodpb.Call{Id: uint64(i + 1), Request: &synodpb.Request{Op: op("get", k), Options: phase, Terse: i != 3}})
	}
	got := exchange(t, ac, &synodpb.PipelineRequest{Calls: calls})
	for id := uint64(1); id <= 4; id++ {
		r := got[id].GetResponse()
		if r.GetResult().GetArray() == nil {
			t.Fatalf("call %d: %v, want a query answer", id, got[id])
		}
		if terse := id != 4; (len(r.GetOptions()) == 0) != terse {
			t.Errorf("call %d, terse %v: options %v", id, terse, r.GetOptions())
		}
	}
}

// slowBackend delays some requests at random and records how many of them
// it ran at once.
type slowBackend struct {
	*gatewaytest.AutomatonBackend
	in, most atomic.Int32
	mu       sync.Mutex
	rnd      *rand.Rand
}

func (b *slowBackend) delay() {
	b.mu.Lock()
	d := time.Duration(0)
	if b.rnd.Intn(3) == 0 {
		d = time.Duration(b.rnd.Intn(400)) * time.Microsecond
	}
	b.mu.Unlock()
	time.Sleep(d)
}

func (b *slowBackend) enter() {
	n := b.in.Add(1)
	for m := b.most.Load(); n > m && !b.most.CompareAndSwap(m, n); m = b.most.Load() {
	}
}

func (b *slowBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	b.enter()
	defer b.in.Add(-1)
	b.delay()
	return b.AutomatonBackend.Do(ctx, ns, req)
}

func (b *slowBackend) DoBatch(ctx context.Context, ns string, reqs []automaton.Request) ([]automaton.Response, []error) {
	b.enter()
	defer b.in.Add(-1)
	b.delay()
	return b.AutomatonBackend.DoBatch(ctx, ns, reqs)
}

// TestPipelineManyMessagesWhileRunning: messages sent one after another,
// at random pauses, while earlier calls run at random speeds (so the
// stream's workers take turns receiving and running, pipe's roles, and
// the receiver queues while the executor runs): every call is answered
// once; on a Multi-Paxos namespace the backend never runs two of the
// stream's batches at once and the calls take effect in the order sent;
// on ABD (concurrent calls) each key ends with the value sent last on it.
func TestPipelineManyMessagesWhileRunning(t *testing.T) {
	for _, proto := range []string{"paxos", "abd"} {
		t.Run(proto, func(t *testing.T) {
			seed := time.Now().UnixNano()
			t.Logf("seed %d", seed)
			rnd := rand.New(rand.NewSource(seed))
			b := &slowBackend{AutomatonBackend: gatewaytest.MustAutomaton(t, proto, "kv"), rnd: rand.New(rand.NewSource(seed + 1))}
			_, c := start(t, b, Options{})
			s, err := c.Pipeline(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			const msgs = 300
			id := uint64(0)
			last := map[string]string{}
			for i := range msgs {
				var m synodpb.PipelineRequest
				for range 1 + rnd.Intn(3) {
					id++
					o := op("rpush", "l", fmt.Sprint(id))
					if proto == "abd" {
						k := fmt.Sprintf("k%d", rnd.Intn(5))
						o = op("set", k, fmt.Sprint(id))
						last[k] = fmt.Sprint(id)
					}
					m.Calls = append(m.Calls, &synodpb.Call{Id: id, Request: &synodpb.Request{Op: o}})
				}
				if err := s.Send(&m); err != nil {
					t.Fatal(err)
				}
				if i%7 == 0 {
					time.Sleep(time.Duration(rnd.Intn(300)) * time.Microsecond)
				}
			}
			s.CloseSend()
			got, err := collect(t, s)
			if err != nil {
				t.Fatalf("stream ended with %v", err)
			}
			if len(got) != int(id) {
				t.Fatalf("%d replies to %d calls", len(got), id)
			}
			for i := uint64(1); i <= id; i++ {
				if r := got[i]; r == nil || r.GetCode() != 0 || r.GetResponse().GetResult().GetErr() != "" {
					t.Fatalf("call %d: %v", i, r)
				}
			}
			if proto == "abd" {
				for k, v := range last {
					r, err := c.Do(ctx(t), &synodpb.Request{Op: op("get", k)})
					if err != nil || string(r.GetResult().GetBytes()) != v {
						t.Errorf("get %s: %v %v, want %s (the value sent last)", k, r.GetResult(), err, v)
					}
				}
				return
			}
			if n := b.most.Load(); n != 1 {
				t.Errorf("the backend ran %d of the stream's batches at once, want 1", n)
			}
			var order []string
			for _, r := range withoutSessionEnds(b.Log()) {
				ops := r.Ops
				if len(ops) == 0 {
					ops = []service.Op{r.Op}
				}
				for _, o := range ops {
					order = append(order, string(o.Args[0]))
				}
			}
			for i, v := range order {
				if v != fmt.Sprint(i+1) {
					t.Fatalf("operation %d to take effect was %s, want %d (the order sent)", i+1, v, i+1)
				}
			}
		})
	}
}

// TestPipelineQuietCallsWakeNobody: a caller with one call at a time on
// its stream (the one-client path) does not wake the stream's own
// goroutine (Pipeline's, which waits for the stream's end) per call, on
// a namespace with atomic groups (paxos: batches) and one without (abd:
// concurrent calls); the stream still ends when the caller closes its
// side. On 8115eb6 every execution's start and end broadcast to it (this
// test with the hook there: 54 (paxos) and 47 (abd)
// wake-ups in 50 calls).
func TestPipelineQuietCallsWakeNobody(t *testing.T) {
	for _, proto := range []string{"paxos", "abd"} {
		t.Run(proto, func(t *testing.T) {
			b := gatewaytest.MustAutomaton(t, proto, "kv")
			_, c := start(t, b, Options{})
			var wakes atomic.Int64
			testHandlerWoke = func() { wakes.Add(1) }
			t.Cleanup(func() { testHandlerWoke = nil })
			s, err := c.Pipeline(ctx(t))
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				id := uint64(i + 1)
				if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: id, Request: &synodpb.Request{Op: op("set", "k", fmt.Sprint(i))}}}}); err != nil {
					t.Fatal(err)
				}
				m, err := s.Recv()
				if err != nil || len(m.GetReplies()) != 1 || m.GetReplies()[0].GetId() != id || m.GetReplies()[0].GetResponse() == nil {
					t.Fatalf("call %d: %v %v", id, m, err)
				}
			}
			if n := wakes.Load(); n != 0 {
				t.Errorf("the stream's goroutine was woken %d times in 50 calls, want 0", n)
			}
			if err := s.CloseSend(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Recv(); err != io.EOF {
				t.Fatalf("stream end: %v, want io.EOF", err)
			}
		})
	}
}

// withoutSessionEnds is log without the stream's session ends, which may
// follow its calls once it ended (sessions.go).
func withoutSessionEnds(log []automaton.Request) []automaton.Request {
	return slices.DeleteFunc(log, func(r automaton.Request) bool { return len(r.Ops) == 0 && automaton.IsSessionEnd(r.Op) })
}
