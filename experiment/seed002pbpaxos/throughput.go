package seed002pbpaxos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
)

// Throughput is a closed-loop throughput sweep: c concurrent clients, each
// with its own connection, each sending exactly Total/c requests of one
// kind, repeated for a confidence interval; per cell the throughput and the
// mean response time of a request. Four experiments are made of it:
//
//   - seed002-pbpaxos-throughput: Fig VI.4, 1..16 clients, 1000 requests.
//   - seed002-pbpaxos-clients: Fig VI.5, 8..128 clients.
//   - seed002-pbpaxos-pipeline: the leader's window (param pipeline): the
//     seed's one outstanding proposal against 8 and 32.
//   - seed002-pbpaxos-paths: the Go client's fan-out against one node
//     (gRPC to the leader, RESP to the leader, RESP to a follower).
type Throughput struct {
	Kinds      []string
	Clients    []int
	Total      int
	Reps       int
	Durability string

	name, desc, title string
	seed              experiment.SeedFigures
	notes             []string
	summary           func(t *Throughput, ours experiment.Figures) []string
}

func NewThroughput() *Throughput {
	return &Throughput{Kinds: []string{"original", "read", "write"}, Clients: []int{1, 2, 4, 8, 16}, Total: 1000, Reps: 10, Durability: config.Memory,
		name: "seed002-pbpaxos-throughput",
		desc: "PB-Paxos throughput (seed 002, Fig VI.4): 1, 2, 4, 8, 16 clients each sending 1000/c requests of one kind " +
			"(original, X-Paxos read, basic write; Multi-Paxos kinds on request), mean and 99% confidence interval over repetitions.",
		title: "Throughput (seed 002, Fig VI.4)",
		seed: experiment.SeedFigures{
			Source: "seed 002, Fig VI.4 (Sysnet): plotted, not tabulated; the text states read throughput at least 13% above write throughput",
			Notes: map[string]string{
				experiment.NewCell("kind", "read", "clients", "1").Key: "read throughput >= 1.13 x write throughput at every client count",
			},
		},
		summary: readsAboveWrites,
	}
}

// NewClientSweep is Fig VI.5: 8 to 128 clients.
func NewClientSweep() *Throughput {
	t := NewThroughput()
	t.Clients, t.Total, t.Reps = []int{8, 16, 32, 64, 128}, 2560, 5
	t.name = "seed002-pbpaxos-clients"
	t.desc = "PB-Paxos throughput and response time with more clients (seed 002, Fig VI.5): 8, 16, 32, 64, 128 clients " +
		"sharing --total requests of one kind (original, X-Paxos read, basic write); where each kind peaks."
	t.title = "Throughput, more clients (seed 002, Fig VI.5)"
	t.seed = experiment.SeedFigures{
		Source: "seed 002, Fig VI.5 (Sysnet, clients on eight machines): plotted in log scale, not tabulated",
		Notes: map[string]string{
			experiment.NewCell("kind", "write", "clients", "8").Key: "the basic protocol peaks between 8 and 32 clients",
			experiment.NewCell("kind", "read", "clients", "16").Key: "X-Paxos peaks between 16 and 64 clients",
		},
	}
	t.summary = peaks
	return t
}

// NewPipeline measures the leader's window.
func NewPipeline() *Throughput {
	t := NewThroughput()
	t.Kinds, t.Clients, t.Reps = []string{"write", "write-window8", "write-window32"}, []int{1, 8, 32}, 5
	t.Total = 2048
	t.name = "seed002-pbpaxos-pipeline"
	t.desc = "PB-Paxos pipelining: write throughput with the seed's one outstanding proposal (pipeline=1, the default) " +
		"against 8 and 32 outstanding proposals with chained deltas, for 1, 8 and 32 clients."
	t.title = "Pipelining: proposals outstanding (seed 002, VI.A.2)"
	t.seed = experiment.SeedFigures{
		Source: "seed 002, VI.A.2: \"the leader never tries to propose more than one proposal simultaneously\"; no figure (pipelining is ours)",
	}
	t.notes = []string{"write = pipeline=1 (the seed's and the default); write-windowN = pipeline=N, batch=1 in all."}
	t.summary = pipelineGain
	return t
}

