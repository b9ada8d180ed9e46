package transport

import (
	"bytes"
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// rawExchange sends 300 small frames and one of 300 KB (read in many
// read(2) calls, waiting for the socket in between) each way between two
// started transports, checks they arrive whole and in order, and returns
// the raw reads and writes made meanwhile.
func rawExchange(t *testing.T, t1, t2 *Transport, in1, in2 *inbox) (reads, writes uint64) {
	t.Helper()
	r0, w0 := rawReads.Load(), rawWrites.Load()
	big := bytes.Repeat([]byte("0123456789abcdef"), 300<<10/16)
	for _, d := range []struct {
		from, to *Transport
		id       automaton.NodeID
		in       *inbox
	}{{t1, t2, "n1", in2}, {t2, t1, "n2", in1}} {
		for i := range 300 {
			if err := d.from.Send(d.to.o.Self, "ns", []byte(fmt.Sprint(i))); err != nil {
				t.Fatal(err)
			}
		}
		if err := d.from.Send(d.to.o.Self, "ns", big); err != nil {
			t.Fatal(err)
		}
		for i := range 300 {
			d.in.expect(t, got{d.id, "ns", fmt.Sprint(i)})
		}
		d.in.expect(t, got{d.id, "ns", string(big)})
	}
	return rawReads.Load() - r0, rawWrites.Load() - w0
}

func plainPair(t *testing.T) (t1, t2 *Transport, in1, in2 *inbox, log2 *logBuf) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	in1, in2, log2 = newInbox(), newInbox(), &logBuf{}
	t1 = start(t, "c", "n1", l1, peers, in1.handler, nil)
	t2 = start(t, "c", "n2", l2, peers, in2.handler, log2.logger())
	return
}

// A plaintext peer connection is read and written by raw read(2) and
// write(2) (rawio.go), both the inline writes and the writer goroutine's
// batches; frames arrive whole and in order, a 300 KB one included.
// With SYNOD_PEER_RAWIO=0 (rawIO false) the net.Conn path: no raw call.
func TestPlaintextPeersUseRawIO(t *testing.T) {
	defer func(old bool) { rawIO = old }(rawIO)
	rawIO = true // read by New only
	t1, t2, in1, in2, _ := plainPair(t)
	rawIO = false
	waitInline(t, t1, "n2")
	waitInline(t, t2, "n1")
	reads, writes := rawExchange(t, t1, t2, in1, in2)
	if reads == 0 || writes == 0 {
		t.Fatalf("raw reads %d, raw writes %d: the plaintext path did not take raw I/O", reads, writes)
	}
	// Batches through the writer goroutine (SendQueued) too.
	w0 := rawWrites.Load()
	for i := range 100 {
		if err := t1.SendQueued("n2", "q", []byte(fmt.Sprint(i))); err != nil {
			t.Fatal(err)
		}
	}
	for i := range 100 {
		in2.expect(t, got{"n1", "q", fmt.Sprint(i)})
	}
	if rawWrites.Load() == w0 {
		t.Fatal("the writer goroutine's batches did not take raw writes")
	}

	u1, u2, v1, v2, _ := plainPair(t)
	waitInline(t, u1, "n2")
	waitInline(t, u2, "n1")
	if reads, writes := rawExchange(t, u1, u2, v1, v2); reads != 0 || writes != 0 {
		t.Fatalf("raw I/O off: %d raw reads, %d raw writes", reads, writes)
	}
}

// TLS peers keep crypto/tls over net.Conn: a raw read of the TCP
// descriptor would read records as frames. They exchange the same frames
// with no raw call.
func TestTLSPeersKeepNetConn(t *testing.T) {
	ca := newTestCA(t)
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	in1, in2 := newInbox(), newInbox()
	defer func(old bool) { rawIO = old }(rawIO)
	rawIO = true // read by New only: on, and still no raw call with TLS
	t1 := startWith(t, Options{Cluster: "c", Self: "n1", Peers: peers, Listener: l1, TLS: ca.config("c", "node", "n1"), Handler: in1.handler})
	t2 := startWith(t, Options{Cluster: "c", Self: "n2", Peers: peers, Listener: l2, TLS: ca.config("c", "node", "n2"), Handler: in2.handler})
	if reads, writes := rawExchange(t, t1, t2, in1, in2); reads != 0 || writes != 0 {
		t.Fatalf("TLS peers made %d raw reads, %d raw writes", reads, writes)
	}
}

// A raw reader sees the dialer's close as the end of the stream (read(2)
// returning 0 is io.EOF): the acceptor drops the connection and logs no
// bad frame.
func TestRawReaderSeesPeerClose(t *testing.T) {
	defer func(old bool) { rawIO = old }(rawIO)
	rawIO = true // read by New only
	t1, t2, in1, in2, log2 := plainPair(t)
	waitInline(t, t1, "n2")
	waitInline(t, t2, "n1")
	rawExchange(t, t1, t2, in1, in2)
	t1.Close()
	waitFor(t, func() bool {
		t2.mu.Lock()
		defer t2.mu.Unlock()
		return len(t2.conns) == 0
	})
	if s := log2.String(); strings.Contains(s, "bad frame") {
		t.Fatalf("the close was read as a bad frame:\n%s", s)
	}
}
