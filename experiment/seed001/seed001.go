package seed001

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"syscall"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
)

func init() {
	experiment.Register(NewThroughput())
	experiment.Register(NewFaults())
}

// Throughput is the experiment "seed001-abd-vs-blocking": Tables 1-6.
type Throughput struct {
	Durability string
	Nodes      []int
	Ratios     []string
	Protocols  []string
	// OpenRates are the open-loop cells' arrival rates (uniform gaps).
	OpenRates []float64
	Clients   int
	Params    []string
}

// Columns beside the registered protocols: ABD driven by its clients
// (the ABD report §3.1.2), on the same abd cluster as node-coordinated ABD.
const abdClient = "abd-client"

// Loads: the closed loop, or uniform arrivals at a rate ("uniform-50").
const (
	loadClosed     = "closed"
	loadOpenPrefix = "uniform-"
)

func openLoad(rate float64) string { return loadOpenPrefix + strconv.FormatFloat(rate, 'g', -1, 64) }

// NewThroughput returns the experiment with the seed's parameters.
func NewThroughput() *Throughput {
	return &Throughput{
		Durability: config.Fsync,
		Nodes:      []int{1, 3, 5},
		Ratios:     []string{"0.1", "0.9"},
		Protocols:  []string{"abd", abdClient, "blocking"},
		OpenRates:  []float64{50},
	}
}

func (t *Throughput) Name() string { return "seed001-abd-vs-blocking" }

func (t *Throughput) Description() string {
	return "ABD (coordinated by the node a client reaches, and driven by its clients as the seed's ABD client) vs the " +
		"blocking lock protocol on live clusters (seed 001, Tables 1-6). N = 1, 3, 5 " +
		"and GET fractions 0.1 and 0.9, with the seed's workload " +
		"(1000 keys preloaded, 1 KB values, Zipf 1.345675, 25 clients, closed loop and open loop at 50 req/s with uniform arrivals): throughput and " +
		"mean/median/p95/p99 latency per cell beside the seed's tables, and each protocol's " +
		"degradation with N (does \"ABD degrades less with N than blocking\" hold?). " +
		"Every number is stated with the cluster's durability mode (--durability, fsync by default)."
}

func (t *Throughput) Flags(fs *pflag.FlagSet) {
	fs.StringVar(&t.Durability, "durability", t.Durability, "cluster durability: fsync (records on disk before a reply) or memory")
	fs.IntSliceVar(&t.Nodes, "nodes", t.Nodes, "cluster sizes N")
	fs.StringSliceVar(&t.Ratios, "get-ratios", t.Ratios, "fractions of GETs (the seed's \"GET/PUT ratio\")")
	fs.StringSliceVar(&t.Protocols, "protocols", t.Protocols, "protocols to compare ("+abdClient+": ABD driven by its clients, on an abd cluster)")
	fs.Var((*rateList)(&t.OpenRates), "open-rates", "open-loop cells' arrival rates in req/s, uniform gaps (the seed's \"uniform, average 50 req/s\"; none: closed loop only)")
	fs.IntVar(&t.Clients, "clients", 0, "closed-loop clients (default: the seed's 25)")
	paramFlag(fs, &t.Params)
}

func (t *Throughput) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(t.Durability); err != nil {
		return nil, err
	}
	if _, err := parseParams(t.Params); err != nil {
		return nil, err
	}
	if t.Clients < 0 {
		return nil, fmt.Errorf("--clients %d: must be positive", t.Clients)
	}
	for _, r := range t.Ratios {
		v, err := strconv.ParseFloat(r, 64)
		if err != nil || v < 0 || v > 1 {
			return nil, fmt.Errorf("--get-ratios: %q is not a fraction between 0 and 1", r)
		}
	}
	loads := []string{loadClosed}
	for _, r := range t.OpenRates {
		if !(r > 0) {
			return nil, fmt.Errorf("--open-rates: %v is not a positive rate", r)
		}
		loads = append(loads, openLoad(r))
	}
	var cells []experiment.Cell
	for _, load := range loads {
		for _, p := range t.Protocols {
			for _, n := range t.Nodes {
				if n < 1 || n > 99 {
					return nil, fmt.Errorf("--nodes: %d is not between 1 and 99", n)
				}
				for _, r := range t.Ratios {
					cells = append(cells, experiment.NewCell("protocol", p, "N", strconv.Itoa(n), "get", r, "load", load))
				}
			}
		}
	}
	return cells, nil
}

