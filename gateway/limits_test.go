package gateway

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/resp"
)

// memInUse is the heap and goroutine stacks in use after a collection.
func memInUse() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapInuse + m.StackInuse
}

// smallBufListener shrinks the kernel send buffer of every accepted
// connection, so that a client that does not read fills it within a few
// kilobytes (loopback buffers otherwise grow to megabytes).
type smallBufListener struct{ net.Listener }

func (l smallBufListener) Accept() (net.Conn, error) {
	nc, err := l.Listener.Accept()
	if tc, ok := nc.(*net.TCPConn); ok {
		tc.SetWriteBuffer(64 << 10)
	}
	return nc, err
}

func startSmallBufServer(t *testing.T, opts ServerOptions) (*Server, string) {
	t.Helper()
	return startSmallBufServerOn(t, gatewaytest.KV(), opts)
}

// startSmallBufServerOn is startSmallBufServer with backend b.
func startSmallBufServerOn(t *testing.T, b Backend, opts ServerOptions) (*Server, string) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(b, opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(smallBufListener{l}) }()
	t.Cleanup(func() {
		s.Close()
		<-done
	})
	return s, l.Addr().String()
}

// waitFor polls cond until it holds; the deadline only guards against a
// hang, it is not what the test measures.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting: %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// TestConnectionFlood dials 3000 connections against maxclients 1000, all
// held open: the first 1000 are served, the other 2000 get Redis's error,
// the refusals are counted, and memory stays bounded. Prints the figures.
func TestConnectionFlood(t *testing.T) {
	const max, dials = 1000, 3000
	logger, logged := testLogger()
	s, addr := startServer(t, gatewaytest.KV(), ServerOptions{MaxClients: max, Logger: logger})
	before := memInUse()
	conns := make([]net.Conn, 0, dials)
	defer func() {
		for _, nc := range conns {
			nc.Close()
		}
	}()
	for i := 0; i < dials; i++ {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatalf("dial %d: %v", i, err)
		}
		nc.SetDeadline(time.Now().Add(30 * time.Second))
		conns = append(conns, nc)
	}
	// Every connection asks PING; the served answer +PONG, the refused
	// were told why before their PING arrived.
	served, refused := 0, 0
	var servedConns []net.Conn
	for i, nc := range conns {
		io.WriteString(nc, "PING\r\n")
		line, err := bufio.NewReaderSize(nc, 64).ReadString('\n')
		switch {
		case line == "+PONG\r\n":
			served++
			servedConns = append(servedConns, nc)
		case line == "-ERR max number of clients reached\r\n":
			refused++
		default:
			t.Fatalf("connection %d: got %q, %v", i, line, err)
		}
	}
	during := memInUse()
	if served != max || refused != dials-max {
		t.Errorf("served %d, refused %d; want %d and %d", served, refused, max, dials-max)
	}
	if got := s.Overload().Rejected; got != dials-max {
		t.Errorf("rejected_connections = %d, want %d", got, dials-max)
	}
	if got := s.Overload().Clients; got != max {
		t.Errorf("open clients = %d, want %d", got, max)
	}
	// The node keeps serving the clients it holds.
	c := &tconn{t: t, nc: servedConns[len(servedConns)/2]}
	c.r, c.w = newTestRW(c.nc)
	if got := c.do("SET", "k", "v"); got != "OK" {
		t.Errorf("SET during the flood: %s", got)
	}
	if got := c.do("INFO", "clients"); !strings.Contains(got, "rejected_connections:2000") {
		t.Errorf("INFO clients does not count the refusals: %s", got)
	}
	// Refusals are logged, not once each.
	if n := strings.Count(logged(), "max number of clients reached"); n < 1 || n > 10 {
		t.Errorf("%d refusal log lines for %d refusals, want 1-10 (rate-limited)", n, dials-max)
	}
	grown := int64(during) - int64(before)
	t.Logf("connection flood: %d dials, maxclients %d: %d served, %d refused; memory in use grew %.1f MB (%.1f KB per served connection, both ends in this process)",
		dials, max, served, refused, float64(grown)/(1<<20), float64(grown)/1024/float64(max))
	if grown > 256<<20 {
		t.Errorf("memory grew %d MB holding %d connections; want under 256 MB", grown>>20, max)
	}
	// Closing the held connections frees their slots.
	for _, nc := range servedConns {
		nc.Close()
	}
	waitFor(t, "the closed connections to be released", func() bool { return s.Overload().Clients == 0 })
	d := dial(t, addr)
	if got := d.do("PING"); got != "PONG" {
		t.Errorf("PING after the flood: %s", got)
	}
}

