package grpcserver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials/insecure"
	"google.golang.org/grpc/status"
	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestMain runs the package's tests on both transports: every test that
// leaves Options.Transport empty (the whole suite: TLS, users and
// certificates, reflection, the Pipeline and Phases streams, WatchLeader,
// limits) runs against grpc-go's server and against the direct one, with
// grpc-go's client.
func TestMain(m *testing.M) {
	code := 0
	for _, tr := range []string{TransportGRPCGo, TransportDirect} {
		DefaultTransport = tr
		if c := m.Run(); c != 0 {
			fmt.Fprintf(os.Stderr, "FAIL with the %s server transport\n", tr)
			code = c
		}
	}
	os.Exit(code)
}

func kvBackend() *gatewaytest.MemBackend {
	return gatewaytest.New(config.Namespace{Name: "default", Protocol: "memory", Service: "kv"})
}

// A lone unary call runs on the goroutine that read its request: the
// backend sees the connection's read loop below it on its stack. grpc-go's
// server runs it on a goroutine of its own (0 of 100: the check sees the
// difference). The client has static windows, so nothing but the requests
// arrives (grpc-go's default client sends BDP pings behind replies).
func TestDirectLoneCallRunsOnReader(t *testing.T) {
	for _, tr := range []string{TransportGRPCGo, TransportDirect} {
		b := kvBackend()
		var onReader, calls atomic.Int64
		b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
			calls.Add(1)
			if strings.Contains(string(debug.Stack()), "grpcserver.(*h2sconn).read(") {
				onReader.Add(1)
			}
			return nil
		})
		_, c := startWith(t, b, Options{Transport: tr}, grpc.WithStaticStreamWindowSize(synodpb.StreamWindow), grpc.WithStaticConnWindowSize(synodpb.ConnWindow))
		x := ctx(t)
		for i := range 100 {
			o := op("set", "k", "v")
			if i%2 == 1 {
				o = op("get", "k")
			}
			if _, err := c.Do(x, &synodpb.Request{Op: o}); err != nil {
				t.Fatal(err)
			}
		}
		t.Logf("%s: %d of %d calls ran on the connection's reader", tr, onReader.Load(), calls.Load())
		want := int64(0)
		if tr == TransportDirect {
			want = calls.Load()
		}
		if onReader.Load() != want || calls.Load() != 100 {
			t.Fatalf("%s: %d of %d calls ran on the connection's reader, want %d", tr, onReader.Load(), calls.Load(), want)
		}
	}
}

// startWith serves b and dials it with grpc-go's client and dopts.
func startWith(t *testing.T, b gateway.Backend, opts Options, dopts ...grpc.DialOption) (*Server, synodpb.SynodClient) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(b, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	dopts = append([]grpc.DialOption{grpc.WithTransportCredentials(insecure.NewCredentials()),
		grpc.WithDefaultCallOptions(grpc.MaxCallRecvMsgSize(64<<20), grpc.MaxCallSendMsgSize(64<<20))}, dopts...)
	cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(), dopts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		cc.Close()
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve returned %v after Close", err)
		}
	})
	return s, synodpb.NewSynodClient(cc)
}

// slowKeys blocks requests on keys starting with "slow" until their
// context ends; started receives the time each one's context had left
// when it started, ended its context's error.
func slowKeys(b *gatewaytest.MemBackend, started chan<- time.Duration, ended chan<- error) {
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if !strings.HasPrefix(req.Op.Key, "slow") {
			return nil
		}
		dl, _ := ctx.Deadline()
		started <- time.Until(dl)
		<-ctx.Done()
		ended <- ctx.Err()
		return ctx.Err()
	})
}

