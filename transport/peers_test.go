package transport

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// A peer added at run time is reached and accepted; a removed one is
// neither: sends fail, and its new connections are refused.
func TestAddAndRemovePeer(t *testing.T) {
	lnA, lnB := listen(t), listen(t)
	inA, inB := newInbox(), newInbox()
	var logA logBuf
	a := start(t, "c", "a", lnA, map[automaton.NodeID]string{}, inA.handler, logA.logger())
	b := start(t, "c", "b", lnB, map[automaton.NodeID]string{"a": lnA.Addr().String()}, inB.handler, nil)
	if err := a.Send("b", "ns", []byte("x")); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("send to a peer not added yet: %v", err)
	}
	if err := a.AddPeer("b", lnB.Addr().String()); err != nil {
		t.Fatal(err)
	}
	if err := a.AddPeer("b", lnB.Addr().String()); err != nil {
		t.Fatal("adding the same peer again:", err)
	}
	if err := a.Send("b", "ns", []byte("hello b")); err != nil {
		t.Fatal(err)
	}
	inB.expect(t, got{"a", "ns", "hello b"})
	if err := b.Send("a", "ns", []byte("hello a")); err != nil {
		t.Fatal(err)
	}
	inA.expect(t, got{"b", "ns", "hello a"})
	if addr, ok := a.PeerAddr("b"); !ok || addr != lnB.Addr().String() {
		t.Fatalf("PeerAddr: %q %v", addr, ok)
	}

	if !a.RemovePeer("b") || a.RemovePeer("b") {
		t.Fatal("RemovePeer reports wrongly")
	}
	if err := a.Send("b", "ns", []byte("gone")); !errors.Is(err, ErrUnknownPeer) {
		t.Fatalf("send to a removed peer: %v", err)
	}
	if len(a.Peers()) != 0 {
		t.Fatalf("peers after removal: %v", a.Peers())
	}
	// b's open connection is closed at its next frame, and b's redial is
	// refused.
	deadline := time.Now().Add(5 * time.Second)
	for !strings.Contains(logA.String(), "unknown node id") && time.Now().Before(deadline) {
		b.Send("a", "ns", []byte("after removal"))
		time.Sleep(20 * time.Millisecond)
	}
	if !strings.Contains(logA.String(), "unknown node id") {
		t.Fatalf("a did not refuse the removed peer; log:\n%s", logA.String())
	}
	select {
	case g := <-inA.ch:
		t.Fatalf("a received %+v from a removed peer", g)
	default:
	}
	a.Close()
	if err := a.AddPeer("z", "127.0.0.1:1"); !errors.Is(err, ErrClosed) {
		t.Fatalf("AddPeer after Close: %v", err)
	}
}
