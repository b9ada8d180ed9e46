package adam

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/service"
)

// Group-major round-robin assignment (§5.2.1): every thread of group 0
// gets a request, then every thread of group 1, ..., then a second round.
func TestGroupMajorAssignment(t *testing.T) {
	p := newPPM(2, 3, 100)
	var q []eve.Entry
	for i := range 8 {
		q = append(q, eve.Entry{Req: automaton.Request{ID: automaton.RequestID{Client: 1, Seq: uint64(i)}}})
	}
	p.startBatch(q, make([][]*service.Cont, p.n()))
	want := [][]uint64{{0, 6}, {1, 7}, {2}, {3}, {4}, {5}}
	for th, w := range want {
		if len(p.assigned[th]) != len(w) {
			t.Fatalf("thread %d has %d requests, want %v", th, len(p.assigned[th]), w)
		}
		for i, seq := range w {
			if p.assigned[th][i].Req.ID.Seq != seq {
				t.Fatalf("thread %d request %d is %d, want %d", th, i, p.assigned[th][i].Req.ID.Seq, seq)
			}
		}
	}
}

// The yield bit-array (§5.2.1): a group's bits are set at its wall; only
// the PPM clears them, and only for a group swapped off at least once.
func TestYieldBits(t *testing.T) {
	p := newPPM(2, 2, 100)
	p.hitWall(0)
	if !p.yield[0] || !p.yield[1] || p.active != 1 || p.yield[2] || p.yield[3] {
		t.Fatalf("after group 0's wall: active %d, bits %v", p.active, p.yield)
	}
	p.hitWall(1)
	// Group 0 was swapped off once: its bits are cleared as it returns.
	if p.active != 0 || p.yield[0] || p.yield[1] || !p.yield[2] || !p.yield[3] {
		t.Fatalf("after group 1's wall: active %d, bits %v", p.active, p.yield)
	}
}
