package release

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// rec is a Runtime that writes down what the interpreter asks of it.
type rec struct{ log []string }

func (r *rec) Persist(seq uint64, p automaton.Persist) {
	r.log = append(r.log, fmt.Sprintf("persist %d %s", seq, p.Key))
}

func (r *rec) Release(o automaton.Output) {
	switch o := o.(type) {
	case automaton.Send:
		r.log = append(r.log, "send "+string(o.Msg))
	case automaton.Respond:
		r.log = append(r.log, fmt.Sprintf("respond %d", o.Resp.ID.Seq))
	case automaton.Effect:
		r.log = append(r.log, fmt.Sprintf("effect %d", o.ID))
	default:
		r.log = append(r.log, fmt.Sprintf("release %T", o))
	}
}

func (r *rec) SetTimer(t automaton.SetTimer) { r.log = append(r.log, fmt.Sprintf("timer %d", t.ID)) }
func (r *rec) CancelTimer(id automaton.TimerID) {
	r.log = append(r.log, fmt.Sprintf("cancel %d", id))
}
func (r *rec) Members(m automaton.Members) {
	r.log = append(r.log, fmt.Sprintf("members %d", len(m.Members)))
}

// Shorthands for outputs.
func put(k string) automaton.Output  { return automaton.Persist{Key: k, Value: []byte("v")} }
func send(m string) automaton.Output { return automaton.Send{To: "n2", Msg: []byte(m)} }
func early(m string) automaton.Output {
	return automaton.Send{To: "n2", Msg: []byte(m), Early: true}
}
func answer(seq uint64) automaton.Output {
	return automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Client: 1, Seq: seq}}}
}
func at(k string, pos uint64) automaton.Output {
	return automaton.Persist{Key: k, Value: []byte("v"), Pos: pos}
}
func upTo(seq, pos uint64) automaton.Output {
	return automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Client: 1, Seq: seq}}, UpTo: pos}
}
func effect(id automaton.EffectID) automaton.Output { return automaton.Effect{ID: id, Kind: "k"} }

// act is one thing that happens to an interpreter: a step's outputs, a
// durability report, a crash or a storage failure.
type act struct {
	step    []automaton.Output
	durable uint64
	crash   bool
	fail    bool
	// want is what the runtime is asked to do by this act, in order.
	want []string
	// lost is what a crash drops, in order.
	lost []string
}

