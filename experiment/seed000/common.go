package seed000

import (
	"context"
	"fmt"
	"math"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/sim"
)

// Metric names.
const (
	mTput      = "throughput"
	mATr       = "at_r_ms"
	mATfe      = "at_fe_ms"
	mP99       = "p99_ms"
	mStrict    = "strict_ms"
	mNonStrict = "nonstrict_ms"
	mIncons    = "inconsistency_pct"
	mInconsNS  = "nonstrict_incons_pct"
	mDone      = "completed"
)

// Modes.
const (
	modeSim  = "sim"
	modeLive = "live"
)

// common holds the settings every the ESDS thesis experiment shares.
type common struct {
	Mode      string
	Ops       int
	Runs      int
	OpCost    string
	ApplyCost string
	MsgCost   string
	Gossip    string
	Values    string
	// Send is the ESDS front end's policy (protocol/esds frontend.go):
	// replicas per operation, 1, 2 or all.
	Send       string
	Durability string
	LiveNodes  []int
	Seed       int64
}

func defaults() common {
	return common{
		Mode: "both", Ops: 300, Runs: 10,
		OpCost: "constant:28ms", ApplyCost: "constant:200us", MsgCost: "constant:300us",
		Gossip: "20ms", Values: "recompute", Send: "1", Durability: config.Memory, Seed: 1,
	}
}

func (c *common) flags(fs *pflag.FlagSet, liveNodes []int) {
	c.LiveNodes = liveNodes
	fs.StringVar(&c.Mode, "mode", c.Mode, "sim (deterministic simulator with the CPU model), live (loopback cluster), or both")
	fs.IntVar(&c.Ops, "ops", c.Ops, "operations per run (the seed: 300)")
	fs.IntVar(&c.Runs, "runs", c.Runs, "simulated runs (seeds) averaged per cell (the seed: 10 runs); live cells run once")
	fs.StringVar(&c.OpCost, "op-cost", c.OpCost, "sim: CPU time per client request at a replica (the seed: a replica keeps up with one request per ~30 ms)")
	fs.StringVar(&c.ApplyCost, "apply-cost", c.ApplyCost, "sim: CPU time per service Apply (re-applying non-stable operations)")
	fs.StringVar(&c.MsgCost, "msg-cost", c.MsgCost, "sim: CPU time per gossip message received")
	fs.StringVar(&c.Gossip, "gossip", c.Gossip, "ESDS gossip interval when gossip is on")
	fs.StringVar(&c.Send, "send", c.Send, "ESDS front end: replicas each operation is sent to, 1, 2 or all (the seed leaves it open, §4.2.4)")
	fs.StringVar(&c.Values, "values", c.Values, "ESDS response values: recompute (the thesis's ESDSOptImpl) or memo (Synod's default)")
	fs.StringVar(&c.Durability, "durability", c.Durability, "live clusters: memory (the seed persisted nothing) or fsync")
	fs.IntSliceVar(&c.LiveNodes, "live-nodes", c.LiveNodes, "live: cluster sizes N (a subset: every node shares this machine's cores)")
	fs.Int64Var(&c.Seed, "seed", c.Seed, "first simulation seed (runs use seed, seed+1, ...) and the live driver's seed")
}

func (c *common) check(o experiment.Options) error {
	if c.Mode != modeSim && c.Mode != modeLive && c.Mode != "both" {
		return fmt.Errorf("--mode %q: want sim, live or both", c.Mode)
	}
	if c.Ops < 1 || c.Runs < 1 {
		return fmt.Errorf("--ops and --runs must be positive")
	}
	for _, d := range []string{c.OpCost, c.ApplyCost, c.MsgCost} {
		if d == "" {
			continue
		}
		if _, err := sim.ParseDist(d); err != nil {
			return err
		}
	}
	if c.Gossip != "off" {
		if d, err := time.ParseDuration(c.Gossip); err != nil || d <= 0 {
			return fmt.Errorf("--gossip %q: not a positive duration", c.Gossip)
		}
	}
	if c.Send != "1" && c.Send != "2" && c.Send != "all" {
		return fmt.Errorf("--send %q: want 1, 2 or all", c.Send)
	}
	if c.Values != "recompute" && c.Values != "memo" {
		return fmt.Errorf("--values %q: want recompute or memo", c.Values)
	}
	if err := experiment.CheckDurability(c.Durability); err != nil {
		return err
	}
	for _, n := range c.LiveNodes {
		if n < 1 || n > 20 {
			return fmt.Errorf("--live-nodes: %d is not between 1 and 20", n)
		}
	}
	return nil
}

