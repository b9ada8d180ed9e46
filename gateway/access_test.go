package gateway

import (
	"fmt"
	"testing"
)

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
	// A new key's entry is found by its hash: the table stores no copy of
	// its name (a string per new key when the map was keyed by name); only
	// the map's and the times' growth allocate, far less than once a key.
	fresh := make([][]byte, 4001)
	for i := range fresh {
		fresh[i] = []byte(fmt.Sprintf("key:%06d", i+2))
	}
	if n := testing.AllocsPerRun(4000, func() { // a warm-up run, then 4000
		args[1], fresh = fresh[0], fresh[1:]
		tab.noteAt("default", set, args, now)
	}); n >= 0.1 {
		t.Fatalf("noting a new key: %v allocations, want < 0.1", n)
	}
	if got := tab.idle("default", []byte("key:004002")); got != 0 {
		t.Fatalf("idle of the last new key %d s, want 0", got)
	}
}

// BenchmarkAccessNote: a SET's note of its key, over 10,000 keys noted
// before (redis-benchmark -r 10000's steady state).
func BenchmarkAccessNote(b *testing.B) {
	set, _ := lookupCommand([]byte("set"))
	tab := newAccessTable()
	keys := make([][]byte, 10000)
	for i := range keys {
		keys[i] = []byte(fmt.Sprintf("key:%012d", i))
	}
	args := [][]byte{[]byte("set"), nil, []byte("v")}
	for _, k := range keys {
		args[1] = k
		tab.noteAt("default", set, args, 1)
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		args[1] = keys[(i*7919)%len(keys)]
		tab.noteAt("default", set, args, 2)
	}
}
