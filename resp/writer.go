package resp

import (
	"bufio"
	"io"
	"strconv"
	"strings"
)

// Writer encodes RESP replies (and, for clients, commands) into a buffered
// stream. Its protocol version (2 by default, 3 after HELLO 3) decides how
// nulls, maps, sets and booleans are written. Write errors are sticky and
// reported by Flush. A Writer is not safe for concurrent use.
type Writer struct {
	bw      *bufio.Writer
	proto   int
	scratch []byte
}

// NewWriter returns a RESP2 writer over w with a 16 KiB buffer.
func NewWriter(w io.Writer) *Writer {
	return &Writer{bw: bufio.NewWriterSize(w, 16<<10), proto: 2, scratch: make([]byte, 0, 24)}
}

// SetProtocol selects RESP2 (2) or RESP3 (3). Other values are ignored.
func (w *Writer) SetProtocol(v int) {
	if v == 2 || v == 3 {
		w.proto = v
	}
}

// Protocol returns the protocol version in use.
func (w *Writer) Protocol() int { return w.proto }

// Flush writes buffered data and returns the first write error, if any.
func (w *Writer) Flush() error { return w.bw.Flush() }

// Buffered returns the number of bytes waiting to be flushed.
func (w *Writer) Buffered() int { return w.bw.Buffered() }

func (w *Writer) header(prefix byte, n int64) {
	w.bw.WriteByte(prefix)
	w.scratch = strconv.AppendInt(w.scratch[:0], n, 10)
	w.bw.Write(w.scratch)
	w.bw.WriteString("\r\n")
}

// oneLine replaces CR and LF, which cannot appear in simple strings and errors.
func oneLine(s string) string {
	if strings.ContainsAny(s, "\r\n") {
		s = strings.NewReplacer("\r", " ", "\n", " ").Replace(s)
	}
	return s
}

// WriteSimple writes a simple string ("+OK").
func (w *Writer) WriteSimple(s string) {
	w.bw.WriteByte('+')
	w.bw.WriteString(oneLine(s))
	w.bw.WriteString("\r\n")
}

// WriteError writes an error reply. msg should start with an upper-case error
// code ("ERR syntax error", "NOAUTH Authentication required.").
func (w *Writer) WriteError(msg string) {
	w.bw.WriteByte('-')
	w.bw.WriteString(oneLine(msg))
	w.bw.WriteString("\r\n")
}

// WriteInt writes an integer.
func (w *Writer) WriteInt(n int64) { w.header(':', n) }

// WriteBulk writes a bulk string.
func (w *Writer) WriteBulk(b []byte) {
	w.header('$', int64(len(b)))
	w.bw.Write(b)
	w.bw.WriteString("\r\n")
}

// WriteBulkString writes a bulk string.
func (w *Writer) WriteBulkString(s string) {
	w.header('$', int64(len(s)))
	w.bw.WriteString(s)
	w.bw.WriteString("\r\n")
}

// WriteNull writes a null: "$-1" in RESP2, "_" in RESP3.
func (w *Writer) WriteNull() {
	if w.proto == 3 {
		w.bw.WriteString("_\r\n")
	} else {
		w.bw.WriteString("$-1\r\n")
	}
}

// WriteNullArray writes a null array: "*-1" in RESP2, "_" in RESP3.
func (w *Writer) WriteNullArray() {
	if w.proto == 3 {
		w.bw.WriteString("_\r\n")
	} else {
		w.bw.WriteString("*-1\r\n")
	}
}

// WriteArray writes an array header; n elements must follow.
func (w *Writer) WriteArray(n int) { w.header('*', int64(n)) }

// WriteMap writes a map header; n key-value pairs (2n values) must follow.
// In RESP2 a map is a flat array of 2n elements.
func (w *Writer) WriteMap(n int) {
	if w.proto == 3 {
		w.header('%', int64(n))
	} else {
		w.header('*', int64(2*n))
	}
}

// WriteSet writes a set header ("~n" in RESP3, an array in RESP2).
func (w *Writer) WriteSet(n int) {
	if w.proto == 3 {
		w.header('~', int64(n))
	} else {
		w.header('*', int64(n))
	}
}

// WriteDouble writes a double given as its text ("1.5", "inf"): ",1.5" in
// RESP3, a bulk string in RESP2 (Redis's ZSCORE).
func (w *Writer) WriteDouble(text []byte) {
	if w.proto == 3 {
		w.bw.WriteByte(',')
		w.bw.Write(text)
		w.bw.WriteString("\r\n")
	} else {
		w.WriteBulk(text)
	}
}

// WriteBool writes a boolean ("#t"/"#f" in RESP3, 1/0 in RESP2).
func (w *Writer) WriteBool(b bool) {
	switch {
	case w.proto == 3 && b:
		w.bw.WriteString("#t\r\n")
	case w.proto == 3:
		w.bw.WriteString("#f\r\n")
	case b:
		w.bw.WriteString(":1\r\n")
	default:
		w.bw.WriteString(":0\r\n")
	}
}

// WriteCommand writes a command as a multibulk array (client side).
func (w *Writer) WriteCommand(args [][]byte) {
	w.WriteArray(len(args))
	for _, a := range args {
		w.WriteBulk(a)
	}
}