func (c *common) modes() []string {
	switch c.Mode {
	case modeSim, modeLive:
		return []string{c.Mode}
	}
	return []string{modeSim, modeLive}
}

// ops and runs for a cell, smaller under --quick.
func (c *common) opsFor(o experiment.Options) int {
	if o.Quick && c.Ops == defaults().Ops {
		return 40
	}
	return c.Ops
}

func (c *common) runsFor(o experiment.Options) int {
	if o.Quick && c.Runs == defaults().Runs {
		return 2
	}
	return c.Runs
}

// params are the ESDS parameters of a cell: gossip every interval ("":
// --gossip) when on.
func (c *common) params(gossipOn bool, every string) map[string]string {
	if every == "" {
		every = c.Gossip
	}
	p := map[string]string{"values": c.Values, "gossip": every, "send": c.Send}
	if c.Durability == config.Memory {
		// The seed's runs persist nothing and restart nothing: esds refuses
		// memory durability unless told so (protocol/esds, Durability
		// memory).
		p["volatile"] = "true"
	}
	if !gossipOn {
		p["gossip"] = "off"
	}
	return p
}

// load is one cell's workload.
type load struct {
	Service string  // counter or string
	N       int     // replicas
	Rate    float64 // submissions per second
	Strict  float64 // fraction of strict operations
	Gossip  bool
	Every   string // gossip interval when on ("": --gossip)
	CPUs    int    // sim: processors shared by the replicas (0: one each)
}

// result is what one cell measured (averaged over runs in simulation;
// Samples holds every simulated run's value, the claims' sample).
type result struct {
	Metrics map[string]float64
	Labels  map[string]string
	Detail  any
	Samples map[string][]float64
}

// outcome is the cell's outcome.
func (r result) outcome() experiment.Outcome {
	return experiment.Outcome{Metrics: r.Metrics, Labels: r.Labels, Detail: r.Detail, Samples: r.Samples}
}

// ---- simulation ----

func (c *common) simConfig(l load, ops int, seed int64) sim.Config {
	mix := "add:1"
	if l.Service == "string" {
		mix = "append:1"
	}
	clients := ((ops + l.N - 1) / l.N) * l.N // one per operation, a multiple of N
	return sim.Config{
		Protocol: "esds", Service: l.Service, Mix: mix, Nodes: l.N, Clients: clients, Ops: ops, Seed: seed,
		StickyClients: true, Rate: l.Rate, StrictFrac: l.Strict,
		OpCost: c.OpCost, ApplyCost: c.ApplyCost, MsgCost: c.MsgCost, CPUs: l.CPUs,
		Latency: "uniform:500us:1500us", ClientLatency: "uniform:500us:1500us", Fsync: "constant:0s",
		RequestTimeout: time.Hour, DrainTime: 10 * time.Minute, MaxTime: time.Hour,
		Params: c.params(l.Gossip, l.Every), NoCheck: !l.Gossip && l.N > 1,
	}
}

// runSim runs runs seeds of l and averages their metrics; every seed's
// value is kept as a sample. Run r of the cell (env.Rep) takes seeds
// seed+r·runs ... seed+r·runs+runs-1.
func (c *common) runSim(ctx context.Context, env *experiment.Env, l load, ops, runs int) (result, error) {
	sum := map[string]float64{}
	count := map[string]int{}
	samples := map[string][]float64{}
	var cmds []string
	for i := 0; i < runs; i++ {
		if err := ctx.Err(); err != nil {
			return result{}, err
		}
		cfg := c.simConfig(l, ops, c.Seed+int64(env.Rep*runs+i))
		r, err := sim.Run(cfg)
		if err != nil {
			return result{}, fmt.Errorf("%v (replay: %s)", err, cfg.Command())
		}
		if r.Violation {
			return result{}, fmt.Errorf("ESDS check failed: %s (replay: %s)", r.ESDS.Detail(), cfg.Command())
		}
		m := opMetrics(r.History)
		if len(r.ReplicaTimes) > 0 {
			m[mATr] = meanMs(r.ReplicaTimes)
		}
		if r.ESDS != nil {
			if r.ESDS.Strict+r.ESDS.NonStrict > 0 {
				m[mIncons] = 100 * r.ESDS.Degree // Def. 4
			}
			if r.ESDS.NonStrict > 0 {
				m[mInconsNS] = 100 * r.ESDS.NonStrictInconsistency
			}
		}
		for k, v := range m {
			sum[k] += v
			count[k]++
			samples[k] = append(samples[k], v)
		}
		if i == 0 {
			cmds = append(cmds, cfg.Command())
		}
		env.Logf("sim run %d/%d: %.1f ops/s, AT_fe %.1f ms", i+1, runs, m[mTput], m[mATfe])
	}
	out := map[string]float64{}
	for k, v := range sum {
		out[k] = v / float64(count[k])
	}
	return result{Metrics: out, Labels: map[string]string{"mode": "sim", "cost": "op " + c.OpCost}, Detail: map[string]any{"runs": runs, "replay_first": cmds}, Samples: samples}, nil
}