// NewPaths measures the client paths of issue 13 item 2.
func NewPaths() *Throughput {
	t := NewThroughput()
	t.Kinds = []string{"write", "write-grpc-leader", "write-resp-leader", "write-resp-follower", "read", "read-grpc-leader", "read-resp-follower"}
	t.Clients, t.Reps = []int{1, 8}, 5
	t.name = "seed002-pbpaxos-paths"
	t.desc = "PB-Paxos client paths: the Go client sending every request to all replicas (the seed's clients; only the " +
		"leader answers) against one node: gRPC to the leader, RESP to the leader, RESP to a follower that forwards."
	t.title = "Client paths: fan-out against one node"
	t.seed = experiment.SeedFigures{
		Source: "seed 002, VI.A.1: clients send each request to every replica and only the leader replies; no figure for the one-node path",
	}
	t.summary = pathRatios
	return t
}

func (t *Throughput) Name() string        { return t.name }
func (t *Throughput) Description() string { return t.desc }

func (t *Throughput) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&t.Kinds, "kinds", t.Kinds, "request kinds: "+strings.Join(kindNames(), ", "))
	fs.IntSliceVar(&t.Clients, "clients", t.Clients, "numbers of concurrent clients (the seed: 1..16; Fig VI.5: 8..128)")
	fs.IntVar(&t.Total, "total", t.Total, "requests per repetition, shared by the clients (the seed's Fig VI.4: 1000)")
	fs.IntVar(&t.Reps, "reps", t.Reps, "repetitions per cell; --quick uses 2")
	fs.StringVar(&t.Durability, "durability", t.Durability, "cluster durability: memory (the seed's) or fsync")
}

func (t *Throughput) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(t.Durability); err != nil {
		return nil, err
	}
	if t.Total < 1 || t.Reps < 1 {
		return nil, fmt.Errorf("--total and --reps must be positive")
	}
	if err := checkKinds(t.Kinds); err != nil {
		return nil, err
	}
	var cells []experiment.Cell
	for _, k := range t.Kinds {
		for _, c := range t.Clients {
			if c < 1 || c > t.Total {
				return nil, fmt.Errorf("--clients: %d is not between 1 and --total", c)
			}
			cells = append(cells, experiment.NewCell("kind", k, "clients", strconv.Itoa(c)))
		}
	}
	return cells, nil
}

func (t *Throughput) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	k, _ := kindNamed(c.Get("kind"))
	nc, _ := strconv.Atoi(c.Get("clients"))
	nodes, err := liveNodes(ctx, env, k, t.Durability)
	if err != nil {
		return experiment.Outcome{}, err
	}
	reps := t.Reps
	if env.Quick && reps > 2 {
		reps = 2
	}
	var tputs, lats []float64
	for rep := 0; rep < reps; rep++ {
		tput, lat, err := t.rep(ctx, k, nodes, nc)
		if err != nil {
			return experiment.Outcome{}, fmt.Errorf("%s request: %w", k.name, err)
		}
		tputs, lats = append(tputs, tput), append(lats, lat)
	}
	mean, half := ci99(tputs)
	lmean, lhalf := ci99(lats)
	labels := map[string]string{"durability": t.Durability, "protocol": k.protocol, "path": pathName(k)}
	if w := k.params["pipeline"]; w != "" {
		labels["pipeline"] = w
	}
	return experiment.Outcome{
		Samples: map[string][]float64{mTput: tputs, mLat: lats},
		Metrics: map[string]float64{mTput: mean, mTputCI: half, mLat: lmean, mLatCI: lhalf},
		Labels:  labels,
	}, nil
}

func pathName(k kind) string {
	if k.path == pathFanout {
		if k.nodes > 1 && k.protocol == "pbpaxos" {
			return "grpc-fanout"
		}
		return "grpc"
	}
	return k.path
}

