package durability

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
)

// Stmt is one SQL statement ready for a database: ? placeholders (the
// store rewrites them for its dialect) and the argument values.
type Stmt struct {
	Object string
	SQL    string
	Args   []Value
	// Fence: the statement must change at least one row, or the whole
	// transaction is rolled back with ErrFenced (a primary's view check
	// inside its transaction: protocol/pbdurable, "Fencing").
	Fence bool
}

// ErrFenced is the error of a transaction whose Fence statement changed
// no row.
var ErrFenced = errors.New("fenced: the database has seen a later view")

func (s Stmt) String() string {
	var b strings.Builder
	b.WriteString(s.SQL)
	if len(s.Args) > 0 {
		fmt.Fprintf(&b, " %v", s.Args)
	}
	return b.String()
}

// template is an SQL template compiled against a method: the text with ?
// placeholders and, for each placeholder, the index of the argument.
type template struct {
	sql  string
	args []int
}

func (t template) bind(object string, args []Value) Stmt {
	st := Stmt{Object: object, SQL: t.sql}
	for _, i := range t.args {
		st.Args = append(st.Args, args[i])
	}
	return st
}

// compileSQL turns a template's :name placeholders (the method's named
// arguments) into ? placeholders. Quoted strings and identifiers are left
// alone, and so is PostgreSQL's :: cast. Without a method signature
// (checked == false), names are not checked and map to nothing.
func compileSQL(s string, m MethodInfo, checked bool) (template, error) {
	var t template
	var b strings.Builder
	if strings.TrimSpace(s) == "" {
		return t, fmt.Errorf("empty statement")
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case c == '\'' || c == '"':
			j := strings.IndexByte(s[i+1:], c)
			if j < 0 {
				return t, fmt.Errorf("unterminated %c at offset %d", c, i)
			}
			b.WriteString(s[i : i+j+2])
			i += j + 1
		case c == '?':
			return t, fmt.Errorf("offset %d: use :name placeholders (the method's argument names), not ?", i)
		case c == ':' && i+1 < len(s) && s[i+1] == ':':
			b.WriteString("::")
			i++
		case c == ':' && i+1 < len(s) && isIdentStart(s[i+1]):
			j := i + 1
			for j < len(s) && isIdent(s[j]) {
				j++
			}
			name := s[i+1 : j]
			idx := -1
			for k, p := range m.Params {
				if p.Name == name {
					idx = k
				}
			}
			if checked && idx < 0 {
				return t, fmt.Errorf(":%s is not an argument of %s (%s)", name, m.Name, paramList(m))
			}
			b.WriteByte('?')
			t.args = append(t.args, idx)
			i = j - 1
		default:
			b.WriteByte(c)
		}
	}
	t.sql = b.String()
	return t, nil
}

func paramList(m MethodInfo) string {
	if len(m.Params) == 0 {
		return "no arguments"
	}
	var out []string
	for _, p := range m.Params {
		out = append(out, ":"+p.Name)
	}
	return strings.Join(out, ", ")
}

func isIdentStart(c byte) bool {
	return c == '_' || c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z'
}

func isIdent(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

// Dialect rewrites the ? placeholders of a compiled statement for a
// database: SQLite takes them as they are; PostgreSQL numbers them ($1,
// $2, ...). Quoted text is left alone.
func Dialect(driver string, sql string) string {
	if driver != "pgx" && driver != "postgres" {
		return sql
	}
	var b strings.Builder
	n := 0
	for i := 0; i < len(sql); i++ {
		c := sql[i]
		switch c {
		case '\'', '"':
			j := strings.IndexByte(sql[i+1:], c)
			if j < 0 {
				b.WriteString(sql[i:])
				return b.String()
			}
			b.WriteString(sql[i : i+j+2])
			i += j + 1
		case '?':
			n++
			b.WriteString("$" + strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}