// opMetrics computes throughput (completed / span from the first submission
// to the last response, the seed's AP = 300/τ) and latencies from a history.
func opMetrics(h *history.History) map[string]float64 {
	var first, last int64 = math.MaxInt64, 0
	var all, st, ns []time.Duration
	for _, o := range h.Ops {
		if o.Outcome != history.OK {
			continue
		}
		first = min(first, o.Call)
		last = max(last, o.Return)
		d := time.Duration(o.Return - o.Call)
		all = append(all, d)
		if o.Opt(automaton.OptStrict) == "1" {
			st = append(st, d)
		} else {
			ns = append(ns, d)
		}
	}
	return latencyMetrics(all, st, ns, time.Duration(last-first))
}

func latencyMetrics(all, st, ns []time.Duration, span time.Duration) map[string]float64 {
	m := map[string]float64{mDone: float64(len(all))}
	if len(all) == 0 {
		return m
	}
	if span > 0 {
		m[mTput] = float64(len(all)) / span.Seconds()
	}
	m[mATfe] = meanMs(all)
	m[mP99] = pctMs(all, 0.99)
	if len(st) > 0 {
		m[mStrict] = meanMs(st)
	}
	if len(ns) > 0 {
		m[mNonStrict] = meanMs(ns)
	}
	return m
}

func meanMs(ds []time.Duration) float64 {
	var s float64
	for _, d := range ds {
		s += float64(d)
	}
	return s / float64(len(ds)) / 1e6
}

func pctMs(ds []time.Duration, p float64) float64 {
	s := append([]time.Duration(nil), ds...)
	sort.Slice(s, func(i, j int) bool { return s[i] < s[j] })
	return float64(s[min(len(s)-1, int(p*float64(len(s))))]) / 1e6
}

// ---- live ----

// liveOp is one operation of a live run.
type liveOp struct {
	token    string
	strict   bool
	ok       bool
	start    time.Time
	lat      time.Duration
	val      []byte
	errorMsg string
}

// liveRecorder collects the operations of one live run.
type liveRecorder struct {
	mu     sync.Mutex
	n      int
	strict float64
	prefix string
	ops    []liveOp
}

// next numbers the next operation and says whether it is strict: exactly a
// fraction strict of the operations, evenly spread.
func (r *liveRecorder) next() (int, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	k := r.n
	r.n++
	return k, math.Floor(float64(k+1)*r.strict) > math.Floor(float64(k)*r.strict)
}

func (r *liveRecorder) add(o liveOp) {
	r.mu.Lock()
	r.ops = append(r.ops, o)
	r.mu.Unlock()
}

// esdsTarget is a bench.Target that turns each of the driver's operations
// into one ESDS operation (counter add 1, or string append of a unique
// token) over the gRPC API, strict or not.
type esdsTarget struct {
	g   *client.GRPC
	svc string
	rec *liveRecorder
}

