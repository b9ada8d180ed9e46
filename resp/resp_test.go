package resp

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strings"
	"testing"
)

func reader(s string, lim Limits) *Reader {
	return NewReader(bufio.NewReader(strings.NewReader(s)), lim)
}

func readAll(t *testing.T, s string) [][]string {
	t.Helper()
	r := reader(s, Limits{})
	var out [][]string
	for {
		args, err := r.ReadCommand()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("ReadCommand(%q): %v", s, err)
		}
		var cmd []string
		for _, a := range args {
			cmd = append(cmd, string(a))
		}
		out = append(out, cmd)
	}
}

func TestReadCommandMultibulkPipelined(t *testing.T) {
	in := "*2\r\n$3\r\nGET\r\n$1\r\nk\r\n*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$4\r\na\r\nb\r\n*0\r\n*1\r\n$0\r\n\r\n"
	got := readAll(t, in)
	want := [][]string{{"GET", "k"}, {"SET", "k", "a\r\nb"}, {""}}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("got %q, want %q", got, want)
	}
}

func TestReadCommandInline(t *testing.T) {
	cases := []struct {
		in   string
		want []string
	}{
		{"PING\r\n", []string{"PING"}},
		{"set  k   v\n", []string{"set", "k", "v"}},
		{"\t get k \r\n", []string{"get", "k"}},
		{`set k "a b\n\x41\"" ` + "\r\n", []string{"set", "k", "a b\nA\""}},
		{`set k 'it\'s "x"'` + "\n", []string{"set", "k", `it's "x"`}},
		{`set k ""` + "\n", []string{"set", "k", ""}},
		{`echo "\xZZ"` + "\n", []string{"echo", "xZZ"}},
	}
	for _, c := range cases {
		got := readAll(t, c.in)
		if len(got) != 1 || fmt.Sprintf("%q", got[0]) != fmt.Sprintf("%q", c.want) {
			t.Errorf("%q: got %q, want %q", c.in, got, c.want)
		}
	}
	// Empty lines are skipped.
	if got := readAll(t, "\r\n\n   \nPING\n"); len(got) != 1 || got[0][0] != "PING" {
		t.Errorf("empty lines: got %q", got)
	}
}

func TestReadCommandErrors(t *testing.T) {
	lim := Limits{MaxBulk: 16, MaxElements: 4, MaxInline: 32, MaxFrame: 90}
	cases := []struct{ in, want string }{
		{"*x\r\n", "Protocol error: invalid multibulk length"},
		{"*5\r\n", "Protocol error: invalid multibulk length"},
		{"*1\r\n$17\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\n$-1\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\n$+1\r\n", "Protocol error: invalid bulk length"},
		{"*1\r\n:1\r\n", "Protocol error: expected '$', got ':'"},
		{"*1\r\n$1\r\nab\r\n", "Protocol error: expected CRLF after bulk string"},
		{"*1\n", "Protocol error: expected CRLF line ending"},
		{`set k "abc` + "\n", "Protocol error: unbalanced quotes in request"},
		{`set k "abc"d` + "\n", "Protocol error: unbalanced quotes in request"},
		{`set k 'abc` + "\n", "Protocol error: unbalanced quotes in request"},
		{strings.Repeat("a", 40) + "\n", "Protocol error: too big inline request"},
		{"*" + strings.Repeat("1", 40) + "\r\n", "Protocol error: too big mbulk count string"},
		{"*4\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n$16\r\n0123456789abcdef\r\n",
			"Protocol error: frame too large (limit 90 bytes)"},
	}
	for _, c := range cases {
		_, err := reader(c.in, lim).ReadCommand()
		if err == nil || err.Error() != c.want || !IsProtocolError(err) {
			t.Errorf("%q: got %v, want %q", c.in, err, c.want)
		}
	}
}

func TestReadCommandEOF(t *testing.T) {
	if _, err := reader("", Limits{}).ReadCommand(); err != io.EOF {
		t.Errorf("empty stream: %v, want io.EOF", err)
	}
	for _, in := range []string{"*2\r\n$3\r\nGET\r\n", "*1\r\n$3\r\nGE", "*1\r\n$3\r\nGET\r", "PING", "*1\r\n"} {
		if _, err := reader(in, Limits{}).ReadCommand(); !errors.Is(err, io.ErrUnexpectedEOF) {
			t.Errorf("%q: %v, want io.ErrUnexpectedEOF", in, err)
		}
	}
}

// allocated returns the bytes allocated while f runs.
func allocated(f func()) uint64 {
	var a, b runtime.MemStats
	runtime.ReadMemStats(&a)
	f()
	runtime.ReadMemStats(&b)
	return b.TotalAlloc - a.TotalAlloc
}

