package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

func startWith(t *testing.T, o Options) *Transport {
	t.Helper()
	o.MinBackoff, o.MaxBackoff = 10*time.Millisecond, 100*time.Millisecond
	if o.Handler == nil {
		o.Handler = func(automaton.NodeID, string, []byte) {}
	}
	tr, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { tr.Close() })
	return tr
}

func pair(t *testing.T, secret1, secret2 string) (t1, t2 *Transport, in2 *inbox, log1, log2 *logBuf) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	log1, log2, in2 = &logBuf{}, &logBuf{}, newInbox()
	t1 = startWith(t, Options{Cluster: "c", Self: "n1", Peers: peers, Listener: l1, Logger: log1.logger(), Secret: secret1})
	t2 = startWith(t, Options{Cluster: "c", Self: "n2", Peers: peers, Listener: l2, Logger: log2.logger(), Secret: secret2, Handler: in2.handler})
	return
}

func TestSecretAuthenticatesPeers(t *testing.T) {
	t1, _, in2, log1, _ := pair(t, "s3cret-s3cret-s3cret", "s3cret-s3cret-s3cret")
	t1.Send("n2", "ns", []byte("hi"))
	in2.expect(t, got{"n1", "ns", "hi"})
	if strings.Contains(log1.String(), "not authenticated") {
		t.Fatalf("warned about missing authentication with a secret set:\n%s", log1)
	}
}

func TestWrongSecretRefused(t *testing.T) {
	t1, _, in2, log1, log2 := pair(t, "secret-one-secret-one", "secret-two-secret-two")
	t1.Send("n2", "ns", []byte("hi"))
	waitFor(t, func() bool {
		return strings.Contains(log2.String(), "authentication failed") && strings.Contains(log1.String(), "peer refused our connection")
	})
	select {
	case g := <-in2.ch:
		t.Fatalf("message over an unauthenticated connection delivered: %+v", g)
	case <-time.After(50 * time.Millisecond):
	}
	// The dialer retries with backoff; the acceptor logs the refusal once.
	time.Sleep(200 * time.Millisecond)
	if n := strings.Count(log2.String(), `msg="refused peer connection"`); n != 1 {
		t.Fatalf("refusal logged %d times, want once:\n%s", n, log2)
	}
}

// fakeAcceptor answers one handshake on c with a challenge and then with
// accept carrying proof, and returns everything the dialer sent.
func fakeAcceptor(c net.Conn, proof [NonceSize]byte) <-chan []byte {
	out := make(chan []byte, 1)
	go func() {
		var rec bytes.Buffer
		br := bufio.NewReader(io.TeeReader(c, &rec))
		if _, err := ReadHandshake(br); err != nil {
			out <- rec.Bytes()
			return
		}
		c.Write(AppendReply(nil, Reply{Status: StatusChallenge, Data: NewNonce()}))
		var p [NonceSize]byte
		readFull(br, p[:])
		c.Write(AppendReply(nil, Reply{Status: StatusAccepted, Data: proof}))
		out <- rec.Bytes()
	}()
	return out
}

func TestImpostorAcceptorDetectedAndSecretNeverSent(t *testing.T) {
	const secret = "the-cluster-secret-value"
	a, b := net.Pipe()
	defer a.Close()
	defer b.Close()
	sent := fakeAcceptor(b, [NonceSize]byte{1, 2, 3})
	_, err := Authenticate(a, bufio.NewReader(a), secret, Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2", Nonce: NewNonce()})
	if !errors.Is(err, ErrImpostor) {
		t.Fatalf("an acceptor with a made-up proof was trusted: %v", err)
	}
	if w := <-sent; bytes.Contains(w, []byte(secret)) || len(w) == 0 {
		t.Fatalf("dialer sent %q", w)
	}
}

func TestReplayedHandshakeRefused(t *testing.T) {
	const secret = "replay-secret-replay-secret"
	ln := listen(t)
	var lg logBuf
	startWith(t, Options{Cluster: "c", Self: "n2", Listener: ln, Logger: lg.logger(), Secret: secret,
		Peers: map[automaton.NodeID]string{"n1": "127.0.0.1:1", "n2": ln.Addr().String()}})
	h := Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2", Nonce: NewNonce()}
	try := func() string {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(5 * time.Second))
		r, err := Authenticate(c, bufio.NewReader(c), secret, h)
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	if r := try(); r != "" {
		t.Fatalf("first handshake refused: %s", r)
	}
	for range 3 {
		if r := try(); !strings.Contains(r, "replayed handshake") {
			t.Fatalf("replayed handshake: refusal %q", r)
		}
	}
	if n := strings.Count(lg.String(), "replayed handshake"); n != 1 {
		t.Fatalf("replay logged %d times, want once:\n%s", n, lg.String())
	}
}

func TestGarbageAfterHandshakeRefusedLoggedOnce(t *testing.T) {
	t1, t2, in2, _, log2 := pair(t, "garbage-secret-garbage", "garbage-secret-garbage")
	t1.Send("n2", "ns", []byte("one"))
	in2.expect(t, got{"n1", "ns", "one"})
	addr := t2.Addr().String()
	garbage := bytes.Repeat(AppendFrame(nil, "ns", []byte("junk")), 300)
	for range 20 {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		// A handshake naming the right cluster and ids, then frames where
		// the proof should be.
		c.Write(AppendHandshake(nil, Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2", Nonce: NewNonce()}))
		c.Write(garbage)
		br := bufio.NewReader(c)
		rep, err := ReadReply(br)
		if err != nil || rep.Status != StatusChallenge {
			t.Fatalf("first reply %+v %v, want a challenge", rep, err)
		}
		rep, err = ReadReply(br)
		if err != nil || rep.Status != StatusRefused || !strings.Contains(rep.Reason, "authentication failed") {
			t.Fatalf("second reply %+v %v, want an authentication refusal", rep, err)
		}
		c.Close()
	}
	select {
	case g := <-in2.ch:
		t.Fatalf("garbage delivered: %+v", g)
	case <-time.After(50 * time.Millisecond):
	}
	if n := strings.Count(log2.String(), "authentication failed"); n != 1 {
		t.Fatalf("20 refusals logged %d times, want once:\n%s", n, log2)
	}
	// The node and its real peer are unaffected.
	t1.Send("n2", "ns", []byte("two"))
	in2.expect(t, got{"n1", "ns", "two"})
}

func TestOldVersionRefusedWithReason(t *testing.T) {
	ln := listen(t)
	startWith(t, Options{Cluster: "c", Self: "n2", Listener: ln, Peers: map[automaton.NodeID]string{"n1": "127.0.0.1:1"}})
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	c.Write([]byte("SYND\x01\x01c\x02n1\x02n2"))
	r, err := ReadAck(bufio.NewReader(c))
	if err != nil || !strings.Contains(r, "version 1") {
		t.Fatalf("refusal %q %v", r, err)
	}
}

func TestNonceCacheForgetsOldest(t *testing.T) {
	nc := newNonceCache(2)
	a, b, c := [NonceSize]byte{1}, [NonceSize]byte{2}, [NonceSize]byte{3}
	if !nc.add(a) || !nc.add(b) || nc.add(a) {
		t.Fatal("a repeated nonce was taken as new")
	}
	if !nc.add(c) || !nc.add(a) {
		t.Fatal("the oldest nonce was not forgotten when the cache was full")
	}
	if nc.add(c) || len(nc.seen) != 2 {
		t.Fatalf("cache holds %d nonces, want 2", len(nc.seen))
	}
}
