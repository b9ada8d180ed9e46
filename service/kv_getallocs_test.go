package service

import "testing"

// TestKVGetAllocs: GET of a key that holds a string, and of a missing key,
// allocate nothing in the store (the value is answered as it is; the nil
// answer is a value). strOrAnswer answered a missing key through a
// pointer to a fresh Result, which escaped: one allocation per GET of a
// missing key (a cache miss), every protocol's apply.
func TestKVGetAllocs(t *testing.T) {
	s := newKVState()
	s.Apply(Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}})
	for _, key := range []string{"k", "missing"} {
		op := Op{Kind: "get", Key: key}
		want := s.Apply(op)
		if n := testing.AllocsPerRun(100, func() { s.Apply(op) }); n != 0 {
			t.Errorf("GET %s (%v): %v allocations, want 0", key, want, n)
		}
	}
}
