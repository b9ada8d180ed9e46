package grpcserver

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// A client that is not Go's against the server (both transports, by
// TestMain): Python's grpcio, whose HTTP/2 and gRPC framing are gRPC's C
// core (testdata/grpcio_client.py). Over plaintext and over TLS: unary
// calls, a Pipeline stream (bidirectional), the password in metadata
// (absent, wrong: UNAUTHENTICATED), status codes and messages (unknown
// method and service: UNIMPLEMENTED; a refused request: the same code and
// message as grpc-go's client gets), a deadline (DEADLINE_EXCEEDED, or
// grpc-go's server resetting the stream when its timer fires first; the
// handler's context carries it and ends),
// a cancellation (the handler's context ends), a gzip-compressed request
// (refused UNIMPLEMENTED by both servers: the direct one accepts no
// compression, grpc-go's has no gzip codec registered here), the
// connection usable after each, and a 1 MiB value (flow control both
// ways).
//
// SYNOD_GRPC_PYTHON names a Python with grpcio (scripts/test installs
// grpcio into its compatibility venv and sets it); without it the test
// skips, unless SYNOD_REQUIRE_GRPC_PYTHON=1 (CI), when it fails.
func TestGRPCIOClient(t *testing.T) {
	py := os.Getenv("SYNOD_GRPC_PYTHON")
	if py == "" || exec.Command(py, "-c", "import grpc").Run() != nil {
		if os.Getenv("SYNOD_REQUIRE_GRPC_PYTHON") == "1" {
			t.Fatalf("SYNOD_GRPC_PYTHON=%q is not a Python with grpcio, and SYNOD_REQUIRE_GRPC_PYTHON=1", py)
		}
		t.Skip("SYNOD_GRPC_PYTHON (a Python with grpcio) not set: scripts/test sets it")
	}
	t.Run("plaintext", func(t *testing.T) { testGRPCIO(t, py, false, false) })
	t.Run("tls", func(t *testing.T) { testGRPCIO(t, py, true, false) })
	// The same against a Backend that answers through a callback, as the
	// node does: the direct server's Do and lone Pipeline calls are then
	// answered by the goroutine that completes them (doreply.go,
	// submitLone); over TLS their replies take the goroutine fallback.
	t.Run("plaintext-reply", func(t *testing.T) { testGRPCIO(t, py, false, true) })
	t.Run("tls-reply", func(t *testing.T) { testGRPCIO(t, py, true, true) })
}

// blockReply is a ReplyBackend whose "block-*" requests are not taken by
// SubmitReply (they run as Do on a goroutine of their own, as a shard
// group's request does at the node): the double answers SubmitReply on
// the caller's goroutine, which a request waiting for its context would
// hold.
type blockReply struct{ *gatewaytest.ReplyBackend }

func (b blockReply) SubmitReply(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	if strings.HasPrefix(req.Op.Key, "block-") {
		return false
	}
	return b.ReplyBackend.SubmitReply(ctx, ns, req, done)
}

// pyStep is a step of grpcio_client.py's plan; pyResult its result.
type pyStep struct {
	Name       string     `json:"name"`
	Method     string     `json:"method"`
	Kind       string     `json:"kind"`
	Req        []byte     `json:"req,omitempty"`
	Reqs       [][]byte   `json:"reqs,omitempty"`
	Metadata   [][]string `json:"metadata,omitempty"`
	Timeout    float64    `json:"timeout,omitempty"`
	Compress   bool       `json:"compress,omitempty"`
	CancelWhen string     `json:"cancel_when,omitempty"`
	Fresh      bool       `json:"fresh,omitempty"`
}

type pyResult struct {
	Name     string   `json:"name"`
	Code     string   `json:"code"`
	Details  string   `json:"details"`
	Resp     []byte   `json:"resp"`
	Resps    [][]byte `json:"resps"`
	Trailing []string `json:"trailing"`
}

