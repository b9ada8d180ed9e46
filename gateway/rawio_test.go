//go:build linux

package gateway

import (
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
)

// TestRawIOLoopConnection: with raw client socket I/O on (rawio_linux.go),
// a loop connection is read and answered by raw read(2) and write(2): a
// pipelined batch in one write, a command split over two writes (the
// loop's first read takes half of it) and a closed peer (the loop's read
// meets EOF and the connection ends) all behave as with syscall.Read and
// syscall.Write. Fails when the loop's read or the direct write does not
// take the raw path (the counts stay still), e.g. with rawIO false, and
// when the loop's zero-timeout epoll_wait is not raw.
func TestRawIOLoopConnection(t *testing.T) {
	if !rawIO {
		t.Skip("SYNOD_GATEWAY_RAWIO=0")
	}
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone): the loop serves the other client
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	r0, w0, p0 := rawReads.Load(), rawWrites.Load(), rawPolls.Load()

	// A pipelined batch, one write.
	const n = 40
	for i := range n {
		c.send("SET", fmt.Sprintf("k%d", i), fmt.Sprint(i))
	}
	for i := range n {
		if got := c.reply().String(); got != "OK" {
			t.Fatalf("pipelined SET %d: %q", i, got)
		}
	}
	if got := c.do("GET", "k7"); got != `"7"` {
		t.Fatalf("GET after the batch: %q", got)
	}

	// A partial read: half a command, then (once the loop has read it) the rest.
	cmd := "*3\r\n$3\r\nSET\r\n$4\r\nhalf\r\n$5\r\nwhole\r\n"
	st := s.ev.steps.Load()
	rr := rawReads.Load()
	if _, err := c.nc.Write([]byte(cmd[:17])); err != nil {
		t.Fatal(err)
	}
	waitReplyFn(t, "the loop's read of half a command", func() bool { return s.ev.steps.Load() > st && rawReads.Load() > rr })
	if _, err := c.nc.Write([]byte(cmd[17:])); err != nil {
		t.Fatal(err)
	}
	if got := c.reply().String(); got != "OK" {
		t.Fatalf("SET sent in two halves: %q", got)
	}
	if got := c.do("GET", "half"); got != `"whole"` {
		t.Fatalf("GET half: %q", got)
	}
	if r, w := rawReads.Load()-r0, rawWrites.Load()-w0; r < 3 || w < 3 {
		t.Errorf("raw reads %d, raw writes %d: want the loop's reads and the replies' writes raw", r, w)
	}
	if p := rawPolls.Load() - p0; p == 0 {
		t.Error("no raw epoll_wait: the loop's readiness check is not raw")
	}
	if h := s.ev.handoffs.Load(); h != 0 {
		t.Logf("%d hand-offs (a batch may go to a goroutine)", h)
	}

	// A closed peer: the loop's raw read meets EOF and the connection ends.
	c.do("SET", "x", "1") // the connection is the loop's again
	c.nc.Close()
	waitReplyFn(t, "the closed client's connection gone", func() bool { return s.ord.conns.Load() == 1 })
}

// TestRawIOShortWrite: a direct write larger than the socket takes (a
// client with a small receive buffer that does not read) writes part of
// it by raw write(2) and returns how much (a short write), never waits;
// the next writes return 0 while the socket is full (EAGAIN); after the
// client reads, the rest goes, and the client receives every byte once,
// in order. A write to a peer that closed returns 0 (EPIPE or ECONNRESET,
// not a crash: Go ignores SIGPIPE for sockets). Fails when writeNow waits
// for the socket or loses or repeats bytes, and when it is not raw.
func TestRawIOShortWrite(t *testing.T) {
	if !rawIO {
		t.Skip("SYNOD_GATEWAY_RAWIO=0")
	}
	c, cl := tcpPair(t, ServerOptions{})
	if c.out.raw == nil {
		t.Skip("no direct writes on this platform")
	}
	cl.(*net.TCPConn).SetReadBuffer(16 << 10)
	c.nc.(*net.TCPConn).SetWriteBuffer(16 << 10)
	d := c.out.raw.(*directWriter)
	big := bytes.Repeat([]byte("0123456789abcdef"), 1<<14) // 256 KiB
	w0 := rawWrites.Load()
	n := d.writeNow(big)
	if n <= 0 || n >= len(big) {
		t.Fatalf("first write took %d of %d bytes: want a short write", n, len(big))
	}
	if m := d.writeNow(big[n:]); m != 0 {
		n += m // the socket may have drained into the client's buffer meanwhile
	}
	if rawWrites.Load() == w0 {
		t.Fatal("no raw write(2)")
	}
	got := make([]byte, 0, len(big))
	buf := make([]byte, 64<<10)
	for len(got) < len(big) {
		m, err := cl.Read(buf)
		if err != nil {
			t.Fatalf("client read after %d bytes: %v", len(got), err)
		}
		got = append(got, buf[:m]...)
		if n < len(big) {
			n += d.writeNow(big[n:])
		}
	}
	if !bytes.Equal(got, big) {
		t.Fatalf("client received %d bytes, not the %d written in order", len(got), len(big))
	}

	cl.Close()
	// The first write after the close may still be taken (the RST comes
	// back with it); a later one fails: writeNow returns 0, it does not panic.
	for i := 0; i < 100 && d.writeNow([]byte("+OK\r\n")) > 0; i++ {
	}
	if m := d.writeNow([]byte("+OK\r\n")); m != 0 {
		t.Fatalf("a write to a closed peer took %d bytes", m)
	}
}

