package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"

	_ "github.com/synod-dev/synod/protocol/abd"   // Namespaces reports abd's properties
	_ "github.com/synod-dev/synod/protocol/esds"  // declares request options
	_ "github.com/synod-dev/synod/protocol/paxos" // applies atomic groups
)

func start(t *testing.T, b gateway.Backend, opts Options) (*Server, synodpb.SynodClient) {
	t.Helper()
	return startWith(t, b, opts)
}

// ctx bounds a test's calls: 60 s, since TestInvalidRequests's five
// 8 MiB messages took more than 20 s under -race at load 36.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	t.Cleanup(cancel)
	return c
}

func op(kind, key string, args ...string) *synodpb.Op {
	o := &synodpb.Op{Kind: kind, Key: key}
	for _, a := range args {
		o.Args = append(o.Args, []byte(a))
	}
	return o
}

func twoNamespaces() *gatewaytest.MemBackend {
	return gatewaytest.New(
		config.Namespace{Name: "default", Protocol: "abd", Service: "kv"},
		config.Namespace{Name: "hits", Protocol: "memory", Service: "counter"},
	)
}

func TestDoMapsEverything(t *testing.T) {
	b := twoNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)

	// Results of every type, with the request's identity and options.
	steps := []struct {
		req  *synodpb.Request
		want service.Result
	}{
		{&synodpb.Request{ClientId: 7, Seq: 1, Op: op("set", "k", "v")}, service.OK()},
		{&synodpb.Request{ClientId: 7, Seq: 2, Op: op("get", "k"), Read: synodpb.ReadMode_READ_MODE_REGULAR}, service.Bytes([]byte("v"))},
		{&synodpb.Request{ClientId: 7, Seq: 3, Op: op("get", "nope")}, service.Nil()},
		{&synodpb.Request{ClientId: 7, Seq: 4, Op: op("incr", "k", "1")}, service.Errorf("ERR value is not an integer or out of range")},
		{&synodpb.Request{ClientId: 7, Seq: 5, Namespace: "hits", Op: op("add", "", "5")}, service.Int(5)},
	}
	for _, s := range steps {
		resp, err := c.Do(x, s.req)
		if err != nil {
			t.Fatalf("%v: %v", s.req, err)
		}
		got, err := synodpb.ToResult(resp.GetResult())
		if err != nil || !got.Equal(s.want) {
			t.Errorf("%v: result %v (%v), want %v", s.req.Op, got, err, s.want)
		}
		// Neither abd nor the unregistered "memory" protocol declares options.
		if resp.GetOpId() != "" || len(resp.GetOptions()) != 0 || len(resp.GetResults()) != 0 {
			t.Errorf("%v: op id %q, options %v, results %v; want none", s.req.Op, resp.GetOpId(), resp.GetOptions(), resp.GetResults())
		}
	}
	log := b.Log()
	if len(log) != len(steps) {
		t.Fatalf("backend saw %d requests, want %d", len(log), len(steps))
	}
	for i, rec := range log {
		in := steps[i].req
		ns := in.Namespace
		if ns == "" {
			ns = "default"
		}
		r := rec.Req
		if rec.NS != ns || r.ID != (automaton.RequestID{Client: 7, Seq: in.Seq}) || r.Op.Kind != in.Op.Kind || r.Op.Key != in.Op.Key {
			t.Errorf("request %d reached the backend as %s %+v", i, rec.NS, r)
		}
		if r.Opts.Read != automaton.ReadMode(in.Read) || r.Opts.Ext != nil {
			t.Errorf("request %d options %+v, want read %v and nothing else", i, r.Opts, in.Read)
		}
	}

	// client_id 0: the server picks a fresh identity per request.
	var ids []automaton.RequestID
	for range 2 {
		if _, err := c.Do(x, &synodpb.Request{Op: op("get", "k")}); err != nil {
			t.Fatal(err)
		}
		r := b.Log()[len(b.Log())-1].Req
		if r.ID.Client == 0 || r.ID.Seq != 1 {
			t.Errorf("anonymous request: id %v", r.ID)
		}
		ids = append(ids, r.ID)
	}
	if ids[0] == ids[1] {
		t.Errorf("two anonymous requests share id %v", ids[0])
	}
}