func TestRelease(t *testing.T) {
	cases := []struct {
		name string
		acts []act
	}{
		{"nothing pending: outputs leave at once", []act{
			{step: []automaton.Output{send("a"), answer(1), effect(1)}, want: []string{"send a", "respond 1", "effect 1"}},
		}},
		{"a Respond waits for the Persist before it, a Send before the Persist does not", []act{
			{step: []automaton.Output{send("a"), put("k"), answer(1)}, want: []string{"send a", "persist 1 k"}},
			{durable: 1, want: []string{"respond 1"}},
		}},
		{"a later step's output waits for an earlier step's record", []act{
			{step: []automaton.Output{put("k")}, want: []string{"persist 1 k"}},
			{step: []automaton.Output{answer(2)}, want: nil},
			{durable: 1, want: []string{"respond 2"}},
		}},
		{"outputs leave in emission order: a read behind a write waits too", []act{
			{step: []automaton.Output{put("k"), answer(1)}, want: []string{"persist 1 k"}},
			{durable: 0, want: nil},
			{step: []automaton.Output{answer(2)}, want: nil},
			{durable: 1, want: []string{"respond 1", "respond 2"}},
		}},
		{"partial durability releases the prefix whose records are durable", []act{
			{step: []automaton.Output{put("a"), send("x"), put("b"), answer(1), put("c"), effect(7)},
				want: []string{"persist 1 a", "persist 2 b", "persist 3 c"}},
			{durable: 2, want: []string{"send x", "respond 1"}},
			{durable: 3, want: []string{"effect 7"}},
		}},
		{"an Early Send leaves before its own step's records", []act{
			{step: []automaton.Output{put("acc"), early("2a"), answer(1)}, want: []string{"persist 1 acc", "send 2a"}},
			{durable: 1, want: []string{"respond 1"}},
		}},
		{"an Early Send waits for what the last plain output waits for", []act{
			{step: []automaton.Output{put("a"), send("x"), put("b"), early("e")}, want: []string{"persist 1 a", "persist 2 b"}},
			{durable: 1, want: []string{"send x", "send e"}},
		}},
		{"an Early Send in a later step waits behind a held output (never overtakes)", []act{
			{step: []automaton.Output{put("a"), send("x")}, want: []string{"persist 1 a"}},
			{step: []automaton.Output{put("b"), early("e")}, want: []string{"persist 2 b"}},
			{durable: 1, want: []string{"send x", "send e"}},
		}},
		{"timers and membership carry no requirement", []act{
			{step: []automaton.Output{put("a"), automaton.SetTimer{ID: 3, After: time.Second}, automaton.CancelTimer{ID: 4},
				automaton.Members{Members: []automaton.Member{{ID: "n1"}}}, answer(1)},
				want: []string{"persist 1 a", "timer 3", "cancel 4", "members 1"}},
			{durable: 1, want: []string{"respond 1"}},
		}},
		{"a crash drops held outputs and restarts numbering", []act{
			{step: []automaton.Output{send("out"), put("a"), send("x"), answer(1), early("e")}, want: []string{"send out", "persist 1 a"}},
			{crash: true, lost: []string{"send x", "respond 1", "send e"}},
			{step: []automaton.Output{answer(2), put("b")}, want: []string{"respond 2", "persist 1 b"}},
		}},
		{"an Early Send released before the crash stays out; the records after it are lost", []act{
			{step: []automaton.Output{put("a"), early("2a"), put("b")}, want: []string{"persist 1 a", "send 2a", "persist 2 b"}},
			{crash: true, lost: nil},
		}},
		{"a positioned answer waits for its positions only, and overtakes held outputs", []act{
			// acc/1 (pos 1), acc/2 (pos 2), c (no position); the answer
			// for position 1 skips acc/2 and c, the plain send does not.
			{step: []automaton.Output{at("acc1", 1)}, want: []string{"persist 1 acc1"}},
			{step: []automaton.Output{at("acc2", 2), early("2a")}, want: []string{"persist 2 acc2", "send 2a"}},
			{step: []automaton.Output{put("c"), send("hb"), upTo(7, 1), upTo(8, 2)}, want: []string{"persist 3 c"}},
			{durable: 1, want: []string{"respond 7"}},
			{durable: 2, want: []string{"respond 8"}},
			{durable: 3, want: []string{"send hb"}},
		}},
		{"a positioned answer waits for everything before its last positioned record", []act{
			{step: []automaton.Output{put("p"), at("acc3", 3), at("acc1", 1), upTo(1, 1), upTo(2, 2), upTo(3, 3)},
				want: []string{"persist 1 p", "persist 2 acc3", "persist 3 acc1"}},
			// acc1 is number 3, after acc3: every answer needs 3.
			{durable: 2, want: nil},
			{durable: 3, want: []string{"respond 1", "respond 2", "respond 3"}},
		}},
		{"a positioned answer with no positioned record before it leaves at once", []act{
			{step: []automaton.Output{put("c"), at("acc5", 5), upTo(4, 4), answer(9)},
				want: []string{"persist 1 c", "persist 2 acc5", "respond 4"}},
			{durable: 2, want: []string{"respond 9"}},
		}},
		{"an Early Send after a positioned answer waits for every record before the answer", []act{
			{step: []automaton.Output{at("acc1", 1), at("acc2", 2), upTo(1, 1), early("e"), put("x")},
				want: []string{"persist 1 acc1", "persist 2 acc2", "persist 3 x"}},
			{durable: 1, want: []string{"respond 1"}},
			{durable: 2, want: []string{"send e"}},
		}},
		{"a crash drops held positioned answers in emission order", []act{
			{step: []automaton.Output{at("acc1", 1), send("x"), upTo(1, 1), at("acc2", 2), upTo(2, 2)},
				want: []string{"persist 1 acc1", "persist 2 acc2"}},
			{crash: true, lost: []string{"send x", "respond 1", "respond 2"}},
		}},
		{"after a storage failure nothing is released", []act{
			{step: []automaton.Output{put("a"), answer(1)}, want: []string{"persist 1 a"}},
			{fail: true},
			{durable: 1, want: nil},
			{step: []automaton.Output{send("x")}, want: nil},
			{crash: true, lost: []string{"respond 1", "send x"}},
			{step: []automaton.Output{send("y")}, want: []string{"send y"}},
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			r := New(Config{Self: "n1"})
			for i, a := range tc.acts {
				rt := &rec{}
				var lost []automaton.Output
				switch {
				case a.step != nil:
					if err := r.Step(a.step, rt); err != nil {
						t.Fatalf("act %d: %v", i, err)
					}
				case a.crash:
					lost = r.Crash()
				case a.fail:
					r.Fail()
				default:
					r.Durable(a.durable, rt)
				}
				if got, want := strings.Join(rt.log, "; "), strings.Join(a.want, "; "); got != want {
					t.Fatalf("act %d: runtime asked to\n  %s\nwant\n  %s", i, got, want)
				}
				lr := &rec{}
				for _, o := range lost {
					lr.Release(o)
				}
				if got, want := strings.Join(lr.log, "; "), strings.Join(a.lost, "; "); got != want {
					t.Fatalf("act %d: crash dropped %q, want %q", i, got, want)
				}
			}
		})
	}
}