// TestRawIOLargeReply: a reply of 512 KiB to a loop client with a small
// receive buffer goes partly by the direct raw write and the rest by the
// writer goroutine; the client reads it whole.
func TestRawIOLargeReply(t *testing.T) {
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	c.nc.(*net.TCPConn).SetReadBuffer(16 << 10)
	val := strings.Repeat("v", 512<<10)
	if got := c.do("SET", "big", val); got != "OK" {
		t.Fatalf("SET big: %q", got)
	}
	c.send("GET", "big")
	c.w.Flush()
	want := fmt.Sprintf("$%d\r\n%s\r\n", len(val), val)
	got := make([]byte, len(want))
	c.deadline()
	if _, err := io.ReadFull(c.nc, got); err != nil {
		t.Fatal(err)
	}
	if string(got) != want {
		t.Fatal("the large reply arrived changed")
	}
	if got := c.do("GET", "nothing"); got != "(nil)" {
		t.Fatalf("GET after the large reply: %q", got)
	}
}

// TestRawIOGoroutineRead: a lone client's connection is read by its
// goroutine (evAlone: the loop hands it over, goRead), and that read is
// raw too (evconn_linux.go, rawOf): each command's read(2), the one that
// finds it and the one that finds the socket empty and waits in the
// netpoller, is made by RawSyscall, which the scheduler does not see (an
// idle process's sysmon is not woken). Commands, a pipelined pair and the
// peer's close behave as through net.Conn. Fails with the goroutine's
// reads through net.Conn (the raw count stays still while the Go
// connection serves the commands).
func TestRawIOGoroutineRead(t *testing.T) {
	if !rawIO {
		t.Skip("SYNOD_GATEWAY_RAWIO=0")
	}
	b := newReplyBackend()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	c := dial(t, addr)
	if got := c.do("SET", "k", "v0"); got != "OK" { // the connection is the goroutine's from here
		t.Fatalf("SET: %q", got)
	}
	var e *evNetConn
	s.mu.Lock()
	for sc := range s.conns {
		e, _ = sc.nc.(*evNetConn)
	}
	s.mu.Unlock()
	if e == nil {
		t.Skip("the connection is not an event-loop connection here")
	}
	r0, g0 := rawReads.Load(), e.gcs.Load()
	const n = 20
	for i := range n {
		if got := c.do("SET", "k", fmt.Sprint(i)); got != "OK" {
			t.Fatalf("SET %d: %q", i, got)
		}
	}
	c.send("GET", "k")
	c.send("GET", "k")
	for range 2 {
		if got := c.reply().String(); got != fmt.Sprintf("%q", fmt.Sprint(n-1)) {
			t.Fatalf("pipelined GET: %q", got)
		}
	}
	if e.gcs.Load() == 0 {
		t.Skip("the loop read every command: no goroutine read to check")
	}
	if r := rawReads.Load() - r0; r < n {
		t.Errorf("%d raw reads for %d commands read by the connection's goroutine (%d Go connections), want at least one each", r, n, e.gcs.Load()-g0)
	}
	c.nc.Close()
	waitReplyFn(t, "the closed client's connection gone", func() bool { return s.ord.conns.Load() == 0 })
}
