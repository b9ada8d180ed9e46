package seed002pbpaxos

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
)

// RRT is the experiment "seed002-pbpaxos-rrt": the seed's request response
// time table (chapter VI.C, Sysnet row) beside Multi-Paxos's reads.
type RRT struct {
	Kinds      []string
	Configs    []string
	Samples    int
	PerSample  int
	Durability string
}

func NewRRT() *RRT {
	return &RRT{Kinds: kindNames(), Configs: []string{"local", "remote-clients", "wan-replicas"}, Samples: 100, PerSample: 20, Durability: config.Memory}
}

func (r *RRT) Name() string { return "seed002-pbpaxos-rrt" }

func (r *RRT) Description() string {
	return "PB-Paxos request response time (seed 002, chapter VI.C): original (unreplicated), read (X-Paxos) and write " +
		"(basic protocol) on three replicas, with Multi-Paxos quorum and lease reads and writes beside them; one client, " +
		"samples of 20 requests, mean with 99% confidence interval."
}

func (r *RRT) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&r.Kinds, "kinds", r.Kinds, "request kinds: "+strings.Join(kindNames(), ", ")+" (WAN configurations: original, read, write only)")
	fs.StringSliceVar(&r.Configs, "configs", r.Configs, "configurations: local (loopback), remote-clients and wan-replicas (the seed's WAN rows: real nodes with userspace relays adding link delays derived from the seed's response times)")
	fs.IntVar(&r.Samples, "samples", r.Samples, "samples per kind (each the mean of --per-sample requests); --quick uses 10")
	fs.IntVar(&r.PerSample, "per-sample", r.PerSample, "requests per sample (the seed: 20)")
	fs.StringVar(&r.Durability, "durability", r.Durability, "cluster durability: memory (the seed's) or fsync")
}

func (r *RRT) samples(o experiment.Options) int {
	if o.Quick && r.Samples > 10 {
		return 10
	}
	return r.Samples
}

func (r *RRT) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(r.Durability); err != nil {
		return nil, err
	}
	if r.Samples < 2 || r.PerSample < 1 {
		return nil, fmt.Errorf("--samples must be at least 2 and --per-sample positive")
	}
	var cells []experiment.Cell
	if err := checkKinds(r.Kinds); err != nil {
		return nil, err
	}
	for _, cfg := range r.Configs {
		if _, wan := wanConfigs[cfg]; !wan && cfg != "local" {
			return nil, fmt.Errorf("--configs: unknown configuration %q (local, remote-clients, wan-replicas)", cfg)
		}
	}
	if slices.Contains(r.Configs, "local") {
		for _, k := range r.Kinds {
			cells = append(cells, experiment.NewCell("kind", k, "config", "local"))
		}
	}
	for _, cfg := range []string{"remote-clients", "wan-replicas"} {
		if !slices.Contains(r.Configs, cfg) {
			continue
		}
		for _, k := range []string{"original", "read", "write"} {
			if slices.Contains(r.Kinds, k) {
				cells = append(cells, experiment.NewCell("kind", k, "config", cfg))
			}
		}
	}
	return cells, nil
}

const (
	mRRT     = "rrt_ms"
	mRRTCI   = "rrt_ci99_ms"
	mTput    = "throughput"
	mTputCI  = "throughput_ci99"
	mTRT     = "trt_ms"
	mTRTCI   = "trt_ci99_ms"
	mLat     = "rt_ms"
	mLatCI   = "rt_ci99_ms"
	mGain    = "gain_pct"
	mAborted = "aborted"
)

func (r *RRT) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	k, _ := kindNamed(c.Get("kind"))
	samples, perSample := r.samples(env.Options), r.PerSample
	labels := map[string]string{"durability": r.Durability, "protocol": k.protocol, "serves": k.doc}
	var nodes []cluster.Node
	var err error
	if w, ok := wanConfigs[c.Get("config")]; ok {
		// A WAN request takes ~100 ms: fewer samples (wan.go).
		samples, perSample = min(samples, 20), min(perSample, 20)
		if env.Options.Quick {
			samples, perSample = 5, 4
		}
		var stop func()
		nodes, stop, err = wanNodes(ctx, env, k, r.Durability, w, uint64(env.Rep)*1000+1)
		if err != nil {
			return experiment.Outcome{}, err
		}
		defer stop()
		labels["links"] = w.String()
	} else if nodes, err = liveNodes(ctx, env, k, r.Durability); err != nil {
		return experiment.Outcome{}, err
	}
	cl, err := newRequester(k, nodes)
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer cl.close()
	val := []byte("v1")
	if err := cl.write(ctx, "x", val); err != nil { // the key exists; warms the path
		return experiment.Outcome{}, err
	}
	var means []float64
	for s := 0; s < samples; s++ {
		t0 := time.Now()
		for i := 0; i < perSample; i++ {
			if err := cl.do(ctx, "x", val); err != nil {
				return experiment.Outcome{}, fmt.Errorf("%s request: %w", k.name, err)
			}
		}
		means = append(means, float64(time.Since(t0))/float64(time.Millisecond)/float64(perSample))
	}
	mean, half := ci99(means)
	labels["samples"] = fmt.Sprintf("%dx%d", samples, perSample)
	return experiment.Outcome{
		Samples: map[string][]float64{mRRT: means},
		Metrics: map[string]float64{mRRT: mean, mRRTCI: half},
		Labels:  labels,
	}, nil
}

