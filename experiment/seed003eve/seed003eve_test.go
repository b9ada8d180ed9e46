package seed003eve

import (
	"context"
	"testing"

	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

// cell runs one simulated cell of an experiment in quick mode.
func cell(t *testing.T, kind string, nameValues ...string) map[string]float64 {
	t.Helper()
	e := &Eve{kind: kind, Ops: 300, Clients: 64, Batch: 64, SimSeed: 1}
	out, err := e.RunCell(context.Background(), &experiment.Env{Options: experiment.Options{Quick: true}}, experiment.NewCell(nameValues...))
	if err != nil {
		t.Fatalf("%s %v: %v", kind, nameValues, err)
	}
	return out.Metrics
}

// The short CI pass: 16 virtual cores speed 10 ms requests up well beyond
// one core; an inaccurate mixer makes the verifiers roll back, an accurate
// one does not; Eve with 16 cores outruns sequential Multi-Paxos.
func TestQuickFigures(t *testing.T) {
	one := cell(t, kSpeedup, "mode", "sim", "cost", "10ms", "cores", "1")[mTput]
	sixteen := cell(t, kSpeedup, "mode", "sim", "cost", "10ms", "cores", "16")[mTput]
	if sixteen < 4*one {
		t.Errorf("10 ms requests: %.0f req/s on 16 cores, %.0f on 1: speedup below 4", sixteen, one)
	}
	if r := cell(t, kRollback, "conflicts", "loose", "keys", "2")[mRollback]; r <= 0 {
		t.Errorf("loose declaration over 2 keys: rollback %.1f%%, want some", r)
	}
	if r := cell(t, kRollback, "conflicts", "service", "keys", "2")[mRollback]; r != 0 {
		t.Errorf("accurate declaration: rollback %.1f%%, want none", r)
	}
	px := cell(t, kVsPaxos, "system", "paxos", "cost", "1ms")[mTput]
	ev := cell(t, kVsPaxos, "system", "eve-16", "cost", "1ms")[mTput]
	if ev <= px {
		t.Errorf("eve on 16 cores %.0f req/s, paxos %.0f", ev, px)
	}
}

// Derive gives every cell its speedup over the one-core cell of its group.
func TestDeriveSpeedup(t *testing.T) {
	e := &Eve{kind: kSpeedup}
	figs := experiment.Figures{}
	a := experiment.NewCell("mode", "sim", "cost", "1ms", "cores", "1").Key
	b := experiment.NewCell("mode", "sim", "cost", "1ms", "cores", "8").Key
	figs.Set(a, mTput, 100)
	figs.Set(b, mTput, 550)
	e.Derive(figs)
	if s, _ := figs.Get(b, mSpeedup); s != 5.5 {
		t.Errorf("speedup %v, want 5.5", s)
	}
}
