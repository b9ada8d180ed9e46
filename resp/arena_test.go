package resp

import (
	"bufio"
	"bytes"
	"strings"
	"testing"
)

// TestArgumentsStayTheirOwn: arguments and argument lists carved from the
// reader's shared chunks must behave as fresh slices: appending to one
// command's argument or list never changes another's, including across a
// chunk boundary, and an argument longer than smallArg still arrives whole.
func TestArgumentsStayTheirOwn(t *testing.T) {
	var in strings.Builder
	var want [][]string
	for i := 0; i < 600; i++ { // > arenaBytes / 12 and > arenaLists / 3: several chunks
		v := strings.Repeat(string(rune('a'+i%26)), i%7)
		if i%100 == 99 {
			v = strings.Repeat("L", smallArg+1)
		}
		cmd := []string{"SET", "k" + string(rune('0'+i%10)), v}
		want = append(want, cmd)
		in.WriteString("*3\r\n")
		for _, a := range cmd {
			in.WriteString("$" + itoa(len(a)) + "\r\n" + a + "\r\n")
		}
	}
	r := NewReader(bufio.NewReader(strings.NewReader(in.String())), Limits{})
	var got [][][]byte
	for range want {
		args, err := r.ReadCommand()
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, args)
	}
	for i, args := range got { // scribble over every command's spare room
		for j := range args {
			args[j] = append(args[j], "XYZ"...)[:len(args[j])]
		}
		_ = append(args, []byte("extra"))
		got[i] = args
	}
	for i, args := range got {
		if len(args) != len(want[i]) {
			t.Fatalf("command %d: %d args, want %d", i, len(args), len(want[i]))
		}
		for j, a := range args {
			if !bytes.Equal(a, []byte(want[i][j])) {
				t.Fatalf("command %d arg %d = %q, want %q", i, j, a, want[i][j])
			}
		}
	}
}

func itoa(n int) string {
	var b []byte
	for {
		b = append([]byte{byte('0' + n%10)}, b...)
		n /= 10
		if n == 0 {
			return string(b)
		}
	}
}