func (r *RRT) Seed() experiment.SeedFigures {
	figs := experiment.Figures{}
	for _, row := range []struct {
		config string
		v      [3][2]float64
	}{
		{"local", [3][2]float64{{0.181, 0.002}, {0.263, 0.02}, {0.338, 0.003}}},
		{"remote-clients", [3][2]float64{{91.85, 0.18}, {92.79, 0.48}, {93.13, 0.27}}},
		{"wan-replicas", [3][2]float64{{70.82, 0.25}, {75.49, 0.25}, {106.73, 0.32}}},
	} {
		for i, k := range []string{"original", "read", "write"} {
			key := experiment.NewCell("kind", k, "config", row.config).Key
			figs.Set(key, mRRT, row.v[i][0])
			figs.Set(key, mRRTCI, row.v[i][1])
		}
	}
	return experiment.SeedFigures{
		Source: "seed 002, chapter VI.C: Sysnet cluster (Pentium IV 2.8 GHz, Gigabit Ethernet), three replicas, empty operations, TCP sockets",
		Values: figs,
	}
}

func (r *RRT) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mRRT, Header: "RRT ms", Format: "%.3f"},
			{Metric: mRRTCI, Header: "± 99% CI", Format: "%.3f"},
		},
		Labels: []string{"protocol", "durability"},
		Plots: []experiment.PlotSpec{{File: "rrt", Title: "Request response time (seed 002, VI.C)", Kind: experiment.Bars,
			Metric: mRRT, YLabel: "ms", X: "kind", XLabel: "request kind"}},
		Notes: []string{
			"local = all nodes and the client on this machine over loopback (the seed's Sysnet: one LAN). remote-clients and",
			"wan-replicas: real nodes on loopback whose every link (client to node, node to node) passes a userspace relay",
			"adding a constant one-way delay derived from the seed's own response times (wan.go); fewer samples per cell.",
		},
	}
}

// Reps: a cell times its own samples (the claims' sample); it runs once.
func (r *RRT) Reps(experiment.Options) int { return 1 }

// Claims: "X-Paxos reduced RRT 22% vs the basic protocol" (local); the
// WAN rows: with remote clients the basic protocol and X-Paxos are
// "roughly the same as a non-replicated service", with WAN-spread
// replicas "X-Paxos achieves better performance than the basic protocol".
func (r *RRT) Claims(d experiment.Data) []experiment.Claim {
	key := func(kind, config string) string { return experiment.NewCell("kind", kind, "config", config).Key }
	var out []experiment.Claim
	claim := func(text, paper string, j func() experiment.Judgement, cause func() string, cells ...string) {
		if c, ok := d.NotRun(text, paper, cells...); ok {
			out = append(out, c)
			return
		}
		c := experiment.Claim{Text: text, Paper: paper, Judgement: j()}
		if cause != nil {
			c.Cause = cause()
		}
		out = append(out, c)
	}
	sample := func(kind, config string) experiment.Sample { return d.Sample(key(kind, config), mRRT) }
	// breakdown is the measured response times beside the derived link
	// delays: what each kind's messages cost on the wire, and the rest
	// (the nodes' own time, the client, the relays).
	breakdown := func(config string) string {
		w := wanConfigs[config]
		var parts []string
		for _, k := range []string{"original", "read", "write"} {
			s := sample(k, config)
			if len(s) == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%s %.2f ms = %.2f ms of link delay on its message chain + %.2f ms elsewhere (nodes, client, relays)", k, s.Mean(), w.chain(k), s.Mean()-w.chain(k)))
		}
		return "measured means against the links' one-way delays (" + w.String() + "): " + strings.Join(parts, "; ")
	}
	claim("VI.C: an X-Paxos read's response time is below a basic-protocol write's (local)", "22% lower",
		func() experiment.Judgement {
			return experiment.RatioBelow("read/write mean RRT", sample("read", "local"), sample("write", "local"), 1)
		}, nil, key("read", "local"), key("write", "local"))
	for _, k := range []string{"write", "read"} {
		seedRatio := map[string]float64{"write": 93.13 / 91.85, "read": 92.79 / 91.85}[k]
		claim(fmt.Sprintf("VI.C remote clients (Berkeley -> Princeton, relayed links): a %s's response time is \"roughly the same as a non-replicated service\" (within 5%% of the original's)", k),
			fmt.Sprintf("%s/original %.3f (%.2f vs 91.85 ms)", k, seedRatio, map[string]float64{"write": 93.13, "read": 92.79}[k]),
			func() experiment.Judgement {
				return experiment.RatioBelow(k+"/original mean RRT", sample(k, "remote-clients"), sample("original", "remote-clients"), 1.05)
			}, func() string { return breakdown("remote-clients") }, key(k, "remote-clients"), key("original", "remote-clients"))
	}
	claim("VI.C WAN-spread replicas (relayed links): \"X-Paxos achieves better performance than the basic protocol\": a read's response time below a write's",
		"read/write 0.707 (75.49 vs 106.73 ms)",
		func() experiment.Judgement {
			return experiment.RatioBelow("read/write mean RRT", sample("read", "wan-replicas"), sample("write", "wan-replicas"), 1)
		}, func() string { return breakdown("wan-replicas") }, key("read", "wan-replicas"), key("write", "wan-replicas"))
	return out
}

// Summary: "X-Paxos reduced RRT 22% vs the basic protocol".
func (r *RRT) Summary(ours, seed experiment.Figures) []string {
	var out []string
	for _, src := range []struct {
		name string
		f    experiment.Figures
	}{{"seed ", seed}, {"synod", ours}} {
		rd, ok1 := src.f.Get(experiment.NewCell("kind", "read", "config", "local").Key, mRRT)
		wr, ok2 := src.f.Get(experiment.NewCell("kind", "write", "config", "local").Key, mRRT)
		if ok1 && ok2 && wr > 0 {
			out = append(out, fmt.Sprintf("%s: X-Paxos read %.1f%% faster than a basic-protocol write (seed: 22%%)", src.name, (1-rd/wr)*100))
		}
	}
	return out
}