func TestInvalidRequests(t *testing.T) {
	b := twoNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)
	for _, tc := range []struct {
		req  *synodpb.Request
		code codes.Code
		msg  string
	}{
		{&synodpb.Request{Namespace: "nope", Op: op("get", "k")}, codes.NotFound, `unknown namespace "nope" (namespaces: default, hits)`},
		{&synodpb.Request{}, codes.InvalidArgument, "request has no op"},
		{&synodpb.Request{Op: op("frob", "k")}, codes.InvalidArgument, `unknown kv operation "frob"`},
		{&synodpb.Request{Op: op("GET", "k")}, codes.InvalidArgument, `unknown kv operation "GET"`},
		{&synodpb.Request{Op: op("set", "k")}, codes.InvalidArgument, "wrong number of arguments"},
		{&synodpb.Request{Namespace: "hits", Op: op("get", "k")}, codes.InvalidArgument, "counter"},
		{&synodpb.Request{Op: op("get", "k"), Read: synodpb.ReadMode(42)}, codes.InvalidArgument, "unknown read mode 42"},
		{&synodpb.Request{Op: op("get", "k"), Ops: []*synodpb.Op{op("get", "k")}}, codes.InvalidArgument, "both op and ops"},
		{&synodpb.Request{ClientId: 5, Op: op("get", "k")}, codes.InvalidArgument, "seq must be at least 1"},
		{&synodpb.Request{Op: op("set", "k", strings.Repeat("v", service.MaxValueSize+1))}, codes.InvalidArgument, "value too large"},
		{&synodpb.Request{Op: op("set", "k", strings.Repeat("v", synodpb.MaxMessageSize))}, codes.ResourceExhausted, ""},
	} {
		_, err := c.Do(x, tc.req)
		st := status.Convert(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), tc.msg) {
			t.Errorf("%.80v: got %v %q, want %v containing %q", tc.req, st.Code(), st.Message(), tc.code, tc.msg)
		}
	}
	if n := len(b.Log()); n != 0 {
		t.Errorf("%d refused requests reached the backend", n)
	}
	// The largest value fits, both ways.
	big := bytes.Repeat([]byte("x"), service.MaxValueSize)
	if _, err := c.Do(x, &synodpb.Request{Op: &synodpb.Op{Kind: "set", Key: "big", Args: [][]byte{big}}}); err != nil {
		t.Fatalf("set of a %d-byte value: %v", len(big), err)
	}
	resp, err := c.Do(x, &synodpb.Request{Op: op("get", "big")})
	if err != nil || !bytes.Equal(resp.GetResult().GetBytes(), big) {
		t.Fatalf("get of the big value: %v", err)
	}
}

func TestOutcomeUnknownErrors(t *testing.T) {
	b := gatewaytest.KV()
	s, c := start(t, b, Options{RequestTimeout: 50 * time.Millisecond})
	x := ctx(t)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		switch req.Op.Key {
		case "slow":
			<-ctx.Done()
			return ctx.Err()
		case "broken":
			return errors.New("disk on fire")
		case "down":
			return gateway.ErrShuttingDown
		}
		return nil
	})
	for _, tc := range []struct {
		key  string
		code codes.Code
	}{
		{"slow", codes.DeadlineExceeded},
		{"broken", codes.Unavailable},
		{"down", codes.Unavailable},
	} {
		_, err := c.Do(x, &synodpb.Request{ClientId: 1, Seq: 1, Op: op("set", tc.key, "v")})
		st := status.Convert(err)
		if st.Code() != tc.code || !strings.Contains(st.Message(), "outcome") || !strings.Contains(st.Message(), "unknown") {
			t.Errorf("%s: got %v %q, want %v saying the outcome is unknown", tc.key, st.Code(), st.Message(), tc.code)
		}
	}
	// The caller's cancellation.
	cx, cancel := context.WithCancel(x)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		cancel()
		<-ctx.Done()
		return ctx.Err()
	})
	if _, err := c.Do(cx, &synodpb.Request{Op: op("set", "k", "v")}); status.Code(err) != codes.Canceled {
		t.Errorf("cancelled call: %v", err)
	}
	// Close cancels requests in flight; their callers learn the outcome is unknown.
	entered := make(chan struct{})
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		close(entered)
		<-ctx.Done()
		return ctx.Err()
	})
	s.opts.RequestTimeout = time.Minute
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(x, &synodpb.Request{Op: op("set", "k", "v")})
		errc <- err
	}()
	<-entered
	go s.Close()
	err := <-errc
	if st := status.Convert(err); st.Code() != codes.Unavailable || !strings.Contains(st.Message(), "unknown") {
		t.Errorf("request in flight at Close: %v", err)
	}
}

