package resp

import (
	"bufio"
	"errors"
	"io"
	"slices"
)

// Reader reads RESP frames (commands on a server, replies on a client) from a
// buffered stream, enforcing Limits. A Reader is not safe for concurrent use.
type Reader struct {
	br  *bufio.Reader
	lim Limits
	n   int // bytes consumed by the current frame

	// Arenas for commands' small arguments and argument lists: each is
	// carved out of a shared chunk with its capacity capped at its length,
	// so it stays a slice of its own (an append to it reallocates; the
	// next one never overlaps it) that the caller may keep, and a command
	// costs about one allocation per chunk instead of one per argument.
	// A chunk is never reused: it is freed when nothing keeps a piece.
	bytes []byte
	lists [][]byte
}

// Arena sizes: arguments up to smallArg bytes share chunks of arenaBytes;
// argument lists of up to smallList elements share chunks of arenaLists.
const (
	smallArg   = 256
	arenaBytes = 4 << 10
	smallList  = 16
	arenaLists = 256
)

// NewReader returns a Reader over br with the given limits (zero fields take
// the package defaults).
func NewReader(br *bufio.Reader, lim Limits) *Reader {
	return &Reader{br: br, lim: lim.withDefaults()}
}

// Buffered reports how many bytes are already read from the underlying
// stream and waiting in the buffer. A server flushes its replies when this is
// zero: the client has no further pipelined command in flight that we have seen.
func (r *Reader) Buffered() int { return r.br.Buffered() }

// bulkChunk is how much a bulk buffer grows at a time beyond what has arrived.
const bulkChunk = 64 << 10

// ReadCommand reads one client command and returns its arguments (the
// command name first). Every argument is a fresh slice that the caller may
// keep. Empty commands (an empty inline line, "*0") are skipped, as Redis
// does. At a clean end of stream it returns io.EOF.
func (r *Reader) ReadCommand() ([][]byte, error) {
	for {
		r.n = 0
		b, err := r.br.Peek(1)
		if err != nil {
			return nil, err
		}
		var args [][]byte
		if b[0] == '*' {
			args, err = r.readMultibulk()
		} else {
			args, err = r.readInline()
		}
		if err != nil {
			return nil, err
		}
		if len(args) > 0 {
			return args, nil
		}
	}
}

func (r *Reader) readMultibulk() ([][]byte, error) {
	line, err := r.readLine(true, "too big mbulk count string")
	if err != nil {
		return nil, err
	}
	n, ok := parseInt(line[1:])
	if !ok || n > int64(r.lim.MaxElements) {
		return nil, protoErr("invalid multibulk length")
	}
	if n <= 0 {
		return nil, nil
	}
	var args [][]byte
	if n <= smallList {
		if cap(r.lists)-len(r.lists) < int(n) {
			r.lists = make([][]byte, 0, arenaLists)
		}
		l := len(r.lists)
		args = r.lists[l : l : l+int(n)]
		r.lists = r.lists[:l+int(n)]
	} else {
		args = make([][]byte, 0, min(n, 64))
	}
	for i := int64(0); i < n; i++ {
		line, err := r.readLine(true, "too big bulk count string")
		if err != nil {
			return nil, eofIsUnexpected(err)
		}
		if line[0] != '$' {
			return nil, protoErr("expected '$', got '%s'", printable(line[0]))
		}
		l, ok := parseInt(line[1:])
		if !ok || l < 0 || l > int64(r.lim.MaxBulk) {
			return nil, protoErr("invalid bulk length")
		}
		arg, err := r.readBulkBody(int(l))
		if err != nil {
			return nil, err
		}
		args = append(args, arg)
	}
	return args, nil
}

func (r *Reader) readInline() ([][]byte, error) {
	line, err := r.readLine(false, "too big inline request")
	if err != nil {
		return nil, err
	}
	return SplitInline(line)
}

// readLine reads one line ending in "\n" and returns it without the line
// ending. strict requires "\r\n" and a non-empty line (RESP headers);
// otherwise a lone "\n" is accepted (inline commands). The returned slice is
// valid until the next read. tooLong is the error message for an overlong line.
func (r *Reader) readLine(strict bool, tooLong string) ([]byte, error) {
	var acc []byte
	var line []byte
	for {
		chunk, err := r.br.ReadSlice('\n')
		if err == nil {
			if acc == nil {
				line = chunk
			} else {
				line = append(acc, chunk...)
			}
			break
		}
		if err == bufio.ErrBufferFull {
			acc = append(acc, chunk...)
			if len(acc) > r.lim.MaxInline+2 {
				return nil, protoErr("%s", tooLong)
			}
			continue
		}
		if err == io.EOF && len(acc)+len(chunk) > 0 {
			err = io.ErrUnexpectedEOF
		}
		return nil, err
	}
	if err := r.count(len(line)); err != nil {
		return nil, err
	}
	line = line[:len(line)-1]
	if len(line) > 0 && line[len(line)-1] == '\r' {
		line = line[:len(line)-1]
	} else if strict {
		return nil, protoErr("expected CRLF line ending")
	}
	if len(line) > r.lim.MaxInline {
		return nil, protoErr("%s", tooLong)
	}
	if strict && len(line) == 0 {
		return nil, protoErr("empty header line")
	}
	return line, nil
}

