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
		service.Int(-7), service.Errorf("ERR boom"),
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