func TestPassword(t *testing.T) {
	b := gatewaytest.KV()
	_, c := start(t, b, Options{Password: "s3cret"})
	x := ctx(t)
	for _, pw := range []string{"", "wrong"} {
		cx := x
		if pw != "" {
			cx = metadata.AppendToOutgoingContext(x, synodpb.PasswordKey, pw)
		}
		if _, err := c.Do(cx, &synodpb.Request{Op: op("set", "k", "v")}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Do with password %q: %v", pw, err)
		}
		if _, err := c.Namespaces(cx, &synodpb.NamespacesRequest{}); status.Code(err) != codes.Unauthenticated {
			t.Errorf("Namespaces with password %q: %v", pw, err)
		}
	}
	if n := len(b.Log()); n != 0 {
		t.Fatalf("unauthenticated requests reached the backend: %d", n)
	}
	cx := metadata.AppendToOutgoingContext(x, synodpb.PasswordKey, "s3cret")
	if _, err := c.Do(cx, &synodpb.Request{Op: op("set", "k", "v")}); err != nil {
		t.Fatalf("with the password: %v", err)
	}
}

func TestNamespacesAndInfo(t *testing.T) {
	_, c := start(t, twoNamespaces(), Options{})
	x := ctx(t)
	resp, err := c.Namespaces(x, &synodpb.NamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, ns := range resp.GetNamespaces() {
		got = append(got, fmt.Sprintf("%s/%s/%s/%s/%v", ns.Name, ns.Protocol, ns.Service, ns.Consistency, ns.IdempotentRetry))
	}
	want := []string{"default/abd/kv/linearizable/false", "hits/memory/counter//false"}
	if !slices.Equal(got, want) {
		t.Errorf("namespaces %v, want %v", got, want)
	}
	// abd declares the options of its client-driven phases (the ABD report).
	wantOpts := map[string]string{"default": "abd.phase abd.tag", "hits": ""}
	for _, ns := range resp.GetNamespaces() {
		var names []string
		for _, o := range ns.GetOptions() {
			names = append(names, o.Name)
		}
		if strings.Join(names, " ") != wantOpts[ns.Name] || ns.GetAtomicGroups() {
			t.Errorf("namespace %s: options %v, atomic groups %v; want options %q and none", ns.Name, names, ns.GetAtomicGroups(), wantOpts[ns.Name])
		}
	}
	// A protocol's declared options and atomic groups are discoverable.
	_, c2 := start(t, optionNamespaces(), Options{})
	resp, err = c2.Namespaces(x, &synodpb.NamespacesRequest{})
	if err != nil {
		t.Fatal(err)
	}
	got = nil
	for _, ns := range resp.GetNamespaces() {
		s := fmt.Sprintf("%s/%s/atomic=%v:", ns.Name, ns.Consistency, ns.AtomicGroups)
		for _, o := range ns.GetOptions() {
			s += fmt.Sprintf(" %s(%s,sticky=%v,doc=%v)", o.Name, o.Type, o.Sticky, o.Doc != "")
		}
		got = append(got, s)
	}
	want = []string{
		"ev/eventually-serializable/atomic=false: opid(string,sticky=false,doc=true) prev(list,sticky=false,doc=true) strict(bool,sticky=true,doc=true)",
		"plain/linearizable/atomic=false: abd.phase(string,sticky=false,doc=true) abd.tag(string,sticky=false,doc=true)",
		"log/linearizable/atomic=true:",
	}
	if !slices.Equal(got, want) {
		t.Errorf("namespaces\n%v\nwant\n%v", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
	info, err := c.Info(x, &synodpb.InfoRequest{})
	if err != nil {
		t.Fatal(err)
	}
	if info.Sections["memory"].GetFields()["backend"] != "memory" || info.Sections["grpc"].GetFields()["namespaces"] != "default,hits" {
		t.Errorf("info: %v", info.Sections)
	}
}

// optionNamespaces serves an ESDS namespace (request options), an abd one
// (none) and a paxos one (atomic groups). The backend applies groups itself
// (groupBackend), as a protocol that honours them would.
func optionNamespaces() *groupBackend {
	kv, err := service.Lookup("kv")
	if err != nil {
		panic(err)
	}
	return &groupBackend{MemBackend: gatewaytest.New(
		config.Namespace{Name: "ev", Protocol: "esds", Service: "kv"},
		config.Namespace{Name: "plain", Protocol: "abd", Service: "kv"},
		config.Namespace{Name: "log", Protocol: "paxos", Service: "kv"},
	), state: kv.NewState()}
}

// groupBackend is a MemBackend that also answers atomic groups: it applies
// a group's operations in order under one lock to a state of its own (one
// namespace's worth: the tests send groups to one namespace) and records the
// group.
type groupBackend struct {
	*gatewaytest.MemBackend

	mu     sync.Mutex
	state  service.State
	groups []gatewaytest.Record
}

func (g *groupBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	if len(req.Ops) == 0 {
		return g.MemBackend.Do(ctx, ns, req)
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	g.groups = append(g.groups, gatewaytest.Record{NS: ns, Req: req})
	return automaton.Response{ID: req.ID, Result: service.OK(), Results: automaton.ApplyGroup(g.state, req.Ops, req.Env)}, nil
}

func (g *groupBackend) received() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return len(g.MemBackend.Log()) + len(g.groups)
}

func optionMap(kv ...any) map[string]*synodpb.OptionValues {
	m := map[string]*synodpb.OptionValues{}
	for i := 0; i < len(kv); i += 2 {
		m[kv[i].(string)] = &synodpb.OptionValues{Values: kv[i+1].([]string)}
	}
	return m
}

func flatten(m map[string]*synodpb.OptionValues) map[string]string {
	out := map[string]string{}
	for k, v := range m {
		out[k] = strings.Join(v.GetValues(), ",")
	}
	return out
}

func TestOptionsRoundTrip(t *testing.T) {
	b := optionNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)
	for i, tc := range []struct {
		req *synodpb.Request
		// want: the options the protocol received and the response echoes
		want map[string]string
	}{
		// Through the map, a bool normalised to "1" and an assigned op id.
		{&synodpb.Request{Options: optionMap("prev", []string{"a", "b"}, "strict", []string{"on"})},
			map[string]string{"opid": "0000000000000009-1", "prev": "a,b", "strict": "1"}},
		// Through the aliases.
		{&synodpb.Request{OpId: "mine", Prev: []string{"0000000000000009-1"}, Strict: true},
			map[string]string{"opid": "mine", "prev": "0000000000000009-1", "strict": "1"}},
		// An alias beside a different map entry; strict off is absent.
		{&synodpb.Request{OpId: "other", Options: optionMap("strict", []string{"off"}, "prev", []string{})},
			map[string]string{"opid": "other", "prev": ""}},
	} {
		tc.req.Namespace, tc.req.ClientId, tc.req.Seq, tc.req.Op = "ev", 9, uint64(i+1), op("get", "k")
		resp, err := c.Do(x, tc.req)
		if err != nil {
			t.Fatalf("request %d: %v", i, err)
		}
		if got := flatten(resp.GetOptions()); !maps.Equal(got, tc.want) {
			t.Errorf("request %d: response options %v, want %v", i, got, tc.want)
		}
		if resp.GetOpId() != tc.want["opid"] {
			t.Errorf("request %d: op_id %q, want %q", i, resp.GetOpId(), tc.want["opid"])
		}
		log := b.Log()
		r := log[len(log)-1].Req
		got := map[string]string{}
		for k, v := range r.Opts.Ext {
			got[k] = strings.Join(v, ",")
		}
		if !maps.Equal(got, tc.want) || r.Opts.Bool(automaton.OptStrict) != (tc.want["strict"] == "1") {
			t.Errorf("request %d reached the protocol with options %v, want %v", i, got, tc.want)
		}
	}
	// An anonymous request's op id is assigned from the identity the server picked.
	resp, err := c.Do(x, &synodpb.Request{Namespace: "ev", Op: op("get", "k")})
	if err != nil {
		t.Fatal(err)
	}
	log := b.Log()
	r := log[len(log)-1].Req
	if want := fmt.Sprintf("%016x-1", r.ID.Client); resp.GetOpId() != want || r.Opts.String(automaton.OptOpID) != want {
		t.Errorf("anonymous request %v: op id %q, protocol saw %q, want %q", r.ID, resp.GetOpId(), r.Opts.String(automaton.OptOpID), want)
	}
}

func TestOptionsRefused(t *testing.T) {
	b := optionNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)
	for _, tc := range []struct {
		req *synodpb.Request
		msg string
	}{
		// An alias and the same map entry.
		{&synodpb.Request{Namespace: "ev", OpId: "a", Options: optionMap("opid", []string{"b"})}, "option opid given twice"},
		{&synodpb.Request{Namespace: "ev", Strict: true, Options: optionMap("strict", []string{"off"})}, "option strict given twice"},
		{&synodpb.Request{Namespace: "ev", Prev: []string{"x"}, Options: optionMap("prev", []string{})}, "option prev given twice"},
		// Unknown names.
		{&synodpb.Request{Namespace: "ev", Options: optionMap("color", []string{"red"})}, `option "color" refused: protocol esds has no request option "color"`},
		{&synodpb.Request{Namespace: "plain", Options: optionMap("opid", []string{"a"})}, `option "opid" refused: protocol abd has no request option "opid" (it has: abd.phase, abd.tag)`},
		{&synodpb.Request{Namespace: "plain", Strict: true}, `option "strict" refused: protocol abd has no request option "strict" (it has: abd.phase, abd.tag)`},
		// Invalid values, checked by the protocol's specs.
		{&synodpb.Request{Namespace: "ev", OpId: "00000000000000ff-3"}, "reserved"},
		{&synodpb.Request{Namespace: "ev", OpId: "a b"}, "printable"},
		{&synodpb.Request{Namespace: "ev", Prev: []string{""}}, "prev: op id is empty"},
		{&synodpb.Request{Namespace: "ev", Prev: make([]string, 1025)}, "option prev: 1025 values"},
		{&synodpb.Request{Namespace: "ev", Options: optionMap("strict", []string{"maybe"})}, `option strict: "maybe" is not on or off`},
		{&synodpb.Request{Namespace: "ev", Options: optionMap("opid", []string{"a", "b"})}, "option opid takes one value"},
	} {
		tc.req.Op = op("get", "k")
		_, err := c.Do(x, tc.req)
		st := status.Convert(err)
		if st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), tc.msg) {
			t.Errorf("%.100v: got %v %q, want InvalidArgument containing %q", tc.req, st.Code(), st.Message(), tc.msg)
		}
	}
	if n := b.received(); n != 0 {
		t.Errorf("%d refused requests reached the backend", n)
	}
}

