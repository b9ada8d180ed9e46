package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"golang.org/x/net/http2"
	"golang.org/x/net/http2/hpack"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/gateway/grpcserver"
)

// alive reports whether h's connection is up and usable, polling it.
func (h *h2client) alive() bool {
	h.mu.Lock()
	c := h.cur
	h.mu.Unlock()
	return c != nil && c.usable()
}

// transportGoroutines counts the goroutines a gRPC client transport
// started: grpc-go's client transport's, or this package's.
func transportGoroutines() int {
	buf := make([]byte, 1<<22)
	buf = buf[:runtime.Stack(buf, true)]
	n := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		_, created, _ := strings.Cut(g, "created by ")
		if strings.Contains(created, "grpc/internal/transport.NewHTTP2Client") || strings.Contains(created, "grpc/internal/transport.newHTTP2Client") || strings.HasPrefix(created, "github.com/synod-dev/synod/client.(*h2") {
			n++
		}
	}
	return n
}

// The direct transport starts no goroutine: a lone caller writes its
// request and reads its reply itself, nobody reads an idle connection.
// grpc-go's transport keeps a reader and a writer goroutine per connection
// (the count is shown to see them).
func TestDirectTransportNoGoroutines(t *testing.T) {
	n := startGRPC(t, kvNS("test-grpc-dedup"), grpcserver.Options{})
	for _, tr := range []string{TransportGRPCGo, TransportDirect} {
		c := newGRPC(t, []string{n.addr}, Options{GRPCTransport: tr})
		x := tctx(t)
		w0 := h2Wakes.Load()
		for i := range 100 {
			k := fmt.Sprintf("k%d", i%10)
			if err := c.Set(x, k, []byte("v")); err != nil {
				t.Fatal(err)
			}
			if v, ok, err := c.Get(x, k); err != nil || !ok || string(v) != "v" {
				t.Fatalf("%s: get %s: %q %v %v", tr, k, v, ok, err)
			}
		}
		g, wakes := transportGoroutines(), h2Wakes.Load()-w0
		t.Logf("%s: %d transport goroutines after 200 calls, %d hand-offs", tr, g, wakes)
		switch {
		case tr == TransportGRPCGo && g < 2:
			t.Fatalf("grpc-go: %d transport goroutines seen, want its reader and writer", g)
		case tr == TransportDirect && (g != 0 || wakes != 0):
			t.Fatalf("direct: %d transport goroutines, %d callers woken by another in 200 lone calls; want 0 and 0", g, wakes)
		}
		c.Close()
	}
}

// slowBackend blocks requests on keys starting with "slow" until their
// context ends or release is closed.
func slowBackend(release chan struct{}) *gatewaytest.MemBackend {
	b := kvNS("test-grpc-dedup")
	b.SetHook(func(ctx context.Context, ns string, req automaton.Request) error {
		if strings.HasPrefix(req.Op.Key, "slow") {
			select {
			case <-release:
			case <-ctx.Done():
				return ctx.Err()
			}
		}
		return nil
	})
	return b
}

// Deadlines and cancellation, on both transports: a caller whose context
// ends returns with its status (DEADLINE_EXCEEDED, CANCELED) while another
// call on the connection goes on; the reading caller leaving hands the
// read turn on (the direct transport), and the connection stays usable.
func TestGRPCTransportsDeadlineCancel(t *testing.T) {
	release := make(chan struct{})
	defer close(release)
	n := startGRPC(t, slowBackend(release), grpcserver.Options{})
	for _, tr := range []string{TransportGRPCGo, TransportDirect} {
		t.Run(tr, func(t *testing.T) {
			c := newGRPC(t, []string{n.addr}, Options{GRPCTransport: tr})
			x := tctx(t)
			if err := c.Set(x, "fast", []byte("1")); err != nil { // connect; namespaces
				t.Fatal(err)
			}
			dctx, cancel := context.WithTimeout(x, 100*time.Millisecond)
			_, _, err := c.Get(dctx, "slow1")
			cancel()
			if status.Code(err) != codes.DeadlineExceeded && !errors.Is(err, context.DeadlineExceeded) {
				t.Fatalf("get past its deadline: %v, want DEADLINE_EXCEEDED", err)
			}
			// A slow call holds the read turn; fast calls go on beside it;
			// then it is canceled.
			cctx, ccancel := context.WithCancel(x)
			slow := make(chan error, 1)
			go func() {
				_, _, err := c.Get(cctx, "slow2")
				slow <- err
			}()
			var wg sync.WaitGroup
			for i := range 4 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for j := range 20 {
						k := fmt.Sprintf("fast%d-%d", i, j)
						if err := c.Set(x, k, []byte(k)); err != nil {
							t.Error(err)
							return
						}
						if v, _, err := c.Get(x, k); err != nil || string(v) != k {
							t.Errorf("get %s: %q %v", k, v, err)
							return
						}
					}
				}()
			}
			wg.Wait()
			select {
			case err := <-slow:
				t.Fatalf("the slow call returned before its cancellation: %v", err)
			default:
			}
			ccancel()
			if err := <-slow; status.Code(err) != codes.Canceled && !errors.Is(err, context.Canceled) {
				t.Fatalf("canceled get: %v, want CANCELED", err)
			}
			if v, _, err := c.Get(x, "fast"); err != nil || string(v) != "1" {
				t.Fatalf("get after the cancellation: %q %v", v, err)
			}
		})
	}
}

