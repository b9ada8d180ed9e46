package service

import "testing"

func TestSpreadsheetOperations(t *testing.T) {
	svc := Spreadsheet{}
	s := svc.NewState()
	set := func(c, v string) Result { return s.Apply(Op{Kind: "set", Key: c, Args: [][]byte{[]byte(v)}}) }
	if r := set("B2", "7"); r.Type != ResultOK {
		t.Fatalf("set: %v", r)
	}
	set("A1", "name")
	if r := s.Apply(Op{Kind: "get", Key: "B2"}); string(r.Bytes) != "7" {
		t.Fatalf("get B2 = %v", r)
	}
	if r := s.Apply(Op{Kind: "get", Key: "C3"}); r.Type != ResultNil {
		t.Fatalf("get of an empty cell = %v", r)
	}
	if r := s.Apply(Op{Kind: "refresh"}); string(r.Bytes) != "A1=name\nB2=7\n" {
		t.Fatalf("refresh = %q", r.Bytes)
	}
	set("A1", "") // clears
	snap := s.Snapshot()
	s2 := svc.NewState()
	if err := s2.Restore(snap); err != nil {
		t.Fatal(err)
	}
	if r := s2.Apply(Op{Kind: "refresh"}); string(r.Bytes) != "B2=7\n" {
		t.Fatalf("restored refresh = %q", r.Bytes)
	}
	if err := s2.Restore(snap[:len(snap)-1]); err == nil {
		t.Fatal("truncated snapshot accepted")
	}
	for _, bad := range []Op{{Kind: "set", Key: "A=1", Args: [][]byte{nil}}, {Kind: "get"}, {Kind: "refresh", Args: [][]byte{nil}}, {Kind: "drop"}} {
		if svc.Validate(bad) == nil {
			t.Errorf("%v accepted", bad)
		}
	}
	if svc.IsRead(Op{Kind: "set", Key: "A1"}) || !svc.IsRead(Op{Kind: "refresh"}) {
		t.Fatal("IsRead")
	}
}

// Disjoint cells entered by different users commute: the seed's case for
// non-strict operations (§4.4).
func TestSpreadsheetDisjointCellsCommute(t *testing.T) {
	a, b := Spreadsheet{}.NewState(), Spreadsheet{}.NewState()
	x := Op{Kind: "set", Key: "A1", Args: [][]byte{[]byte("x")}}
	y := Op{Kind: "set", Key: "B1", Args: [][]byte{[]byte("y")}}
	a.Apply(x)
	a.Apply(y)
	b.Apply(y)
	b.Apply(x)
	if string(a.Snapshot()) != string(b.Snapshot()) {
		t.Fatal("disjoint sets do not commute")
	}
}