// Deadlines (grpc-timeout) and cancellation (RST_STREAM) reach the
// handler's context on the direct transport; the connection stays usable.
func TestDirectDeadlineAndCancel(t *testing.T) {
	b := kvBackend()
	started, ended := make(chan time.Duration, 1), make(chan error, 1)
	slowKeys(b, started, ended)
	_, c := startWith(t, b, Options{Transport: TransportDirect})

	dctx, cancel := context.WithTimeout(ctx(t), 300*time.Millisecond)
	defer cancel()
	_, err := c.Do(dctx, &synodpb.Request{Op: op("get", "slow1")})
	// The handler's context has the caller's deadline (grpc-timeout), not
	// the server's request timeout (10 s); it ends by that deadline or by
	// the client's RST_STREAM at the same moment, whichever comes first.
	if left := <-started; left > 300*time.Millisecond {
		t.Fatalf("the handler's context had %v left, want at most the caller's 300ms", left)
	}
	if status.Code(err) != codes.DeadlineExceeded {
		t.Fatalf("past its deadline: %v, want DEADLINE_EXCEEDED", err)
	}
	if e := <-ended; e == nil {
		t.Fatal("the handler's context did not end")
	}

	cctx, cancel2 := context.WithCancel(ctx(t))
	errc := make(chan error, 1)
	go func() {
		_, err := c.Do(cctx, &synodpb.Request{Op: op("get", "slow2")})
		errc <- err
	}()
	<-started
	cancel2()
	if err := <-errc; status.Code(err) != codes.Canceled {
		t.Fatalf("cancelled: %v, want CANCELED", err)
	}
	if e := <-ended; e != context.Canceled {
		t.Fatalf("the handler's context ended with %v, want cancelled (RST_STREAM)", e)
	}
	if _, err := c.Do(ctx(t), &synodpb.Request{Op: op("set", "k", "v")}); err != nil {
		t.Fatalf("the connection after a deadline and a cancellation: %v", err)
	}
}

// Messages larger than the stream window (4 MiB), several at once, both
// ways: flow control on the direct transport.
func TestDirectLargeMessages(t *testing.T) {
	_, c := startWith(t, kvBackend(), Options{Transport: TransportDirect})
	val := bytes.Repeat([]byte("0123456789abcdef"), 7<<16) // 7 MiB
	var wg sync.WaitGroup
	errs := make(chan error, 3)
	for i := range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			k := fmt.Sprintf("big%d", i)
			if _, err := c.Do(ctx(t), &synodpb.Request{Op: &synodpb.Op{Kind: "set", Key: k, Args: [][]byte{val}}}); err != nil {
				errs <- err
				return
			}
			for range 2 {
				r, err := c.Do(ctx(t), &synodpb.Request{Op: op("get", k)})
				if err != nil {
					errs <- err
					return
				}
				if !bytes.Equal(r.GetResult().GetBytes(), val) {
					errs <- fmt.Errorf("get %s: %d bytes back, want %d", k, len(r.GetResult().GetBytes()), len(val))
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// rawConn is a bare HTTP/2 client for the direct transport's refusals.
type rawConn struct {
	t    *testing.T
	nc   net.Conn
	fr   *http2.Framer
	hbuf bytes.Buffer
	enc  *hpack.Encoder
}

func dialRaw(t *testing.T, addr string) *rawConn {
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	r := &rawConn{t: t, nc: nc, fr: http2.NewFramer(nc, nc)}
	r.fr.ReadMetaHeaders = hpack.NewDecoder(4096, nil)
	r.enc = hpack.NewEncoder(&r.hbuf)
	io.WriteString(nc, http2.ClientPreface)
	r.fr.WriteSettings()
	return r
}

func (r *rawConn) headers(id uint32, end bool, path, ctype string) {
	r.hbuf.Reset()
	for _, f := range [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", path}, {":authority", "x"}, {"content-type", ctype}, {"te", "trailers"}} {
		r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
	}
	if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndHeaders: true, EndStream: end}); err != nil {
		r.t.Fatal(err)
	}
}

// next reads frames until one for which fn returns true (or the
// connection ends: a test failure).
func (r *rawConn) next(what string, fn func(f http2.Frame) bool) http2.Frame {
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			r.t.Fatalf("waiting for %s: %v", what, err)
		}
		if fn(f) {
			return f
		}
	}
}