// odd is an output type no runtime knows.
type odd struct{ automaton.CancelTimer }

func TestViolations(t *testing.T) {
	known := func(id automaton.NodeID) bool { return id == "n1" || id == "n2" }
	for _, tc := range []struct {
		o    automaton.Output
		want string
	}{
		{automaton.Send{To: "n1"}, "itself"},
		{automaton.Send{To: "n9"}, `unknown node "n9"`},
		{automaton.Send{To: "n1", Early: true}, "itself"},
		{automaton.Persist{Value: []byte("v")}, "empty key"},
		{automaton.SetTimer{ID: 1, After: -time.Millisecond}, "negative duration"},
		{nil, "nil output"},
		{odd{}, "unknown output"},
	} {
		r := New(Config{Self: "n1", Known: known})
		rt := &rec{}
		err := r.Step([]automaton.Output{send("before"), tc.o, send("after")}, rt)
		var v *Violation
		if !errors.As(err, &v) || !strings.Contains(v.Reason, tc.want) {
			t.Fatalf("%#v: got %v, want a violation about %q", tc.o, err, tc.want)
		}
		if got := strings.Join(rt.log, "; "); got != "send before" {
			t.Fatalf("%#v: runtime asked to %q; want only the output before the violation", tc.o, got)
		}
		if r.Last() != 0 {
			t.Fatalf("%#v: a refused output was numbered", tc.o)
		}
	}
	// Without Known, any node but self is accepted.
	if err := New(Config{Self: "n1"}).Output(automaton.Send{To: "n9"}, &rec{}); err != nil {
		t.Fatal(err)
	}
}

func TestEarlyAndExposed(t *testing.T) {
	r := New(Config{Self: "n1"})
	rt := &rec{}
	_ = r.Step([]automaton.Output{put("a"), answer(1), put("b"), early("e"), put("c")}, rt)
	if !r.TakeEarly() || r.TakeEarly() {
		t.Fatal("TakeEarly must report the Early Send once")
	}
	if last, ok := r.Exposed(); !ok || last != 1 {
		t.Fatalf("Exposed = %d, %v; want records after 1 exposed", last, ok)
	}
	if !r.Waiting() || r.Held() != 2 || !r.Unsynced() {
		t.Fatalf("waiting %v held %d unsynced %v", r.Waiting(), r.Held(), r.Unsynced())
	}
	// A plain output after the Early Send covers every record again.
	_ = r.Step([]automaton.Output{send("x")}, rt)
	if _, ok := r.Exposed(); ok {
		t.Fatal("a plain Send after the Early one leaves nothing exposed")
	}
	r.Durable(3, rt)
	if r.Waiting() || r.Unsynced() || r.DurableUpTo() != 3 {
		t.Fatalf("after durable 3: waiting %v unsynced %v", r.Waiting(), r.Unsynced())
	}
	// No Early Send after the last plain output: nothing exposed.
	_ = r.Step([]automaton.Output{early("e2"), send("y"), put("d")}, rt)
	if _, ok := r.Exposed(); ok {
		t.Fatal("an Early Send before the last plain output exposes nothing")
	}
}