// count charges n bytes to the current frame.
func (r *Reader) count(n int) error {
	r.n += n
	if r.n > r.lim.MaxFrame {
		return protoErr("frame too large (limit %d bytes)", r.lim.MaxFrame)
	}
	return nil
}

// readBulkBody reads n bytes and the CRLF after them, growing the buffer only
// as data arrives.
func (r *Reader) readBulkBody(n int) ([]byte, error) {
	if err := r.count(n + 2); err != nil {
		return nil, err
	}
	var b []byte
	if n <= smallArg {
		if cap(r.bytes)-len(r.bytes) < n {
			r.bytes = make([]byte, 0, arenaBytes)
		}
		l := len(r.bytes)
		b = r.bytes[l : l+n : l+n]
		r.bytes = r.bytes[:l+n]
		if _, err := io.ReadFull(r.br, b); err != nil {
			return nil, eofIsUnexpected(err)
		}
	} else {
		b = make([]byte, 0, min(n, bulkChunk))
	}
	for len(b) < n {
		want := min(n-len(b), bulkChunk)
		b = slices.Grow(b, want)
		m, err := io.ReadFull(r.br, b[len(b):len(b)+want])
		b = b[:len(b)+m]
		if err != nil {
			return nil, eofIsUnexpected(err)
		}
	}
	c1, err := r.br.ReadByte()
	if err != nil {
		return nil, eofIsUnexpected(err)
	}
	c2, err := r.br.ReadByte()
	if err != nil {
		return nil, eofIsUnexpected(err)
	}
	if c1 != '\r' || c2 != '\n' {
		return nil, protoErr("expected CRLF after bulk string")
	}
	return b, nil
}

func eofIsUnexpected(err error) error {
	if errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// parseInt parses a decimal integer strictly: an optional '-', then 1 to 19
// digits, nothing else, no overflow.
func parseInt(b []byte) (int64, bool) {
	neg := false
	if len(b) > 0 && b[0] == '-' {
		neg = true
		b = b[1:]
	}
	if len(b) == 0 || len(b) > 19 {
		return 0, false
	}
	var v uint64
	for _, c := range b {
		if c < '0' || c > '9' {
			return 0, false
		}
		v = v*10 + uint64(c-'0')
	}
	if neg {
		if v > 1<<63 {
			return 0, false
		}
		return -int64(v), true
	}
	if v > 1<<63-1 {
		return 0, false
	}
	return int64(v), true
}

func printable(c byte) string {
	if c >= 0x20 && c < 0x7f {
		return string(rune(c))
	}
	return "\\x" + string("0123456789abcdef"[c>>4]) + string("0123456789abcdef"[c&15])
}

func isSpace(c byte) bool {
	return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\v' || c == '\f'
}

func hexVal(c byte) (byte, bool) {
	switch {
	case c >= '0' && c <= '9':
		return c - '0', true
	case c >= 'a' && c <= 'f':
		return c - 'a' + 10, true
	case c >= 'A' && c <= 'F':
		return c - 'A' + 10, true
	}
	return 0, false
}

// SplitInline splits an inline command line into arguments with the quoting
// rules of Redis's sdssplitargs: words separated by white space; "double
// quotes" with \n \r \t \b \a \\ \" and \xHH escapes; 'single quotes' with \'
// only. A closing quote must be followed by white space or the end of the line.
func SplitInline(line []byte) ([][]byte, error) {
	var args [][]byte
	p := 0
	for {
		for p < len(line) && isSpace(line[p]) {
			p++
		}
		if p >= len(line) {
			return args, nil
		}
		inq, insq, done := false, false, false
		cur := []byte{}
		for !done {
			switch {
			case inq:
				if p >= len(line) {
					return nil, protoErr("unbalanced quotes in request")
				}
				c := line[p]
				if c == '\\' && p+3 < len(line) && line[p+1] == 'x' {
					if h, ok := hexVal(line[p+2]); ok {
						if l, ok := hexVal(line[p+3]); ok {
							cur = append(cur, h<<4|l)
							p += 3
							break
						}
					}
				}
				if c == '\\' && p+1 < len(line) {
					p++
					switch e := line[p]; e {
					case 'n':
						cur = append(cur, '\n')
					case 'r':
						cur = append(cur, '\r')
					case 't':
						cur = append(cur, '\t')
					case 'b':
						cur = append(cur, '\b')
					case 'a':
						cur = append(cur, '\a')
					default:
						cur = append(cur, e)
					}
				} else if c == '"' {
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return nil, protoErr("unbalanced quotes in request")
					}
					done = true
				} else {
					cur = append(cur, c)
				}
			case insq:
				if p >= len(line) {
					return nil, protoErr("unbalanced quotes in request")
				}
				c := line[p]
				if c == '\\' && p+1 < len(line) && line[p+1] == '\'' {
					p++
					cur = append(cur, '\'')
				} else if c == '\'' {
					if p+1 < len(line) && !isSpace(line[p+1]) {
						return nil, protoErr("unbalanced quotes in request")
					}
					done = true
				} else {
					cur = append(cur, c)
				}
			default:
				if p >= len(line) {
					done = true
					break
				}
				switch c := line[p]; {
				case isSpace(c):
					done = true
				case c == '"':
					inq = true
				case c == '\'':
					insq = true
				default:
					cur = append(cur, c)
				}
			}
			if p < len(line) {
				p++
			}
		}
		args = append(args, cur)
	}
}