func testGRPCIO(t *testing.T, py string, withTLS, reply bool) {
	dir := t.TempDir()
	b := kvBackend()
	var backend gateway.Backend = b
	if reply {
		backend = blockReply{gatewaytest.NewReply(b)}
	}
	// Keys "block-*" wait for the call's context to end; the handler says
	// it started (a file, for the client's cancellation) and how it ended.
	type ended struct {
		err         error
		hasDeadline bool
	}
	var mu sync.Mutex
	ends := map[string]ended{}
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		k := req.Op.Key
		if !strings.HasPrefix(k, "block-") {
			return nil
		}
		os.WriteFile(filepath.Join(dir, k), nil, 0o644)
		_, dl := ctx.Deadline()
		select {
		case <-ctx.Done():
		case <-time.After(30 * time.Second):
		}
		mu.Lock()
		ends[k] = ended{ctx.Err(), dl}
		mu.Unlock()
		return ctx.Err()
	})
	opts := Options{Password: "pw"}
	var ca string
	if withTLS {
		if _, err := certs.Generate(dir, certs.Spec{Cluster: "c", Nodes: []certs.Node{{ID: "n1"}}}); err != nil {
			t.Fatal(err)
		}
		cfg, err := certs.LoadNodeTLS(dir, "n1")
		if err != nil {
			t.Fatal(err)
		}
		opts.TLS = cfg
		ca = filepath.Join(dir, certs.CAFile)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(backend, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })

	pw := [][]string{{synodpb.PasswordKey, "pw"}}
	do := func(name string, o *synodpb.Op) pyStep {
		return pyStep{Name: name, Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, &synodpb.Request{Op: o}), Metadata: pw}
	}
	pipeMsg := func(id uint64, o *synodpb.Op) []byte {
		return marshal(t, &synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: id, Request: &synodpb.Request{Op: o}}}})
	}
	big := bytes.Repeat([]byte("x"), 1<<20)
	invalid := &synodpb.Request{} // no operation: refused
	steps := []pyStep{
		do("set", op("set", "k", "v")),
		do("get", op("get", "k")),
		{Name: "pipeline", Method: synodpb.Synod_Pipeline_FullMethodName, Kind: "stream", Metadata: pw,
			Reqs: [][]byte{pipeMsg(1, op("set", "a", "1")), pipeMsg(2, op("get", "a")), pipeMsg(3, op("get", "k"))}},
		{Name: "no password", Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, &synodpb.Request{Op: op("get", "k")})},
		{Name: "wrong password", Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, &synodpb.Request{Op: op("get", "k")}), Metadata: [][]string{{synodpb.PasswordKey, "nope"}}},
		{Name: "unknown method", Method: "/synod.v1.Synod/Nope", Kind: "unary", Req: nil, Metadata: pw},
		{Name: "unknown service", Method: "/nope.v1.Nope/Do", Kind: "unary", Req: nil, Metadata: pw},
		{Name: "invalid", Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, invalid), Metadata: pw},
		{Name: "deadline", Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, &synodpb.Request{Op: op("get", "block-deadline")}), Metadata: pw, Timeout: 1},
		{Name: "cancel", Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, &synodpb.Request{Op: op("get", "block-cancel")}), Metadata: pw, CancelWhen: filepath.Join(dir, "block-cancel")},
		{Name: "stream deadline", Method: synodpb.Synod_Pipeline_FullMethodName, Kind: "stream", Metadata: pw, Timeout: 1,
			Reqs: [][]byte{pipeMsg(1, op("get", "block-stream"))}},
		{Name: "compressed", Method: synodpb.Synod_Do_FullMethodName, Kind: "unary", Req: marshal(t, &synodpb.Request{Op: &synodpb.Op{Kind: "set", Key: "z", Args: [][]byte{bytes.Repeat([]byte("z"), 64<<10)}}}), Metadata: pw, Compress: true, Fresh: true},
		do("after compressed", op("get", "k")),
		do("set big", &synodpb.Op{Kind: "set", Key: "big", Args: [][]byte{big}}),
		do("get big", op("get", "big")),
	}
	plan := map[string]any{"target": l.Addr().String(), "steps": steps}
	if withTLS {
		plan["ca"], plan["server_name"] = ca, "localhost"
	}
	pf := filepath.Join(dir, "plan.json")
	pj, _ := json.Marshal(plan)
	if err := os.WriteFile(pf, pj, 0o644); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(py, filepath.Join("testdata", "grpcio_client.py"), pf)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("grpcio_client.py: %v\n%s", err, stderr.String())
	}
	var rs []pyResult
	if err := json.Unmarshal(out, &rs); err != nil || len(rs) != len(steps) {
		t.Fatalf("grpcio_client.py's results (%v): %s\n%s", err, out, stderr.String())
	}
	res := map[string]pyResult{}
	for _, r := range rs {
		t.Logf("%s: %s %q trailing %v", r.Name, r.Code, r.Details, r.Trailing)
		res[r.Name] = r
	}
	want := func(name, code string) pyResult {
		t.Helper()
		r := res[name]
		if r.Code != code {
			t.Errorf("%s: %s %q, want %s", name, r.Code, r.Details, code)
		}
		return r
	}
	value := func(r pyResult) string {
		var resp synodpb.Response
		if err := proto.Unmarshal(r.Resp, &resp); err != nil {
			t.Errorf("%s: response %v", r.Name, err)
		}
		return string(resp.GetResult().GetBytes())
	}
	want("set", "OK")
	if got := value(want("get", "OK")); got != "v" {
		t.Errorf("get: %q, want v", got)
	}
	// The Pipeline stream: every call answered, in order of ids' values.
	got := map[uint64]*synodpb.CallReply{}
	for _, m := range want("pipeline", "OK").Resps {
		var pr synodpb.PipelineResponse
		if err := proto.Unmarshal(m, &pr); err != nil {
			t.Fatal(err)
		}
		for _, r := range pr.GetReplies() {
			got[r.GetId()] = r
		}
	}
	if len(got) != 3 || got[1].GetCode() != 0 || string(got[2].GetResponse().GetResult().GetBytes()) != "1" || string(got[3].GetResponse().GetResult().GetBytes()) != "v" {
		t.Errorf("pipeline: replies %v", got)
	}
	want("no password", "UNAUTHENTICATED")
	want("wrong password", "UNAUTHENTICATED")
	want("unknown method", "UNIMPLEMENTED")
	want("unknown service", "UNIMPLEMENTED")
	// A refusal: the code and message grpc-go's client gets.
	_, c := startWith(t, b, Options{Password: "pw"})
	_, gerr := c.Do(metadata.AppendToOutgoingContext(ctx(t), synodpb.PasswordKey, "pw"), invalid)
	gst, _ := status.FromError(gerr)
	r := res["invalid"]
	if gst == nil || r.Code != strings.ToUpper(snake(gst.Code().String())) || r.Details != gst.Message() {
		t.Errorf("invalid: grpcio got %s %q, grpc-go %v", r.Code, r.Details, gerr)
	}
	// A deadline: DEADLINE_EXCEEDED by the client's timer or the server's
	// answer, or, when the server's timer fires first (the client's is
	// late under load), grpc-go's server resets the stream (CANCEL).
	if r := res["deadline"]; r.Code != "DEADLINE_EXCEEDED" && (DefaultTransport != TransportGRPCGo || r.Code != "CANCELLED" || !strings.Contains(r.Details, "RST_STREAM")) {
		t.Errorf("deadline: %s %q, want DEADLINE_EXCEEDED", r.Code, r.Details)
	}
	want("cancel", "CANCELLED")
	// The stream's deadline: the client's own, or (the server's timer
	// first) the stream ended OK with the call answered DEADLINE_EXCEEDED.
	if r := res["stream deadline"]; r.Code != "DEADLINE_EXCEEDED" {
		var pr synodpb.PipelineResponse
		if len(r.Resps) == 1 {
			proto.Unmarshal(r.Resps[0], &pr)
		}
		if r.Code != "OK" || len(pr.GetReplies()) != 1 || codes.Code(pr.GetReplies()[0].GetCode()) != codes.DeadlineExceeded {
			t.Errorf("stream deadline: %s %q, replies %v; want DEADLINE_EXCEEDED", r.Code, r.Details, pr.GetReplies())
		}
	}
	// The handlers' contexts ended (and carried the deadline). The
	// stream's call may not have started before its deadline (a stream's
	// calls do not start once it ended): checked when it did.
	deadline := time.Now().Add(10 * time.Second)
	for {
		mu.Lock()
		d, c, st := ends["block-deadline"], ends["block-cancel"], ends["block-stream"]
		mu.Unlock()
		if d.err != nil && c.err != nil && (st.err != nil || time.Now().After(deadline)) {
			if !d.hasDeadline || (st.err != nil && !st.hasDeadline) {
				t.Errorf("the handler's context had no deadline: unary %v, stream %v", d.hasDeadline, st.hasDeadline)
			}
			if !errors.Is(c.err, context.Canceled) {
				t.Errorf("cancelled call's context ended with %v", c.err)
			}
			if st.err == nil {
				t.Logf("the stream's call did not start before its deadline")
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("handlers' contexts not ended 10 s after the calls: deadline %v, cancel %v, stream %v", d.err, c.err, st.err)
		}
		time.Sleep(10 * time.Millisecond)
	}
	// A compressed request (64 KiB: grpcio sends small ones uncompressed),
	// on a channel's first call: refused, and the connection serves on.
	// The direct server announces no grpc-accept-encoding; grpc-go's has
	// no gzip codec registered (no package here imports it).
	if r := want("compressed", "UNIMPLEMENTED"); !strings.Contains(strings.ToLower(r.Details), "compress") {
		t.Errorf("compressed: %q, want a message naming compression", r.Details)
	}
	if got := value(want("after compressed", "OK")); got != "v" {
		t.Errorf("after compressed: %q, want v", got)
	}
	want("set big", "OK")
	if got := value(want("get big", "OK")); got != string(big) {
		t.Errorf("get big: %d bytes, want %d", len(got), len(big))
	}
}

func marshal(t *testing.T, m proto.Message) []byte {
	t.Helper()
	b, err := proto.Marshal(m)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// snake turns a codes.Code's String ("InvalidArgument") into its
// grpc.StatusCode name's form ("Invalid_Argument"; upper-cased by the
// caller).
func snake(s string) string {
	var b strings.Builder
	for i, r := range s {
		if i > 0 && r >= 'A' && r <= 'Z' {
			b.WriteByte('_')
		}
		b.WriteRune(r)
	}
	return b.String()
}