// TestPositionedFrontier checks the requirement of positioned answers
// against a brute force over random record sequences, across the
// frontier's pruning.
func TestPositionedFrontier(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for trial := 0; trial < 40; trial++ {
		r := New(Config{Self: "n1"})
		rt := &rec{}
		var recs []posSeq // every positioned record, by number
		for k := 0; k < 3000; k++ {
			p := uint64(rng.IntN(40))
			if trial%2 == 0 {
				p = uint64(k/3 + rng.IntN(5)) // mostly increasing, as a leader's
			}
			_ = r.Output(automaton.Persist{Key: "k", Pos: p}, rt)
			if p > 0 {
				recs = append(recs, posSeq{p, r.Last()})
			}
			if rng.IntN(10) == 0 {
				r.Durable(r.Last()-min(r.Last(), uint64(rng.IntN(3))), rt)
			}
			u := uint64(rng.IntN(int(k/3 + 45)))
			want := uint64(0)
			for _, x := range recs {
				if x.pos <= u {
					want = x.seq
				}
			}
			got := r.needUpTo(u)
			if got != want && !(got <= r.DurableUpTo() && want <= r.DurableUpTo()) {
				t.Fatalf("trial %d record %d: needUpTo(%d) = %d, want %d (durable %d)", trial, k, u, got, want, r.DurableUpTo())
			}
		}
	}
}

// TestFlawRespondUndurable shows the deliberately wrong interpreter doing
// what the correct one never does; sim/release_flaw_test.go shows the
// simulator's checks catching it.
func TestFlawRespondUndurable(t *testing.T) {
	r := New(Config{Self: "n1", Flaw: FlawRespondUndurable})
	rt := &rec{}
	_ = r.Step([]automaton.Output{put("a"), answer(1)}, rt)
	if got := strings.Join(rt.log, "; "); got != "persist 1 a; respond 1" {
		t.Fatalf("flawed interpreter: %q", got)
	}
}

func TestDurableBeyondEmittedPanics(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("reporting an unemitted record durable must panic")
		}
	}()
	New(Config{}).Durable(1, &rec{})
}

// TestLongQueue compacts the queue without losing order.
func TestLongQueue(t *testing.T) {
	r := New(Config{Self: "n1"})
	rt := &rec{}
	const n = 5000
	for i := 1; i <= n; i++ {
		_ = r.Step([]automaton.Output{put("k"), answer(uint64(i))}, rt)
		if i%3 == 0 {
			r.Durable(uint64(i-1), rt)
		}
	}
	r.Durable(n, rt)
	k := 0
	for _, l := range rt.log {
		if strings.HasPrefix(l, "respond ") {
			k++
			if l != fmt.Sprintf("respond %d", k) {
				t.Fatalf("answer %d out of order: %s", k, l)
			}
		}
	}
	if k != n || r.Held() != 0 {
		t.Fatalf("released %d of %d, %d held", k, n, r.Held())
	}
}

// passOn is a Runtime that keeps the last output released, as given.
type passOn struct{ last automaton.Output }

func (p *passOn) Persist(uint64, automaton.Persist) {}
func (p *passOn) Release(o automaton.Output)        { p.last = o }
func (p *passOn) SetTimer(automaton.SetTimer)       {}
func (p *passOn) CancelTimer(automaton.TimerID)     {}
func (p *passOn) Members(automaton.Members)         {}

// TestReleaseBoxesNothing: the interpreter passes on the output the
// automaton boxed; an output released at once costs no allocation (a
// type switch that rebinds the output and passes the value on boxed every
// Send and Respond again: one allocation each).
func TestReleaseBoxesNothing(t *testing.T) {
	r := New(Config{Self: "n1"})
	rt := &passOn{}
	outs := []automaton.Output{
		automaton.Send{To: "n2", Msg: []byte("m")},
		automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Client: 7, Seq: 1}}},
	}
	for _, o := range outs {
		if n := testing.AllocsPerRun(100, func() {
			if err := r.Output(o, rt); err != nil {
				t.Fatal(err)
			}
		}); n != 0 {
			t.Errorf("%T: %v allocations per output, want 0", o, n)
		}
		if !reflect.DeepEqual(rt.last, o) {
			t.Errorf("released %v, want %v", rt.last, o)
		}
	}
}

