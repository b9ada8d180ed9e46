package transport

import (
	"bufio"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"slices"

	"github.com/synod-dev/synod/wire"
)

// Magic opens every handshake and handshake reply.
const Magic = "SYND"

// Version is the peer protocol version this package speaks. Version 2 added
// the challenge-response authentication (auth.go); version 1 peers are
// refused with a reason naming both versions.
const Version byte = 2

// DefaultMaxFrame bounds one frame's payload unless Options.MaxFrame says otherwise.
const DefaultMaxFrame = 64 << 20

// maxName bounds the strings in a handshake and a frame's namespace name
// (config names are at most 63 bytes).
const maxName = 255

// maxReason bounds a refusal reason.
const maxReason = 1024

// NonceSize is the length of a handshake nonce and of a proof (HMAC-SHA256).
const NonceSize = 32

// Handshake is the first thing a dialing node sends on a new connection.
type Handshake struct {
	Version byte
	Cluster string
	From    string // the sender's node id
	To      string // the node id the sender believes it reached
	// Nonce is the dialer's fresh random challenge (auth.go).
	Nonce [NonceSize]byte
}

// AppendHandshake encodes h: "SYND", version, then cluster, from and to as
// uvarint-length-prefixed strings, then the NonceSize-byte nonce.
func AppendHandshake(dst []byte, h Handshake) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, h.Version)
	e := wire.Encoder{B: dst}
	e.String(h.Cluster)
	e.String(h.From)
	e.String(h.To)
	return append(e.B, h.Nonce[:]...)
}

// ReadHandshake reads one handshake. It reads exactly the handshake's bytes
// and never allocates more than maxName bytes per field.
func ReadHandshake(r io.ByteReader) (Handshake, error) {
	var h Handshake
	if err := readMagic(r); err != nil {
		return h, err
	}
	v, err := r.ReadByte()
	if err != nil {
		return h, truncated(err)
	}
	h.Version = v
	if v != Version {
		return h, fmt.Errorf("%w: peer speaks version %d, this node speaks %d", ErrVersion, v, Version)
	}
	for _, f := range []*string{&h.Cluster, &h.From, &h.To} {
		s, err := readString(r, maxName)
		if err != nil {
			return h, err
		}
		*f = s
	}
	if err := readFull(r, h.Nonce[:]); err != nil {
		return h, err
	}
	return h, nil
}

// ErrVersion reports a peer speaking another peer protocol version.
var ErrVersion = errors.New("transport: unsupported peer protocol version")

// Reply statuses: the acceptor's answer to a handshake, and to a proof.
const (
	StatusAccepted  byte = 0 // followed by the acceptor's proof
	StatusRefused   byte = 1 // followed by the reason
	StatusChallenge byte = 2 // followed by the acceptor's nonce
)

// Reply is the acceptor's answer: a refusal with its reason, a challenge
// with the acceptor's nonce, or an acceptance with the acceptor's proof.
type Reply struct {
	Status byte
	Reason string
	Data   [NonceSize]byte // the nonce (StatusChallenge) or proof (StatusAccepted)
}

// AppendAck encodes a refusal reply: "SYND", version, status 1, the reason.
// An empty refusal encodes an acceptance with a zero proof (tests only).
func AppendAck(dst []byte, refusal string) []byte {
	if refusal == "" {
		return AppendReply(dst, Reply{Status: StatusAccepted})
	}
	return AppendReply(dst, Reply{Status: StatusRefused, Reason: refusal})
}

// AppendReply encodes r: "SYND", version, the status byte, then the reason
// (uvarint-length-prefixed) or the NonceSize bytes of data.
func AppendReply(dst []byte, r Reply) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, Version, r.Status)
	if r.Status == StatusRefused {
		reason := r.Reason
		if len(reason) > maxReason {
			reason = reason[:maxReason]
		}
		e := wire.Encoder{B: dst}
		e.String(reason)
		return e.B
	}
	return append(dst, r.Data[:]...)
}

// ReadReply reads the acceptor's reply.
func ReadReply(r io.ByteReader) (Reply, error) {
	var rep Reply
	if err := readMagic(r); err != nil {
		return rep, err
	}
	v, err := r.ReadByte()
	if err != nil {
		return rep, truncated(err)
	}
	if v != Version {
		return rep, fmt.Errorf("%w in reply: peer speaks version %d, this node speaks %d", ErrVersion, v, Version)
	}
	if rep.Status, err = r.ReadByte(); err != nil {
		return rep, truncated(err)
	}
	switch rep.Status {
	case StatusRefused:
		if rep.Reason, err = readString(r, maxReason); err != nil {
			return rep, err
		}
		if rep.Reason == "" {
			rep.Reason = "refused (no reason given)"
		}
		return rep, nil
	case StatusAccepted, StatusChallenge:
		return rep, readFull(r, rep.Data[:])
	}
	return rep, fmt.Errorf("transport: bad handshake reply status %d", rep.Status)
}

