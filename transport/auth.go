package transport

import (
	"bufio"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sync"

	"github.com/synod-dev/synod/wire"
)

// Peer authentication by challenge-response with the cluster secret.
//
// The dialer sends its handshake with a fresh random nonce Nd. The acceptor
// checks the names (cluster, its own id, a known member), refuses a nonce it
// has seen before (a replayed handshake), and answers with a challenge: its
// own fresh nonce Na. The dialer proves it knows the secret by sending
//
//	HMAC-SHA256(secret, "synod-peer-v2 dialer" | cluster | from | to | Nd | Na)
//
// and the acceptor, once that proof checks, proves itself in turn with the
// same MAC under the label "synod-peer-v2 acceptor", sent with its
// acceptance. The dialer checks it before sending any frame. The secret never
// crosses the wire; a recorded exchange is useless later because each side's
// proof covers the other side's fresh nonce; the role labels stop a proof
// being reflected back; and the names in the MAC tie the proof to this
// connection's claimed identities. The acceptor asks for the dialer's proof
// first, so a stranger on the peer port learns nothing computed from the
// secret.
//
// Without a secret (Options.Secret empty) the exchange still runs with an
// empty key: it then authenticates nothing, and New logs a warning saying so.

const (
	labelDialer   = "synod-peer-v2 dialer"
	labelAcceptor = "synod-peer-v2 acceptor"
)

// Proof is the MAC one side of a handshake sends: label is the sender's role.
func Proof(secret, label string, h Handshake, acceptorNonce [NonceSize]byte) [NonceSize]byte {
	m := hmac.New(sha256.New, []byte(secret))
	e := wire.Encoder{}
	e.String(label)
	e.String(h.Cluster)
	e.String(h.From)
	e.String(h.To)
	m.Write(e.B)
	m.Write(h.Nonce[:])
	m.Write(acceptorNonce[:])
	var out [NonceSize]byte
	m.Sum(out[:0])
	return out
}

// NewNonce returns a fresh random nonce.
func NewNonce() [NonceSize]byte {
	var n [NonceSize]byte
	rand.Read(n[:])
	return n
}

// ErrImpostor means the acceptor did not prove that it knows the secret.
var ErrImpostor = errors.New("the peer did not prove it knows the cluster secret (an impostor, or a different secret)")

// Authenticate runs the dialer's side of the handshake on c (br reads c):
// it sends h (whose Nonce should be fresh, see NewNonce), answers the
// challenge with its proof and checks the acceptor's. It returns the
// refusal reason when the acceptor refused, or an error.
func Authenticate(c io.Writer, br *bufio.Reader, secret string, h Handshake) (refusal string, err error) {
	if _, err := c.Write(AppendHandshake(nil, h)); err != nil {
		return "", fmt.Errorf("handshake: %w", err)
	}
	rep, err := ReadReply(br)
	if err != nil {
		return "", fmt.Errorf("handshake reply: %w", err)
	}
	switch rep.Status {
	case StatusRefused:
		return rep.Reason, nil
	case StatusAccepted:
		return "", fmt.Errorf("handshake reply: accepted without a challenge: %w", ErrImpostor)
	}
	na := rep.Data
	p := Proof(secret, labelDialer, h, na)
	if _, err := c.Write(p[:]); err != nil {
		return "", fmt.Errorf("handshake proof: %w", err)
	}
	if rep, err = ReadReply(br); err != nil {
		return "", fmt.Errorf("handshake reply to proof: %w", err)
	}
	switch rep.Status {
	case StatusRefused:
		return rep.Reason, nil
	case StatusChallenge:
		return "", fmt.Errorf("handshake reply to proof: a second challenge: %w", ErrImpostor)
	}
	want := Proof(secret, labelAcceptor, h, na)
	if !hmac.Equal(rep.Data[:], want[:]) {
		return "", ErrImpostor
	}
	return "", nil
}

// challenge runs the acceptor's side after h passed the name checks: it
// sends a challenge, reads and checks the dialer's proof, and accepts with
// its own. It returns a refusal reason ("" when authenticated) or an I/O error.
func (t *Transport) challenge(c net.Conn, br *bufio.Reader, h Handshake) (string, error) {
	na := NewNonce()
	if _, err := c.Write(AppendReply(nil, Reply{Status: StatusChallenge, Data: na})); err != nil {
		return "", err
	}
	var got [NonceSize]byte
	if err := readFull(br, got[:]); err != nil {
		return "", fmt.Errorf("reading the proof: %w", err)
	}
	want := Proof(t.o.Secret, labelDialer, h, na)
	if !hmac.Equal(got[:], want[:]) {
		return fmt.Sprintf("authentication failed: node %q did not prove it knows cluster %q's secret (wrong secret, or not a member)", h.From, h.Cluster), nil
	}
	mine := Proof(t.o.Secret, labelAcceptor, h, na)
	_, err := c.Write(AppendReply(nil, Reply{Status: StatusAccepted, Data: mine}))
	return "", err
}

// nonceCache remembers the dialer nonces of recent handshakes, so that a
// replayed handshake is refused by name (its proof could not pass anyway:
// the challenge differs each time). It holds the last size nonces.
type nonceCache struct {
	mu   sync.Mutex
	size int
	seen map[[NonceSize]byte]struct{}
	ring [][NonceSize]byte // grows to size, then overwrites the oldest
	next int
}

func newNonceCache(size int) *nonceCache {
	return &nonceCache{size: size, seen: map[[NonceSize]byte]struct{}{}}
}

// add records n and reports whether it was new.
func (nc *nonceCache) add(n [NonceSize]byte) bool {
	nc.mu.Lock()
	defer nc.mu.Unlock()
	if _, ok := nc.seen[n]; ok {
		return false
	}
	if len(nc.ring) < nc.size {
		nc.ring = append(nc.ring, n)
	} else {
		delete(nc.seen, nc.ring[nc.next])
		nc.ring[nc.next] = n
		nc.next = (nc.next + 1) % len(nc.ring)
	}
	nc.seen[n] = struct{}{}
	return true
}

// logRefusal logs a refused or failed incoming connection, at most once per
// Options.LogEvery for each kind of event and remote host.
func (t *Transport) logRefusal(isErr bool, kind, remote, msg string, attrs ...any) {
	level := slog.LevelWarn
	if isErr {
		level = slog.LevelError
	}
	t.limit.Log(t.log, level, kind, remote, msg, attrs...)
}
