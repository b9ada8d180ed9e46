package gateway

import "testing"

// TestAccessNoteAllocs: noting a key that has an entry, in a later second
// than its last note, allocates nothing (its time is set in the entry);
// when the time lived in the map, storing it made a new key string every
// time (1 allocation per command on a key noted in an earlier second:
// redis-benchmark -r 10000's SETs). A new key allocates, and OBJECT
// IDLETIME's reading stays the note's (TestObjectIdletime pins the rest).
func TestAccessNoteAllocs(t *testing.T) {
	if raceDetector {
		t.Skip("the race detector allocates")
	}
	set, ok := lookupCommand([]byte("set"))
	if !ok {
		t.Fatal("no set command")
	}
	tab := newAccessTable()
	var now int64 = 1000
	tab.now = func() int64 { return now }
	args := [][]byte{[]byte("set"), []byte("key:000001"), []byte("v")}
	tab.noteAt("default", set, args, now)
	if n := testing.AllocsPerRun(100, func() {
		now++
		tab.noteAt("default", set, args, now)
	}); n != 0 {
		t.Fatalf("noting a known key in a later second: %v allocations, want 0", n)
	}
	now += 5
	if got := tab.idle("default", args[1]); got != 5 {
		t.Fatalf("idle %d s, want 5", got)
	}
	fresh := [][]byte{[]byte("key:000002"), []byte("key:000003"), []byte("key:000004")}
	if n := testing.AllocsPerRun(2, func() { // a warm-up run, then 2
		args[1], fresh = fresh[0], fresh[1:]
		tab.noteAt("default", set, args, now)
	}); n == 0 {
		t.Fatal("a new key allocated nothing: the test does not see the table's allocations")
	}
}