func (t *esdsTarget) Do(ctx context.Context, _ service.Op) (service.Result, error) {
	k, strict := t.rec.next()
	token := fmt.Sprintf("<%s%d>", t.rec.prefix, k)
	op := service.Op{Kind: "add", Args: [][]byte{[]byte("1")}}
	if t.svc == "string" {
		op = service.Op{Kind: "append", Args: [][]byte{[]byte(token)}}
	}
	t0 := time.Now()
	res, _, err := t.g.DoOp(ctx, "", op, client.OpOptions{Strict: strict})
	o := liveOp{token: token, strict: strict, start: t0, lat: time.Since(t0), ok: err == nil && !res.IsErr()}
	if err != nil {
		o.errorMsg = err.Error()
	} else if res.IsErr() {
		o.errorMsg = res.Err
	}
	if t.svc == "string" {
		o.val = append([]byte(nil), res.Bytes...)
	}
	t.rec.add(o)
	return res, err
}

func (t *esdsTarget) Close() error { return t.g.Close() }

func grpcAddrs(cl *cluster.Cluster) ([]string, error) {
	var out []string
	for _, n := range cl.Nodes {
		if n.GRPC == "" {
			return nil, fmt.Errorf("node %s has no gRPC address", n.ID)
		}
		out = append(out, n.GRPC)
	}
	return out, nil
}

// liveCluster returns the (shared) live cluster of l.
func (c *common) liveCluster(env *experiment.Env, l load) (*cluster.Cluster, error) {
	p := c.params(l.Gossip, l.Every)
	key := fmt.Sprintf("esds-%s-n%d-gossip%s", l.Service, l.N, p["gossip"])
	return env.Cluster(key, cluster.UpOptions{Nodes: l.N, Protocol: "esds", Service: l.Service, Durability: c.Durability, Params: p})
}

// runLive submits ops operations at l.Rate (bench's open loop: Poisson
// arrivals) to a live cluster, spread over its nodes, and measures them.
func (c *common) runLive(ctx context.Context, env *experiment.Env, l load, ops int, cellKey string) (result, error) {
	cl, err := c.liveCluster(env, l)
	if err != nil {
		return result{}, err
	}
	addrs, err := grpcAddrs(cl)
	if err != nil {
		return result{}, err
	}
	rec := &liveRecorder{strict: l.Strict, prefix: strconv.FormatInt(time.Now().UnixNano()%1e9, 36) + "."}
	cfg := bench.DefaultConfig()
	cfg.Addrs = addrs
	cfg.Rate = l.Rate
	cfg.Ops = int64(ops)
	cfg.Duration = time.Duration(float64(ops)/l.Rate*float64(time.Second))*2 + 30*time.Second
	cfg.Clients = min(max(8*l.N, 16), 64)
	cfg.ReadRatio = 0
	cfg.Seed = c.Seed
	cfg.OpTimeout = 30 * time.Second
	cfg.DurabilityLabel = c.Durability
	cfg.TargetName = "esds-grpc"
	cfg.NewTarget = func(ctx context.Context, addr string, _ int) (bench.Target, error) {
		g, err := client.NewGRPC([]string{addr}, client.Options{Timeout: 30 * time.Second})
		if err != nil {
			return nil, err
		}
		// Connect and learn the namespaces now, not in the first measured call.
		if _, err := g.Namespaces(ctx); err != nil {
			g.Close()
			return nil, err
		}
		return &esdsTarget{g: g, svc: l.Service, rec: rec}, nil
	}
	rep, err := bench.Run(ctx, cfg, env.Progress())
	if err != nil {
		return result{}, err
	}
	if rep.Interrupted {
		return result{}, fmt.Errorf("interrupted")
	}
	var first, last time.Time
	var all, st, ns []time.Duration
	errs := 0
	for _, o := range rec.ops {
		if !o.ok {
			errs++
			continue
		}
		end := o.start.Add(o.lat)
		if first.IsZero() || o.start.Before(first) {
			first = o.start
		}
		if end.After(last) {
			last = end
		}
		all = append(all, o.lat)
		if o.strict {
			st = append(st, o.lat)
		} else {
			ns = append(ns, o.lat)
		}
	}
	if len(all) == 0 {
		return result{}, fmt.Errorf("no operation succeeded (%d errors)", errs)
	}
	m := latencyMetrics(all, st, ns, last.Sub(first))
	labels := map[string]string{"mode": "live", "cost": "none (real replicas)", "durability": c.Durability}
	detail := map[string]any{"errors": errs, "bench": rep}
	if l.Service == "string" && l.Gossip {
		final, err := finalString(ctx, addrs, rec)
		if err != nil {
			return result{}, err
		}
		incons, nonStrict := 0, 0
		for _, o := range rec.ops {
			if !o.ok {
				continue
			}
			i := strings.Index(final, o.token)
			if i < 0 {
				return result{}, fmt.Errorf("acknowledged append %s is missing from the converged string", o.token)
			}
			if !o.strict {
				nonStrict++
			}
			if string(o.val) != final[:i+len(o.token)] {
				if o.strict {
					return result{}, fmt.Errorf("strict append %s answered a value that differs from the final order", o.token)
				}
				incons++
			}
		}
		m[mIncons] = 100 * float64(incons) / float64(len(all))
		if nonStrict > 0 {
			m[mInconsNS] = 100 * float64(incons) / float64(nonStrict)
		}
	} else if l.Service == "counter" {
		time.Sleep(300 * time.Millisecond) // let gossip settle before the next cell
	}
	if errs > 0 {
		labels["errors"] = strconv.Itoa(errs)
	}
	return result{Metrics: m, Labels: labels, Detail: detail}, nil
}

