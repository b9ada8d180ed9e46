package transport

import (
	"bufio"
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"io"

	"github.com/synod-dev/synod/wire"
)

// Magic opens every handshake and handshake reply.
const Magic = "SYND"

// Version is the peer protocol version this package speaks.
const Version byte = 1

// DefaultMaxFrame bounds one frame's payload unless Options.MaxFrame says otherwise.
const DefaultMaxFrame = 64 << 20

// maxName bounds the strings in a handshake and a frame's namespace name
// (config names are at most 63 bytes).
const maxName = 255

// maxReason bounds a refusal reason.
const maxReason = 1024

// Handshake is the first thing a dialing node sends on a new connection.
type Handshake struct {
	Version byte
	Cluster string
	From    string // the sender's node id
	To      string // the node id the sender believes it reached
}

// AppendHandshake encodes h: "SYND", version, then cluster, from and to as
// uvarint-length-prefixed strings.
func AppendHandshake(dst []byte, h Handshake) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, h.Version)
	e := wire.Encoder{B: dst}
	e.String(h.Cluster)
	e.String(h.From)
	e.String(h.To)
	return e.B
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
		return h, fmt.Errorf("transport: unsupported peer protocol version %d (this node speaks %d)", v, Version)
	}
	for _, f := range []*string{&h.Cluster, &h.From, &h.To} {
		s, err := readString(r, maxName)
		if err != nil {
			return h, err
		}
		*f = s
	}
	return h, nil
}

// AppendAck encodes the acceptor's reply: "SYND", version, then a status byte
// (0 accepted, 1 refused) and, when refused, the reason.
func AppendAck(dst []byte, refusal string) []byte {
	dst = append(dst, Magic...)
	dst = append(dst, Version)
	if refusal == "" {
		return append(dst, 0)
	}
	if len(refusal) > maxReason {
		refusal = refusal[:maxReason]
	}
	dst = append(dst, 1)
	e := wire.Encoder{B: dst}
	e.String(refusal)
	return e.B
}

// ReadAck reads the acceptor's reply. It returns the refusal reason ("" when
// accepted) or a decoding error.
func ReadAck(r io.ByteReader) (refusal string, err error) {
	if err := readMagic(r); err != nil {
		return "", err
	}
	v, err := r.ReadByte()
	if err != nil {
		return "", truncated(err)
	}
	if v != Version {
		return "", fmt.Errorf("transport: unsupported peer protocol version %d in reply (this node speaks %d)", v, Version)
	}
	st, err := r.ReadByte()
	if err != nil {
		return "", truncated(err)
	}
	switch st {
	case 0:
		return "", nil
	case 1:
		s, err := readString(r, maxReason)
		if err != nil {
			return "", err
		}
		if s == "" {
			s = "refused (no reason given)"
		}
		return s, nil
	}
	return "", fmt.Errorf("transport: bad handshake reply status %d", st)
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
	for i := range b {
		if b[i], err = r.ReadByte(); err != nil {
			return "", truncated(err)
		}
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

// ErrFrameTooLarge is returned for a frame whose declared length exceeds the limit.
var ErrFrameTooLarge = errors.New("transport: frame too large")

// ReadFrame reads one frame's payload into fresh memory that the caller owns.
// A declared length above max is an error before anything is allocated, and a
// large frame's buffer grows only as its bytes actually arrive.
func ReadFrame(r *bufio.Reader, max int) ([]byte, error) {
	var hdr [4]byte
	if _, err := io.ReadFull(r, hdr[:]); err != nil {
		return nil, err // io.EOF here is a clean end between frames
	}
	n := binary.BigEndian.Uint32(hdr[:])
	if uint64(n) > uint64(max) {
		return nil, fmt.Errorf("%w: %d bytes (limit %d)", ErrFrameTooLarge, n, max)
	}
	if n <= 64<<10 {
		b := make([]byte, n)
		if _, err := io.ReadFull(r, b); err != nil {
			return nil, truncated(err)
		}
		return b, nil
	}
	var buf bytes.Buffer
	if _, err := io.CopyN(&buf, r, int64(n)); err != nil {
		return nil, truncated(err)
	}
	return buf.Bytes(), nil
}

// DecodePayload splits a frame payload into namespace and message. msg aliases p.
func DecodePayload(p []byte) (ns string, msg []byte, err error) {
	d := wire.NewDecoder(p)
	n := d.Uvarint()
	if d.Err() != nil {
		return "", nil, fmt.Errorf("transport: frame payload: %w", d.Err())
	}
	if n == 0 || n > maxName {
		return "", nil, fmt.Errorf("transport: frame namespace name of %d bytes (want 1-%d)", n, maxName)
	}
	if n > uint64(len(d.B)) {
		return "", nil, fmt.Errorf("transport: frame payload: %w", wire.ErrTruncated)
	}
	return string(d.B[:n]), d.B[n:], nil
}
