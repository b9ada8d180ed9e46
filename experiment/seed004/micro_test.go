package seed004

import (
	"context"
	"testing"

	"github.com/synod-dev/synod/experiment"
)

// The paper's own figures, put through Arithmetic, give back §5.1's
// conclusions: update wins a small object from 6 readers and a large one
// from 3, invalidation wins from 3 successive writes of a large object.
func TestArithmeticReproducesThePaper(t *testing.T) {
	m := &Micro{}
	s := m.Seed().Values
	a, ok := arithmetic(func(c experiment.Cell) (float64, bool) { return s.Get(c.Key, mMs) }, 10)
	if !ok {
		t.Fatal("seed figures incomplete")
	}
	if a.SmallReaders != 6 || a.LargeReaders != 3 || a.LargeWrites != 3 || !a.SmallTwiceInvalidates || !a.LargeTwiceUpdates {
		t.Fatalf("paper arithmetic: %+v", a)
	}
}

// The --quick pass runs every cell; point-to-point update and invalidation
// cost more on 10 replicas than on 2 (one message per copy), broadcast with
// multicast does not grow, a remote 1 KB read costs more than a 4 B one,
// and the broadcast reaches every node.
func TestMicroQuick(t *testing.T) {
	m := &Micro{}
	o := experiment.Options{Quick: true}
	cells, err := m.Cells(o)
	if err != nil {
		t.Fatal(err)
	}
	ours := experiment.Figures{}
	for _, c := range cells {
		out, err := m.RunCell(context.Background(), &experiment.Env{Options: o}, c)
		if err != nil {
			t.Fatalf("%s: %v", c.Key, err)
		}
		ours.Set(c.Key, mMs, out.Metrics[mMs])
		ours.Set(c.Key, mPerOp, out.Metrics[mPerOp])
	}
	g := func(b, rt string, n int, metric string) float64 {
		v, ok := ours.Get(cell(b, rt, n).Key, metric)
		if !ok {
			t.Fatalf("no %s %s %d", b, rt, n)
		}
		return v
	}
	for _, b := range []string{"inc-int", "setall-1k"} {
		for _, rt := range []string{"orca-primary/invalidate", "orca-primary/update"} {
			if g(b, rt, 10, mMs) <= g(b, rt, 2, mMs) || g(b, rt, 10, mPerOp) < 2*9 {
				t.Errorf("%s %s: 10 replicas %.2f ms %.0f msgs, 2 replicas %.2f ms", b, rt, g(b, rt, 10, mMs), g(b, rt, 10, mPerOp), g(b, rt, 2, mMs))
			}
		}
		// The paper's point (§5): a broadcast update costs one multicast
		// whatever the number of replicas, point-to-point protocols one
		// message per copy. Ours waits for r+1 members to hold an update
		// before it is applied ([21]'s rule, protocol/orcabcast doc), so it
		// grows a little with the replicas, but less than either
		// point-to-point protocol.
		d := g(b, "orca-bcast", 10, mMs) - g(b, "orca-bcast", 2, mMs)
		for _, rt := range []string{"orca-primary/invalidate", "orca-primary/update"} {
			if p2p := g(b, rt, 10, mMs) - g(b, rt, 2, mMs); d < 0 || d >= p2p {
				t.Errorf("%s: broadcast grows by %.2f ms from 2 to 10 replicas, %s by %.2f ms", b, d, rt, p2p)
			}
		}
	}
	if g("remote-read-1k", "orca-primary/update", 2, mMs) <= g("remote-read-4b", "orca-primary/update", 2, mMs) {
		t.Error("a 1 KB remote read is not dearer than a 4 B one")
	}
	if g("bcast-short", "orca-bcast", 10, mPerOp) < 9 {
		t.Errorf("broadcast to 10 nodes sent %.0f messages", g("bcast-short", "orca-bcast", 10, mPerOp))
	}
	if lines := m.Summary(ours, m.Seed().Values); len(lines) != 2 {
		t.Fatalf("summary: %q", lines)
	}
}