// available reports whether protocol p is registered in this binary.
func available(p string) error {
	if _, err := automaton.Lookup(p); err != nil {
		return experiment.Unavailable("protocol %q not available in this binary (registered: %s)", p, strings.Join(automaton.Names(), ", "))
	}
	return nil
}

func (t *Throughput) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	proto := c.Get("protocol")
	n, _ := strconv.Atoi(c.Get("N"))
	ratio, _ := strconv.ParseFloat(c.Get("get"), 64)
	driven := proto == abdClient
	if driven {
		proto = "abd" // the replicas of client-driven ABD are an abd cluster's
	}
	if err := available(proto); err != nil {
		return experiment.Outcome{}, err
	}
	// One cluster per protocol and N, shared by that pair's mixes.
	pp, _ := parseParams(t.Params)
	cl, err := env.Cluster(fmt.Sprintf("%s-n%d", proto, n), cluster.UpOptions{Nodes: n, Protocol: proto, Durability: t.Durability, Params: pp[proto]})
	if err != nil {
		return experiment.Outcome{}, err
	}
	cfg, err := bench.Preset("seed001")
	if err != nil {
		return experiment.Outcome{}, err
	}
	cfg.Addrs = cl.ClientAddrs()
	if driven {
		// Every client talks to every replica over gRPC (client.ABD),
		// every phase to all of them, as the seed's client does (its
		// threads, one per server); the Go client's default asks a
		// majority first.
		cfg.Addrs = nil
		for _, nd := range cl.Nodes {
			cfg.Addrs = append(cfg.Addrs, nd.GRPC)
		}
		cfg.UseABDClient(true)
	}
	if rate, ok := strings.CutPrefix(c.Get("load"), loadOpenPrefix); ok {
		cfg.Rate, _ = strconv.ParseFloat(rate, 64)
		cfg.Arrivals = bench.ArrivalsUniform
	}
	cfg.ReadRatio = ratio
	cfg.Duration = env.CellDuration(defaultCell, quickCell)
	cfg.DurabilityLabel = t.Durability
	if t.Clients > 0 {
		cfg.Clients = t.Clients
	}
	var node0, self0 float64 // CPU at the start of the measured phase (after the preload)
	cfg.OnMeasure = func() { node0, self0 = nodesCPU(cl), selfCPU() }
	rep, err := bench.Run(ctx, cfg, env.Progress())
	if err != nil {
		return experiment.Outcome{}, err
	}
	nodeCPU, clientCPU := nodesCPU(cl)-node0, selfCPU()-self0
	if rep.Interrupted {
		return experiment.Outcome{}, fmt.Errorf("interrupted")
	}
	if rep.All.Count == 0 {
		return experiment.Outcome{Detail: rep}, fmt.Errorf("no operation succeeded (%d errors: %v)", rep.All.Errors, rep.ErrorSamples)
	}
	a := rep.All
	return experiment.Outcome{
		Metrics: map[string]float64{
			mThroughput: a.Throughput, mMean: a.MeanMs, mP50: a.P50Ms, mP95: a.P95Ms, mP99: a.P99Ms,
			mErrors: float64(a.Errors),
			mGetMs:  rep.Reads.MeanMs, mSetMs: rep.Writes.MeanMs,
			mNodeCPU: 1000 * nodeCPU / float64(a.Count), mClientCPU: 1000 * clientCPU / float64(a.Count),
		},
		Labels: map[string]string{"durability": t.Durability, "clients": strconv.Itoa(cfg.Clients), "settings": settings(proto, pp[proto]), "target": rep.Config.Target},
		Detail: rep,
	}, nil
}

