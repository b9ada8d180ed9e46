package transport

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// TestSplitListener: the first bytes of a connection send it to the TCP
// transport or to the HTTP/2 (gRPC) side, replayed intact; a connection too
// quiet to tell goes to the TCP side; closing both sides closes the port.
func TestSplitListener(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	tcp, h2 := SplitListener(ln, 200*time.Millisecond, nil)
	send := func(b string) net.Conn {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		if _, err := c.Write([]byte(b)); err != nil {
			t.Fatal(err)
		}
		return c
	}
	read := func(l net.Listener, n int) string {
		c, err := l.Accept()
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		b := make([]byte, n)
		if _, err := io.ReadFull(c, b); err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	hs := string(AppendHandshake(nil, Handshake{Version: Version, Cluster: "c", From: "a", To: "b"}))
	c1 := send(hs)
	defer c1.Close()
	if got := read(tcp, len(hs)); got != hs {
		t.Errorf("tcp side read %q, want the handshake %q", got, hs)
	}
	c2 := send(H2Preface)
	defer c2.Close()
	if got := read(h2, len(H2Preface)); got != H2Preface {
		t.Errorf("h2 side read %q", got)
	}
	c3 := send("PR") // too short to tell: the TCP side, whose handshake reports it
	defer c3.Close()
	if got := read(tcp, 2); got != "PR" {
		t.Errorf("quiet connection: tcp side read %q", got)
	}
	tcp.Close()
	if _, err := tcp.Accept(); !errors.Is(err, net.ErrClosed) {
		t.Errorf("Accept after Close: %v", err)
	}
	c4 := send(H2Preface) // the port stays open for the other side
	defer c4.Close()
	if got := read(h2, 4); got != "PRI " {
		t.Errorf("h2 after tcp closed read %q", got)
	}
	h2.Close()
	if _, err := net.DialTimeout("tcp", ln.Addr().String(), time.Second); err == nil {
		t.Errorf("port still open after both sides closed")
	}
}

// TestTransportOverSplitListener: two TCP transports whose listeners are the
// TCP side of a split exchange messages as before.
func TestTransportOverSplitListener(t *testing.T) {
	lnA, _ := net.Listen("tcp", "127.0.0.1:0")
	lnB, _ := net.Listen("tcp", "127.0.0.1:0")
	tA, hA := SplitListener(lnA, 0, nil)
	tB, hB := SplitListener(lnB, 0, nil)
	defer hA.Close()
	defer hB.Close()
	got := make(chan string, 1)
	peers := map[automaton.NodeID]string{"a": lnA.Addr().String(), "b": lnB.Addr().String()}
	a, err := New(Options{Cluster: "c", Self: "a", Peers: peers, Listener: tA, Handler: func(_ automaton.NodeID, _ string, _ []byte) {}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b, err := New(Options{Cluster: "c", Self: "b", Peers: peers, Listener: tB, Handler: func(from automaton.NodeID, ns string, msg []byte) {
		got <- string(from) + "/" + ns + "/" + string(msg)
	}})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	if err := a.Send("b", "ns", []byte("hello")); err != nil {
		t.Fatal(err)
	}
	select {
	case g := <-got:
		if g != "a/ns/hello" {
			t.Errorf("got %q", g)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no message over the split listener")
	}
}
