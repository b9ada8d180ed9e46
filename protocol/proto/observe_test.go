package proto

import "testing"

// A recorder is found by its name until dropped, a name registered again
// gets a fresh recorder, and Emit reaches OnEvent (nothing without one).
func TestRecorders(t *testing.T) {
	var rs Recorders[int]
	if rs.Lookup("a") != nil {
		t.Fatal("empty table found a recorder")
	}
	r := rs.New("a")
	if rs.Lookup("a") != r || rs.Lookup("b") != nil {
		t.Fatal("lookup by name")
	}
	r.Emit(1) // no OnEvent: nothing happens
	var got []int
	r.OnEvent = func(e int) { got = append(got, e) }
	rs.Lookup("a").Emit(2)
	rs.Lookup("a").Emit(3)
	if len(got) != 2 || got[0] != 2 || got[1] != 3 {
		t.Fatalf("events %v, want [2 3]", got)
	}
	if r2 := rs.New("a"); r2 == r || rs.Lookup("a") != r2 {
		t.Fatal("New did not replace the recorder")
	}
	rs.Drop("a")
	if rs.Lookup("a") != nil {
		t.Fatal("dropped recorder still found")
	}
}
