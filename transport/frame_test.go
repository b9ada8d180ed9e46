package transport

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"runtime"
	"strings"
	"testing"
)

func TestFrameRoundTrip(t *testing.T) {
	var stream []byte
	type fr struct {
		ns  string
		msg []byte
	}
	frames := []fr{{"default", []byte("hello")}, {"x", nil}, {strings.Repeat("n", 255), bytes.Repeat([]byte{7}, 200000)}}
	for _, f := range frames {
		before := len(stream)
		stream = AppendFrame(stream, f.ns, f.msg)
		if got := len(stream) - before; got != FrameSize(f.ns, f.msg) {
			t.Fatalf("FrameSize %d, encoded %d", FrameSize(f.ns, f.msg), got)
		}
	}
	r := bufio.NewReader(bytes.NewReader(stream))
	for i, f := range frames {
		p, err := ReadFrame(r, DefaultMaxFrame)
		if err != nil {
			t.Fatalf("frame %d: %v", i, err)
		}
		ns, msg, err := DecodePayload(p)
		if err != nil || ns != f.ns || !bytes.Equal(msg, f.msg) {
			t.Fatalf("frame %d: got %q %d bytes %v", i, ns, len(msg), err)
		}
	}
	if _, err := ReadFrame(r, DefaultMaxFrame); err != io.EOF {
		t.Fatalf("after last frame: %v, want io.EOF", err)
	}
}

func TestFrameLimitsAndGarbage(t *testing.T) {
	big := AppendFrame(nil, "ns", make([]byte, 1000))
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(big)), 100); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversized frame: %v", err)
	}
	// A forged 60 MiB length followed by 3 bytes: truncated, not a 60 MiB allocation.
	forged := []byte{0x03, 0xc0, 0, 0, 1, 2, 3}
	if _, err := ReadFrame(bufio.NewReader(bytes.NewReader(forged)), DefaultMaxFrame); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("truncated frame: %v", err)
	}
	for _, p := range [][]byte{{}, {0}, {5, 'a'}, {0x80}} {
		if _, _, err := DecodePayload(p); err == nil {
			t.Fatalf("payload %v accepted", p)
		}
	}
}

func TestHandshakeRoundTripAndRejects(t *testing.T) {
	h := Handshake{Version: Version, Cluster: "demo", From: "n1", To: "n2"}
	b := AppendHandshake(nil, h)
	got, err := ReadHandshake(bufio.NewReader(bytes.NewReader(b)))
	if err != nil || got != h {
		t.Fatalf("got %+v %v", got, err)
	}
	bad := map[string][]byte{
		"http":      []byte("GET / HTTP/1.1\r\n\r\n"),
		"version":   AppendHandshake(nil, Handshake{Version: 9, Cluster: "demo", From: "n1", To: "n2"}),
		"truncated": b[:len(b)-1],
		"long":      append([]byte("SYND\x02"), 0xff, 0xff, 0x03),
		"no nonce":  b[:len(b)-NonceSize],
	}
	for name, in := range bad {
		if _, err := ReadHandshake(bufio.NewReader(bytes.NewReader(in))); err == nil {
			t.Errorf("%s: accepted", name)
		}
	}
	for _, reason := range []string{"", "cluster mismatch"} {
		r, err := ReadAck(bufio.NewReader(bytes.NewReader(AppendAck(nil, reason))))
		if err != nil || r != reason {
			t.Fatalf("ack %q: got %q %v", reason, r, err)
		}
	}
	for _, rep := range []Reply{{Status: StatusChallenge, Data: NewNonce()}, {Status: StatusAccepted, Data: NewNonce()}, {Status: StatusRefused, Reason: "no"}} {
		got, err := ReadReply(bufio.NewReader(bytes.NewReader(AppendReply(nil, rep))))
		if err != nil || got != rep {
			t.Fatalf("reply %+v: got %+v %v", rep, got, err)
		}
	}
}

func FuzzDecodeFrame(f *testing.F) {
	f.Add(AppendFrame(nil, "default", []byte("m")))
	f.Add(AppendFrame(AppendFrame(nil, "a", nil), "b", []byte{1, 2, 3}))
	f.Add([]byte{0, 0, 0, 0})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 1})
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bufio.NewReader(bytes.NewReader(data))
		for {
			p, err := ReadFrame(r, 1<<20)
			if err != nil {
				return
			}
			ns, msg, err := DecodePayload(p)
			if err != nil {
				continue
			}
			// Whatever decodes re-encodes to a frame that decodes the same.
			enc := AppendFrame(nil, ns, msg)
			p2, err := ReadFrame(bufio.NewReader(bytes.NewReader(enc)), 1<<20)
			if err != nil {
				t.Fatalf("re-encoded frame unreadable: %v", err)
			}
			ns2, msg2, err := DecodePayload(p2)
			if err != nil || ns2 != ns || !bytes.Equal(msg2, msg) {
				t.Fatalf("round trip: %q %x -> %q %x (%v)", ns, msg, ns2, msg2, err)
			}
		}
	})
}

