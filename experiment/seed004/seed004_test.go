package seed004

import (
	"context"
	"errors"
	"testing"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/orcabcast"
	_ "github.com/synod-dev/synod/protocol/orcaprimary"
)

// The --quick pass of both programs runs every cell, checks each answer
// against the sequential solver (RunCell fails otherwise), and sees the
// shared objects cost messages on more than one node.
func TestQuickCells(t *testing.T) {
	for _, a := range []*App{{Program: "tsp"}, {Program: "asp"}} {
		o := experiment.Options{Quick: true}
		cells, err := a.Cells(o)
		if err != nil {
			t.Fatal(err)
		}
		env := &experiment.Env{Options: o}
		ran := 0
		for _, c := range cells {
			out, err := a.RunCell(context.Background(), env, c)
			if errors.Is(err, experiment.ErrUnavailable) {
				continue
			}
			if err != nil {
				t.Fatalf("%s %s: %v", a.Name(), c.Key, err)
			}
			ran++
			if c.Get("nodes") != "1" && out.Metrics[mSends] == 0 {
				t.Fatalf("%s %s: no messages", a.Name(), c.Key)
			}
			if s := out.Metrics[mSpeedup]; s <= 0 || s > 1.05*atof(c.Get("nodes")) {
				t.Fatalf("%s %s: speedup %.2f", a.Name(), c.Key, s)
			}
		}
		if ran < len(cells)-2 {
			t.Fatalf("%s: only %d of %d cells ran", a.Name(), ran, len(cells))
		}
	}
}
