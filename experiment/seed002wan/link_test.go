package seed002wan

import (
	"bytes"
	"io"
	"net"
	"testing"
	"time"
)

// The relay carries both directions intact and in order, and delays each
// way by at least the Pareto scale (its minimum).
func TestParetoLink(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		io.Copy(c, c) // echo
		c.Close()
	}()
	w, err := New(ln.Addr().String(), Pareto(1.8, 5), 1)
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	c, err := net.Dial("tcp", w.Addr())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var want []byte
	start := time.Now()
	for i := range 50 {
		msg := []byte{byte(i), byte(i >> 8), 'x'}
		want = append(want, msg...)
		if _, err := c.Write(msg); err != nil {
			t.Fatal(err)
		}
	}
	got := make([]byte, len(want))
	if _, err := io.ReadFull(c, got); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatalf("echo through the link: %v, want %v", got, want)
	}
	if d := time.Since(start); d < 10*time.Millisecond {
		t.Fatalf("round trip %v through a link of at least 5 ms each way", d)
	}
}
