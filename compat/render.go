package compat

import (
	"fmt"
	"sort"
	"strconv"
	"strings"
)

// Markers of a command line (see the package doc).
const (
	MarkShape  = "~shape"
	MarkSorted = "~sorted"
	MarkError  = "~error"
	MarkSynod  = "~synod"
)

// Line is one parsed command line of a case.
type Line struct {
	Text   string // as written
	Marker string // "" or one of the Mark constants
	Args   []string
}

// Name is the command's name in lower case ("" for an empty line).
func (l Line) Name() string {
	if len(l.Args) == 0 {
		return ""
	}
	return strings.ToLower(l.Args[0])
}

// ParseLine splits a command line into its marker and words; a word may be a
// Go double-quoted string.
func ParseLine(s string) (Line, error) {
	l := Line{Text: s}
	s = strings.TrimSpace(s)
	if strings.HasPrefix(s, "~") {
		m, rest, _ := strings.Cut(s, " ")
		switch m {
		case MarkShape, MarkSorted, MarkError, MarkSynod:
		default:
			return l, fmt.Errorf("unknown marker %q (want %s, %s, %s or %s)", m, MarkShape, MarkSorted, MarkError, MarkSynod)
		}
		l.Marker, s = m, rest
	}
	for {
		s = strings.TrimLeft(s, " \t")
		if s == "" {
			break
		}
		if s[0] == '"' {
			q, err := strconv.QuotedPrefix(s)
			if err != nil {
				return l, fmt.Errorf("bad quoted word in %q: %v", l.Text, err)
			}
			w, _ := strconv.Unquote(q)
			l.Args = append(l.Args, w)
			s = s[len(q):]
			if s != "" && s[0] != ' ' && s[0] != '\t' {
				return l, fmt.Errorf("quoted word followed by %q in %q", s, l.Text)
			}
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		l.Args = append(l.Args, w)
		s = rest
	}
	if len(l.Args) == 0 {
		return l, fmt.Errorf("empty command line %q", l.Text)
	}
	return l, nil
}

// ErrorReply is an error answer; both drivers turn theirs into one.
type ErrorReply string

func (e ErrorReply) Error() string { return string(e) }

// Nil is the nil answer.
type Nil struct{}

// Render turns an answer into its one-line form: v is what a driver read
// (string, int64, float64, bool, Nil, ErrorReply, []any, map[any]any).
func Render(v any) string {
	var b strings.Builder
	render(&b, v)
	return b.String()
}

func render(b *strings.Builder, v any) {
	switch x := v.(type) {
	case nil, Nil:
		b.WriteString("(nil)")
	case ErrorReply:
		b.WriteString("(error) " + string(x))
	case string:
		b.WriteString(strconv.Quote(x))
	case int64:
		fmt.Fprintf(b, "(integer) %d", x)
	case float64:
		fmt.Fprintf(b, "(double) %s", strconv.FormatFloat(x, 'g', -1, 64))
	case bool:
		fmt.Fprintf(b, "(boolean) %v", x)
	case []any:
		b.WriteByte('[')
		for i, e := range x {
			if i > 0 {
				b.WriteString(", ")
			}
			render(b, e)
		}
		b.WriteByte(']')
	case map[any]any:
		type kv struct{ k, v string }
		var es []kv
		for k, e := range x {
			es = append(es, kv{Render(k), Render(e)})
		}
		sort.Slice(es, func(i, j int) bool { return es[i].k < es[j].k })
		b.WriteByte('{')
		for i, e := range es {
			if i > 0 {
				b.WriteString(", ")
			}
			b.WriteString(e.k + ": " + e.v)
		}
		b.WriteByte('}')
	default:
		fmt.Fprintf(b, "(unexpected %T) %v", v, v)
	}
}

// Shape is the kind of an answer, as ~shape compares it.
func Shape(v any) string {
	switch v.(type) {
	case nil, Nil:
		return "<nil>"
	case ErrorReply:
		return "<error>"
	case string:
		return "<string>"
	case int64:
		return "<integer>"
	case float64:
		return "<double>"
	case bool:
		return "<boolean>"
	case []any:
		return "<array>"
	case map[any]any:
		return "<map>"
	}
	return fmt.Sprintf("<%T>", v)
}

// Compared renders v the way marker compares it.
func Compared(marker string, v any) string {
	switch marker {
	case MarkShape:
		return Shape(v)
	case MarkError:
		if e, ok := v.(ErrorReply); ok {
			code, _, _ := strings.Cut(string(e), " ")
			return "(error) " + code + " ..."
		}
	case MarkSorted:
		if a, ok := v.([]any); ok {
			r := make([]string, len(a))
			for i, e := range a {
				r[i] = Render(e)
			}
			sort.Strings(r)
			return "[" + strings.Join(r, ", ") + "]"
		}
	}
	return Render(v)
}

// IsError reports whether v is an error answer.
func IsError(v any) bool {
	_, ok := v.(ErrorReply)
	return ok
}

// UnknownCommand is Redis's answer to a command it does not know
// (server.c processCommand: the name, then up to 128 bytes of arguments, each
// quoted and followed by a space).
func UnknownCommand(args []string) string {
	var b strings.Builder
	for _, a := range args[1:] {
		if b.Len() >= 128 {
			break
		}
		if len(a) > 128-b.Len() {
			a = a[:128-b.Len()]
		}
		fmt.Fprintf(&b, "'%s' ", a)
	}
	n := args[0]
	if len(n) > 128 {
		n = n[:128]
	}
	return fmt.Sprintf("ERR unknown command '%s', with args beginning with: %s", n, b.String())
}