// TestPipelineBackpressure: a client pipelines 1e6 PINGs (PING 000000,
// PING 000001, ...) without reading a reply. The server stops reading it
// (it executes a bounded number of them while the client reads nothing),
// memory stays bounded, another client is served meanwhile, and once the
// client reads, every command is answered exactly once and in order.
func TestPipelineBackpressure(t *testing.T) {
	total := 1_000_000
	if raceDetector {
		total = 100_000
	}
	pipelineBackpressure(t, gatewaytest.KV(), total, "PINGs",
		func(b []byte, i int) []byte { return fmt.Appendf(b, "*2\r\n$4\r\nPING\r\n$6\r\n%06d\r\n", i) },
		func(b []byte, i int) []byte { return fmt.Appendf(b, "$6\r\n%06d\r\n", i) })
}

// TestPipelineBatchBackpressure: the same with INCRs of one key where the
// protocol has atomic groups, so the pipeline goes as batches (pipeline.go).
func TestPipelineBatchBackpressure(t *testing.T) {
	total := 300_000
	if raceDetector {
		total = 100_000
	}
	b := gatewaytest.New(config.Namespace{Name: "default", Protocol: pxName, Service: "kv"})
	pipelineBackpressure(t, b, total, "INCRs as batches",
		func(b []byte, i int) []byte { return append(b, "*2\r\n$4\r\nINCR\r\n$1\r\nn\r\n"...) },
		func(b []byte, i int) []byte { return fmt.Appendf(b, ":%d\r\n", i+1) })
}