func TestAnnouncedLengthsAreNotTrusted(t *testing.T) {
	inputs := []string{
		fmt.Sprintf("*1\r\n$%d\r\nabc", MaxBulk),
		fmt.Sprintf("*%d\r\n$1\r\na\r\n", MaxElements),
		fmt.Sprintf("*%d\r\n", MaxElements) + strings.Repeat(fmt.Sprintf("*%d\r\n", MaxElements), 10),
	}
	for _, in := range inputs {
		r := reader(in, Limits{})
		n := allocated(func() { r.ReadCommand() })
		if n > 512<<10 {
			t.Errorf("ReadCommand(%.30q...) allocated %d bytes", in, n)
		}
		r = reader(in, Limits{})
		n = allocated(func() { r.ReadReply() })
		if n > 512<<10 {
			t.Errorf("ReadReply(%.30q...) allocated %d bytes", in, n)
		}
	}
}

func TestLargeBulkRoundTrip(t *testing.T) {
	val := bytes.Repeat([]byte("0123456789"), MaxBulk/10)
	var buf bytes.Buffer
	w := NewWriter(&buf)
	w.WriteCommand([][]byte{[]byte("SET"), []byte("k"), val})
	w.Flush()
	args, err := NewReader(bufio.NewReader(&buf), Limits{}).ReadCommand()
	if err != nil || len(args) != 3 || !bytes.Equal(args[2], val) {
		t.Fatalf("round trip of %d-byte value failed: %v", len(val), err)
	}
	// One byte more than the limit is refused before reading the body.
	_, err = reader(fmt.Sprintf("*1\r\n$%d\r\n", MaxBulk+1), Limits{}).ReadCommand()
	if err == nil || err.Error() != "Protocol error: invalid bulk length" {
		t.Fatalf("oversized bulk: %v", err)
	}
}

func TestWriterVersions(t *testing.T) {
	write := func(proto int, f func(w *Writer)) string {
		var buf bytes.Buffer
		w := NewWriter(&buf)
		w.SetProtocol(proto)
		f(w)
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		return buf.String()
	}
	all := func(w *Writer) {
		w.WriteSimple("OK")
		w.WriteError("ERR bad\r\nthing")
		w.WriteInt(-42)
		w.WriteBulk([]byte("a\r\nb"))
		w.WriteNull()
		w.WriteNullArray()
		w.WriteArray(2)
		w.WriteBulkString("x")
		w.WriteMap(1)
		w.WriteBulkString("k")
		w.WriteBool(true)
		w.WriteSet(0)
	}
	if got, want := write(2, all), "+OK\r\n-ERR bad  thing\r\n:-42\r\n$4\r\na\r\nb\r\n$-1\r\n*-1\r\n*2\r\n$1\r\nx\r\n*2\r\n$1\r\nk\r\n:1\r\n*0\r\n"; got != want {
		t.Errorf("RESP2:\n got %q\nwant %q", got, want)
	}
	if got, want := write(3, all), "+OK\r\n-ERR bad  thing\r\n:-42\r\n$4\r\na\r\nb\r\n_\r\n_\r\n*2\r\n$1\r\nx\r\n%1\r\n$1\r\nk\r\n#t\r\n~0\r\n"; got != want {
		t.Errorf("RESP3:\n got %q\nwant %q", got, want)
	}
}

func TestReadReplyAllTypes(t *testing.T) {
	in := "+OK\r\n-ERR x\r\n:-7\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n_\r\n#t\r\n,3.5\r\n(123456789012345678901234567890\r\n" +
		"=7\r\ntxt:hey\r\n!5\r\nERR z\r\n%1\r\n+k\r\n:1\r\n~2\r\n:1\r\n:2\r\n>1\r\n+p\r\n|1\r\n+a\r\n+b\r\n:9\r\n*2\r\n*1\r\n$0\r\n\r\n_\r\n"
	r := reader(in, Limits{})
	var got []string
	for {
		rep, err := r.ReadReply()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("after %q: %v", got, err)
		}
		got = append(got, rep.String())
	}
	want := []string{"OK", "(error) ERR x", "(integer) -7", `"abc"`, "(nil)", "(nil)", "(nil)", "(true)", "(double) 3.5",
		"(big number) 123456789012345678901234567890", `"hey"`, "(error) ERR z", `1) k => (integer) 1`,
		"1) (integer) 1\n2) (integer) 2", "1) p", "(integer) 9", "1) 1) \"\"\n2) (nil)"}
	if strings.Join(got, "|") != strings.Join(want, "|") {
		t.Errorf("got\n%q\nwant\n%q", got, want)
	}
}