func (t *Throughput) Seed() experiment.SeedFigures {
	figs, err := seedFigures()
	if err != nil {
		panic(err) // the tables are constants; a test parses them
	}
	return experiment.SeedFigures{
		Source: "seed 001, Tables 1-6: AWS t2.micro VMs (1 vCPU, 1 GB), durability not stated, " +
			"\"uniform arrivals, average 50 req/s, concurrency 25\"; its ABD is client-driven, shown beside both " +
			"ABD columns and both loads (its throughputs fit neither 50 req/s nor our closed loop)",
		Values: figs,
	}
}

func (t *Throughput) Report() experiment.ReportSpec {
	var plots []experiment.PlotSpec
	for _, r := range t.Ratios {
		plots = append(plots,
			experiment.PlotSpec{
				File: "throughput-get" + r, Title: "Throughput, GET fraction " + r, Kind: experiment.Bars,
				Metric: mThroughput, YLabel: "operations/s", X: "N", XLabel: "nodes",
				Series: []string{"protocol"}, Filter: map[string]string{"get": r, "load": loadClosed},
			},
			experiment.PlotSpec{
				File: "latency-get" + r, Title: "Mean latency, GET fraction " + r, Kind: experiment.Bars,
				Metric: mMean, YLabel: "ms", X: "N", XLabel: "nodes",
				Series: []string{"protocol", "load"}, Filter: map[string]string{"get": r},
			},
			experiment.PlotSpec{
				File: "relative-throughput-get" + r, Title: "Throughput relative to N=1, GET fraction " + r, Kind: experiment.Lines,
				Metric: mRelThroughput, YLabel: "throughput(N) / throughput(1)", X: "N", XLabel: "nodes",
				Series: []string{"protocol"}, Filter: map[string]string{"get": r, "load": loadClosed},
			})
	}
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mThroughput, Header: "ops/s", Format: "%.0f"},
			{Metric: mMean, Header: "avg ms"},
			{Metric: mP50, Header: "p50 ms"},
			{Metric: mP95, Header: "p95 ms"},
			{Metric: mP99, Header: "p99 ms"},
			{Metric: mRelThroughput, Header: "tput/N=1"},
			{Metric: mRelMean, Header: "avg/N=1"},
			{Metric: mGetMs, Header: "GET ms"},
			{Metric: mSetMs, Header: "SET ms"},
			{Metric: mNodeCPU, Header: "node CPU ms/op"},
			{Metric: mClientCPU, Header: "client CPU ms/op"},
		},
		Labels: []string{"durability", "target"},
		Plots:  plots,
		Notes: []string{
			"get = fraction of GETs (the seed's \"GET/PUT ratio\" 0.1 / 0.9). Ours: closed loop, 25 clients spread",
			"round-robin over the nodes, all on one machine over loopback; the seed's: separate VMs. Compare shapes",
			"and ratios (tput/N=1), not absolute numbers. Durability is ours only: the seed does not state its own.",
			"protocol=abd: the node a client reaches coordinates both phases; protocol=abd-client: the client runs them",
			"itself against every replica over gRPC (seed 001 section 3.1.2), replicas never talk to each other.",
			"load=uniform-50: open loop, uniform gaps averaging 1/50 s, as the seed says it ran; its throughput is the",
			"offered rate, and its latencies are those of a lightly loaded cluster.",
		},
	}
}

// params splits a cell key back into its parameters.
func params(key string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(key, ",") {
		k, v, _ := strings.Cut(kv, "=")
		m[k] = v
	}
	return m
}

// Derive adds, per cell, throughput and mean latency relative to the same
// protocol and mix at N=1.
func (t *Throughput) Derive(figs experiment.Figures) {
	for key, m := range figs {
		p := params(key)
		base := cellKey(p["protocol"], 1, p["get"], p["load"])
		if bt, ok := figs.Get(base, mThroughput); ok && bt > 0 {
			if v, ok := m[mThroughput]; ok {
				m[mRelThroughput] = v / bt
			}
		}
		if bm, ok := figs.Get(base, mMean); ok && bm > 0 {
			if v, ok := m[mMean]; ok {
				m[mRelMean] = v / bm
			}
		}
	}
}

