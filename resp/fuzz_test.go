package resp

import (
	"bufio"
	"bytes"
	"fmt"
	"strings"
	"testing"
)

// FuzzSplitInline: an inline command line that splits re-quotes (every
// argument double-quoted, every byte a \xHH escape) to a line that splits
// into the same arguments; no argument is longer than the line.
func FuzzSplitInline(f *testing.F) {
	for _, s := range []string{`set k v`, `set "a b" 'c d'`, `"\x41\n\t\\\"" 'it\'s'`, `"unterminated`, `'x'y`, "  \t ", `"\x4"`} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, line []byte) {
		args, err := SplitInline(line)
		if err != nil {
			return
		}
		var b strings.Builder
		for i, a := range args {
			if len(a) > len(line) {
				t.Fatalf("argument of %d bytes from a line of %d", len(a), len(line))
			}
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteByte('"')
			for _, c := range a {
				fmt.Fprintf(&b, `\x%02x`, c)
			}
			b.WriteByte('"')
		}
		again, err := SplitInline([]byte(b.String()))
		if err != nil || fmt.Sprintf("%q", again) != fmt.Sprintf("%q", args) {
			t.Fatalf("%q split into %q; re-quoted %q split into %q (%v)", line, args, b.String(), again, err)
		}
	})
}

// appendReply encodes r in RESP3 (errors as blob errors, so any text
// survives; a verbatim string with the "txt" format).
func appendReply(b []byte, r Reply) []byte {
	switch r.Kind {
	case SimpleString, Double, BigNumber:
		return fmt.Appendf(b, "%c%s\r\n", r.Kind, r.Str)
	case Error:
		return fmt.Appendf(b, "!%d\r\n%s\r\n", len(r.Str), r.Str)
	case Bulk:
		return fmt.Appendf(b, "$%d\r\n%s\r\n", len(r.Str), r.Str)
	case Verbatim:
		return fmt.Appendf(b, "=%d\r\ntxt:%s\r\n", len(r.Str)+4, r.Str)
	case Integer:
		return fmt.Appendf(b, ":%d\r\n", r.Int)
	case Null:
		return append(b, "_\r\n"...)
	case Bool:
		return append(b, "#f\r\n#t\r\n"[4*r.Int:4*r.Int+4]...)
	}
	n := len(r.Elems)
	if r.Kind == Map {
		n /= 2
	}
	b = fmt.Appendf(b, "%c%d\r\n", r.Kind, n)
	for _, e := range r.Elems {
		b = appendReply(b, e)
	}
	return b
}

// FuzzReplyRoundTrip: every reply read from the input (default limits)
// encodes to RESP3 that reads back as the same reply, in as many bytes.
func FuzzReplyRoundTrip(f *testing.F) {
	for _, s := range replySeeds {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bufio.NewReader(bytes.NewReader(data)), Limits{})
		for {
			rep, err := r.ReadReply()
			if err != nil {
				return
			}
			enc := appendReply(nil, rep)
			again, err := NewReader(bufio.NewReader(bytes.NewReader(enc)), Limits{}).ReadReply()
			if err != nil || again.String() != rep.String() || !bytes.Equal(appendReply(nil, again), enc) {
				t.Fatalf("reply %s encoded as %q read back as %s (%v)", rep, enc, again, err)
			}
		}
	})
}
