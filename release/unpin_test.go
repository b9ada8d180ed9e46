package release

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// TestUnpin: an Unpin of position p lets a positioned answer at p, held
// for the record at p, leave once the records positioned below p are
// durable (at once here), and not an answer at another position; an
// answer at p emitted after the Unpin waits only for the records below p;
// an Early Send after the answer still waits for every record before it;
// Exposed reports the record the answer skipped. Without the
// interpreter's Unpin case (the output refused as unknown, or ignored) the
// answer at 2 waits for record 2: "persist 1 a/1; persist 2 a/2".
func TestUnpin(t *testing.T) {
	r := New(Config{Self: "n1"})
	rt := &rec{}
	if err := r.Step([]automaton.Output{at("a/1", 1)}, rt); err != nil {
		t.Fatal(err)
	}
	r.Durable(1, rt)
	_ = r.Step([]automaton.Output{at("a/2", 2), early("acc"), at("a/3", 3)}, rt)
	_ = r.Step([]automaton.Output{upTo(2, 2), upTo(3, 3)}, rt) // wait for records 2 and 3
	if got, want := strings.Join(rt.log, "; "), "persist 1 a/1; persist 2 a/2; send acc; persist 3 a/3"; got != want {
		t.Fatalf("before the Unpin: %q, want %q", got, want)
	}
	if err := r.Step([]automaton.Output{automaton.Unpin{Pos: 2}}, rt); err != nil {
		t.Fatal(err)
	}
	if got, want := strings.Join(rt.log, "; "), "persist 1 a/1; persist 2 a/2; send acc; persist 3 a/3; respond 2"; got != want {
		t.Fatalf("after Unpin{2}: %q, want %q (the answer at 2 leaves; the one at 3 still waits)", got, want)
	}
	// An answer at 2 emitted after the Unpin waits only for record 1; an
	// Early Send after it waits for every record before it.
	_ = r.Step([]automaton.Output{upTo(4, 2), early("e")}, rt)
	if got, want := strings.Join(rt.log[5:], "; "), "respond 4"; got != want {
		t.Fatalf("an answer at 2 after the Unpin, then an Early Send: %q, want %q", got, want)
	}
	r.Durable(3, rt)
	if got, want := strings.Join(rt.log[6:], "; "), "send e; respond 3"; got != want {
		t.Fatalf("after record 3: %q, want %q", got, want)
	}
	// Exposed reports the record the unpinned answer skipped.
	r3 := New(Config{Self: "n1"})
	_ = r3.Step([]automaton.Output{at("a/1", 1)}, &rec{})
	r3.Durable(1, &rec{})
	_ = r3.Step([]automaton.Output{at("a/2", 2), upTo(1, 2), automaton.Unpin{Pos: 2}}, &rec{})
	if last, ok := r3.Exposed(); !ok || last != 1 {
		t.Fatalf("Exposed = %d, %v; want record 2 exposed (the answer at 2 is out without it)", last, ok)
	}
	// Unpinning does not raise an answer above what it waited for, nor
	// touch a relayed answer or another position.
	r2 := New(Config{Self: "n1"})
	rt2 := &rec{}
	_ = r2.Step([]automaton.Output{at("a/5", 5), upTo(1, 5), at("a/4", 4), automaton.Unpin{Pos: 5}}, rt2)
	if got, want := strings.Join(rt2.log, "; "), "persist 1 a/5; persist 2 a/4"; got != want {
		t.Fatalf("an Unpin whose lower positions were persisted after the answer: %q, want %q", got, want)
	}
	if p := r2.Pending(); len(p) != 1 || p[0].Need != 1 {
		t.Fatalf("pending %+v, want the answer still waiting for record 1 (not 2)", p)
	}
}

// TestUnpinCrashDropsHeld: a crash drops the answers still held and
// forgets the positions unpinned (the next incarnation numbers afresh).
func TestUnpinCrashDropsHeld(t *testing.T) {
	r := New(Config{Self: "n1"})
	rt := &rec{}
	_ = r.Step([]automaton.Output{at("a/1", 1), upTo(1, 1), automaton.Unpin{Pos: 2}}, rt)
	if lost := r.Crash(); len(lost) != 1 {
		t.Fatalf("crash dropped %d outputs, want the held answer", len(lost))
	}
	_ = r.Step([]automaton.Output{at("a/1", 1), at("a/2", 2), upTo(2, 2)}, rt)
	if p := r.Pending(); len(p) != 1 || p[0].Need != 2 {
		t.Fatalf("pending %+v, want the answer at 2 waiting for record 2 (the Unpin was forgotten)", p)
	}
}