// rep runs one repetition: nc clients, each with its own connection (as the
// seed's client processes) and its own key, created by one unmeasured write
// that also opens the connection; then Total/nc requests each. It returns
// the throughput and the mean response time of a request in ms.
func (t *Throughput) rep(ctx context.Context, k kind, nodes []cluster.Node, nc int) (tput, latMS float64, err error) {
	clients := make([]requester, nc)
	defer func() {
		for _, cl := range clients {
			if cl.close != nil {
				cl.close()
			}
		}
	}()
	for i := range clients {
		if clients[i], err = newRequester(k, nodes); err != nil {
			return 0, 0, err
		}
		if err = clients[i].write(ctx, "c"+strconv.Itoa(i), []byte("v")); err != nil {
			return 0, 0, err
		}
	}
	per := t.Total / nc
	var wg sync.WaitGroup
	errs := make(chan error, nc)
	busy := make([]time.Duration, nc)
	t0 := time.Now()
	for i, cl := range clients {
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "c" + strconv.Itoa(i)
			for j := 0; j < per; j++ {
				s := time.Now()
				if err := cl.do(ctx, key, []byte("v")); err != nil {
					errs <- err
					return
				}
				busy[i] += time.Since(s)
			}
		}()
	}
	wg.Wait()
	elapsed := time.Since(t0)
	close(errs)
	if err := <-errs; err != nil {
		return 0, 0, err
	}
	var sum time.Duration
	for _, b := range busy {
		sum += b
	}
	return float64(per*nc) / elapsed.Seconds(), float64(sum) / float64(time.Millisecond) / float64(per*nc), nil
}

func (t *Throughput) Seed() experiment.SeedFigures { return t.seed }

func (t *Throughput) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTput, Header: "req/s", Format: "%.0f"},
			{Metric: mTputCI, Header: "± 99% CI", Format: "%.0f"},
			{Metric: mLat, Header: "RT ms", Format: "%.3f"},
			{Metric: mLatCI, Header: "± 99% CI", Format: "%.3f"},
		},
		Labels: []string{"protocol", "path", "pipeline", "durability"},
		Plots: []experiment.PlotSpec{{File: "throughput", Title: t.title, Kind: experiment.Lines,
			Metric: mTput, YLabel: "requests/s", X: "clients", XLabel: "clients", Series: []string{"kind"}}},
		Notes: t.notes,
	}
}

// Reps: a cell repeats its measurement itself (--reps, the claims'
// samples); it runs once.
func (t *Throughput) CellReps(experiment.Cell, experiment.Options) int { return 1 }

// Claims: Fig VI.4's "read throughput at least 13% higher than write
// throughput" at every client count run (throughput and clients
// variants); the pipeline and paths variants measure Synod's own options,
// no seed claim.
func (t *Throughput) Claims(d experiment.Data) []experiment.Claim {
	if t.name != "seed002-pbpaxos-throughput" && t.name != "seed002-pbpaxos-clients" {
		return nil
	}
	var parts []experiment.Judgement
	var keys []string
	for _, c := range t.Clients {
		rd, wr := experiment.NewCell("kind", "read", "clients", strconv.Itoa(c)).Key, experiment.NewCell("kind", "write", "clients", strconv.Itoa(c)).Key
		keys = append(keys, rd, wr)
		if d.Sample(rd, mTput) == nil || d.Sample(wr, mTput) == nil {
			continue
		}
		parts = append(parts, experiment.RatioAbove(fmt.Sprintf("%d clients: read/write throughput", c), d.Sample(rd, mTput), d.Sample(wr, mTput), 1.13))
	}
	text := "Fig VI.4: X-Paxos read throughput at least 13% above basic write throughput, at every client count"
	if len(parts) == 0 {
		c, _ := d.NotRun(text, "at least +13%", keys...)
		return []experiment.Claim{c}
	}
	cl := experiment.Claim{Text: text, Paper: "at least +13%", Judgement: experiment.AllOf(parts...)}
	if cl.Verdict != experiment.Holds {
		var why []string
		for _, c := range t.Clients {
			rd, ok1 := t.get(d.Ours, "read", c, mTput)
			wr, ok2 := t.get(d.Ours, "write", c, mTput)
			rl, _ := t.get(d.Ours, "read", c, mLat)
			wl, _ := t.get(d.Ours, "write", c, mLat)
			if ok1 && ok2 {
				why = append(why, fmt.Sprintf("%d clients: read %.0f req/s at %.2f ms, write %.0f req/s at %.2f ms", c, rd, rl, wr, wl))
			}
		}
		cl.Cause = "measured means (durability " + t.Durability + "): " + strings.Join(why, "; ")
	}
	return []experiment.Claim{cl}
}

