package resp

import (
	"fmt"
	"strconv"
	"strings"
)

// Kind is a reply's type, named by its RESP prefix byte.
type Kind byte

// Reply kinds. RESP2 null bulk strings ("$-1") and null arrays ("*-1") are
// read as Null, like RESP3's "_". RESP3 blob errors ("!") are read as Error.
const (
	SimpleString Kind = '+'
	Error        Kind = '-'
	Integer      Kind = ':'
	Bulk         Kind = '$'
	Array        Kind = '*'
	Null         Kind = '_'
	Map          Kind = '%'
	Set          Kind = '~'
	Bool         Kind = '#'
	Double       Kind = ','
	BigNumber    Kind = '('
	Verbatim     Kind = '='
	Push         Kind = '>'
)

func (k Kind) String() string {
	switch k {
	case SimpleString:
		return "simple-string"
	case Error:
		return "error"
	case Integer:
		return "integer"
	case Bulk:
		return "bulk"
	case Array:
		return "array"
	case Null:
		return "null"
	case Map:
		return "map"
	case Set:
		return "set"
	case Bool:
		return "bool"
	case Double:
		return "double"
	case BigNumber:
		return "big-number"
	case Verbatim:
		return "verbatim"
	case Push:
		return "push"
	}
	return fmt.Sprintf("Kind(%q)", byte(k))
}

// Reply is one parsed server reply.
type Reply struct {
	Kind Kind
	// Str holds the text of SimpleString, Error, Bulk, Verbatim (without its
	// "txt:" format prefix), Double and BigNumber replies.
	Str []byte
	// Int holds an Integer, or 1/0 for a Bool.
	Int int64
	// Elems holds the elements of Array, Set and Push replies, and the keys
	// and values of a Map alternately (k1, v1, k2, v2, ...).
	Elems []Reply
}

// IsNull reports whether the reply is a null.
func (r Reply) IsNull() bool { return r.Kind == Null }

// String renders the reply the way redis-cli does ("(nil)", "(integer) 1",
// quoted strings, numbered array elements).
func (r Reply) String() string {
	var sb strings.Builder
	r.format(&sb, "")
	return sb.String()
}

func (r Reply) format(sb *strings.Builder, indent string) {
	switch r.Kind {
	case SimpleString:
		sb.Write(r.Str)
	case Error:
		sb.WriteString("(error) ")
		sb.Write(r.Str)
	case Integer:
		fmt.Fprintf(sb, "(integer) %d", r.Int)
	case Bulk, Verbatim:
		sb.WriteString(strconv.Quote(string(r.Str)))
	case Null:
		sb.WriteString("(nil)")
	case Bool:
		if r.Int != 0 {
			sb.WriteString("(true)")
		} else {
			sb.WriteString("(false)")
		}
	case Double:
		fmt.Fprintf(sb, "(double) %s", r.Str)
	case BigNumber:
		fmt.Fprintf(sb, "(big number) %s", r.Str)
	case Array, Set, Push, Map:
		if len(r.Elems) == 0 {
			sb.WriteString("(empty array)")
			return
		}
		step := 1
		if r.Kind == Map {
			step = 2
		}
		width := len(strconv.Itoa(len(r.Elems) / step))
		for i := 0; i < len(r.Elems); i += step {
			if i > 0 {
				sb.WriteString("\n")
				sb.WriteString(indent)
			}
			label := fmt.Sprintf("%*d) ", width, i/step+1)
			sb.WriteString(label)
			sub := indent + strings.Repeat(" ", len(label))
			r.Elems[i].format(sb, sub)
			if step == 2 {
				sb.WriteString(" => ")
				r.Elems[i+1].format(sb, sub)
			}
		}
	default:
		fmt.Fprintf(sb, "(%s)", r.Kind)
	}
}

// ReadReply reads one server reply. RESP3 attributes ("|") are read and
// dropped: they are metadata about the reply that follows them.
func (r *Reader) ReadReply() (Reply, error) {
	r.n = 0
	if _, err := r.br.Peek(1); err != nil {
		return Reply{}, err
	}
	return r.readReply(0)
}

func (r *Reader) readReply(depth int) (Reply, error) {
	if depth > r.lim.MaxDepth {
		return Reply{}, protoErr("reply nested too deeply (limit %d)", r.lim.MaxDepth)
	}
	line, err := r.readLine(true, "too big reply header")
	if err != nil {
		if depth > 0 {
			err = eofIsUnexpected(err)
		}
		return Reply{}, err
	}
	kind, body := Kind(line[0]), line[1:]
	switch kind {
	case SimpleString, Error:
		return Reply{Kind: kind, Str: append([]byte(nil), body...)}, nil
	case Integer:
		n, ok := parseInt(body)
		if !ok {
			return Reply{}, protoErr("invalid integer %q", body)
		}
		return Reply{Kind: Integer, Int: n}, nil
	case Null:
		if len(body) != 0 {
			return Reply{}, protoErr("invalid null")
		}
		return Reply{Kind: Null}, nil
	case Bool:
		if len(body) != 1 || (body[0] != 't' && body[0] != 'f') {
			return Reply{}, protoErr("invalid boolean")
		}
		v := int64(0)
		if body[0] == 't' {
			v = 1
		}
		return Reply{Kind: Bool, Int: v}, nil
	case Double:
		if _, err := strconv.ParseFloat(string(body), 64); err != nil {
			return Reply{}, protoErr("invalid double %q", body)
		}
		return Reply{Kind: Double, Str: append([]byte(nil), body...)}, nil
	case BigNumber:
		b := body
		if len(b) > 0 && b[0] == '-' {
			b = b[1:]
		}
		if len(b) == 0 || len(b) > r.lim.MaxInline {
			return Reply{}, protoErr("invalid big number")
		}
		for _, c := range b {
			if c < '0' || c > '9' {
				return Reply{}, protoErr("invalid big number")
			}
		}
		return Reply{Kind: BigNumber, Str: append([]byte(nil), body...)}, nil
	case Bulk, Verbatim, '!':
		n, ok := parseInt(body)
		if ok && n == -1 && kind == Bulk {
			return Reply{Kind: Null}, nil
		}
		if !ok || n < 0 || n > int64(r.lim.MaxBulk) {
			return Reply{}, protoErr("invalid bulk length")
		}
		b, err := r.readBulkBody(int(n))
		if err != nil {
			return Reply{}, err
		}
		switch kind {
		case '!':
			return Reply{Kind: Error, Str: b}, nil
		case Verbatim:
			if len(b) < 4 || b[3] != ':' {
				return Reply{}, protoErr("invalid verbatim string")
			}
			return Reply{Kind: Verbatim, Str: b[4:]}, nil
		}
		return Reply{Kind: Bulk, Str: b}, nil
	case Array, Set, Push, Map, '|':
		n, ok := parseInt(body)
		if ok && n == -1 && kind == Array {
			return Reply{Kind: Null}, nil
		}
		if !ok || n < 0 || n > int64(r.lim.MaxElements) {
			return Reply{}, protoErr("invalid multibulk length")
		}
		if kind == Map || kind == '|' {
			n *= 2
		}
		elems := make([]Reply, 0, min(n, 16))
		for i := int64(0); i < n; i++ {
			e, err := r.readReply(depth + 1)
			if err != nil {
				return Reply{}, err
			}
			elems = append(elems, e)
		}
		if kind == '|' {
			// Counted as a level so a chain of attributes stays bounded.
			return r.readReply(depth + 1)
		}
		return Reply{Kind: kind, Elems: elems}, nil
	}
	return Reply{}, protoErr("unknown reply type '%s'", printable(byte(kind)))
}
