package transport

import (
	"bufio"
	"bytes"
	"crypto/hmac"
	"io"
	"runtime"
	"testing"
)

// allocatedBy returns the bytes allocated while f runs.
func allocatedBy(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

// FuzzPeerStream reads an input as an acceptor reads a new connection: a
// handshake, then frames. Whatever is read respects the limits (names of at
// most maxName bytes, frames of at most the limit), and the whole read
// allocates at most one small frame's buffer (64 KB, allocated before its
// bytes arrive), 64 KB of slack (the fuzzing engine allocates in the
// background) and a bounded amount per input byte: a length prefix claiming
// 4 GB allocates nothing.
func FuzzPeerStream(f *testing.F) {
	h := Handshake{Version: Version, Cluster: "demo", From: "n1", To: "n2", Nonce: [NonceSize]byte{7}}
	hs := AppendHandshake(nil, h)
	f.Add(AppendFrame(AppendFrame(hs, "default", []byte("m")), "kv", nil))
	f.Add(append(append([]byte(nil), hs...), 0xff, 0xff, 0xff, 0xff, 1))
	f.Add(append(append([]byte(nil), hs...), 0, 0, 0x10, 0, 1, 'a'))
	f.Add([]byte("SYND\x02\xff\xff\xff\xff\x0f"))
	f.Add([]byte("SYND\x02\x04demo\x80\x80\x80\x80\x80\x80\x80\x80\x80\x01"))
	const limit = 1 << 20
	f.Fuzz(func(t *testing.T, data []byte) {
		n := allocatedBy(func() {
			br := bufio.NewReader(bytes.NewReader(data))
			h, err := ReadHandshake(br)
			if err != nil {
				return
			}
			if len(h.Cluster) > maxName || len(h.From) > maxName || len(h.To) > maxName {
				t.Fatalf("oversized handshake field accepted: %+v", h)
			}
			for {
				p, err := ReadFrame(br, limit)
				if err != nil {
					return
				}
				if len(p) > limit {
					t.Fatalf("frame of %d bytes over the limit %d", len(p), limit)
				}
				if ns, _, err := DecodePayload(p); err == nil && (ns == "" || len(ns) > maxName) {
					t.Fatalf("namespace of %d bytes accepted", len(ns))
				}
			}
		})
		if n > 128<<10+64*uint64(len(data)) {
			t.Fatalf("reading %d bytes allocated %d", len(data), n)
		}
	})
}

// FuzzReply reads an input as a dialer reads the acceptor's answers. A
// reply that decodes re-encodes to one that decodes equal (a refusal's
// reason at most maxReason bytes), and Authenticate, fed the input as the
// acceptor's side, succeeds only if the input carries the acceptor's true
// proof for the challenge it sent: garbage never authenticates.
func FuzzReply(f *testing.F) {
	h := Handshake{Version: Version, Cluster: "demo", From: "n1", To: "n2", Nonce: [NonceSize]byte{7}}
	na := [NonceSize]byte{9}
	good := AppendReply(AppendReply(nil, Reply{Status: StatusChallenge, Data: na}), Reply{Status: StatusAccepted, Data: Proof("s3cret", labelAcceptor, h, na)})
	f.Add(good)
	f.Add(AppendReply(AppendReply(nil, Reply{Status: StatusChallenge, Data: na}), Reply{Status: StatusAccepted}))
	f.Add(AppendReply(AppendReply(nil, Reply{Status: StatusChallenge, Data: na}), Reply{Status: StatusChallenge}))
	f.Add(AppendReply(nil, Reply{Status: StatusRefused, Reason: "wrong cluster"}))
	f.Add(AppendAck(nil, ""))
	f.Add([]byte("SYND\x02\x01\xff\xff\xff\xff\x0f"))
	f.Add([]byte("SYND\x01\x00"))
	f.Fuzz(func(t *testing.T, data []byte) {
		if rep, err := ReadReply(bytes.NewReader(data)); err == nil {
			if len(rep.Reason) > maxReason {
				t.Fatalf("reason of %d bytes accepted", len(rep.Reason))
			}
			again, err := ReadReply(bytes.NewReader(AppendReply(nil, rep)))
			if err != nil || again != rep {
				t.Fatalf("reply %+v re-read as %+v (%v)", rep, again, err)
			}
		}
		refusal, err := Authenticate(io.Discard, bufio.NewReader(bytes.NewReader(data)), "s3cret", h)
		if err != nil || refusal != "" {
			return
		}
		// Authenticated: the input must be a challenge then the true proof.
		br := bytes.NewReader(data)
		ch, err1 := ReadReply(br)
		ok, err2 := ReadReply(br)
		want := Proof("s3cret", labelAcceptor, h, ch.Data)
		if err1 != nil || err2 != nil || ch.Status != StatusChallenge || ok.Status != StatusAccepted || !hmac.Equal(ok.Data[:], want[:]) {
			t.Fatalf("authenticated by %x", data)
		}
	})
}