func (t *Throughput) Summary(ours, _ experiment.Figures) []string {
	if t.summary == nil {
		return nil
	}
	return t.summary(t, ours)
}

// get is ours' metric m of kind k at c clients.
func (t *Throughput) get(ours experiment.Figures, k string, c int, m string) (float64, bool) {
	return ours.Get(experiment.NewCell("kind", k, "clients", strconv.Itoa(c)).Key, m)
}

// readsAboveWrites: "read throughput at least 13% higher than write
// throughput" (Fig VI.4's text).
func readsAboveWrites(t *Throughput, ours experiment.Figures) []string {
	worst, have := 0.0, false
	for _, c := range t.Clients {
		rd, ok1 := t.get(ours, "read", c, mTput)
		wr, ok2 := t.get(ours, "write", c, mTput)
		if ok1 && ok2 && wr > 0 {
			if g := rd/wr - 1; !have || g < worst {
				worst = g
			}
			have = true
		}
	}
	if !have {
		return nil
	}
	return []string{fmt.Sprintf("synod: read throughput at least %.0f%% above write throughput at every client count (seed: at least 13%%): %s",
		worst*100, verdict(worst >= 0.13))}
}

// peaks: where each kind's throughput peaks (Fig VI.5's text: writes
// between 8 and 32 clients, X-Paxos reads between 16 and 64).
func peaks(t *Throughput, ours experiment.Figures) []string {
	var out []string
	for _, r := range []struct {
		kind   string
		lo, hi int
	}{{"original", 0, 0}, {"write", 8, 32}, {"read", 16, 64}} {
		best, at := 0.0, 0
		for _, c := range t.Clients {
			if v, ok := t.get(ours, r.kind, c, mTput); ok && v > best {
				best, at = v, c
			}
		}
		if at == 0 {
			continue
		}
		line := fmt.Sprintf("synod: %s peaks at %d clients (%.0f req/s)", r.kind, at, best)
		if r.hi > 0 {
			line += fmt.Sprintf("; seed: between %d and %d: %s", r.lo, r.hi, verdict(at >= r.lo && at <= r.hi))
		}
		out = append(out, line)
	}
	return out
}

// pipelineGain: each window's write throughput against pipeline=1.
func pipelineGain(t *Throughput, ours experiment.Figures) []string {
	var out []string
	for _, c := range t.Clients {
		base, ok := t.get(ours, "write", c, mTput)
		if !ok || base <= 0 {
			continue
		}
		var parts []string
		for _, k := range t.Kinds {
			if v, ok := t.get(ours, k, c, mTput); ok && k != "write" {
				parts = append(parts, fmt.Sprintf("%s %+.0f%%", k, (v/base-1)*100))
			}
		}
		if len(parts) > 0 {
			out = append(out, fmt.Sprintf("synod, %d clients: against one outstanding proposal (%.0f req/s): %s", c, base, strings.Join(parts, ", ")))
		}
	}
	return out
}

// pathRatios: each one-node path's response time against the fan-out's.
func pathRatios(t *Throughput, ours experiment.Figures) []string {
	var out []string
	for _, base := range []string{"write", "read"} {
		for _, c := range t.Clients {
			b, ok := t.get(ours, base, c, mLat)
			if !ok || b <= 0 {
				continue
			}
			var parts []string
			for _, k := range t.Kinds {
				if v, ok := t.get(ours, k, c, mLat); ok && k != base && strings.HasPrefix(k, base+"-") {
					parts = append(parts, fmt.Sprintf("%s %+.0f%%", strings.TrimPrefix(k, base+"-"), (v/b-1)*100))
				}
			}
			if len(parts) > 0 {
				out = append(out, fmt.Sprintf("synod, %s, %d clients: response time against fan-out (%.3f ms): %s", base, c, b, strings.Join(parts, ", ")))
			}
		}
	}
	return out
}

func verdict(ok bool) string {
	if ok {
		return "holds"
	}
	return "does not hold"
}
