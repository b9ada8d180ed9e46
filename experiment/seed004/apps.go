// Package seed004 holds seed 004's experiments (Orca: "Replication
// Techniques for Speeding up Parallel Applications on Distributed
// Systems", Bal, Kaashoek, Tanenbaum, Jansen): seed004-micro measures §5.1
// and §5.2's basic costs and redoes §5.1's arithmetic (micro.go);
// seed004-tsp and seed004-asp
// run the programs of §5.3 (package orca/programs) on 1…10 simulated nodes
// under orca-bcast, orca-primary/update and orca-primary/invalidate and set
// their communication and speedups beside the paper's cost arithmetic and
// conclusions.
//
// Everything is simulated (orca/programs.World: virtual time, the cost
// model printed with every table, fsync off): the machine has 2 cores, so
// 10 processors only exist as simulated nodes. The paper reports no
// speedup values (they are in its reference [12]); its figures are the
// communication costs of §5.3 (milliseconds on 10 CPUs), set beside our
// overhead on 10 nodes: the elapsed virtual time minus the sequential
// time divided by the nodes (what communication and waiting added to a
// perfect speedup).
package seed004

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/orca/programs"
)

func init() {
	experiment.Register(&App{Program: "tsp"})
	experiment.Register(&App{Program: "asp"})
}

// App is seed004-tsp or seed004-asp.
type App struct {
	Program string
	// Size is the cities (TSP) or vertices (ASP); 0: the default.
	Size      int
	Multicast bool
}

const (
	mElapsed  = "elapsed_s"
	mSpeedup  = "speedup"
	mOverhead = "overhead_s"
	mSends    = "sends"
	mFrames   = "frames"
	mKB       = "kbytes"
)

var nodeCounts = []int{1, 2, 4, 6, 8, 10}

func (a *App) Name() string { return "seed004-" + a.Program }

func (a *App) Description() string {
	if a.Program == "tsp" {
		return "Seed 004 §5.3 TSP (master/worker branch and bound, shared bound and guarded job queue) on 1-10 simulated " +
			"nodes under orca-bcast, orca-primary/update and orca-primary/invalidate: speedup over the sequential solver, " +
			"messages and bytes, overhead on 10 nodes beside the paper's communication costs (462 ms queue + 42 / 580 / 755 ms bound)."
	}
	return "Seed 004 §5.3 ASP (parallel Floyd, pivot rows shared through one object) on 1-10 simulated nodes under " +
		"orca-bcast, orca-primary/update and orca-primary/invalidate: speedup, messages, bytes, overhead on 10 nodes beside " +
		"the paper's 2278.4 / 16230.4 / 29260.8 ms of communication for N=256."
}

func (a *App) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&a.Size, "size", 0, "cities (tsp, default 12; 9 with --quick) or vertices (asp, default 256; 32 with --quick)")
	fs.BoolVar(&a.Multicast, "multicast", false, "model hardware multicast (one frame for a step's identical sends)")
}

func (a *App) size(o experiment.Options) int {
	switch {
	case a.Size > 0:
		return a.Size
	case a.Program == "tsp" && o.Quick:
		return 9
	case a.Program == "tsp":
		return 12
	case o.Quick:
		return 32
	}
	return 256
}

func (a *App) Cells(o experiment.Options) ([]experiment.Cell, error) {
	ns := nodeCounts
	if o.Quick {
		ns = []int{1, 2, 4}
	}
	var cells []experiment.Cell
	for _, rt := range programs.Runtimes {
		for _, n := range ns {
			cells = append(cells, experiment.NewCell("runtime", rt.String(), "nodes", strconv.Itoa(n)))
		}
	}
	return cells, nil
}

func (a *App) net() programs.Net {
	n := programs.Ethernet10
	n.Multicast = a.Multicast
	return n
}

func (a *App) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	var rt programs.Runtime
	for _, r := range programs.Runtimes {
		if r.String() == c.Get("runtime") {
			rt = r
		}
	}
	n, _ := strconv.Atoi(c.Get("nodes"))
	size := a.size(env.Options)
	var res programs.Result
	var seq time.Duration
	var err error
	switch a.Program {
	case "tsp":
		inst := programs.NewTSP(size, 1)
		want, exp := programs.SolveTSP(inst)
		seq = time.Duration(exp) * programs.DefaultTSPConfig.NodeCost
		res, err = rt.RunTSP(n, inst, programs.DefaultTSPConfig, a.net(), 1)
		if err == nil && res.Answer != want {
			err = fmt.Errorf("tour %d, sequential solver %d", res.Answer, want)
		}
	default:
		g := programs.NewGraph(size, 1)
		want := programs.SolveASP(g)
		seq = time.Duration(size*size*size) * programs.DefaultASPConfig.CellCost
		var got programs.Graph
		res, got, err = rt.RunASP(n, g, programs.DefaultASPConfig, a.net(), 1)
		if err == nil && !got.Equal(want) {
			err = fmt.Errorf("matrix differs from the sequential solver's")
		}
	}
	if err != nil {
		return experiment.Outcome{}, err
	}
	el := res.Elapsed.Seconds()
	return experiment.Outcome{
		Metrics: map[string]float64{
			mElapsed: el, mSpeedup: seq.Seconds() / el, mOverhead: el - seq.Seconds()/float64(n),
			mSends: float64(res.Stats.Sends), mFrames: float64(res.Stats.Frames), mKB: float64(res.Stats.Bytes) / 1024,
		},
		Labels: map[string]string{"fsync": "off", "multicast": strconv.FormatBool(a.Multicast), "size": strconv.Itoa(size)},
		Detail: res,
	}, nil
}

