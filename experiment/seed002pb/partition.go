package seed002pb

import (
	"context"
	"fmt"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/sim"
)

// Partition is the experiment "seed002-pb-partition" (issue 10, item 4):
// primary-backup is safe only with a perfect failure detector (the Grid Services thesis,
// chapter III.A: "the primary is assumed to have failed" when a heartbeat is
// late). The simulator runs each protocol under two failure models: crash-stop
// with bounded delays (what the seed assumes), and partitions plus long pauses
// (what a real network does). A protocol that needs the perfect detector
// splits its brain in the second; consensus (chapter VI's motivation) does not.
type Partition struct {
	Protocols []string
	Seeds     string
	Ops       int
	Nodes     int
}

// Failure models: the simulator's fault kinds each one injects.
var models = []struct{ name, faults, doc string }{
	{"crash-stop", "crash", "crashes and restarts, messages delayed far less than the heartbeat timeout"},
	{"partitions", "crash,partition,pause", "crashes, network partitions and process pauses of up to 1 s"},
}

// NewPartition returns the experiment with its defaults.
func NewPartition() *Partition {
	return &Partition{Protocols: []string{"pb", "paxos", "pbpaxos"}, Ops: 300, Nodes: 3}
}

func (p *Partition) Name() string { return "seed002-pb-partition" }

func (p *Partition) Description() string {
	return "Primary-backup against consensus outside the perfect-failure-detector model (seed 002, chapter III " +
		"vs chapter VI): the simulator runs pb, paxos and pbpaxos over hundreds of seeds with crash-stop faults, " +
		"then with partitions and pauses, checks every history for linearizability and every step for the " +
		"protocols' invariants, and prints the violations found with their replay commands."
}

func (p *Partition) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&p.Protocols, "protocols", p.Protocols, "protocols to compare")
	fs.StringVar(&p.Seeds, "seeds", "", `simulation seeds per cell (default "1-200", "1-20" with --quick)`)
	fs.IntVar(&p.Ops, "ops", p.Ops, "operations per simulated run")
	fs.IntVar(&p.Nodes, "nodes", p.Nodes, "nodes per simulated cluster")
}

func (p *Partition) seeds(o experiment.Options) string {
	switch {
	case p.Seeds != "":
		return p.Seeds
	case o.Quick:
		return "1-20"
	}
	return "1-200"
}

func (p *Partition) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if _, err := sim.ParseSeeds(p.seeds(o)); err != nil {
		return nil, fmt.Errorf("--seeds: %w", err)
	}
	if p.Ops < 1 || p.Nodes < 1 {
		return nil, fmt.Errorf("--ops and --nodes must be positive")
	}
	var cells []experiment.Cell
	for _, proto := range p.Protocols {
		for _, m := range models {
			cells = append(cells, experiment.NewCell("protocol", proto, "faults", m.name))
		}
	}
	return cells, nil
}

// simArgs are the `synod-lab sim` flags of a cell.
func (p *Partition) simArgs(proto, faults, seeds string) []string {
	return []string{"--protocol", proto, "--nodes", strconv.Itoa(p.Nodes), "--clients", "4",
		"--ops", strconv.Itoa(p.Ops), "--faults", faults, "--seeds", seeds}
}

func (p *Partition) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	proto := c.Get("protocol")
	if _, err := automaton.LookupAny(proto); err != nil {
		return experiment.Outcome{}, experiment.Unavailable("protocol %q not available in this binary (registered: %s)", proto, strings.Join(automaton.Names(), ", "))
	}
	var faults string
	for _, m := range models {
		if m.name == c.Get("faults") {
			faults = m.faults
		}
	}
	cfg, seeds, err := sim.ParseArgs(p.simArgs(proto, faults, p.seeds(env.Options)))
	if err != nil {
		return experiment.Outcome{}, err
	}
	var runs, violations, history, invariant, undecided, ops int
	var first, replayCmd []string
	for _, seed := range seeds {
		if err := ctx.Err(); err != nil {
			return experiment.Outcome{}, err
		}
		cfg.Seed = seed
		r, err := sim.Run(cfg)
		if err != nil {
			return experiment.Outcome{}, fmt.Errorf("seed %d: %w (replay: %s)", seed, err, cfg.Command())
		}
		runs++
		ops += r.Ops
		switch {
		case r.Invariant != "" || r.Divergence != "":
			invariant++
		case r.Violation:
			history++
		case r.Check != nil && r.Check.Result == check.Unknown:
			undecided++
		}
		if r.Violation {
			violations++
			if len(first) < 3 {
				why := "history not linearizable"
				if r.Invariant != "" {
					why = "invariant: " + firstLine(r.Invariant)
				} else if r.Divergence != "" {
					why = "divergence: " + firstLine(r.Divergence)
				}
				first = append(first, fmt.Sprintf("seed %d (%s): %s", seed, why, cfg.Command()))
				replayCmd = append(replayCmd, cfg.Command())
			}
		}
		if runs%50 == 0 {
			env.Logf("%d/%d seeds, %d violations", runs, len(seeds), violations)
		}
	}
	labels := map[string]string{"seeds": p.seeds(env.Options), "faults": faults}
	if len(first) > 0 {
		// The table shows one replay command; results.json keeps three,
		// with what failed.
		labels["replay"] = replayCmd[0]
	}
	return experiment.Outcome{
		Detail: first,
		Metrics: map[string]float64{
			mRuns: float64(runs), mViolations: float64(violations), mHistory: float64(history),
			mInvariant: float64(invariant), mUndecided: float64(undecided), mOps: float64(ops),
		},
		Labels: labels,
	}, nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	if len(s) > 160 {
		s = s[:160] + "..."
	}
	return s
}

