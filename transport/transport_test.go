package transport

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// logBuf is a goroutine-safe log sink.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func (l *logBuf) logger() *slog.Logger {
	return slog.New(slog.NewTextHandler(l, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type got struct {
	from automaton.NodeID
	ns   string
	msg  string
}

type inbox struct{ ch chan got }

func newInbox() *inbox { return &inbox{ch: make(chan got, 1000)} }

func (in *inbox) handler(from automaton.NodeID, ns string, msg []byte) {
	in.ch <- got{from, ns, string(msg)}
}

func (in *inbox) expect(t *testing.T, want got) {
	t.Helper()
	select {
	case g := <-in.ch:
		if g != want {
			t.Fatalf("received %+v, want %+v", g, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("timed out waiting for %+v", want)
	}
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

func start(t *testing.T, cluster string, self automaton.NodeID, ln net.Listener, peers map[automaton.NodeID]string, h Handler, lg *slog.Logger) *Transport {
	t.Helper()
	tr, err := New(Options{Cluster: cluster, Self: self, Peers: peers, Listener: ln, Handler: h, Logger: lg,
		MinBackoff: 10 * time.Millisecond, MaxBackoff: 100 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func TestExchange(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	in1, in2 := newInbox(), newInbox()
	t1 := start(t, "c", "n1", l1, peers, in1.handler, nil)
	t2 := start(t, "c", "n2", l2, peers, in2.handler, nil)

	buf := []byte("ping")
	if err := t1.Send("n2", "default", buf); err != nil {
		t.Fatal(err)
	}
	buf[0] = 'X' // Send copied the message
	in2.expect(t, got{"n1", "default", "ping"})
	if err := t2.Send("n1", "other", []byte("pong")); err != nil {
		t.Fatal(err)
	}
	in1.expect(t, got{"n2", "other", "pong"})

	// A burst arrives complete and in order.
	for i := 0; i < 500; i++ {
		if err := t1.Send("n2", "default", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := 0; i < 500; i++ {
		in2.expect(t, got{"n1", "default", fmt.Sprint(i)})
	}
	if err := t1.Send("n9", "default", nil); err == nil {
		t.Fatal("send to unknown peer accepted")
	}
	if err := t1.Send("n1", "default", nil); err == nil {
		t.Fatal("send to self accepted")
	}
	waitFor(t, func() bool { return t1.Stats()["n2"].Sent == 501 && t2.Stats()["n1"].Received == 501 })
	if s := t1.Stats()["n2"]; s.Dropped != 0 || !s.Connected {
		t.Fatalf("stats %+v", s)
	}
}

// waitFor waits for cond; 30 s is only the bound past which the test
// fails (a loaded machine can take more than a few seconds to connect).
func waitFor(t *testing.T, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatal("condition not reached in 30s")
		}
		time.Sleep(5 * time.Millisecond)
	}
}

func TestQueueFullDrops(t *testing.T) {
	// The peer's address accepts nothing (a listener we never serve), so the
	// writer cannot drain the queue... unless it connects. Use a closed port.
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	tr, err := New(Options{Cluster: "c", Self: "n1", Peers: map[automaton.NodeID]string{"n2": addr},
		ListenAddr: "127.0.0.1:0", Handler: func(automaton.NodeID, string, []byte) {}, QueueLen: 4})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	drops := 0
	for i := 0; i < 10; i++ {
		if err := tr.Send("n2", "ns", []byte("x")); err == ErrDropped {
			drops++
		} else if err != nil {
			t.Fatal(err)
		}
	}
	if drops != 6 || tr.Stats()["n2"].Dropped != 6 {
		t.Fatalf("drops %d, stats %+v; want 6", drops, tr.Stats()["n2"])
	}
}

func TestReconnectAfterListenerRestart(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	addr2 := l2.Addr().String()
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": addr2}
	in2 := newInbox()
	t1 := start(t, "c", "n1", l1, peers, func(automaton.NodeID, string, []byte) {}, nil)
	t2 := start(t, "c", "n2", l2, peers, in2.handler, nil)
	if err := t1.Send("n2", "ns", []byte("before")); err != nil {
		t.Fatal(err)
	}
	in2.expect(t, got{"n1", "ns", "before"})

	t2.Close()
	waitFor(t, func() bool { return !t1.Stats()["n2"].Connected })

	var l2b net.Listener
	waitFor(t, func() bool {
		var err error
		l2b, err = net.Listen("tcp", addr2)
		return err == nil
	})
	in2b := newInbox()
	start(t, "c", "n2", l2b, peers, in2b.handler, nil)
	// Messages sent while reconnecting may be lost; keep sending until one arrives.
	deadline := time.Now().Add(5 * time.Second)
	for i := 0; ; i++ {
		t1.Send("n2", "ns", []byte("after"))
		select {
		case g := <-in2b.ch:
			if g != (got{"n1", "ns", "after"}) {
				t.Fatalf("got %+v", g)
			}
			return
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatal("no message after the peer restarted")
		}
	}
}

func TestForeignClusterRefused(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	var log1, log2 logBuf
	in2 := newInbox()
	t1 := start(t, "alpha", "n1", l1, peers, func(automaton.NodeID, string, []byte) {}, log1.logger())
	start(t, "beta", "n2", l2, peers, in2.handler, log2.logger())
	t1.Send("n2", "ns", []byte("hello"))
	waitFor(t, func() bool {
		return strings.Contains(log2.String(), "cluster mismatch") && strings.Contains(log1.String(), "peer refused our connection")
	})
	select {
	case g := <-in2.ch:
		t.Fatalf("message from a foreign cluster delivered: %+v", g)
	case <-time.After(50 * time.Millisecond):
	}
	if !strings.Contains(log2.String(), `level=ERROR msg="refused peer connection"`) {
		t.Fatalf("refusal not logged at error level:\n%s", log2.String())
	}
}

// rawHandshake dials addr, sends h and returns the refusal reason.
func rawHandshake(t *testing.T, addr string, h Handshake) string {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	h.Nonce = NewNonce()
	r, err := Authenticate(c, bufio.NewReader(c), "", h)
	if err != nil {
		t.Fatal(err)
	}
	return r
}

func TestHandshakeChecks(t *testing.T) {
	ln := listen(t)
	var lg logBuf
	start(t, "c", "n2", ln, map[automaton.NodeID]string{"n1": "127.0.0.1:1", "n2": ln.Addr().String()},
		func(automaton.NodeID, string, []byte) {}, lg.logger())
	addr := ln.Addr().String()
	cases := []struct {
		h    Handshake
		want string
	}{
		{Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2"}, ""},
		{Handshake{Version: Version, Cluster: "other", From: "n1", To: "n2"}, "cluster mismatch"},
		{Handshake{Version: Version, Cluster: "c", From: "n7", To: "n2"}, `unknown node id "n7"`},
		{Handshake{Version: Version, Cluster: "c", From: "n2", To: "n2"}, `unknown node id "n2"`},
		{Handshake{Version: Version, Cluster: "c", From: "n1", To: "n3"}, `meant to reach node "n3"`},
	}
	for _, c := range cases {
		r := rawHandshake(t, addr, c.h)
		if c.want == "" && r != "" || c.want != "" && !strings.Contains(r, c.want) {
			t.Errorf("%+v: refusal %q, want %q", c.h, r, c.want)
		}
	}
}

func TestGarbageClosesOnlyThatConnection(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	var log2 logBuf
	in2 := newInbox()
	t1 := start(t, "c", "n1", l1, peers, func(automaton.NodeID, string, []byte) {}, nil)
	t2 := start(t, "c", "n2", l2, peers, in2.handler, log2.logger())
	t1.Send("n2", "ns", []byte("one"))
	in2.expect(t, got{"n1", "ns", "one"})

	closedByPeer := func(c net.Conn) {
		t.Helper()
		c.SetReadDeadline(time.Now().Add(5 * time.Second))
		var b [64]byte
		for {
			_, err := c.Read(b[:])
			if err != nil {
				if ne, ok := err.(net.Error); ok && ne.Timeout() {
					t.Fatal("connection with garbage was not closed")
				}
				return
			}
		}
	}
	// Garbage instead of a handshake.
	c, err := net.Dial("tcp", l2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	c.Write([]byte("GET / HTTP/1.1\r\nHost: x\r\n\r\n"))
	closedByPeer(c)
	c.Close()
	// A valid handshake, then a frame over the size limit.
	c, err = net.Dial("tcp", l2.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	if r, err := Authenticate(c, bufio.NewReader(c), "", Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2", Nonce: NewNonce()}); err != nil || r != "" {
		t.Fatalf("handshake: %q %v", r, err)
	}
	c.Write([]byte{0xff, 0xff, 0xff, 0xff, 1, 2, 3})
	closedByPeer(c)
	c.Close()

	logs := log2.String()
	if !strings.Contains(logs, "bad handshake on peer port") || !strings.Contains(logs, "bad frame from peer") {
		t.Fatalf("garbage not logged:\n%s", logs)
	}
	// The node and its real peer connection are unaffected.
	t1.Send("n2", "ns", []byte("two"))
	in2.expect(t, got{"n1", "ns", "two"})
	if !t1.Stats()["n2"].Connected {
		t.Fatal("real peer connection lost")
	}
	_ = t2
}

func TestCloseIsPrompt(t *testing.T) {
	// A peer that never answers the handshake must not hold Close up.
	silent := listen(t)
	defer silent.Close()
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				return
			}
			defer c.Close()
		}
	}()
	tr, err := New(Options{Cluster: "c", Self: "n1", Peers: map[automaton.NodeID]string{"n2": silent.Addr().String()},
		ListenAddr: "127.0.0.1:0", Handler: func(automaton.NodeID, string, []byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	tr.Send("n2", "ns", []byte("x"))
	time.Sleep(50 * time.Millisecond)
	start := time.Now()
	tr.Close()
	if d := time.Since(start); d > time.Second {
		t.Fatalf("Close took %v", d)
	}
}

// TestQueueBytesDrops: the per-peer queue is bounded in bytes too, so a
// peer that does not drain cannot hold QueueLen large messages.
func TestQueueBytesDrops(t *testing.T) {
	ln := listen(t)
	addr := ln.Addr().String()
	ln.Close()
	tr, err := New(Options{Cluster: "c", Self: "n1", Peers: map[automaton.NodeID]string{"n2": addr},
		ListenAddr: "127.0.0.1:0", Handler: func(automaton.NodeID, string, []byte) {}, QueueLen: 1000, QueueBytes: 10 << 10})
	if err != nil {
		t.Fatal(err)
	}
	defer tr.Close()
	msg := make([]byte, 1000)
	sent, drops := 0, 0
	for i := 0; i < 100; i++ {
		switch err := tr.Send("n2", "ns", msg); err {
		case nil:
			sent++
		case ErrDropped:
			drops++
		default:
			t.Fatal(err)
		}
	}
	// Each frame is 1000 bytes plus a header of a few bytes: 10 fit in 10 KiB.
	if sent != 10 || drops != 90 || tr.Stats()["n2"].Dropped != 90 {
		t.Fatalf("sent %d, dropped %d, stats %+v; want 10 and 90", sent, drops, tr.Stats()["n2"])
	}
}

// Frames are recycled once written (framePools) and a reader reuses the
// previous frame's namespace name: a burst of messages of mixed sizes (of
// several size classes, some above the pooled limit) to alternating
// namespaces arrives intact, in order, each under its own namespace.
func TestRecycledFramesArriveIntact(t *testing.T) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	in2 := newInbox()
	t1 := start(t, "c", "n1", l1, peers, func(automaton.NodeID, string, []byte) {}, nil)
	start(t, "c", "n2", l2, peers, in2.handler, nil)
	sizes := []int{1, 700, 3, maxPooledFrame + 10, 40, 5000, 90 << 10, 600}
	msg := func(i int) string {
		return strings.Repeat(string(rune('a'+i%26)), sizes[i%len(sizes)])
	}
	names := []string{"default", "default", "other"}
	const n = 300
	go func() {
		for i := 0; i < n; i++ {
			buf := []byte(msg(i))
			for t1.Send("n2", names[i%len(names)], buf) == ErrDropped {
				time.Sleep(time.Millisecond)
			}
			clear(buf) // Send copied it
		}
	}()
	for i := 0; i < n; i++ {
		in2.expect(t, got{"n1", names[i%len(names)], msg(i)})
	}
}

// A peer that is already connecting when a transport starts (a node
// restarted on its old address, its peers redialling): the first
// connection is accepted while New is still running. Every peer must be
// whole before then: serve reads the peer's context. Under -race this test
// caught New setting the contexts after it had started the accept loop.
// n1 is a goroutine started before New, so that nothing New does after
// starting the accept loop happens before what n1 makes serve do (the test
// goroutine, which ran New, does no I/O until the message has arrived: the
// race detector orders every read after every earlier write syscall).
func TestPeerAlreadyDialingWhenTransportStarts(t *testing.T) {
	for i := 0; i < 10; i++ {
		l2 := listen(t)
		peers := map[automaton.NodeID]string{"n1": "127.0.0.1:1", "n2": l2.Addr().String(), "n3": "127.0.0.1:1"}
		dialed, errc := make(chan struct{}), make(chan error, 1)
		go func() {
			c, err := net.Dial("tcp", l2.Addr().String())
			close(dialed)
			if err != nil {
				errc <- err
				return
			}
			defer c.Close()
			c.SetDeadline(time.Now().Add(5 * time.Second))
			br := bufio.NewReader(c)
			r, err := Authenticate(c, br, "", Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2", Nonce: NewNonce()})
			if err == nil && r != "" {
				err = fmt.Errorf("refused: %s", r)
			}
			if err == nil {
				_, err = c.Write(AppendFrame(nil, "ns", []byte("early")))
			}
			if err == nil {
				_, err = br.ReadByte() // hold the connection until n2 closes it
				if errors.Is(err, io.EOF) {
					err = nil
				}
			}
			errc <- err
		}()
		<-dialed // n1's connection waits in l2's backlog
		in2 := newInbox()
		tr := start(t, "c", "n2", l2, peers, in2.handler, nil)
		in2.expect(t, got{"n1", "ns", "early"})
		tr.Close()
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
	}
}

// Frame buffers of every size up to maxPooledFrame are reused: a frame
// freed is what the next frame of its size class gets, with room for the
// message, so a steady stream of large frames (a pipelined leader's
// Accepts, 50-100 KiB) allocates nothing. A frame goes back only to a class
// whose every size it holds, and a buffer over the bound is not kept.
func TestFramePoolsBySize(t *testing.T) {
	for _, size := range []int{1, minPooledFrame, minPooledFrame + 1, 5000, 64 << 10, 64<<10 + 1, 90 << 10, maxPooledFrame} {
		newFrame(size).free() // the class's first frame
		allocs := testing.AllocsPerRun(100, func() {
			f := newFrame(size)
			if cap(f.b) < size || len(f.b) != 0 || f.n != 1 {
				t.Fatalf("newFrame(%d): len %d cap %d n %d", size, len(f.b), cap(f.b), f.n)
			}
			f.b = append(f.b, make([]byte, size)...)
			f.n = 3
			f.free()
		})
		if allocs != 0 && !raceDetector {
			t.Errorf("frame of %d bytes: %.1f allocations per frame, want 0 (pooled)", size, allocs)
		}
	}
	for _, c := range []int{minPooledFrame, 700, 1023, 1024, 3000, 100 << 10, maxPooledFrame} {
		f := &frame{b: make([]byte, 0, c)}
		f.free()
		k := frameClass(c + 1)
		if minPooledFrame<<k <= c {
			t.Fatalf("frameClass(%d) = %d, whose frames may hold only %d bytes", c+1, k, minPooledFrame<<k)
		}
		// Every size the class of f's buffer promises fits in it.
		for size := 1; size <= c; size = size*2 + 1 {
			if g := newFrame(size); cap(g.b) < size {
				t.Fatalf("newFrame(%d) after a free of cap %d: cap %d", size, c, cap(g.b))
			}
		}
	}
	if k := frameClass(maxPooledFrame + 1); k < frameClasses {
		t.Fatalf("frameClass(maxPooledFrame+1) = %d, want none", k)
	}
	big := &frame{b: make([]byte, 0, maxPooledFrame+1)}
	big.free()
	if f := newFrame(maxPooledFrame); cap(f.b) > maxPooledFrame {
		t.Fatalf("a buffer of %d bytes was kept", cap(f.b))
	}
}
