package grpcserver

import (
	"context"
	"net"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/peer"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
)

// A header block with an invalid field (the checks x/net's Framer made
// with ReadMetaHeaders, now the reader's own: h2headers.go) resets its
// stream with PROTOCOL_ERROR, and the connection goes on: the next call
// on it is served. Before, the Framer's StreamError failed the whole
// connection (the test then fails waiting for the RST_STREAM).
func TestDirectInvalidHeaderResetsStream(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := New(kvBackend(), Options{Transport: TransportDirect})
	go s.Serve(l)
	defer s.Close()
	r := dialRaw(t, l.Addr().String())
	req := grpcMsg(&synodpb.Request{Op: op("set", "k", "v")})
	good := [][2]string{{":method", "POST"}, {":scheme", "http"}, {":path", "/synod.v1.Synod/Do"}, {":authority", "x"}, {"content-type", "application/grpc"}}
	cases := []struct {
		name   string
		fields [][2]string
	}{
		{"upper-case name", append(good[:5:5], [2]string{"X-Bad", "1"})},
		{"invalid value", append(good[:5:5], [2]string{"x-bad", "a\x01b"})},
		{"pseudo after regular", append([][2]string{{"x-first", "1"}}, good...)},
		{"unknown pseudo", append(good[:5:5], [2]string{":nope", "1"})},
		{"duplicate pseudo", append(good[:5:5], [2]string{":path", "/x"})},
		{"response pseudo", append(good[:5:5], [2]string{":status", "200"})},
	}
	id := uint32(1)
	for _, c := range cases {
		r.hbuf.Reset()
		for _, f := range c.fields {
			r.enc.WriteField(hpack.HeaderField{Name: f[0], Value: f[1]})
		}
		if err := r.fr.WriteHeaders(http2.HeadersFrameParam{StreamID: id, BlockFragment: r.hbuf.Bytes(), EndHeaders: true}); err != nil {
			t.Fatal(err)
		}
		r.fr.WriteData(id, true, req)
		rst := r.next(c.name+": RST_STREAM", func(f http2.Frame) bool {
			if g, ok := f.(*http2.GoAwayFrame); ok {
				t.Fatalf("%s: GOAWAY %v, want the stream reset", c.name, g.ErrCode)
			}
			rs, ok := f.(*http2.RSTStreamFrame)
			return ok && rs.StreamID == id
		}).(*http2.RSTStreamFrame)
		if rst.ErrCode != http2.ErrCodeProtocol {
			t.Fatalf("%s: RST_STREAM %v, want PROTOCOL_ERROR", c.name, rst.ErrCode)
		}
		id += 2
		r.headers(id, false, "/synod.v1.Synod/Do", "application/grpc")
		r.fr.WriteData(id, true, req)
		if h, st := r.ends(id); st != "200" || field(h, "grpc-status") != "0" {
			t.Fatalf("after %s: the next call got :status %q grpc-status %q, want it served", c.name, st, field(h, "grpc-status"))
		}
		id += 2
	}
}

// A unary call's context (the stream itself, h2ctx.go) gives a handler
// behind the interceptors what a context of its own gave: the incoming
// metadata (custom keys, :authority, content-type, user-agent), the peer,
// the caller's deadline, the call's user, and a context derived from it
// (Server.run's) that ends with it.
func TestDirectUnaryContext(t *testing.T) {
	b := kvBackend()
	type seen struct {
		md       metadata.MD
		peer     bool
		left     time.Duration
		user     bool
		derived  error
		cause    error
		deadline bool
	}
	got := make(chan seen, 1)
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if req.Op.Key != "look" {
			return nil
		}
		var s seen
		s.md, _ = metadata.FromIncomingContext(ctx)
		_, s.peer = peer.FromContext(ctx)
		var dl time.Time
		dl, s.deadline = ctx.Deadline()
		s.left = time.Until(dl)
		s.user = userOf(ctx) != nil
		if req.Op.Kind == "get" {
			<-ctx.Done() // Server.run's context, derived from the call's
			s.derived = ctx.Err()
			s.cause = context.Cause(ctx)
		}
		got <- s
		return nil
	})
	_, c := startWith(t, b, Options{Transport: TransportDirect})
	x := metadata.AppendToOutgoingContext(ctx(t), "x-one", "1", "x-two", "a", "x-two", "b")
	dx, cancel := context.WithTimeout(x, 5*time.Second)
	defer cancel()
	if _, err := c.Do(dx, &synodpb.Request{Op: op("set", "look", "v")}); err != nil {
		t.Fatal(err)
	}
	s := <-got
	if s.md.Get("x-one")[0] != "1" || len(s.md.Get("x-two")) != 2 || len(s.md.Get(":authority")) != 1 ||
		s.md.Get("content-type")[0] != "application/grpc" || len(s.md.Get("user-agent")) != 1 {
		t.Fatalf("the handler's metadata: %v", s.md)
	}
	if !s.peer || !s.user || !s.deadline || s.left <= 0 || s.left > 5*time.Second {
		t.Fatalf("the handler's context: peer %v user %v deadline %v (%v left), want all, within the caller's 5s", s.peer, s.user, s.deadline, s.left)
	}
	// A call whose deadline passes: the derived context ends with it,
	// DeadlineExceeded, and its cause says so too (not the connection's).
	dx2, cancel2 := context.WithTimeout(ctx(t), 200*time.Millisecond)
	defer cancel2()
	c.Do(dx2, &synodpb.Request{Op: op("get", "look")}, grpc.WaitForReady(true))
	s = <-got
	if s.derived != context.DeadlineExceeded && s.derived != context.Canceled {
		t.Fatalf("the derived context ended with %v", s.derived)
	}
	if s.cause == nil {
		t.Fatal("context.Cause of the ended derived context is nil")
	}
}