// ReadAck reads a reply that must be a refusal or an acceptance, and
// returns the refusal reason ("" when accepted). A challenge is an error:
// the caller did not authenticate (see Authenticate).
func ReadAck(r io.ByteReader) (refusal string, err error) {
	rep, err := ReadReply(r)
	if err != nil {
		return "", err
	}
	if rep.Status == StatusChallenge {
		return "", errors.New("transport: the peer demands authentication (challenge)")
	}
	return rep.Reason, nil
}

func readFull(r io.ByteReader, b []byte) error {
	for i := range b {
		var err error
		if b[i], err = r.ReadByte(); err != nil {
			return truncated(err)
		}
	}
	return nil
}

func readMagic(r io.ByteReader) error {
	for i := 0; i < len(Magic); i++ {
		b, err := r.ReadByte()
		if err != nil {
			return truncated(err)
		}
		if b != Magic[i] {
			return fmt.Errorf("transport: not a Synod peer connection (bad magic byte %#02x at offset %d)", b, i)
		}
	}
	return nil
}

func readString(r io.ByteReader, max int) (string, error) {
	n, err := binary.ReadUvarint(r)
	if err != nil {
		return "", truncated(err)
	}
	if n > uint64(max) {
		return "", fmt.Errorf("transport: handshake field of %d bytes exceeds %d", n, max)
	}
	b := make([]byte, n)
	if err := readFull(r, b); err != nil {
		return "", err
	}
	return string(b), nil
}

func truncated(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// AppendFrame encodes one frame: a 4-byte big-endian payload length, then the
// payload: the namespace name (uvarint length + bytes) followed by the message
// bytes up to the end of the frame.
func AppendFrame(dst []byte, ns string, msg []byte) []byte {
	plen := uvarintLen(uint64(len(ns))) + len(ns) + len(msg)
	dst = binary.BigEndian.AppendUint32(dst, uint32(plen))
	e := wire.Encoder{B: dst}
	e.String(ns)
	return append(e.B, msg...)
}

// FrameSize is the encoded size of a frame.
func FrameSize(ns string, msg []byte) int {
	return 4 + uvarintLen(uint64(len(ns))) + len(ns) + len(msg)
}

func uvarintLen(v uint64) int {
	n := 1
	for v >= 0x80 {
		v >>= 7
		n++
	}
	return n
}

// exactFrame bounds the frames ReadFrame reads into a buffer of their
// declared length, allocated before their bytes arrive: at most this much
// per connection for a length that is not followed by its bytes. It was
// 64 KiB, and a pipelined leader's Accepts (50-100 KiB, issue 28) each
// cost a follower a 64 KiB buffer, a second one of 128 KiB and a copy of
// the first into it (session 56).
const exactFrame = 1 << 20

// ErrFrameTooLarge is returned for a frame whose declared length exceeds the limit.
var ErrFrameTooLarge = errors.New("transport: frame too large")

// ReadFrame reads one frame's payload into fresh memory that the caller owns.
// A declared length above max is an error before anything is allocated, and a
// frame over exactFrame grows its buffer only as its bytes actually arrive.
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	// The length read in place (Peek): an array given to io.ReadFull
	// escapes, an allocation per frame.
	hdr, err := r.Peek(4)
	if len(hdr) < 4 {
		if len(hdr) > 0 && err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, err // io.EOF here is a clean end between frames
	}
	n := binary.BigEndian.Uint32(hdr)
	r.Discard(4)
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, max)
	}
	if n <= exactFrame {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, truncated(err)
		}
		return b, nil
	}
	// A large frame: the buffer starts at 64 KB and doubles (up to n) each
	// time what arrived fills it, so it is never more than twice what
	// arrived, in a few steps (bytes.Buffer started at 512 bytes: ten
	// growths and copies for a follower's 300 KB Accept).
	b := make([]byte, 0, 64<<10)
	for len(b) < int(n) {
		if len(b) == cap(b) {
			b = slices.Grow(b, min(cap(b), int(n)-len(b)))
		}
		m, err := io.ReadFull(r, b[len(b):min(cap(b), int(n))])
		b = b[:len(b)+m]
		if err != nil {
			return nil, truncated(err)
		}
	}
	return b, nil
}

// DecodePayload splits a frame payload into namespace and message. msg aliases p.
func DecodePayload(p []byte) (ns string, msg []byte, err error) {
	nsb, msg, err := splitPayload(p)
	if err != nil {
		return "", nil, err
	}
	return string(nsb), msg, nil
}

// splitPayload is DecodePayload with the namespace name left as bytes
// aliasing p, so that a reader can compare it with the name of its previous
// frame instead of allocating a string per frame.
func splitPayload(p []byte) (ns, msg []byte, err error) {
	d := wire.Decoder{B: p}
	n := d.Uvarint()
	if d.Err() != nil {
		return nil, nil, fmt.Errorf("transport: frame payload: %w", d.Err())
	}
	if n == 0 || n > maxName {
		return nil, nil, fmt.Errorf("transport: frame namespace name of %d bytes (want 1-%d)", n, maxName)
	}
	if n > uint64(len(d.B)) {
		return nil, nil, fmt.Errorf("transport: frame payload: %w", wire.ErrTruncated)
	}
	return d.B[:n], d.B[n:], nil
}
