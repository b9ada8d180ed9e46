package compat

import (
	"reflect"
	"testing"
)

func TestParseLine(t *testing.T) {
	l, err := ParseLine(`~sorted SET k "hello world" "\x00" plain`)
	if err != nil {
		t.Fatal(err)
	}
	if l.Marker != MarkSorted || !reflect.DeepEqual(l.Args, []string{"SET", "k", "hello world", "\x00", "plain"}) || l.Name() != "set" {
		t.Fatalf("parsed %+v", l)
	}
	for _, bad := range []string{`~bogus GET k`, `GET "unterminated`, `GET "a"b`, ``} {
		if _, err := ParseLine(bad); err == nil {
			t.Errorf("ParseLine(%q) accepted", bad)
		}
	}
}

func TestCompared(t *testing.T) {
	v := []any{"b", int64(1), Nil{}, "a"}
	if got, want := Compared("", v), `["b", (integer) 1, (nil), "a"]`; got != want {
		t.Errorf("Render: %s, want %s", got, want)
	}
	if got, want := Compared(MarkSorted, v), `["a", "b", (integer) 1, (nil)]`; got != want {
		t.Errorf("~sorted: %s, want %s", got, want)
	}
	if got, want := Compared(MarkShape, "x"), "<string>"; got != want {
		t.Errorf("~shape: %s, want %s", got, want)
	}
	if got, want := Compared(MarkError, ErrorReply("WRONGTYPE Operation against a key")), "(error) WRONGTYPE ..."; got != want {
		t.Errorf("~error: %s, want %s", got, want)
	}
	m := map[any]any{"z": int64(1), "a": "x"}
	if got, want := Render(m), `{"a": "x", "z": (integer) 1}`; got != want {
		t.Errorf("map: %s, want %s", got, want)
	}
}

func TestUnknownCommandFormat(t *testing.T) {
	// Redis 7: each argument quoted and followed by a space, 128 bytes at most.
	if got, want := UnknownCommand([]string{"FOO", "a", "b"}), "ERR unknown command 'FOO', with args beginning with: 'a' 'b' "; got != want {
		t.Errorf("got %q, want %q", got, want)
	}
}