// pipelineBackpressure pipelines total commands (command i appended by
// cmd) to a server on b without reading, requires the server to stop
// reading with bounded memory and to serve another client meanwhile, then
// reads every reply (reply i appended by reply), in order.
func pipelineBackpressure(t *testing.T, b Backend, total int, what string, cmd, reply func([]byte, int) []byte) {
	s, addr := startSmallBufServerOn(t, b, ServerOptions{})
	before := memInUse()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.(*net.TCPConn).SetReadBuffer(64 << 10)
	writeErr := make(chan error, 1)
	go func() {
		var chunk []byte
		for i := 0; i < total; i++ {
			chunk = cmd(chunk, i)
			if len(chunk) < 32<<10 && i < total-1 {
				continue
			}
			_, err := nc.Write(chunk)
			chunk = chunk[:0]
			if err != nil {
				writeErr <- err
				return
			}
		}
		writeErr <- nil
	}()
	waitFor(t, "the connection to stop being read", func() bool { return s.Overload().BackpressurePauses > 0 })
	// While the client reads nothing the server can have executed only what
	// the output buffer (1024 replies or 64 KiB) and the small socket
	// buffers hold: sample it a few times.
	var maxDone int64
	var maxMem uint64
	for range 5 {
		time.Sleep(20 * time.Millisecond)
		maxDone = max(maxDone, s.totalCommands.Load())
		maxMem = max(maxMem, memInUse())
	}
	if maxDone >= 100_000 {
		t.Errorf("the server executed %d of %d pipelined commands while the client read no reply: it did not stop reading", maxDone, total)
	}
	grown := int64(maxMem) - int64(before)
	if grown > 64<<20 {
		t.Errorf("memory grew %d MB while the client pipelined without reading; want under 64 MB", grown>>20)
	}
	t.Logf("pipeline of %d %s, client not reading: server executed at most %d, backpressure pauses %d, memory in use grew %.1f MB",
		total, what, maxDone, s.Overload().BackpressurePauses, float64(grown)/(1<<20))
	// Another client is served meanwhile.
	other := dial(t, addr)
	if got := other.do("SET", "x", "1"); got != "OK" {
		t.Errorf("another client during the pipeline: %s", got)
	}
	// Now read every reply, in order.
	br := bufio.NewReaderSize(nc, 64<<10)
	want := make([]byte, 0, 16)
	nc.SetReadDeadline(time.Now().Add(2 * time.Minute))
	got := make([]byte, 0, 16)
	for i := 0; i < total; i++ {
		want = reply(want[:0], i)
		got = got[:len(want)]
		if _, err := io.ReadFull(br, got); err != nil {
			t.Fatalf("reply %d: %v", i, err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("reply %d: %q, want %q", i, got, want)
		}
	}
	if err := <-writeErr; err != nil {
		t.Fatalf("pipelining client: %v", err)
	}
}

// TestSlowReaderClosedAtOutputLimit: a reply larger than the output
// buffer's hard limit to a client that does not read closes that client,
// with a log line naming the limit; other clients are served.
func TestSlowReaderClosedAtOutputLimit(t *testing.T) {
	logger, logged := testLogger()
	s, addr := startSmallBufServer(t, ServerOptions{OutputBufferLimit: 256 << 10, Logger: logger})
	w := dial(t, addr)
	big := strings.Repeat("x", 1<<20)
	for _, k := range []string{"a", "b"} {
		if got := w.do("SET", k, big); got != "OK" {
			t.Fatalf("SET: %s", got)
		}
	}
	slow, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	slow.(*net.TCPConn).SetReadBuffer(8 << 10)
	io.WriteString(slow, "*3\r\n$4\r\nMGET\r\n$1\r\na\r\n$1\r\nb\r\n")
	waitFor(t, "the slow reader to be closed", func() bool { return s.Overload().OutputLimitClosed == 1 })
	line := ""
	for _, l := range strings.Split(logged(), "\n") {
		if strings.Contains(l, "closing client: output buffer limit reached") {
			line = l
		}
	}
	if !strings.Contains(line, "client_output_buffer_limit=262144") {
		t.Errorf("no log line naming the limit; log:\n%s", logged())
	}
	// The slow client sees less than its reply, then the end.
	slow.SetReadDeadline(time.Now().Add(30 * time.Second))
	n, err := io.Copy(io.Discard, slow)
	var ne net.Error
	if errors.As(err, &ne) && ne.Timeout() {
		t.Fatalf("the slow reader's connection was not closed")
	}
	if n >= 2<<20 {
		t.Errorf("the slow reader received %d bytes, its whole reply", n)
	}
	if got := w.do("GET", "missing"); got != "(nil)" {
		t.Errorf("another client after the close: %s", got)
	}
	t.Logf("slow reader: closed at client-output-buffer-limit 256 KB after receiving %d of %d bytes", n, 2<<20+30)
}

// TestOutputLimitAllowsAReadingClient: replies totalling far more than the
// hard limit, pipelined to a client that reads them, are all delivered: the
// limit counts unwritten bytes, and the connection stops reading commands
// long before it (backpressure).
func TestOutputLimitAllowsAReadingClient(t *testing.T) {
	s, addr := startSmallBufServer(t, ServerOptions{OutputBufferLimit: 256 << 10})
	c := dial(t, addr)
	big := strings.Repeat("y", 100<<10)
	c.do("SET", "a", big)
	const n = 200
	for range n {
		c.send("GET", "a")
	}
	for i := range n {
		if got := c.reply(); len(got.Str) != len(big) {
			t.Fatalf("GET %d of 100 KB through a 256 KB output limit: got %d bytes", i, len(got.Str))
		}
	}
	if got := s.Overload().OutputLimitClosed; got != 0 {
		t.Errorf("%d clients closed at the output limit", got)
	}
}

// TestMaxClientsSharedWithGRPC: connections through LimitListener (the
// gRPC port) count against maxclients with the RESP port's.
func TestMaxClientsSharedWithGRPC(t *testing.T) {
	s, addr := startServer(t, gatewaytest.KV(), ServerOptions{MaxClients: 2})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ll := s.LimitListener(l)
	defer ll.Close()
	accepted := make(chan net.Conn, 4)
	go func() {
		for {
			nc, err := ll.Accept()
			if err != nil {
				return
			}
			accepted <- nc
		}
	}()
	g1, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer g1.Close()
	sc := <-accepted
	r1 := dial(t, addr)
	if got := r1.do("PING"); got != "PONG" {
		t.Fatalf("PING: %s", got)
	}
	// Two open (one gRPC, one RESP): a third on either port is refused.
	r2, _ := net.Dial("tcp", addr)
	defer r2.Close()
	if line, _ := bufio.NewReader(r2).ReadString('\n'); line != "-ERR max number of clients reached\r\n" {
		t.Errorf("third client on RESP: %q", line)
	}
	g2, _ := net.Dial("tcp", l.Addr().String())
	defer g2.Close()
	g2.SetReadDeadline(time.Now().Add(10 * time.Second))
	if _, err := g2.Read(make([]byte, 1)); err != io.EOF {
		t.Errorf("third client on gRPC: read %v, want EOF (closed)", err)
	}
	if got := s.Overload().Rejected; got != 2 {
		t.Errorf("rejected = %d, want 2", got)
	}
	// Closing the gRPC connection frees its slot for a RESP client.
	sc.Close()
	waitFor(t, "the gRPC slot to be released", func() bool { return s.Overload().Clients == 1 })
	if got := dial(t, addr).do("PING"); got != "PONG" {
		t.Errorf("PING after the gRPC client left: %s", got)
	}
}

// TestProtoMaxBulkLen: a bulk longer than proto-max-bulk-len is a protocol
// error, as in Redis.
func TestProtoMaxBulkLen(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{ProtoMaxBulkLen: 4096})
	c := dial(t, addr)
	if got := c.do("SET", "k", strings.Repeat("z", 4096)); got != "OK" {
		t.Fatalf("SET of 4096 bytes: %s", got)
	}
	if got := c.do("SET", "k", strings.Repeat("z", 4097)); got != "(error) ERR Protocol error: invalid bulk length" {
		t.Errorf("SET of 4097 bytes: %s", got)
	}
}

func newTestRW(nc net.Conn) (*resp.Reader, *resp.Writer) {
	return resp.NewReader(bufio.NewReader(nc), resp.Limits{}), resp.NewWriter(nc)
}
