package seed000

import (
	"context"
	"fmt"
	"strconv"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
)

// Throughput is "seed000-throughput-vs-n": Test Series 1 (§5.4, Fig. 5.1).
type Throughput struct {
	common
	Nodes []int
	CPUs  int
	Rate  float64

	effCPUs int // CPUs, or 2 under --quick
}

// NewThroughput returns the experiment with the seed's parameters.
func NewThroughput() *Throughput {
	return &Throughput{common: defaults(), Nodes: nodesRange(1, 20), CPUs: 10, Rate: 330}
}

func (t *Throughput) Name() string { return "seed000-throughput-vs-n" }

func (t *Throughput) Description() string {
	return "ESDS throughput vs the number of replicas N = 1..20 at a fixed 330 ops/s (seed 000, Test Series 1, " +
		"§5.4, Fig. 5.1): 300 non-strict Counter adds spread over the replicas; throughput = 300/τ. " +
		"In simulation the replicas share 10 processors beyond N = 10, as the seed's did; live, every node shares this machine."
}

func (t *Throughput) Flags(fs *pflag.FlagSet) {
	t.common.flags(fs, []int{1, 2, 4, 6, 10})
	fs.IntSliceVar(&t.Nodes, "nodes", t.Nodes, "sim: replica counts N")
	fs.IntVar(&t.CPUs, "cpus", t.CPUs, "sim: processors the replicas share (the seed: 10 workstations)")
	fs.Float64Var(&t.Rate, "rate", t.Rate, "submission rate, operations/s")
}

func (t *Throughput) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := t.check(o); err != nil {
		return nil, err
	}
	if t.Rate <= 0 || t.CPUs < 0 {
		return nil, fmt.Errorf("--rate must be positive and --cpus non-negative")
	}
	t.effCPUs = t.CPUs
	if o.Quick && t.CPUs == 10 {
		t.effCPUs = 2
	}
	var cells []experiment.Cell
	for _, m := range t.modes() {
		ns := t.Nodes
		if m == modeLive {
			ns = t.LiveNodes
		}
		if o.Quick {
			ns = []int{1, 2, 3}
		}
		for _, n := range ns {
			cells = append(cells, experiment.NewCell("mode", m, "N", strconv.Itoa(n)))
		}
	}
	return cells, nil
}

func (t *Throughput) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	n, _ := strconv.Atoi(c.Get("N"))
	cpus := t.effCPUs
	l := load{Service: "counter", N: n, Rate: t.Rate, Gossip: true, CPUs: cpus}
	var r result
	var err error
	if c.Get("mode") == modeSim {
		r, err = t.runSim(ctx, env, l, t.opsFor(env.Options), t.runsFor(env.Options))
		if err == nil {
			r.Labels["cpus"] = strconv.Itoa(cpus)
		}
	} else {
		r, err = t.runLive(ctx, env, l, t.opsFor(env.Options), c.Key)
	}
	return r.outcome(), err
}

func (t *Throughput) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{Source: seedSource}
}

func (t *Throughput) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTput, Header: "ops/s", Format: "%.1f"},
			{Metric: mATfe, Header: "AT_fe ms", Format: "%.1f"},
			{Metric: mP99, Header: "p99 ms", Format: "%.1f"},
		},
		Labels: []string{"cpus", "durability"},
		Plots: []experiment.PlotSpec{{
			File: "throughput", Title: "Fig. 5.1: throughput at 330 ops/s", Kind: experiment.Lines,
			Metric: mTput, YLabel: "operations/s", X: "N", XLabel: "replicas", Series: []string{"mode"},
		}},
		Notes: append([]string{"Throughput = completed/τ (first submission to last response), the seed's AP = 300/τ."}, modelNotes...),
	}
}

// Summary compares the shape with Fig. 5.1's prose.
func (t *Throughput) Summary(ours, _ experiment.Figures) []string {
	out := []string{`Seed, Fig. 5.1 (§5.4): "The system's throughput rises as the number of replicas ... increases. However, the throughput drops off again at the point where the system runs out of physical processes for replicas (this happens at N = 10)".`}
	for _, m := range t.modes() {
		ns := t.Nodes
		if m == modeLive {
			ns = t.LiveNodes
		}
		x, y := seriesOf(ours, mTput, ns, func(n int) string { return fmt.Sprintf("mode=%s,N=%d", m, n) })
		if len(x) < 2 {
			continue
		}
		peak := argmax(y)
		rises := y[peak] > 1.2*y[0]
		line := fmt.Sprintf("  %s: ops/s by N %s; peak at N=%g", m, fmtSeries(x, y, "%.0f"), x[peak])
		if m == modeSim && x[len(x)-1] > float64(t.effCPUs) && t.effCPUs > 0 {
			drops := peak < len(x)-1 && y[len(y)-1] < 0.95*y[peak] && x[peak] <= float64(t.effCPUs)+1
			line += fmt.Sprintf("; rises: %s; drops past N=%d (processors): %s", verdict(rises), t.effCPUs, verdict(drops))
		} else {
			line += fmt.Sprintf("; rises with N: %s", verdict(rises))
		}
		out = append(out, line)
	}
	out = append(out, "  Live replicas have no artificial cost: each handles 330 ops/s alone, so throughput is the submission rate at every N (shape differs by construction).")
	return out
}
