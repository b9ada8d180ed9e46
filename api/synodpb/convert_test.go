package synodpb

import (
	"strings"
	"testing"

	"google.golang.org/protobuf/proto"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

func TestReadModesAgree(t *testing.T) {
	// Every automaton read mode has the enum value of the same number, and
	// the names correspond ("regular" <-> READ_MODE_REGULAR).
	for i := 0; ; i++ {
		m := automaton.ReadMode(i)
		if strings.HasPrefix(m.String(), "ReadMode(") {
			if _, ok := ReadMode_name[int32(i)]; ok {
				t.Errorf("enum value %d has no automaton read mode", i)
			}
			break
		}
		pb := FromReadMode(m)
		if want := "READ_MODE_" + strings.ToUpper(m.String()); pb.String() != want {
			t.Errorf("read mode %v -> %v, want %s", m, pb, want)
		}
		back, err := ToReadMode(pb)
		if err != nil || back != m {
			t.Errorf("round trip of %v: %v, %v", m, back, err)
		}
	}
	if _, err := ToReadMode(ReadMode(99)); err == nil {
		t.Error("ToReadMode(99) succeeded")
	}
}

func TestResultRoundTrip(t *testing.T) {
	for _, r := range []service.Result{
		service.Nil(), service.OK(), service.Bytes([]byte("v")), service.Bytes([]byte{}),
		service.Int(-7), service.Errorf("ERR boom"), service.Array(),
		service.Array(service.Bytes([]byte("0")), service.Array(service.Int(1), service.Nil(), service.Errorf("WRONGTYPE x"))),
	} {
		b, err := proto.Marshal(FromResult(r))
		if err != nil {
			t.Fatal(err)
		}
		var m Result
		if err := proto.Unmarshal(b, &m); err != nil {
			t.Fatal(err)
		}
		got, err := ToResult(&m)
		if err != nil || !got.Equal(r) {
			t.Errorf("%v -> %v, %v", r, got, err)
		}
	}
	if _, err := ToResult(&Result{}); err == nil {
		t.Error("a result without a value was accepted")
	}
}

func TestOptionsRoundTrip(t *testing.T) {
	// Through the wire: values in order, and a list option set to no values
	// stays set (an empty list, not absent).
	ext := map[string][]string{"opid": {"a1"}, "prev": {"p1", "p2"}, "empty": {}}
	b, err := proto.Marshal(&Request{Options: FromOptions(ext)})
	if err != nil {
		t.Fatal(err)
	}
	var m Request
	if err := proto.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	got := ToOptions(m.GetOptions())
	if len(got) != len(ext) {
		t.Fatalf("options %v, want %v", got, ext)
	}
	for k, v := range ext {
		g, ok := got[k]
		if !ok || g == nil || strings.Join(g, ",") != strings.Join(v, ",") || len(g) != len(v) {
			t.Errorf("option %s: %#v, want %#v", k, g, v)
		}
	}
	if FromOptions(nil) != nil || ToOptions(nil) != nil {
		t.Error("no options should convert to nil")
	}
}

func TestOpRoundTrip(t *testing.T) {
	op := service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v"), []byte("nx")}}
	back := ToOp(FromOp(op))
	if back.Kind != op.Kind || back.Key != op.Key || len(back.Args) != 2 || string(back.Args[1]) != "nx" {
		t.Errorf("round trip of %v: %v", op, back)
	}
}
