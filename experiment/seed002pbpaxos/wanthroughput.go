package seed002pbpaxos

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
)

// WANThroughput is Figs VI.6 and VI.7: the throughput of original, read
// (X-Paxos) and write (basic protocol) requests with c concurrent clients
// in the seed's two WAN configurations, on real nodes whose every link
// passes a seed002wan relay with the delays derived from the seed's own
// response times (wan.go). Each client has its own connection and key and
// sends Total/c requests (closed loop, as Fig VI.4's cells); a cell
// repeats that Reps times. A request takes ~70-130 ms here, so Total is
// scaled down from the seed's 1000 (it plots, not tabulates, the figures:
// only the orderings are judged). The cells of one configuration and kind
// share one relayed cluster, started by the first and stopped by the last.
type WANThroughput struct {
	Kinds      []string
	Configs    []string
	Clients    []int
	Total      int
	Reps       int
	Durability string

	// The running relayed cluster, shared by consecutive cells of one
	// configuration and kind.
	cur struct {
		key   string
		nodes []cluster.Node
		stop  func()
	}
}

func NewWANThroughput() *WANThroughput {
	return &WANThroughput{Kinds: []string{"original", "read", "write"}, Configs: []string{"remote-clients", "wan-replicas"},
		Clients: []int{1, 2, 4, 8, 16}, Total: 64, Reps: 3, Durability: config.Memory}
}

func (t *WANThroughput) Name() string { return "seed002-pbpaxos-wan-throughput" }

func (t *WANThroughput) Description() string {
	return "PB-Paxos throughput on the WAN (seed 002, Figs VI.6 and VI.7): original, X-Paxos read and basic write requests from " +
		"1, 2, 4, 8, 16 closed-loop clients sharing --total requests, with remote clients (Berkeley -> Princeton) and with WAN-spread " +
		"replicas (UIUC / Utah / UT Austin): real nodes on loopback, every link through a userspace relay with the one-way delays " +
		"derived from the seed's response times (as seed002-pbpaxos-rrt); mean and 99% confidence interval over repetitions."
}

func (t *WANThroughput) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&t.Configs, "configs", t.Configs, "WAN configurations: remote-clients (Fig VI.6), wan-replicas (Fig VI.7)")
	fs.IntSliceVar(&t.Clients, "clients", t.Clients, "numbers of concurrent clients (the seed: 1..16); --quick uses 1 and 4")
	fs.IntVar(&t.Total, "total", t.Total, "requests per repetition, shared by the clients (the seed: 1000 at ~0.1 s each; --quick uses 16)")
	fs.IntVar(&t.Reps, "reps", t.Reps, "repetitions per cell; --quick uses 2")
	fs.StringVar(&t.Durability, "durability", t.Durability, "cluster durability: memory (the seed's) or fsync")
}

// sizes are the client counts, total and repetitions of a run.
func (t *WANThroughput) sizes(o experiment.Options) (clients []int, total, reps int) {
	if o.Quick {
		return []int{1, 4}, min(t.Total, 16), min(t.Reps, 2)
	}
	return t.Clients, t.Total, t.Reps
}

func (t *WANThroughput) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(t.Durability); err != nil {
		return nil, err
	}
	clients, total, reps := t.sizes(o)
	if total < 1 || reps < 1 {
		return nil, fmt.Errorf("--total and --reps must be positive")
	}
	var cells []experiment.Cell
	for _, cfg := range t.Configs {
		if _, ok := wanConfigs[cfg]; !ok {
			return nil, fmt.Errorf("--configs: unknown WAN configuration %q (remote-clients, wan-replicas)", cfg)
		}
		for _, k := range t.Kinds {
			if k != "original" && k != "read" && k != "write" {
				return nil, fmt.Errorf("--kinds: %q has no WAN cell (original, read, write)", k)
			}
			for _, c := range clients {
				if c < 1 || c > total {
					return nil, fmt.Errorf("--clients: %d is not between 1 and --total", c)
				}
				cells = append(cells, experiment.NewCell("config", cfg, "kind", k, "clients", strconv.Itoa(c)))
			}
		}
	}
	return cells, nil
}

