// Package resp implements the Redis serialization protocol (RESP2 and RESP3)
// for Synod's Redis-compatible client port.
//
// It has three parts:
//
//   - Reader.ReadCommand parses what clients send: multibulk commands
//     ("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n") and inline commands (a line of
//     space-separated words, with Redis's quoting rules, which is what a person
//     typing into telnet or redis-cli sends).
//   - Writer encodes replies. It knows the negotiated protocol version (HELLO
//     2 or 3) and writes nulls and maps in the form that version expects:
//     RESP2 nulls are "$-1", RESP3 nulls are "_"; RESP3 maps are "%n", RESP2
//     maps are flat arrays of 2n elements.
//   - ReadReply parses what servers send (every RESP2 and RESP3 type), for the
//     Go client and the benchmark driver.
//
// # Limits
//
// Input comes from the network, so every length is checked before anything is
// allocated, and large lengths are never trusted: a bulk string is read in
// chunks and its buffer grows only as bytes actually arrive, and an array's
// slice grows only as elements arrive. A peer that announces "$8000000" and
// then goes quiet costs one chunk, not eight megabytes. Besides per-item
// limits (Limits.MaxBulk, MaxElements, MaxInline) every frame is bounded in
// total bytes (Limits.MaxFrame), so many small elements cannot add up beyond
// it either. Replies may nest at most Limits.MaxDepth levels.
//
// # Errors
//
// Malformed input yields a *ProtocolError whose message follows Redis's
// ("Protocol error: invalid bulk length"). After a protocol error the stream
// position is undefined: the caller should report the error and close the
// connection, as Redis does. I/O errors are returned unchanged; a stream that
// ends in the middle of a frame yields io.ErrUnexpectedEOF, a stream that ends
// between frames yields io.EOF.
package resp

import (
	"errors"
	"fmt"

	"github.com/synod-dev/synod/service"
)

// Default limits.
const (
	// MaxBulk is the longest bulk string accepted: the largest value Synod
	// stores plus 1 KiB, so that a slightly-too-large value reaches the service
	// and is refused there with a clear "value too large" reply instead of
	// tearing the connection down.
	MaxBulk = service.MaxValueSize + 1<<10
	// MaxElements bounds the element count of one array (and of a command).
	MaxElements = 1 << 20
	// MaxInline bounds an inline command line and every header line.
	MaxInline = 64 << 10
	// MaxFrame bounds the total bytes of one command or reply.
	MaxFrame = 4 * MaxBulk
	// MaxDepth bounds the nesting of aggregate replies.
	MaxDepth = 32
)

// Limits bound what a Reader accepts. The zero value of a field means the
// package default.
type Limits struct {
	MaxBulk     int
	MaxElements int
	MaxInline   int
	MaxFrame    int
	MaxDepth    int
}

// DefaultLimits returns the package defaults.
func DefaultLimits() Limits {
	return Limits{MaxBulk: MaxBulk, MaxElements: MaxElements, MaxInline: MaxInline, MaxFrame: MaxFrame, MaxDepth: MaxDepth}
}

func (l Limits) withDefaults() Limits {
	d := DefaultLimits()
	if l.MaxBulk <= 0 {
		l.MaxBulk = d.MaxBulk
	}
	if l.MaxElements <= 0 {
		l.MaxElements = d.MaxElements
	}
	if l.MaxInline <= 0 {
		l.MaxInline = d.MaxInline
	}
	if l.MaxFrame <= 0 {
		l.MaxFrame = d.MaxFrame
	}
	if l.MaxDepth <= 0 {
		l.MaxDepth = d.MaxDepth
	}
	return l
}

// ProtocolError reports malformed input. Its message reads like Redis's.
type ProtocolError struct{ Msg string }

func (e *ProtocolError) Error() string { return "Protocol error: " + e.Msg }

func protoErr(f string, a ...any) error { return &ProtocolError{Msg: fmt.Sprintf(f, a...)} }

// IsProtocolError reports whether err is (or wraps) a *ProtocolError.
func IsProtocolError(err error) bool {
	var pe *ProtocolError
	return errors.As(err, &pe)
}
