package service

import (
	"testing"
)

func TestStringSemantics(t *testing.T) {
	s := String{}.NewState()
	steps := []struct {
		op   Op
		want Result
	}{
		{op("read", ""), Bytes([]byte(""))},
		{op("append", "", "ab"), Bytes([]byte("ab"))},
		{op("append", "", "c"), Bytes([]byte("abc"))},
		{op("read", "ignored-key"), Bytes([]byte("abc"))},
		{op("append", ""), Errorf("wrong number of arguments for 'append' command")},
		{op("read", "", "x"), Errorf("wrong number of arguments for 'read' command")},
		{op("concat", "", "x"), Errorf(`unknown string operation "concat" (want read or append)`)},
		{op("read", ""), Bytes([]byte("abc"))},
	}
	for i, st := range steps {
		if got := s.Apply(st.op); !got.Equal(st.want) {
			t.Fatalf("step %d %v: got %v, want %v", i, st.op, got, st.want)
		}
	}
}

// Appends do not commute: that is why the ESDS thesis measured String beside Counter.
func TestStringAppendsDoNotCommute(t *testing.T) {
	a, b := String{}.NewState(), String{}.NewState()
	a.Apply(op("append", "", "x"))
	a.Apply(op("append", "", "y"))
	b.Apply(op("append", "", "y"))
	b.Apply(op("append", "", "x"))
	if ra, rb := a.Apply(op("read", "")), b.Apply(op("read", "")); ra.Equal(rb) {
		t.Fatalf("xy and yx read the same: %v", ra)
	}
}

func TestStringResultsDoNotAlias(t *testing.T) {
	s := String{}.NewState()
	r1 := s.Apply(op("append", "", "ab"))
	s.Apply(op("append", "", "cd"))
	r1.Bytes[0] = 'Z'
	if got := s.Apply(op("read", "")); string(got.Bytes) != "abcd" {
		t.Fatalf("state changed through an old result: %q", got.Bytes)
	}
}

func TestStringSnapshotRoundTrip(t *testing.T) {
	s := String{}.NewState()
	s.Apply(op("append", "", "hello"))
	r := String{}.NewState()
	if err := r.Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got := r.Apply(op("read", "")); string(got.Bytes) != "hello" {
		t.Fatalf("restored %q", got.Bytes)
	}
	if err := r.Restore([]byte{9}); err == nil {
		t.Fatal("bad version accepted")
	}
	if err := r.Restore(append(s.Snapshot(), 0)); err == nil {
		t.Fatal("trailing bytes accepted")
	}
	if (String{}).IsRead(op("append", "", "x")) || !(String{}).IsRead(op("read", "")) {
		t.Fatal("read classification")
	}
	if _, err := Lookup("string"); err != nil {
		t.Fatal(err)
	}
}