// Seed: §5.3's communication costs on 10 CPUs, in seconds.
func (a *App) Seed() experiment.SeedFigures {
	v := experiment.Figures{}
	notes := map[string]string{}
	key := func(rt string) string { return experiment.NewCell("runtime", rt, "nodes", "10").Key }
	if a.Program == "tsp" {
		v.Set(key("orca-bcast"), mOverhead, 0.462+0.042)
		v.Set(key("orca-primary/update"), mOverhead, 0.462+0.580)
		v.Set(key("orca-primary/invalidate"), mOverhead, 0.462+0.755)
		notes[key("orca-bcast")] = "12 cities, 110 jobs: queue 110·4.2 = 462 ms, bound 10·4.2 = 42 ms; \"the multicast RTS achieves slightly better speedups\""
		notes[key("orca-primary/update")] = "queue 462 ms, bound 10·58.0 = 580 ms"
		notes[key("orca-primary/invalidate")] = "queue 462 ms, bound 10·(27.8+9·5.3) = 755 ms"
		return experiment.SeedFigures{Source: "seed 004 §5.3 (TSP, 10 MC68030 CPUs, 10 Mbit/s Ethernet; communication cost arithmetic)", Values: v, Notes: notes}
	}
	v.Set(key("orca-bcast"), mOverhead, 2.2784)
	v.Set(key("orca-primary/update"), mOverhead, 16.2304)
	v.Set(key("orca-primary/invalidate"), mOverhead, 29.2608)
	notes[key("orca-bcast")] = "N=256: 256·8.9 = 2278.4 ms; \"to obtain good (close to linear) speedups, the multicast protocol is required\""
	notes[key("orca-primary/update")] = "256·63.4 = 16230.4 ms; \"reasonable speedups ... although far from linear\""
	notes[key("orca-primary/invalidate")] = "pivot rows by remote reads: 9·12.7·256 = 29260.8 ms; \"not appropriate for ASP\""
	return experiment.SeedFigures{Source: "seed 004 §5.3 (ASP N=256, 10 MC68030 CPUs; communication cost arithmetic)", Values: v, Notes: notes}
}

func (a *App) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mElapsed, Header: "elapsed s", Format: "%.3f"},
			{Metric: mSpeedup, Header: "speedup", Format: "%.2f"},
			{Metric: mOverhead, Header: "overhead s", Format: "%.3f"},
			{Metric: mSends, Header: "messages", Format: "%.0f"},
			{Metric: mFrames, Header: "frames", Format: "%.0f"},
			{Metric: mKB, Header: "KB", Format: "%.1f"},
		},
		Labels: []string{"size", "fsync", "multicast"},
		Plots: []experiment.PlotSpec{
			{File: a.Program + "-speedup", Title: "seed 004 " + a.Program + ": speedup (simulated nodes)", Kind: experiment.Lines,
				Metric: mSpeedup, YLabel: "speedup over sequential", X: "nodes", XLabel: "nodes", Series: []string{"runtime"}},
			{File: a.Program + "-messages", Title: "seed 004 " + a.Program + ": messages", Kind: experiment.Lines,
				Metric: mSends, YLabel: "messages", X: "nodes", XLabel: "nodes", Series: []string{"runtime"}},
		},
		Notes: []string{
			"Cost model: " + a.net().String() + ".",
			"All figures are virtual time in orca/programs.World (2-core machine: 10 processors are simulated nodes); fsync off in every cell.",
			"overhead s = elapsed - sequential/nodes; the paper's column is its communication-cost arithmetic (§5.3), not a measurement.",
		},
	}
}

// Summary states whether the paper's conclusions hold here.
func (a *App) Summary(ours, seed experiment.Figures) []string {
	top := ""
	sp := map[string]float64{}
	for _, n := range []string{"10", "4"} {
		for _, rt := range programs.Runtimes {
			if v, ok := ours.Get(experiment.NewCell("runtime", rt.String(), "nodes", n).Key, mSpeedup); ok {
				sp[rt.String()] = v
				top = n
			}
		}
		if len(sp) > 0 {
			break
		}
	}
	b, u, i := sp["orca-bcast"], sp["orca-primary/update"], sp["orca-primary/invalidate"]
	verdict := func(ok bool) string {
		if ok {
			return "holds"
		}
		return "does not hold"
	}
	if a.Program == "tsp" {
		return []string{fmt.Sprintf("speedups on %s nodes: bcast %.2f, primary/update %.2f, primary/invalidate %.2f. "+
			"\"The multicast RTS achieves slightly better speedups\" %s here (bcast ahead of the best primary strategy by %.1f%%).",
			top, b, u, i, verdict(b >= max(u, i)), 100*(b/max(u, i)-1))}
	}
	out := []string{fmt.Sprintf("speedups on %s nodes: bcast %.2f, primary/update %.2f. \"To obtain good (close to linear) speedups, "+
		"the multicast protocol is required\": %s (bcast %.0f%% of linear, update %.0f%%).", top, b, u,
		verdict(b > u), 100*b/atof(top), 100*u/atof(top))}
	if i == 0 {
		out = append(out, "\"invalidation is not appropriate for ASP\": not measured (orca-primary/invalidate stalls on guarded reads; see the cell).")
	} else {
		out = append(out, fmt.Sprintf("\"invalidation is not appropriate for ASP\": %s (invalidate %.2f).", verdict(i < u && i < b), i))
	}
	return out
}

func atof(s string) float64 { v, _ := strconv.ParseFloat(s, 64); return v }