func FuzzHandshake(f *testing.F) {
	f.Add(AppendHandshake(nil, Handshake{Version: Version, Cluster: "demo", From: "n1", To: "n2"}))
	f.Add(AppendAck(nil, ""))
	f.Add(AppendAck(nil, "no"))
	f.Add([]byte("SYND\x02\x05"))
	f.Add(AppendReply(nil, Reply{Status: StatusChallenge, Data: NewNonce()}))
	f.Fuzz(func(t *testing.T, data []byte) {
		r := bytes.NewReader(data)
		h, err := ReadHandshake(r)
		if err == nil {
			h2, err := ReadHandshake(bytes.NewReader(AppendHandshake(nil, h)))
			if err != nil || h2 != h {
				t.Fatalf("handshake round trip: %+v -> %+v (%v)", h, h2, err)
			}
			if len(h.Cluster) > maxName || len(h.From) > maxName || len(h.To) > maxName {
				t.Fatalf("oversized field accepted: %+v", h)
			}
		}
		r = bytes.NewReader(data)
		if rep, err := ReadReply(r); err == nil {
			if len(rep.Reason) > maxReason {
				t.Fatalf("oversized reason accepted (%d bytes)", len(rep.Reason))
			}
			rep2, err := ReadReply(bytes.NewReader(AppendReply(nil, rep)))
			if err != nil || rep2 != rep {
				t.Fatalf("reply round trip: %+v -> %+v (%v)", rep, rep2, err)
			}
		}
	})
}

// chunkReader returns at most n bytes per Read, as a socket does.
type chunkReader struct {
	r io.Reader
	n int
}

func (c chunkReader) Read(p []byte) (int, error) { return c.r.Read(p[:min(len(p), c.n)]) }

// TestFrameLarge: frames up to exactFrame (read into a buffer of their
// length: one allocation, none for the length) and above it (read into a buffer that doubles as
// their bytes arrive) round-trip whole at and around the doubling
// boundaries, arriving in socket-sized pieces; a large frame cut short is
// ErrUnexpectedEOF; and a forged huge length followed by 200 KB allocates
// about what arrived, not what was declared.
func TestFrameLarge(t *testing.T) {
	for _, size := range []int{64<<10 + 1, 128 << 10, 128<<10 + 1, 300000, exactFrame - 20, exactFrame + 1, 1<<20 + 3, 2<<20 + 5} {
		msg := make([]byte, size)
		for i := range msg {
			msg[i] = byte(i * 7)
		}
		stream := AppendFrame(nil, "default", msg)
		stream = AppendFrame(stream, "next", []byte("after"))
		// The frame twice: AllocsPerRun reads it once before it counts.
		r := bufio.NewReader(chunkReader{bytes.NewReader(append(AppendFrame(nil, "default", msg), stream...)), 4000})
		var p []byte
		var err error
		allocs := testing.AllocsPerRun(1, func() { p, err = ReadFrame(r, DefaultMaxFrame) })
		if err != nil {
			t.Fatalf("%d bytes: %v", size, err)
		}
		if FrameSize("default", msg)-4 <= exactFrame && allocs != 1 {
			t.Fatalf("%d bytes: %.0f allocations, want 1 (a buffer of the frame's length)", size, allocs)
		}
		if ns, got, err := DecodePayload(p); err != nil || ns != "default" || !bytes.Equal(got, msg) {
			t.Fatalf("%d bytes: got %q %d bytes %v", size, ns, len(got), err)
		}
		if p, err := ReadFrame(r, DefaultMaxFrame); err != nil || string(p[1+len("next"):]) != "after" {
			t.Fatalf("%d bytes: the next frame: %q %v", size, p, err)
		}
		cut := stream[:len(stream)-FrameSize("next", []byte("after"))-1]
		if _, err := ReadFrame(bufio.NewReader(chunkReader{bytes.NewReader(cut), 4000}), DefaultMaxFrame); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Fatalf("%d bytes cut short by one: %v, want ErrUnexpectedEOF", size, err)
		}
	}
	forged := append([]byte{0x03, 0xc0, 0, 0}, make([]byte, 200000)...)
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	_, err := ReadFrame(bufio.NewReader(bytes.NewReader(forged)), DefaultMaxFrame)
	runtime.ReadMemStats(&after)
	if !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Fatalf("forged length: %v", err)
	}
	if got := after.TotalAlloc - before.TotalAlloc; got > 4<<20 {
		t.Fatalf("a forged 60 MB length with 200 KB behind it allocated %d bytes", got)
	}
}