// Summary answers the seed's conclusion: does ABD degrade less with N than
// blocking (and outperform it as N grows)? Checked per mix at every N > 1
// measured for both protocols, for our figures and the seed's.
func (t *Throughput) Summary(ours, seed experiment.Figures) []string {
	var out []string
	out = append(out, "Claim (seed 001, section 5): \"where the number of nodes grows, non-blocking ABD outperforms the blocking protocol\";")
	out = append(out, "read here as: at every N > 1, ABD keeps a larger fraction of its N=1 throughput than blocking does.")
	for _, src := range []struct {
		name string
		f    experiment.Figures
	}{{"seed ", seed}, {"synod", ours}} {
		out = append(out, degradationLines(src.name, src.f, t.Ratios, t.Nodes)...)
	}
	return out
}

func degradationLines(name string, f experiment.Figures, ratios []string, nodes []int) []string {
	var out []string
	ns := append([]int(nil), nodes...)
	sort.Ints(ns)
	for _, r := range ratios {
		var parts []string
		holds, checked := true, 0
		for _, n := range ns {
			if n == 1 {
				continue
			}
			a, okA := f.Get(cellKey("abd", n, r, loadClosed), mRelThroughput)
			b, okB := f.Get(cellKey("blocking", n, r, loadClosed), mRelThroughput)
			if !okA || !okB {
				continue
			}
			checked++
			ta, _ := f.Get(cellKey("abd", n, r, loadClosed), mThroughput)
			tb, _ := f.Get(cellKey("blocking", n, r, loadClosed), mThroughput)
			part := fmt.Sprintf("N=%d: abd %.2f vs blocking %.2f of N=1 (abd/blocking %.2fx)", n, a, b, ta/tb)
			if c, ok := f.Get(cellKey(abdClient, n, r, loadClosed), mRelThroughput); ok {
				tc, _ := f.Get(cellKey(abdClient, n, r, loadClosed), mThroughput)
				part += fmt.Sprintf(", abd-client %.2f of N=1 (abd-client/abd %.2fx)", c, tc/ta)
			}
			parts = append(parts, part)
			if a < b {
				holds = false
			}
		}
		if checked == 0 {
			out = append(out, fmt.Sprintf("  %s get=%s: not enough cells for both protocols to compare", name, r))
			continue
		}
		verdict := "HOLDS"
		if !holds {
			verdict = "DOES NOT HOLD"
		}
		out = append(out, fmt.Sprintf("  %s get=%s: %s; ABD degrades less: %s", name, r, strings.Join(parts, "; "), verdict))
	}
	return out
}

// nodesCPU is the CPU seconds the cluster's node processes used so far.
func nodesCPU(cl *cluster.Cluster) float64 {
	var sum float64
	for _, n := range cl.Nodes {
		if v, err := bench.ProcCPU(n.PID); err == nil {
			sum += v
		}
	}
	return sum
}

// selfCPU is the CPU seconds this process used so far (its bench clients).
func selfCPU() float64 {
	var ru syscall.Rusage
	if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) != nil {
		return 0
	}
	return float64(ru.Utime.Nano()+ru.Stime.Nano()) / 1e9
}

// rateList is --open-rates: comma-separated rates, or "none" for no
// open-loop cell (pflag's float slice cannot be set empty).
type rateList []float64

func (r *rateList) String() string {
	if len(*r) == 0 {
		return "none"
	}
	var parts []string
	for _, v := range *r {
		parts = append(parts, strconv.FormatFloat(v, 'g', -1, 64))
	}
	return strings.Join(parts, ",")
}

func (r *rateList) Set(s string) error {
	*r = nil
	if s == "none" {
		return nil
	}
	for _, f := range strings.Split(s, ",") {
		v, err := strconv.ParseFloat(strings.TrimSpace(f), 64)
		if err != nil {
			return fmt.Errorf("%q is not a rate (or none)", f)
		}
		*r = append(*r, v)
	}
	return nil
}

func (r *rateList) Type() string { return "rates" }