func TestReadReplyErrors(t *testing.T) {
	lim := Limits{MaxDepth: 3}
	for _, c := range []struct{ in, want string }{
		{":abc\r\n", "Protocol error: invalid integer \"abc\""},
		{"#x\r\n", "Protocol error: invalid boolean"},
		{",x\r\n", "Protocol error: invalid double \"x\""},
		{"*1\r\n*1\r\n*1\r\n*1\r\n*1\r\n:1\r\n", "Protocol error: reply nested too deeply (limit 3)"},
		{"|1\r\n+a\r\n|1\r\n+a\r\n|1\r\n+a\r\n|1\r\n+a\r\n:1\r\n", "Protocol error: reply nested too deeply (limit 3)"},
		{"?\r\n", "Protocol error: unknown reply type '?'"},
		{"$-2\r\n", "Protocol error: invalid bulk length"},
		{"=2\r\nab\r\n", "Protocol error: invalid verbatim string"},
	} {
		_, err := reader(c.in, lim).ReadReply()
		if err == nil || err.Error() != c.want {
			t.Errorf("%q: got %v, want %q", c.in, err, c.want)
		}
	}
	if _, err := reader("*2\r\n:1\r\n", Limits{}).ReadReply(); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("truncated array: %v", err)
	}
}

var commandSeeds = []string{
	"*2\r\n$3\r\nGET\r\n$1\r\nk\r\n",
	"*3\r\n$3\r\nSET\r\n$1\r\nk\r\n$5\r\nhello\r\n*1\r\n$4\r\nPING\r\n",
	"PING\r\nset k \"v\\x41\" 'q'\n",
	"*-1\r\n*0\r\n\r\n",
	"*1\r\n$99999999999\r\n",
	"*1\r\n$8389632\r\nabc",
	"*1048576\r\n$1\r\na\r\n",
	"*1\r\n:1\r\n",
	"set k \"unterminated\n",
	"*2\r\n$1\r\na\r\n$1\r\nbXX",
}

func FuzzReadCommand(f *testing.F) {
	for _, s := range commandSeeds {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBulk: 64, MaxElements: 16, MaxInline: 128, MaxFrame: 512}
	f.Fuzz(func(t *testing.T, data []byte) {
		// Small limits: every returned command must respect them, and
		// re-encoding it must read back the same arguments.
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 16), lim)
		for {
			args, err := r.ReadCommand()
			if err != nil {
				break
			}
			if len(args) == 0 || len(args) > lim.MaxElements+lim.MaxInline {
				t.Fatalf("bad arg count %d", len(args))
			}
			var buf bytes.Buffer
			w := NewWriter(&buf)
			w.WriteCommand(args)
			w.Flush()
			again, err := NewReader(bufio.NewReader(&buf), Limits{}).ReadCommand()
			if err != nil || fmt.Sprintf("%q", again) != fmt.Sprintf("%q", args) {
				t.Fatalf("re-encoding %q gave %q, %v", args, again, err)
			}
			for _, a := range args {
				if len(a) > lim.MaxBulk && len(a) > lim.MaxInline {
					t.Fatalf("argument of %d bytes exceeds limits", len(a))
				}
			}
		}
		// Default limits: allocation stays proportional to the input.
		r = NewReader(bufio.NewReader(bytes.NewReader(data)), Limits{})
		n := allocated(func() {
			for {
				if _, err := r.ReadCommand(); err != nil {
					break
				}
			}
		})
		if n > 1<<20+64*uint64(len(data)) {
			t.Fatalf("allocated %d bytes for %d bytes of input", n, len(data))
		}
	})
}

var replySeeds = []string{
	"+OK\r\n-ERR x\r\n:-7\r\n$3\r\nabc\r\n$-1\r\n*-1\r\n_\r\n",
	"#t\r\n,3.5\r\n(1234\r\n=7\r\ntxt:hey\r\n!5\r\nERR z\r\n",
	"%1\r\n+k\r\n:1\r\n~2\r\n:1\r\n:2\r\n>1\r\n+p\r\n|1\r\n+a\r\n+b\r\n:9\r\n",
	"*3\r\n*1\r\n*1\r\n:1\r\n$0\r\n\r\n_\r\n",
	"*99999999\r\n", "$99999999\r\nab", "|1\r\n|1\r\n|1\r\n", "#x\r\n", ",nan\r\n", "=2\r\nab\r\n",
}

func FuzzReadReply(f *testing.F) {
	for _, s := range replySeeds {
		f.Add([]byte(s))
	}
	lim := Limits{MaxBulk: 64, MaxElements: 16, MaxInline: 128, MaxFrame: 512, MaxDepth: 4}
	f.Fuzz(func(t *testing.T, data []byte) {
		r := NewReader(bufio.NewReaderSize(bytes.NewReader(data), 16), lim)
		for {
			rep, err := r.ReadReply()
			if err != nil {
				break
			}
			if d := depth(rep); d > lim.MaxDepth+1 {
				t.Fatalf("reply depth %d exceeds limit", d)
			}
			_ = rep.String()
		}
		r = NewReader(bufio.NewReader(bytes.NewReader(data)), Limits{})
		n := allocated(func() {
			for {
				if _, err := r.ReadReply(); err != nil {
					break
				}
			}
		})
		if n > 1<<20+256*uint64(len(data)) {
			t.Fatalf("allocated %d bytes for %d bytes of input", n, len(data))
		}
	})
}

func depth(r Reply) int {
	d := 0
	for _, e := range r.Elems {
		d = max(d, depth(e))
	}
	return d + 1
}
