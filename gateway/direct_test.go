package gateway

import (
	"bytes"
	"encoding/binary"
	"io"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// tcpPair returns a server-side conn (of a Server, no goroutines started)
// and the client's end of its TCP connection.
func tcpPair(t *testing.T, opts ServerOptions) (*conn, net.Conn) {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	cl, err := net.Dial("tcp", l.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	sc, err := l.Accept()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cl.Close(); sc.Close() })
	s := NewServer(gatewaytest.KV(), opts)
	return s.newConn(sc, 1), cl
}

// An idle connection's reply goes straight to the socket: the client reads
// it although no writer goroutine runs, and nothing stays buffered.
func TestDirectWriteIdle(t *testing.T) {
	c, cl := tcpPair(t, ServerOptions{})
	if c.out.raw == nil {
		t.Skip("no direct writes on this platform")
	}
	for i := range 3 {
		c.w.WriteSimple("OK")
		if err := c.w.Flush(); err != nil {
			t.Fatal(err)
		}
		c.out.addReplies(1)
		c.out.mu.Lock()
		buffered, owed := len(c.out.buf)+c.out.writing, c.out.replies+c.out.wreplies
		c.out.mu.Unlock()
		if buffered != 0 || owed != 0 {
			t.Fatalf("reply %d: %d bytes and %d replies left for the writer, want none", i, buffered, owed)
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(cl, got); err != nil || string(got) != "+OK\r\n" {
			t.Fatalf("reply %d: read %q, %v", i, got, err)
		}
	}
}

// A client that does not read: the socket takes what it can, the rest
// queues for the writer goroutine, and every byte arrives once, in the
// order written, when the client reads again.
func TestDirectWriteOverflowKeepsOrder(t *testing.T) {
	c, cl := tcpPair(t, ServerOptions{})
	if c.out.raw == nil {
		t.Skip("no direct writes on this platform")
	}
	cl.(*net.TCPConn).SetReadBuffer(64 << 10)
	const size, maxChunks = 16 << 10, 4096 // at most 64 MiB
	chunk := make([]byte, size)
	chunks, extra := 0, 4 // write until the socket is full, then 4 more chunks
	for ; extra > 0; chunks++ {
		if chunks == maxChunks {
			t.Fatal("64 MiB to a client that does not read: nothing queued for the writer")
		}
		for j := 0; j < size; j += 4 {
			binary.BigEndian.PutUint32(chunk[j:], uint32(chunks*size+j))
		}
		if _, err := c.out.Write(chunk); err != nil {
			t.Fatal(err)
		}
		c.out.mu.Lock()
		if len(c.out.buf) > 0 {
			extra--
		}
		c.out.mu.Unlock()
	}
	go c.out.writer()
	got := make([]byte, chunks*size)
	if _, err := io.ReadFull(cl, got); err != nil {
		t.Fatal(err)
	}
	for j := 0; j < len(got); j += 4 {
		if v := binary.BigEndian.Uint32(got[j:]); v != uint32(j) {
			t.Fatalf("byte %d: got the word written at %d", j, v)
		}
	}
	c.out.finish()
}

// The hard limit still closes a client that does not read, although the
// first replies went straight to the socket.
func TestDirectWriteHardLimit(t *testing.T) {
	c, cl := tcpPair(t, ServerOptions{OutputBufferLimit: 1 << 20})
	go c.out.writer()
	chunk := bytes.Repeat([]byte{'x'}, 64<<10)
	var err error
	for range 1024 { // 64 MiB at most; the limit is 1 MiB past the socket buffers
		if _, err = c.out.Write(chunk); err != nil {
			break
		}
	}
	if err != errOutputLimit {
		t.Fatalf("writing to a client that does not read: %v, want %v", err, errOutputLimit)
	}
	if n := c.s.ov.outputClosed.Load(); n != 1 {
		t.Fatalf("client_output_limit_closed = %d, want 1", n)
	}
	cl.Close()
	c.out.finish()
}

// heldWriter is a direct write that takes all of p, once the test lets it.
type heldWriter struct{ started, release chan struct{} }

func (h heldWriter) writeNow(p []byte) int {
	close(h.started)
	<-h.release
	return len(p)
}

// A reader paused in waitRoom on the bytes of a direct write under way
// (they count as the chunk being written) must wake when that write ends,
// even when the socket took all of it and nothing is left for the writer.
// It once slept on: the connection read no more commands, and
// TestOutputLimitAllowsAReadingClient hung about once in 60 runs.
func TestWaitRoomWakesAfterADirectWrite(t *testing.T) {
	c, _ := tcpPair(t, ServerOptions{})
	h := heldWriter{make(chan struct{}), make(chan struct{})}
	c.out.raw = h
	wrote := make(chan error, 1)
	go func() {
		_, err := c.out.Write(make([]byte, 2*outputPause))
		wrote <- err
	}()
	<-h.started
	room := make(chan bool, 1)
	go func() { room <- c.out.waitRoom(1024) }()
	// waitRoom counts its pause under the buffer's lock and keeps the lock
	// until it waits, so once the count shows, the direct write can only
	// finish after waitRoom sleeps.
	for c.s.ov.backpressure.Load() == 0 {
		select {
		case ok := <-room:
			t.Fatalf("waitRoom returned %v during a direct write of %d bytes", ok, 2*outputPause)
		case <-time.After(time.Millisecond):
		}
	}
	close(h.release)
	if err := <-wrote; err != nil {
		t.Fatal(err)
	}
	select {
	case ok := <-room:
		if !ok {
			t.Fatal("waitRoom reported the buffer closed")
		}
	case <-time.After(5 * time.Second):
		t.Fatal("waitRoom still paused after the direct write took everything")
	}
}

// One client reading each reply: every reply goes straight to the socket,
// and the writer goroutine, waiting for buffered bytes, is not woken for
// it. It was, once per reply (the direct write's Broadcast), and each
// wake-up started a thread for a writer that found nothing to write: one
// hand-off per put at a paxos leader (futex wake-ups per put 3.1-3.5 ->
// 2.1-2.3, perf stat, docs/costs/s52-lat.md).
func TestDirectWriteLeavesWriterAsleep(t *testing.T) {
	c, cl := tcpPair(t, ServerOptions{})
	if c.out.raw == nil {
		t.Skip("no direct writes on this platform")
	}
	go c.out.writer()
	for deadline := time.Now().Add(10 * time.Second); ; {
		c.out.mu.Lock()
		waits := c.out.writerWaits
		c.out.mu.Unlock()
		if waits {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the writer goroutine never waited")
		}
		time.Sleep(time.Millisecond)
	}
	for i := range 50 {
		if _, err := c.out.Write([]byte("+OK\r\n")); err != nil {
			t.Fatal(err)
		}
		got := make([]byte, 5)
		if _, err := io.ReadFull(cl, got); err != nil || string(got) != "+OK\r\n" {
			t.Fatalf("reply %d: read %q, %v", i, got, err)
		}
	}
	c.out.mu.Lock()
	wakes, buffered := c.out.writerWakes, len(c.out.buf)
	c.out.mu.Unlock()
	if wakes != 0 || buffered != 0 {
		t.Fatalf("50 direct replies woke the waiting writer %d times (%d bytes buffered), want 0", wakes, buffered)
	}
	c.out.finish()
}