func (p *Partition) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{
		Source: "seed 002, chapter III.A (primary-backup assumes a failure detector that never suspects a live primary) " +
			"and chapter VI (PB-Paxos keeps one copy's semantics under any crash and message delay)",
		Notes: map[string]string{
			experiment.NewCell("protocol", "pb", "faults", "crash-stop").Key: "safe: the backup takes over only after the primary crashed",
			experiment.NewCell("protocol", "pb", "faults", "partitions").Key: "not claimed: a late heartbeat makes two primaries",
		},
	}
}

func (p *Partition) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mRuns, Header: "seeds", Format: "%.0f"},
			{Metric: mViolations, Header: "violations", Format: "%.0f"},
			{Metric: mHistory, Header: "non-lin. histories", Format: "%.0f"},
			{Metric: mInvariant, Header: "invariant/diverged", Format: "%.0f"},
			{Metric: mUndecided, Header: "undecided", Format: "%.0f"},
			{Metric: mOps, Header: "ops", Format: "%.0f"},
		},
		Labels: []string{"faults", "replay"},
		Notes: []string{
			"crash-stop = " + models[0].doc + "; partitions = " + models[1].doc + ".",
			"A violation is a history the checker proves not linearizable, a broken protocol invariant, or replicas",
			"whose states diverge. Each is printed with the `synod-lab sim` command that replays it.",
		},
	}
}

// Claims: chapter VI's motivation, primary-backup needs the perfect failure
// detector: no violation under crash-stop faults, some with partitions and
// pauses; consensus (paxos, pbpaxos) none under either. Counts over the
// simulated seeds, deterministic: an exact rule over identical runs.
func (p *Partition) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	for _, proto := range p.Protocols {
		ck := experiment.NewCell("protocol", proto, "faults", "crash-stop").Key
		pk := experiment.NewCell("protocol", proto, "faults", "partitions").Key
		want := "violations under partitions and pauses, none under crash-stop"
		ok := func(crash, part float64) bool { return crash == 0 && part > 0 }
		if proto != "pb" {
			want = "no violation under either failure model"
			ok = func(crash, part float64) bool { return crash == 0 && part == 0 }
		}
		text := fmt.Sprintf("Chapter VI (motivation): %s: %s", proto, want)
		if c, missing := d.NotRun(text, "qualitative", ck, pk); missing {
			out = append(out, c)
			continue
		}
		crash, part := d.Ours[ck][mViolations], d.Ours[pk][mViolations]
		cl := experiment.Claim{Text: text, Paper: "qualitative", Judgement: experiment.Exact(ok(crash, part),
			fmt.Sprintf("%.0f violations of %.0f seeds under crash-stop, %.0f of %.0f with partitions", crash, d.Ours[ck][mRuns], part, d.Ours[pk][mRuns]),
			"violations counted over the simulated seeds", d.Sample(ck, mViolations), d.Sample(pk, mViolations))}
		out = append(out, cl)
	}
	return out
}

// Summary states whether the contrast of chapter VI's motivation holds.
func (p *Partition) Summary(ours, _ experiment.Figures) []string {
	var out []string
	for _, proto := range p.Protocols {
		crash, ok1 := ours.Get(experiment.NewCell("protocol", proto, "faults", "crash-stop").Key, mViolations)
		part, ok2 := ours.Get(experiment.NewCell("protocol", proto, "faults", "partitions").Key, mViolations)
		if !ok1 || !ok2 {
			continue
		}
		runs, _ := ours.Get(experiment.NewCell("protocol", proto, "faults", "partitions").Key, mRuns)
		switch {
		case crash == 0 && part > 0:
			out = append(out, fmt.Sprintf("%s: safe under crash-stop faults, broken on %.0f of %.0f seeds with partitions and pauses: it needs the perfect failure detector.", proto, part, runs))
		case crash == 0 && part == 0:
			out = append(out, fmt.Sprintf("%s: no violation under either failure model.", proto))
		default:
			out = append(out, fmt.Sprintf("%s: %.0f violations even under crash-stop faults: a bug, not the failure model (see the replay commands).", proto, crash))
		}
	}
	return out
}