func (t *WANThroughput) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	k, _ := kindNamed(c.Get("kind"))
	w := wanConfigs[c.Get("config")]
	nc, _ := strconv.Atoi(c.Get("clients"))
	clients, total, reps := t.sizes(env.Options)
	key := w.name + "/" + k.name
	if t.cur.key != key {
		t.release()
		nodes, stop, err := wanNodes(ctx, env, k, t.Durability, w, uint64(env.Rep)*1000+7)
		if err != nil {
			return experiment.Outcome{}, err
		}
		t.cur.key, t.cur.nodes, t.cur.stop = key, nodes, stop
	}
	if nc == clients[len(clients)-1] {
		defer t.release() // the last client count of this configuration and kind
	}
	tp := &Throughput{Total: total}
	var tputs, lats []float64
	for rep := 0; rep < reps; rep++ {
		tput, lat, err := tp.rep(ctx, k, t.cur.nodes, nc)
		if err != nil {
			t.release()
			return experiment.Outcome{}, fmt.Errorf("%s request: %w", k.name, err)
		}
		tputs, lats = append(tputs, tput), append(lats, lat)
	}
	mean, half := ci99(tputs)
	lmean, lhalf := ci99(lats)
	return experiment.Outcome{
		Samples: map[string][]float64{mTput: tputs, mLat: lats},
		Metrics: map[string]float64{mTput: mean, mTputCI: half, mLat: lmean, mLatCI: lhalf},
		Labels:  map[string]string{"durability": t.Durability, "protocol": k.protocol, "requests": fmt.Sprintf("%dx%d", reps, total/nc*nc)},
	}, nil
}

// release stops the running relayed cluster, if any.
func (t *WANThroughput) release() {
	if t.cur.stop != nil {
		t.cur.stop()
	}
	t.cur.key, t.cur.nodes, t.cur.stop = "", nil, nil
}

// Reps: a cell repeats its measurement itself (--reps, the claims'
// samples); it runs once.
func (t *WANThroughput) CellReps(experiment.Cell, experiment.Options) int { return 1 }

func (t *WANThroughput) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{
		Source: "seed 002, Figs VI.6 and VI.7 (PlanetLab): plotted, not tabulated; VI.6 (remote clients): original, read and write throughput " +
			"\"close\"; VI.7 (WAN-spread replicas): \"X-Paxos achieves better performance than the basic protocol\"",
		Notes: map[string]string{
			experiment.NewCell("config", "remote-clients", "kind", "write", "clients", "1").Key: "close to the original's (Fig VI.6)",
			experiment.NewCell("config", "wan-replicas", "kind", "read", "clients", "1").Key:    "above the write's (Fig VI.7)",
		},
	}
}

func (t *WANThroughput) Report() experiment.ReportSpec {
	var notes []string
	for _, cfg := range t.Configs {
		if w, ok := wanConfigs[cfg]; ok {
			notes = append(notes, cfg+": "+w.String())
		}
	}
	notes = append(notes, "requests: repetitions x requests per repetition (shared by the clients); closed loop, each client its own connection and key")
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTput, Header: "req/s", Format: "%.1f"},
			{Metric: mTputCI, Header: "± 99% CI", Format: "%.1f"},
			{Metric: mLat, Header: "RT ms", Format: "%.2f"},
			{Metric: mLatCI, Header: "± 99% CI", Format: "%.2f"},
		},
		Labels: []string{"protocol", "requests", "durability"},
		Plots: []experiment.PlotSpec{
			{File: "remote-clients", Title: "Throughput, remote clients (seed 002, Fig VI.6)", Kind: experiment.Lines,
				Metric: mTput, YLabel: "requests/s", X: "clients", XLabel: "clients", Series: []string{"kind"}, Filter: map[string]string{"config": "remote-clients"}},
			{File: "wan-replicas", Title: "Throughput, WAN-spread replicas (seed 002, Fig VI.7)", Kind: experiment.Lines,
				Metric: mTput, YLabel: "requests/s", X: "clients", XLabel: "clients", Series: []string{"kind"}, Filter: map[string]string{"config": "wan-replicas"}},
		},
		Notes: notes,
	}
}

