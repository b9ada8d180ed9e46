package sim

import (
	"strings"
	"testing"
	"time"
)

// RunWithStarts issues each client's first operation at its start time,
// exactly, and later ones after the usual think time; a start before the
// first think time ends, or a count that is not one per client, is refused.
func TestRunWithStarts(t *testing.T) {
	cfg := Config{Protocol: "test-leader", Nodes: 3, Clients: 3, Ops: 6, Seed: 3,
		Think: "constant:1s", Mix: "set:1", NoCheck: true}
	starts := []time.Duration{1500 * time.Millisecond, time.Second, 1250 * time.Millisecond}
	res, err := RunWithStarts(cfg, starts)
	if err != nil {
		t.Fatal(err)
	}
	first := map[int]int64{}
	for _, op := range res.History.Ops {
		if _, ok := first[op.Process]; !ok {
			first[op.Process] = op.Call
		}
	}
	for i, at := range starts {
		if first[i] != int64(at) {
			t.Errorf("client %d's first call at %v, want %v", i, time.Duration(first[i]), at)
		}
	}
	plain, err := Run(cfg)
	if err != nil {
		t.Fatal(err)
	}
	for _, op := range plain.History.Ops[:3] {
		if op.Call != int64(time.Second) {
			t.Errorf("without start times client %d's first call at %v, want the think time 1s", op.Process, time.Duration(op.Call))
		}
	}
	if _, err := RunWithStarts(cfg, []time.Duration{2 * time.Second, 500 * time.Millisecond, 2 * time.Second}); err == nil || !strings.Contains(err.Error(), "before its first think time") {
		t.Errorf("a start before the think time: %v", err)
	}
	if _, err := RunWithStarts(cfg, starts[:2]); err == nil {
		t.Error("two start times for three clients accepted")
	}
}