// field is a header's value in f.
func field(f *http2.MetaHeadersFrame, name string) string {
	for _, hf := range f.Fields {
		if hf.Name == name {
			return hf.Value
		}
	}
	return ""
}

// ends reads until stream id's HEADERS with END_STREAM and returns them
// with the :status of its first HEADERS.
func (r *rawConn) ends(id uint32) (*http2.MetaHeadersFrame, string) {
	st := ""
	h := r.next(fmt.Sprintf("stream %d's end", id), func(f http2.Frame) bool {
		h, ok := f.(*http2.MetaHeadersFrame)
		if ok && h.StreamID == id && st == "" {
			st = field(h, ":status")
		}
		return ok && h.StreamID == id && h.StreamEnded()
	}).(*http2.MetaHeadersFrame)
	return h, st
}

func grpcMsg(m proto.Message) []byte {
	b, _ := synodpb.FrameMessage(m)
	return b
}

// The direct transport's answers to what it does not serve, and its
// keepalive acknowledgements, frame by frame.
func TestDirectRefusalsAndPings(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(kvBackend(), Options{Transport: TransportDirect})
	go s.Serve(l)
	defer s.Close()
	r := dialRaw(t, l.Addr().String())

	// PING (a client's keepalive): acknowledged with its data.
	r.fr.WritePing(false, [8]byte{1, 2, 3, 4, 5, 6, 7, 8})
	r.next("PING ack", func(f http2.Frame) bool {
		p, ok := f.(*http2.PingFrame)
		return ok && p.IsAck() && p.Data == [8]byte{1, 2, 3, 4, 5, 6, 7, 8}
	})

	req := grpcMsg(&synodpb.Request{Op: op("set", "k", "v")})
	cases := []struct {
		name, path, ctype string
		body              []byte
		httpStatus, code  string
	}{
		{"unknown method", "/synod.v1.Synod/Nope", "application/grpc", req, "200", "12"},
		{"unknown service", "/x.Y/Z", "application/grpc", req, "200", "12"},
		{"not gRPC", "/synod.v1.Synod/Do", "application/json", []byte("{}"), "415", "13"},
		{"compressed", "/synod.v1.Synod/Do", "application/grpc", append([]byte{1}, req[1:]...), "200", "12"},
		{"too large", "/synod.v1.Synod/Do", "application/grpc", []byte{0, 0xff, 0xff, 0xff, 0xff}, "200", "8"},
		{"no message", "/synod.v1.Synod/Do", "application/grpc", nil, "200", "13"},
		{"served", "/synod.v1.Synod/Do", "application/grpc", req, "200", "0"},
	}
	for i, c := range cases {
		id := uint32(2*i + 1)
		r.headers(id, false, c.path, c.ctype)
		r.fr.WriteData(id, true, c.body)
		h, st := r.ends(id)
		if code := field(h, "grpc-status"); st != c.httpStatus || code != c.code {
			t.Errorf("%s: :status %q grpc-status %q (%s), want %s and %s", c.name, st, code, field(h, "grpc-message"), c.httpStatus, c.code)
		}
	}

	// A stream of even id is a protocol error: GOAWAY.
	r.headers(100, true, "/synod.v1.Synod/Do", "application/grpc")
	g := r.next("GOAWAY", func(f http2.Frame) bool { _, ok := f.(*http2.GoAwayFrame); return ok }).(*http2.GoAwayFrame)
	if g.ErrCode != http2.ErrCodeProtocol {
		t.Fatalf("GOAWAY %v, want PROTOCOL_ERROR", g.ErrCode)
	}
}

