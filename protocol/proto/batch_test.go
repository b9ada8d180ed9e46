package proto

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
)

var bh = Header{Protocol: "p", Version: 1, Kinds: []string{"m", "batch"}}

func msg(b byte, n int) []byte {
	e := bh.Message(1, n+2)
	e.B = append(e.B, bytes.Repeat([]byte{b}, n)...)
	return e.B
}

// Coalesce puts each peer's batch where its last message was: after every
// Persist any of its messages followed, and before what followed it.
func TestCoalescePlacement(t *testing.T) {
	outs := []automaton.Output{
		automaton.Send{To: "a", Msg: msg(1, 3)},
		automaton.Send{To: "b", Msg: msg(2, 3)},
		automaton.Persist{Key: "r"},
		automaton.Send{To: "a", Msg: msg(3, 3)},
		automaton.Respond{},
		automaton.Send{To: "c", Msg: msg(4, 3), Early: true},
		automaton.Send{To: "c", Msg: msg(5, 3), Early: true},
	}
	got := bh.Coalesce(outs, 2)
	var kinds []string
	for _, o := range got {
		switch o := o.(type) {
		case automaton.Send:
			kinds = append(kinds, string(o.To)+bh.KindName(o.Msg[1]))
		case automaton.Persist:
			kinds = append(kinds, "persist")
		case automaton.Respond:
			kinds = append(kinds, "respond")
		}
	}
	// b's one message stays as it is; a's two become one batch after the
	// Persist; Early sends are left alone.
	if w := "bm persist abatch respond cm cm"; strings.Join(kinds, " ") != w {
		t.Fatalf("got %v, want %s", kinds, w)
	}
	parts, err := bh.SplitBatch(got[2].(automaton.Send).Msg, 2)
	if err != nil || len(parts) != 2 || !bytes.Equal(parts[0], msg(1, 3)) || !bytes.Equal(parts[1], msg(3, 3)) {
		t.Fatalf("split: %x, %v", parts, err)
	}
	one := []automaton.Output{automaton.Send{To: "a", Msg: msg(1, 1)}, automaton.Send{To: "b", Msg: msg(1, 1)}}
	if got := bh.Coalesce(one, 2); &got[0] != &one[0] {
		t.Errorf("one message per peer: outputs rewritten")
	}
}

// A batch holds at most about MaxBatchBytes; the rest starts another.
func TestCoalesceBound(t *testing.T) {
	var outs []automaton.Output
	for i := range 5 {
		outs = append(outs, automaton.Send{To: "a", Msg: msg(byte(i), MaxBatchBytes/3)})
	}
	got := bh.Coalesce(outs, 2)
	total := 0
	for _, o := range got {
		m := o.(automaton.Send).Msg
		if len(m) > 2*MaxBatchBytes {
			t.Errorf("a batch of %d bytes", len(m))
		}
		parts, err := bh.SplitBatch(m, 2)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range parts {
			if p[2] != byte(total) {
				t.Fatalf("message %d out of order", total)
			}
			total++
		}
	}
	if len(got) != 2 || total != 5 {
		t.Fatalf("%d batches holding %d messages, want 2 holding 5", len(got), total)
	}
}

// Corrupt batches are errors, never a panic or a huge allocation.
func TestSplitBatchCorrupt(t *testing.T) {
	good := bh.batch(2, [][]byte{msg(1, 2), msg(2, 2)}, 8)
	for name, b := range map[string][]byte{
		"truncated":   good[:len(good)-1],
		"trailing":    append(append([]byte(nil), good...), 0),
		"huge count":  {1, 2, 0xff, 0xff, 0xff, 0xff, 0x0f},
		"not a batch": msg(1, 2),
		"nested":      bh.batch(2, [][]byte{good, msg(1, 1)}, len(good)+3),
	} {
		if _, err := bh.SplitBatch(b, 2); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// Place, given a step's other outputs and its Sends kept aside with their
// places, builds exactly what Coalesce builds from the outputs with every
// Send in its place: random steps of three peers, Persists, Responds and
// timers between the Sends, some messages large enough to close a batch
// at MaxBatchBytes, half of them in a scratch buffer overwritten once
// Place returns (none of its outputs may alias it).
func TestPlaceIsCoalesce(t *testing.T) {
	rng := rand.New(rand.NewPCG(28, 64))
	peers := []automaton.NodeID{"a", "b", "c"}
	var s Sends
	for step := range 2000 {
		s.Reset()
		scratch, arrays := make([]byte, 0, 64), [][]byte(nil)
		var outs, whole []automaton.Output
		for range rng.IntN(12) {
			switch rng.IntN(4) {
			case 0, 1:
				n := 1 + rng.IntN(8)
				if rng.IntN(50) == 0 {
					n = MaxBatchBytes/2 + rng.IntN(MaxBatchBytes/2)
				}
				to, m := peers[rng.IntN(len(peers))], msg(byte(step), n)
				if rng.IntN(2) == 0 {
					s.Add(len(outs), to, m)
				} else { // in a scratch buffer overwritten after Place
					if cap(scratch)-len(scratch) < len(m) {
						arrays = append(arrays, scratch)
						scratch = make([]byte, 0, max(64, 2*len(m)))
					}
					at := len(scratch)
					scratch = append(scratch, m...)
					s.AddScratch(len(outs), to, scratch[at:len(scratch):len(scratch)])
				}
				whole = append(whole, automaton.Send{To: to, Msg: m})
			case 2:
				p := automaton.Persist{Key: fmt.Sprint(step)}
				outs, whole = append(outs, p), append(whole, p)
			default:
				r := automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Seq: uint64(step)}}}
				outs, whole = append(outs, r), append(whole, r)
			}
		}
		want := bh.Coalesce(whole, 2)
		got := bh.Place(outs, &s, 2)
		for _, a := range append(arrays, scratch) {
			a = a[:cap(a)]
			for i := range a {
				a[i] = 0xff // reused by the next step
			}
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("step %d: Place gave %d outputs, Coalesce %d (or their contents differ)", step, len(got), len(want))
		}
	}
}

// BatchStep: a ClientBatch and a peer message of the batch kind are batch
// steps; a lone request, a message of another kind, a truncated message
// and a timer are not.
func TestBatchStep(t *testing.T) {
	batch := bh.batch(2, [][]byte{msg(1, 3), msg(2, 3)}, 0)
	for _, c := range []struct {
		in   automaton.Input
		want bool
	}{
		{automaton.ClientBatch{}, true},
		{automaton.PeerMessage{From: "a", Msg: batch}, true},
		{automaton.PeerMessage{From: "a", Msg: msg(1, 3)}, false},
		{automaton.PeerMessage{From: "a", Msg: batch[:1]}, false},
		{automaton.ClientRequest{}, false},
		{automaton.TimerFired{}, false},
	} {
		if got := BatchStep(c.in, 2); got != c.want {
			t.Errorf("BatchStep(%T %v) = %v, want %v", c.in, c.in, got, c.want)
		}
	}
}