func TestAtomicGroups(t *testing.T) {
	b := optionNamespaces()
	_, c := start(t, b, Options{})
	x := ctx(t)
	group := []*synodpb.Op{op("set", "k", "1"), op("incr", "k", "41"), op("get", "k"), op("append", "s", "x"), op("incr", "s", "1")}

	// Protocols without atomic groups refuse them before the backend.
	for _, ns := range []string{"ev", "plain"} {
		_, err := c.Do(x, &synodpb.Request{Namespace: ns, ClientId: 3, Seq: 1, Ops: group})
		st := status.Convert(err)
		want := fmt.Sprintf(automaton.ErrNoAtomic, map[string]string{"ev": "esds", "plain": "abd"}[ns])
		if st.Code() != codes.FailedPrecondition || st.Message() != want {
			t.Errorf("group on %s: got %v %q, want FailedPrecondition %q", ns, st.Code(), st.Message(), want)
		}
	}
	// Every operation of a group is validated.
	_, err := c.Do(x, &synodpb.Request{Namespace: "log", Ops: []*synodpb.Op{op("get", "k"), op("frob", "k")}})
	if st := status.Convert(err); st.Code() != codes.InvalidArgument || !strings.Contains(st.Message(), "operation 2 of the group") {
		t.Errorf("group with an invalid operation: %v", err)
	}
	if n := b.received(); n != 0 {
		t.Fatalf("%d refused requests reached the backend", n)
	}

	// A protocol with atomic groups gets the group as one request and the
	// client one result per operation.
	resp, err := c.Do(x, &synodpb.Request{Namespace: "log", ClientId: 3, Seq: 2, Ops: group})
	if err != nil {
		t.Fatal(err)
	}
	if r, _ := synodpb.ToResult(resp.GetResult()); !r.Equal(service.OK()) {
		t.Errorf("group result %v, want OK", r)
	}
	want := []service.Result{service.OK(), service.Int(42), service.Bytes([]byte("42")), service.Int(1), service.Errorf("ERR value is not an integer or out of range")}
	if len(resp.GetResults()) != len(want) {
		t.Fatalf("group answered %d results, want %d", len(resp.GetResults()), len(want))
	}
	for i, m := range resp.GetResults() {
		if r, err := synodpb.ToResult(m); err != nil || !r.Equal(want[i]) {
			t.Errorf("result %d: %v (%v), want %v", i, r, err, want[i])
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.groups) != 1 || b.groups[0].NS != "log" || len(b.groups[0].Req.Ops) != len(group) || b.groups[0].Req.ID != (automaton.RequestID{Client: 3, Seq: 2}) {
		t.Errorf("backend received groups %+v", b.groups)
	}
}