// Close sends GOAWAY, fails the calls in flight with UNAVAILABLE (outcome
// unknown) and closes the connection.
func TestDirectGoAwayOnClose(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	b := kvBackend()
	started, ended := make(chan time.Duration, 1), make(chan error, 1)
	slowKeys(b, started, ended)
	s := New(b, Options{Transport: TransportDirect})
	served := make(chan error, 1)
	go func() { served <- s.Serve(l) }()
	r := dialRaw(t, l.Addr().String())
	r.headers(1, false, "/synod.v1.Synod/Do", "application/grpc")
	r.fr.WriteData(1, true, grpcMsg(&synodpb.Request{Op: op("get", "slow")}))
	<-started
	closed := make(chan struct{})
	go func() { s.Close(); close(closed) }()
	// The call's end (cancelled by Close) and GOAWAY come in either order,
	// then the connection's end.
	var g *http2.GoAwayFrame
	var h *http2.MetaHeadersFrame
	r.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	for {
		f, err := r.fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) {
				t.Fatalf("after Close: %v, want the connection closed (EOF)", err)
			}
			break
		}
		switch f := f.(type) {
		case *http2.PingFrame:
			if !f.IsAck() {
				r.fr.WritePing(true, f.Data) // lets Close go on at once
			}
		case *http2.GoAwayFrame:
			g = f
		case *http2.MetaHeadersFrame:
			if f.StreamID == 1 && f.StreamEnded() {
				h = f
			}
		}
	}
	if g == nil || g.ErrCode != http2.ErrCodeNo || g.LastStreamID != 1 {
		t.Fatalf("GOAWAY %v, want NO_ERROR and last stream 1", g)
	}
	if h == nil || field(h, "grpc-status") != "14" {
		t.Fatalf("the call in flight at Close ended with %v, want grpc-status 14 (UNAVAILABLE)", h)
	}
	<-closed
	if err := <-served; err != nil {
		t.Fatalf("Serve returned %v after Close", err)
	}
}

// A lone Pipeline message on the direct transport is read by the stream's
// own RecvMsg (h2sconn's Read turn): the receiver that runs it, not the
// connection's reader, which would hand it over. The first message or two
// may come through the reader (it leaves the turn once it finds the
// stream's receiver waiting); the test asks for 90 of 100 (with the turn
// off, Options.turn unset, 0 of 100). Unary calls sent on the same
// connection between the stream's messages are read by the stream's
// receiver and answered (run beside it), and a second stream opened
// meanwhile is served: the turn passes to a reader while it is open.
func TestDirectLonePipelineMessageReadByReceiver(t *testing.T) {
	_, c := startWith(t, kvBackend(), Options{Transport: TransportDirect}, grpc.WithStaticStreamWindowSize(synodpb.StreamWindow), grpc.WithStaticConnWindowSize(synodpb.ConnWindow))
	x := ctx(t)
	s, err := c.Pipeline(x)
	if err != nil {
		t.Fatal(err)
	}
	call := func(s synodpb.Synod_PipelineClient, id uint64, o *synodpb.Op) *synodpb.CallReply {
		t.Helper()
		if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: id, Request: &synodpb.Request{Op: o}}}}); err != nil {
			t.Fatal(err)
		}
		r, err := s.Recv()
		if err != nil {
			t.Fatal(err)
		}
		if len(r.GetReplies()) != 1 || r.GetReplies()[0].GetId() != id || r.GetReplies()[0].GetCode() != 0 {
			t.Fatalf("call %d: reply %v", id, r)
		}
		return r.GetReplies()[0]
	}
	own0, yields0 := h2OwnReads.Load(), h2Yields.Load()
	for i := range 100 {
		call(s, uint64(i+1), op("set", "k", fmt.Sprint(i)))
	}
	own, yields := h2OwnReads.Load()-own0, h2Yields.Load()-yields0
	t.Logf("%d of 100 lone Pipeline messages read by their receiver; %d readers left the turn", own, yields)
	if own < 90 {
		t.Fatalf("%d of 100 lone Pipeline messages read by their receiver, want at least 90", own)
	}
	// Unary calls between the stream's messages, on the same connection.
	for i := range 20 {
		r, err := c.Do(x, &synodpb.Request{Op: op("get", "k")})
		if err != nil {
			t.Fatal(err)
		}
		if got := string(r.GetResult().GetBytes()); got != "99" {
			t.Fatalf("Do %d: got %q, want 99", i, got)
		}
		call(s, uint64(200+i), op("get", "k"))
	}
	// A second stream beside the first, then the first ends.
	s2, err := c.Pipeline(x)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		call(s, uint64(300+i), op("set", "k", "a"))
		call(s2, uint64(400+i), op("get", "k"))
	}
	if err := s.CloseSend(); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Recv(); err != io.EOF {
		t.Fatalf("first stream's end: %v, want EOF", err)
	}
	if r := call(s2, 500, op("get", "k")); string(r.GetResponse().GetResult().GetBytes()) != "a" {
		t.Fatalf("after the first stream's end: %v", r)
	}
	if _, err := c.Do(x, &synodpb.Request{Op: op("get", "k")}); err != nil {
		t.Fatal(err)
	}
}