// Values larger than the HTTP/2 stream window (synodpb.StreamWindow) go
// both ways: the direct transport waits for the node's WINDOW_UPDATE and
// grants its own.
func TestGRPCTransportsLargeValues(t *testing.T) {
	n := startGRPC(t, kvNS("test-grpc-dedup"), grpcserver.Options{})
	big := bytes.Repeat([]byte("0123456789abcdef"), (7<<20)/16)
	for _, tr := range []string{TransportGRPCGo, TransportDirect} {
		t.Run(tr, func(t *testing.T) {
			// 30 s per attempt: 7 MiB messages take 5-17 s per subtest
			// under -race at load 26 (either transport).
			c := newGRPC(t, []string{n.addr}, Options{GRPCTransport: tr, Timeout: 30 * time.Second})
			x := tctx(t)
			var wg sync.WaitGroup
			for i := range 3 {
				wg.Add(1)
				go func() {
					defer wg.Done()
					k := fmt.Sprintf("big%d", i)
					if err := c.Set(x, k, big); err != nil {
						t.Error(err)
						return
					}
					for range 2 {
						if v, ok, err := c.Get(x, k); err != nil || !ok || !bytes.Equal(v, big) {
							t.Errorf("get %s: %d bytes, %v %v", k, len(v), ok, err)
							return
						}
					}
				}()
			}
			wg.Wait()
		})
	}
}

// A connection the node sent GOAWAY on is closed by the client once its
// last stream ends, even when the node keeps its side open (grpc-go does
// during a GracefulStop or a max-age grace). The node here is a bare
// HTTP/2 peer: GOAWAY before it answers stream 1, then it waits for the
// client's end. Before the fix the connection stayed open (c.err nil, the
// node's read blocked until the process ended).
func TestDirectClosesConnAfterGoAway(t *testing.T) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	eof := make(chan error, 1)
	go func() {
		nc, err := l.Accept()
		if err != nil {
			eof <- err
			return
		}
		defer nc.Close()
		pre := make([]byte, len(http2.ClientPreface))
		if _, err := io.ReadFull(nc, pre); err != nil {
			eof <- err
			return
		}
		fr := http2.NewFramer(nc, nc)
		fr.WriteSettings()
		for {
			f, err := fr.ReadFrame()
			if err != nil {
				eof <- err
				return
			}
			if d, ok := f.(*http2.DataFrame); ok && d.StreamEnded() && d.StreamID == 1 {
				break
			}
		}
		var hb bytes.Buffer
		enc := hpack.NewEncoder(&hb)
		enc.WriteField(hpack.HeaderField{Name: ":status", Value: "200"})
		enc.WriteField(hpack.HeaderField{Name: "content-type", Value: "application/grpc"})
		fr.WriteGoAway(1, http2.ErrCodeNo, nil)
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: bytes.Clone(hb.Bytes()), EndHeaders: true})
		fr.WriteData(1, false, []byte{0, 0, 0, 0, 0}) // an empty InfoResponse
		hb.Reset()
		enc.WriteField(hpack.HeaderField{Name: "grpc-status", Value: "0"})
		fr.WriteHeaders(http2.HeadersFrameParam{StreamID: 1, BlockFragment: hb.Bytes(), EndHeaders: true, EndStream: true})
		for {
			if _, err := fr.ReadFrame(); err != nil {
				eof <- err
				return
			}
		}
	}()
	h := &h2client{addr: l.Addr().String(), timeout: 10 * time.Second}
	defer h.close()
	if err := h.Invoke(tctx(t), "/synod.v1.Synod/Info", &synodpb.InfoRequest{}, &synodpb.InfoResponse{}); err != nil {
		t.Fatal(err)
	}
	h.mu.Lock()
	c := h.cur
	h.mu.Unlock()
	c.mu.Lock()
	cerr := c.err
	c.mu.Unlock()
	if cerr != errH2Drained {
		t.Fatalf("after GOAWAY and the last stream's end: connection error %v, want it closed (%v)", cerr, errH2Drained)
	}
	if err := <-eof; err != io.EOF {
		t.Fatalf("the node read %v, want EOF (the client closed)", err)
	}
	if h.alive() {
		t.Fatal("a drained connection is still usable")
	}
}