// finalString reads the string at every node until all agree and hold every
// acknowledged token (the eventual total order, spelled out: appends of
// unique tokens), for up to 20 s.
func finalString(ctx context.Context, addrs []string, rec *liveRecorder) (string, error) {
	var gs []*client.GRPC
	for _, a := range addrs {
		g, err := client.NewGRPC([]string{a}, client.Options{Timeout: 10 * time.Second})
		if err != nil {
			return "", err
		}
		defer g.Close()
		gs = append(gs, g)
	}
	deadline := time.Now().Add(20 * time.Second)
	for {
		var vals []string
		for _, g := range gs {
			res, _, err := g.DoOp(ctx, "", service.Op{Kind: "read"}, client.OpOptions{})
			if err != nil {
				return "", err
			}
			vals = append(vals, string(res.Bytes))
		}
		agree := true
		for _, v := range vals[1:] {
			agree = agree && v == vals[0]
		}
		if agree {
			all := true
			for _, o := range rec.ops {
				if o.ok && !strings.Contains(vals[0], o.token) {
					all = false
					break
				}
			}
			if all {
				return vals[0], nil
			}
		}
		if time.Now().After(deadline) {
			return "", fmt.Errorf("replicas did not converge on one string holding every acknowledged append within 20 s")
		}
		select {
		case <-ctx.Done():
			return "", ctx.Err()
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// ---- shapes ----

// series returns the values of metric over xs for cells keyed by key(x).
func seriesOf(f experiment.Figures, metric string, xs []int, key func(int) string) ([]float64, []float64) {
	var x, y []float64
	for _, n := range xs {
		if v, ok := f.Get(key(n), metric); ok {
			x = append(x, float64(n))
			y = append(y, v)
		}
	}
	return x, y
}

// fit is the least-squares line through (x, y) and its R².
func fit(x, y []float64) (slope, r2 float64) {
	n := float64(len(x))
	if n < 2 {
		return 0, 0
	}
	var sx, sy, sxx, sxy, syy float64
	for i := range x {
		sx += x[i]
		sy += y[i]
		sxx += x[i] * x[i]
		sxy += x[i] * y[i]
		syy += y[i] * y[i]
	}
	den := n*sxx - sx*sx
	if den == 0 {
		return 0, 0
	}
	slope = (n*sxy - sx*sy) / den
	vy := n*syy - sy*sy
	if vy == 0 {
		return slope, 1
	}
	r := (n*sxy - sx*sy) / math.Sqrt(den*vy)
	return slope, r * r
}

// verdict words a shape test of the means (the verdicts are the claims',
// decided on every run: see claims.go).
func verdict(ok bool) string {
	if ok {
		return "shape as the seed's"
	}
	return "shape unlike the seed's"
}

func fmtSeries(x, y []float64, format string) string {
	parts := make([]string, len(x))
	for i := range x {
		parts[i] = fmt.Sprintf("%g:"+format, x[i], y[i])
	}
	return strings.Join(parts, " ")
}

func argmax(y []float64) int {
	best := 0
	for i := range y {
		if y[i] > y[best] {
			best = i
		}
	}
	return best
}

func nodesRange(lo, hi int) []int {
	var out []int
	for n := lo; n <= hi; n++ {
		out = append(out, n)
	}
	return out
}