// The read turn is not given up to a receiver that already took its
// message (session 48's lost turn): the reader hands a lone Pipeline
// stream's waiting receiver a message; before the reader decides whether
// to leave the turn (yield), the receiver takes the message, becomes the
// executor, and the worker that receives next waits in RecvMsg, finding
// the turn held. testBeforeYield holds the reader until then (what the
// race detector's timing did 1 run in 6-10). Leaving the turn then leaves
// nobody reading: the second call's message is never read and the test
// fails at its bound, printing every goroutine (the old yield, which
// looked only at the receiver's waiting, fails every run at call 2).
func TestDirectReadTurnNotLostToReturnedReceiver(t *testing.T) {
	var held atomic.Int64
	var srv atomic.Pointer[h2server]
	hook := func(s *h2sstream) {
		c := s.c
		if c.srv != srv.Load() {
			return // another test's server, still ending
		}
		for range 2000 { // the next receiver waits within microseconds; 2 s bound
			c.mu.Lock()
			again := s.waiting && len(s.msgs) == 0
			c.mu.Unlock()
			if again {
				held.Add(1)
				return
			}
			time.Sleep(time.Millisecond)
		}
	}
	testBeforeYield.Store(&hook)
	t.Cleanup(func() { testBeforeYield.Store(nil) })
	server, c := startWith(t, kvBackend(), Options{Transport: TransportDirect}, grpc.WithStaticStreamWindowSize(synodpb.StreamWindow), grpc.WithStaticConnWindowSize(synodpb.ConnWindow))
	srv.Store(server.h)
	sctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	s, err := c.Pipeline(sctx)
	if err != nil {
		t.Fatal(err)
	}
	for i := range 20 {
		done := make(chan error, 1)
		go func() {
			if err := s.Send(&synodpb.PipelineRequest{Calls: []*synodpb.Call{{Id: uint64(i + 1), Request: &synodpb.Request{Op: op("set", "k", fmt.Sprint(i))}}}}); err != nil {
				done <- err
				return
			}
			r, err := s.Recv()
			if err == nil && (len(r.GetReplies()) != 1 || r.GetReplies()[0].GetId() != uint64(i+1)) {
				err = fmt.Errorf("reply %v", r)
			}
			done <- err
		}()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("call %d: %v", i+1, err)
			}
		case <-time.After(20 * time.Second): // a bound on a hang, not a timing
			buf := make([]byte, 1<<20)
			buf = buf[:runtime.Stack(buf, true)]
			t.Fatalf("call %d: no reply in 20 s (the connection's read turn lost; %d of %d messages had the next receiver waiting before yield); goroutines:\n%s", i+1, held.Load(), i+1, buf)
		}
	}
	if held.Load() == 0 {
		t.Fatalf("the reader never found the next receiver waiting before yield: the test did not set up the race")
	}
	t.Logf("%d of 20 messages had the next receiver waiting before the reader's yield", held.Load())
}