// TestRelayed: a relayed answer (automaton.Respond.Relayed) waits for no
// record: it leaves at once, before the records emitted earlier are
// durable, and the records it skips are exposed (a crash before their
// fsync is a crash after the answer: the model checker explores it); an
// Early Send after it waits for every record before it. Without the flag
// the same answer waits for every record before it.
func TestRelayed(t *testing.T) {
	relayed := func(seq uint64) automaton.Output {
		return automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Client: 1, Seq: seq}}, Relayed: true}
	}
	for _, on := range []bool{true, false} {
		r := New(Config{Self: "n1"})
		rt := &rec{}
		ans := answer(1)
		if on {
			ans = relayed(1)
		}
		_ = r.Step([]automaton.Output{at("a/1", 1), ans}, rt)
		got := strings.Join(rt.log, "; ")
		want := "persist 1 a/1"
		if on {
			want = "persist 1 a/1; respond 1"
		}
		if got != want {
			t.Fatalf("relayed=%v: before the record is durable: %q, want %q", on, got, want)
		}
		if last, ok := r.Exposed(); ok != on || on && last != 0 {
			t.Fatalf("relayed=%v: Exposed = %d, %v; want record 1 exposed only when relayed", on, last, ok)
		}
		_ = r.Step([]automaton.Output{early("e")}, rt) // waits for record 1 either way
		if got := strings.Join(rt.log, "; "); got != want {
			t.Fatalf("relayed=%v: an Early Send after the answer: %q, want %q", on, got, want)
		}
		r.Durable(1, rt)
		got = strings.Join(rt.log, "; ")
		if on {
			want = "persist 1 a/1; respond 1; send e"
		} else {
			want = "persist 1 a/1; respond 1; send e"
		}
		if got != want {
			t.Fatalf("relayed=%v: after the record is durable: %q, want %q", on, got, want)
		}
	}
}

// TestRelayedSend: a relayed Send (automaton.Send.Relayed, a Multi-Paxos
// follower's Forward) waits for no record: it leaves at once, before the
// records and the waiting send emitted earlier, and the records it skips
// are exposed (when no earlier output waits for them); an Early Send after
// it waits for every record before it. Without the flag (the interpreter's case removed, or the flag unset) it
// waits behind the earlier send for record 1: "persist 1 p; send w1".
func TestRelayedSend(t *testing.T) {
	for _, on := range []bool{true, false} {
		r := New(Config{Self: "n1"})
		rt := &rec{}
		fwd := automaton.Send{To: "n2", Msg: []byte("f"), Relayed: on}
		_ = r.Step([]automaton.Output{put("p"), send("w1")}, rt) // w1 waits for record 1
		_ = r.Step([]automaton.Output{fwd}, rt)
		got := strings.Join(rt.log, "; ")
		want := "persist 1 p"
		if on {
			want = "persist 1 p; send f"
		}
		if got != want {
			t.Fatalf("relayed=%v: before the record is durable: %q, want %q", on, got, want)
		}
		_ = r.Step([]automaton.Output{early("e")}, rt) // waits for record 1 either way
		if got := strings.Join(rt.log, "; "); got != want {
			t.Fatalf("relayed=%v: an Early Send after it: %q, want %q", on, got, want)
		}
		// Alone after a record, it exposes that record (a crash before its
		// fsync is a crash after the send: the model checker explores it).
		r2 := New(Config{Self: "n1"})
		_ = r2.Step([]automaton.Output{put("p"), fwd}, &rec{})
		if last, ok := r2.Exposed(); ok != on || on && last != 0 {
			t.Fatalf("relayed=%v: Exposed = %d, %v; want record 1 exposed only when relayed", on, last, ok)
		}
		r.Durable(1, rt)
		got = strings.Join(rt.log, "; ")
		want = "persist 1 p; send w1; send f; send e"
		if on {
			want = "persist 1 p; send f; send w1; send e"
		}
		if got != want {
			t.Fatalf("relayed=%v: after the record is durable: %q, want %q", on, got, want)
		}
	}
}