// Claims: Fig VI.6, remote clients: read and write throughput "close" to
// the original's, read as within 5% (the RRT rows' reading) at every
// client count; Fig VI.7, WAN-spread replicas: read throughput above
// write throughput at every client count.
func (t *WANThroughput) Claims(d experiment.Data) []experiment.Claim {
	var clients []int // the client counts that ran (--quick's or --clients)
	for _, c := range d.Cells {
		if n, _ := strconv.Atoi(c.Get("clients")); c.Get("config") != "" && !slices.Contains(clients, n) {
			clients = append(clients, n)
		}
	}
	key := func(cfg, k string, c int) string {
		return experiment.NewCell("config", cfg, "kind", k, "clients", strconv.Itoa(c)).Key
	}
	var out []experiment.Claim
	judge := func(text, paper, cfg, a, b string, threshold float64) {
		var keys []string
		var parts []experiment.Judgement
		for _, c := range clients {
			keys = append(keys, key(cfg, a, c), key(cfg, b, c))
			parts = append(parts, experiment.RatioAbove(fmt.Sprintf("%d clients: %s/%s throughput", c, a, b),
				d.Sample(key(cfg, a, c), mTput), d.Sample(key(cfg, b, c), mTput), threshold))
		}
		if len(clients) == 0 {
			keys = append(keys, key(cfg, a, 1), key(cfg, b, 1))
		}
		if cl, ok := d.NotRun(text, paper, keys...); ok {
			out = append(out, cl)
			return
		}
		cl := experiment.Claim{Text: text, Paper: paper, Judgement: experiment.AllOf(parts...), Cause: t.cause(d, cfg, clients)}
		out = append(out, cl)
	}
	for _, cfg := range t.Configs {
		switch cfg {
		case "remote-clients":
			for _, k := range []string{"read", "write"} {
				judge(fmt.Sprintf("Fig VI.6 remote clients (relayed links): %s throughput \"close\" to the original's (at least 1/1.05 of it) at every client count", k),
					"close (plotted)", cfg, k, "original", 1/1.05)
			}
		case "wan-replicas":
			judge("Fig VI.7 WAN-spread replicas (relayed links): \"X-Paxos achieves better performance than the basic protocol\": read throughput above write throughput at every client count",
				"read above write (plotted)", cfg, "read", "write", 1)
		}
	}
	return out
}

// cause is the measured throughput and response time of every kind at
// every client count, beside the link delays on each kind's message
// chain: closed-loop clients make throughput ≈ clients / response time.
func (t *WANThroughput) cause(d experiment.Data, cfg string, clients []int) string {
	w := wanConfigs[cfg]
	var parts []string
	for _, c := range clients {
		var ks []string
		for _, k := range []string{"original", "read", "write"} {
			m, ok := d.Ours[experiment.NewCell("config", cfg, "kind", k, "clients", strconv.Itoa(c)).Key]
			if !ok {
				continue
			}
			ks = append(ks, fmt.Sprintf("%s %.1f req/s at %.1f ms (%.1f ms of it link delay)", k, m[mTput], m[mLat], w.chain(k)))
		}
		parts = append(parts, fmt.Sprintf("%d clients: %s", c, strings.Join(ks, ", ")))
	}
	return "measured means (closed loop: throughput ≈ clients / response time; " + w.String() + "): " + strings.Join(parts, "; ")
}
