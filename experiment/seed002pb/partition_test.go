package seed002pb

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

// runPartition runs the partition experiment over the given protocols and seeds.
func runPartition(t *testing.T, seeds string, protos ...string) *experiment.Results {
	t.Helper()
	e := NewPartition()
	e.Protocols, e.Seeds, e.Ops = protos, seeds, 150
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Reps: 1}, Out: t.TempDir(), Work: t.TempDir(), Stdout: &stdout})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	return res
}

// Consensus stays linearizable under both failure models; a protocol that
// breaks is counted, with a replay command, and the summary says which
// failure model broke it.
func TestPartitionContrast(t *testing.T) {
	protos := []string{"paxos"}
	pb := automaton.Names()
	hasPB := false
	for _, n := range pb {
		hasPB = hasPB || n == "pb"
	}
	if hasPB {
		protos = append(protos, "pb")
	}
	res := runPartition(t, "1-4", protos...)
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK {
			t.Fatalf("cell %s: %s %s", c.Key, c.Status, c.Reason)
		}
		if c.Metrics[mRuns] != 4 || c.Metrics[mOps] < 4*100 {
			t.Errorf("cell %s ran %v seeds, %v ops", c.Key, c.Metrics[mRuns], c.Metrics[mOps])
		}
		proto, faults := c.Params[0].Value, c.Params[1].Value
		v := c.Metrics[mViolations]
		switch {
		case proto == "paxos" && v != 0:
			t.Errorf("paxos broke under %s: %v", faults, c.Labels["replay"])
		case proto == "pb" && faults == "crash-stop" && v != 0:
			t.Errorf("pb broke under crash-stop faults: %v", c.Labels["replay"])
		case v > 0 && !strings.Contains(c.Labels["replay"], "synod-lab sim --protocol "+proto):
			t.Errorf("cell %s: violations without a replay command: %q", c.Key, c.Labels["replay"])
		}
	}
	if len(res.Summary) != len(protos) || !strings.Contains(res.Summary[0], "paxos: no violation") {
		t.Errorf("summary: %q", res.Summary)
	}
}

func TestPartitionSummary(t *testing.T) {
	e := NewPartition()
	e.Protocols = []string{"a", "b", "c"}
	figs := experiment.Figures{}
	set := func(p, f string, runs, v float64) {
		k := experiment.NewCell("protocol", p, "faults", f).Key
		figs.Set(k, mRuns, runs)
		figs.Set(k, mViolations, v)
	}
	set("a", "crash-stop", 10, 0)
	set("a", "partitions", 10, 3)
	set("b", "crash-stop", 10, 0)
	set("b", "partitions", 10, 0)
	set("c", "crash-stop", 10, 2)
	set("c", "partitions", 10, 5)
	got := strings.Join(e.Summary(figs, nil), "\n")
	for _, want := range []string{"a: safe under crash-stop faults, broken on 3 of 10", "b: no violation", "c: 2 violations even under crash-stop"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}
