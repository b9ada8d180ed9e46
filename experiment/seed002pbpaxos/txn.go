package seed002pbpaxos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Txn is the experiment "seed002-pbpaxos-txn": Table VI.1, transaction
// response time of 3- and 5-request transactions without T-Paxos
// (read/write, write-only) and with it (optimized).
type Txn struct {
	Sizes      []int
	Samples    int
	Clients    []int
	Total      int
	Rounds     int
	Durability string
}

func NewTxn() *Txn {
	return &Txn{Sizes: []int{3, 5}, Samples: 200, Clients: []int{1, 2, 4, 8, 16}, Total: 200, Rounds: 5, Durability: config.Memory}
}

func (t *Txn) Name() string { return "seed002-pbpaxos-txn" }

func (t *Txn) Description() string {
	return "T-Paxos transactions (seed 002, Table VI.1 and Fig VI.8): response time of 3- and 5-request transactions coordinated " +
		"request by request (read/write: X-Paxos reads, basic writes and commit; write-only) against T-Paxos " +
		"(optimized: the leader answers each request at once and coordinates only the commit), on pbpaxos, " +
		"mean with 99% confidence interval and the time of each step; and their throughput with 1 to 16 concurrent clients."
}

func (t *Txn) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&t.Sizes, "sizes", t.Sizes, "requests per transaction (the seed: 3 and 5)")
	fs.IntVar(&t.Samples, "samples", t.Samples, "transactions per response-time cell; --quick uses 20")
	fs.IntSliceVar(&t.Clients, "clients", t.Clients, "concurrent clients of the throughput cells (Fig VI.8: 1, 2, 4, 8, 16); --quick uses 1 and 4")
	fs.IntVar(&t.Total, "total", t.Total, "transactions per throughput round, shared by the clients; --quick uses 40")
	fs.IntVar(&t.Rounds, "rounds", t.Rounds, "throughput rounds per cell (each one sample of the claims); --quick uses 3")
	fs.StringVar(&t.Durability, "durability", t.Durability, "cluster durability: memory (the seed's) or fsync")
}

var txnModes = []string{"read/write", "write-only", "optimized"}

func (t *Txn) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(t.Durability); err != nil {
		return nil, err
	}
	if t.Samples < 2 {
		return nil, fmt.Errorf("--samples must be at least 2")
	}
	if t.Total < 1 || t.Rounds < 2 {
		return nil, fmt.Errorf("--total must be positive and --rounds at least 2")
	}
	var cells []experiment.Cell
	for _, m := range txnModes {
		for _, n := range t.Sizes {
			if n < 1 || n > 100 {
				return nil, fmt.Errorf("--sizes: %d is not between 1 and 100", n)
			}
			cells = append(cells, experiment.NewCell("operation", m, "requests", strconv.Itoa(n)))
		}
	}
	for _, m := range txnModes {
		for _, n := range t.Sizes {
			for _, c := range t.clients(o) {
				if c < 1 || c > 64 {
					return nil, fmt.Errorf("--clients: %d is not between 1 and 64", c)
				}
				cells = append(cells, tputCell(m, n, c))
			}
		}
	}
	return cells, nil
}

// txnOps are the requests of one transaction of n requests: the seed's
// read/write mix is 2 reads + 1 write for 3 and 3 reads + 2 writes for 5
// (reads first, then writes: about 60% reads); write-only writes them all.
func txnOps(mode string, n int, keys []string, tag string) []service.Op {
	writes := n
	if mode != "write-only" {
		writes = n * 2 / 5
		if writes == 0 {
			writes = 1
		}
	}
	var ops []service.Op
	for i := 0; i < n; i++ {
		k := keys[i%len(keys)]
		if i < n-writes {
			ops = append(ops, service.Op{Kind: "get", Key: k})
		} else {
			ops = append(ops, service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(tag)}})
		}
	}
	return ops
}

// tputCell is a throughput cell of Fig VI.8: c concurrent clients.
func tputCell(mode string, n, c int) experiment.Cell {
	return experiment.NewCell("operation", mode, "requests", strconv.Itoa(n), "clients", strconv.Itoa(c))
}

func (t *Txn) clients(o experiment.Options) []int {
	if o.Quick {
		return []int{1, 4}
	}
	return t.Clients
}

// Step metrics: the mean time of each step of a transaction (one client).
const (
	mStepBegin  = "step_begin_ms"
	mStepRead   = "step_read_ms"
	mStepWrite  = "step_write_ms"
	mStepCommit = "step_commit_ms"
	// Throughput transactions that ended in TRYAGAIN or an unknown
	// outcome (no leader in time): not counted as committed.
	mUnknown = "tryagain"
)

func (t *Txn) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	mode := c.Get("operation")
	n, _ := strconv.Atoi(c.Get("requests"))
	k, _ := kindNamed("write")
	nodes, err := liveNodes(ctx, env, k, t.Durability)
	if err != nil {
		return experiment.Outcome{}, err
	}
	if c.Get("clients") != "" {
		return t.runThroughput(ctx, env, c, nodes)
	}
	cl, err := client.NewGRPC(grpcAddrs(nodes), client.Options{Timeout: 10 * time.Second})
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer cl.Close()
	samples := t.Samples
	if env.Quick && samples > 20 {
		samples = 20
	}
	keys := []string{"a1", "a2", "a3", "a4", "a5"}
	var trts []float64
	steps := map[string][]float64{}
	aborted := 0
	for s := -3; s < samples; s++ { // three unmeasured transactions warm the path
		ops := txnOps(mode, n, keys, "t"+strconv.Itoa(s))
		t0 := time.Now()
		st, err := runTxn(ctx, cl, mode, ops)
		if errors.Is(err, client.ErrTxnAborted) {
			aborted++
			continue
		}
		if err != nil {
			return experiment.Outcome{}, fmt.Errorf("%s transaction: %w", mode, err)
		}
		if s >= 0 {
			trts = append(trts, float64(time.Since(t0))/float64(time.Millisecond))
			for _, x := range st {
				steps[x.name] = append(steps[x.name], float64(x.d)/float64(time.Millisecond))
			}
		}
	}
	mean, half := ci99(trts)
	met := map[string]float64{mTRT: mean, mTRTCI: half, mAborted: float64(aborted)}
	for name, m := range map[string]string{"begin": mStepBegin, "get": mStepRead, "set": mStepWrite, "commit": mStepCommit} {
		if v := steps[name]; len(v) > 0 {
			met[m] = experiment.Sample(v).Mean()
		}
	}
	return experiment.Outcome{
		Metrics: met,
		Labels:  map[string]string{"durability": t.Durability},
		Samples: map[string][]float64{mTRT: trts},
	}, nil
}

// runThroughput runs --rounds rounds of --total transactions shared by the
// cell's clients (each its own connection and keys, so that T-Paxos
// transactions do not conflict); each round's transactions per second is
// one sample.
func (t *Txn) runThroughput(ctx context.Context, env *experiment.Env, c experiment.Cell, nodes []cluster.Node) (experiment.Outcome, error) {
	mode := c.Get("operation")
	n, _ := strconv.Atoi(c.Get("requests"))
	nc, _ := strconv.Atoi(c.Get("clients"))
	total, rounds := t.Total, t.Rounds
	if env.Quick {
		total, rounds = min(total, 40), min(rounds, 3)
	}
	per := max(1, total/nc)
	cls := make([]*client.GRPC, nc)
	for i := range cls {
		cl, err := client.NewGRPC(grpcAddrs(nodes), client.Options{Timeout: 10 * time.Second})
		if err != nil {
			return experiment.Outcome{}, err
		}
		defer cl.Close()
		cls[i] = cl
	}
	var tputs []float64
	aborted, committed, unknown := 0, 0, 0
	var mu sync.Mutex
	for r := -1; r < rounds; r++ { // round -1 warms every connection
		count := per
		if r < 0 {
			count = 2
		}
		mu.Lock()
		committed = 0
		mu.Unlock()
		t0 := time.Now()
		var wg sync.WaitGroup
		errs := make([]error, nc)
		for i, cl := range cls {
			wg.Add(1)
			go func() {
				defer wg.Done()
				keys := []string{fmt.Sprintf("c%d-a1", i), fmt.Sprintf("c%d-a2", i), fmt.Sprintf("c%d-a3", i)}
				for j := 0; j < count && ctx.Err() == nil; j++ {
					_, err := runTxn(ctx, cl, mode, txnOps(mode, n, keys, fmt.Sprintf("r%d-%d", r, j)))
					if errors.Is(err, client.ErrTxnAborted) {
						mu.Lock()
						aborted++
						mu.Unlock()
						continue
					}
					var ce *client.Error
					if errors.Is(err, client.ErrUnknownOutcome) || errors.As(err, &ce) && ce.Code() == "TRYAGAIN" {
						// No leader answered in time (a loaded machine's
						// election): not committed as far as we know.
						mu.Lock()
						unknown++
						mu.Unlock()
						continue
					}
					if err != nil {
						errs[i] = err
						return
					}
					mu.Lock()
					committed++
					mu.Unlock()
				}
			}()
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return experiment.Outcome{}, fmt.Errorf("%s transactions, %d clients: %w", mode, nc, err)
		}
		if r >= 0 {
			tputs = append(tputs, float64(committed)/time.Since(t0).Seconds()) // committed transactions per second
		}
	}
	mean, half := ci99(tputs)
	return experiment.Outcome{
		Metrics: map[string]float64{mTput: mean, mTputCI: half, mAborted: float64(aborted), mUnknown: float64(unknown)},
		Labels:  map[string]string{"durability": t.Durability},
		Samples: map[string][]float64{mTput: tputs},
	}, nil
}

// Reps: a cell times --samples transactions itself; it runs once.
func (t *Txn) Reps(experiment.Options) int { return 1 }

// Claims judges Table VI.1 on every transaction's response time and Fig
// VI.8's throughput gains on every round's throughput; each claim's cause
// is the measured time of each step of both transactions (one client).
func (t *Txn) Claims(d experiment.Data) []experiment.Claim {
	var out []experiment.Claim
	for _, n := range t.Sizes {
		opt := experiment.NewCell("operation", "optimized", "requests", strconv.Itoa(n)).Key
		for _, base := range []string{"read/write", "write-only"} {
			b := experiment.NewCell("operation", base, "requests", strconv.Itoa(n)).Key
			text := fmt.Sprintf("Table VI.1: T-Paxos reduces the response time of a %d-request transaction against %s coordination", n, base)
			paper := "28% to 39% lower"
			if s, ok := d.Seed.Get(opt, mTRT); ok {
				if sb, ok := d.Seed.Get(b, mTRT); ok && sb > 0 {
					paper = fmt.Sprintf("%.0f%% lower (%.1f vs %.1f ms)", (1-s/sb)*100, s, sb)
				}
			}
			if c, ok := d.NotRun(text, paper, opt, b); ok {
				out = append(out, c)
				continue
			}
			out = append(out, experiment.Claim{Text: text, Paper: paper,
				Judgement: experiment.RatioBelow("T-Paxos/"+base+" mean TRT", d.Sample(opt, mTRT), d.Sample(b, mTRT), 1),
				Cause:     stepBreakdown(d, n, base)})
		}
	}
	// Fig VI.8: "T-Paxos increases the service throughput by 42%, 43%, 45%,
	// 47% and 57% [1..16 clients] compared to 3-request read/write
	// transactions ... 52%, 53%, 77%, 88% and 97% [write-only] ... a 53% -
	// 90% increase for [5-request] read/write transactions and a 69% - 138%
	// increase for write-only."
	gains := map[string][2]string{
		"3 read/write": {"+42%, +43%, +45%, +47%, +57% at 1, 2, 4, 8, 16 clients", "1.42"},
		"3 write-only": {"+52%, +53%, +77%, +88%, +97% at 1, 2, 4, 8, 16 clients", "1.52"},
		"5 read/write": {"+53% to +90%", "1.53"},
		"5 write-only": {"+69% to +138%", "1.69"},
	}
	for _, n := range t.Sizes {
		for _, base := range []string{"read/write", "write-only"} {
			g, ok := gains[fmt.Sprintf("%d %s", n, base)]
			if !ok {
				continue
			}
			least, _ := strconv.ParseFloat(g[1], 64)
			text := fmt.Sprintf("Fig VI.8: T-Paxos raises the throughput of %d-request transactions against %s coordination by at least the seed's smallest gain (%+.0f%%), at every client count", n, base, (least-1)*100)
			var parts []experiment.Judgement
			var cells []string
			for _, c := range t.clientsRun(d) {
				o, b := tputCell("optimized", n, c).Key, tputCell(base, n, c).Key
				cells = append(cells, o, b)
				if d.Sample(o, mTput) == nil || d.Sample(b, mTput) == nil {
					continue
				}
				parts = append(parts, experiment.RatioAbove(fmt.Sprintf("%d clients: T-Paxos/%s throughput", c, base), d.Sample(o, mTput), d.Sample(b, mTput), least))
			}
			if len(parts) == 0 {
				if c, ok := d.NotRun(text, g[0], cells...); ok {
					out = append(out, c)
				}
				continue
			}
			out = append(out, experiment.Claim{Text: text, Paper: g[0], Judgement: experiment.AllOf(parts...), Cause: stepBreakdown(d, n, base)})
		}
	}
	return out
}

// clientsRun are the client counts of the throughput cells that ran.
func (t *Txn) clientsRun(d experiment.Data) []int {
	var out []int
	for _, c := range []int{1, 2, 4, 8, 16, 32, 64} {
		for _, n := range t.Sizes {
			if d.Samples[tputCell("optimized", n, c).Key] != nil {
				out = append(out, c)
				break
			}
		}
	}
	return out
}

// stepBreakdown is where one client's transaction time goes, step by step,
// in the optimized and the base mode (mean ms of each step kind times
// their count per transaction).
func stepBreakdown(d experiment.Data, n int, base string) string {
	one := func(mode string) string {
		k := experiment.NewCell("operation", mode, "requests", strconv.Itoa(n)).Key
		reads, writes := 0, 0
		for _, op := range txnOps(mode, n, []string{"a"}, "") {
			if op.Kind == "get" {
				reads++
			} else {
				writes++
			}
		}
		var parts []string
		sum := 0.0
		for _, st := range []struct {
			metric, name string
			count        int
		}{{mStepBegin, "begin", 1}, {mStepRead, "get", reads}, {mStepWrite, "set", writes}, {mStepCommit, "commit", 1}} {
			v, ok := d.Ours.Get(k, st.metric)
			if !ok || st.count == 0 {
				continue
			}
			parts = append(parts, fmt.Sprintf("%d %s x %.3f", st.count, st.name, v))
			sum += float64(st.count) * v
		}
		if len(parts) == 0 {
			return mode + ": not run"
		}
		return fmt.Sprintf("%s %s = %.3f ms", mode, strings.Join(parts, " + "), sum)
	}
	return fmt.Sprintf("measured steps of one client's %d-request transaction (mean ms per step): %s; %s", n, one("optimized"), one(base))
}

// runTxn runs one transaction. Without T-Paxos every request is an ordinary
// coordinated request and the commit is one more coordinated write (of a
// commit marker), as the seed's baseline; optimized runs Begin, the
// requests inside the transaction and Commit.
//
// It returns the time of each step (begin, get, set, commit), the
// measured breakdown of where a transaction's time goes.
func runTxn(ctx context.Context, cl *client.GRPC, mode string, ops []service.Op) ([]step, error) {
	var steps []step
	t0 := time.Now()
	lap := func(name string) {
		now := time.Now()
		steps = append(steps, step{name, now.Sub(t0)})
		t0 = now
	}
	if mode != "optimized" {
		for _, op := range ops {
			res, _, err := cl.DoOp(ctx, "", op, client.OpOptions{Read: automaton.ReadDefault})
			if err != nil {
				return nil, err
			}
			if res.IsErr() {
				return nil, fmt.Errorf("%v: %s", op, res.Err)
			}
			lap(op.Kind)
		}
		res, _, err := cl.DoOp(ctx, "", service.Op{Kind: "set", Key: "commit", Args: [][]byte{[]byte("1")}}, client.OpOptions{})
		if err == nil && res.IsErr() {
			err = fmt.Errorf("commit marker: %s", res.Err)
		}
		lap("commit")
		return steps, err
	}
	tx, err := cl.Begin(ctx, "")
	if err != nil {
		return nil, err
	}
	lap("begin")
	for _, op := range ops {
		if _, err := tx.Do(ctx, op); err != nil {
			tx.Abort(ctx)
			var ce *client.Error
			if errors.As(err, &ce) && (ce.Kind == synoderr.Aborted || strings.HasPrefix(ce.Msg, automaton.ErrNoSuchTxn)) {
				// A conflict (no-wait locks) or a leader change aborted it.
				err = fmt.Errorf("%w: %v", client.ErrTxnAborted, err)
			}
			return nil, err
		}
		lap(op.Kind)
	}
	err = tx.Commit(ctx)
	lap("commit")
	return steps, err
}

// step is one step of a transaction and its time.
type step struct {
	name string
	d    time.Duration
}

func (t *Txn) Seed() experiment.SeedFigures {
	figs := experiment.Figures{}
	for _, r := range []struct {
		mode string
		n    int
		trt  float64
		ci   float64
	}{
		{"read/write", 3, 1.17, 0.02}, {"read/write", 5, 1.79, 0.02},
		{"write-only", 3, 1.29, 0.02}, {"write-only", 5, 2.01, 0.03},
		{"optimized", 3, 0.85, 0.02}, {"optimized", 5, 1.23, 0.02},
	} {
		k := experiment.NewCell("operation", r.mode, "requests", strconv.Itoa(r.n)).Key
		figs.Set(k, mTRT, r.trt)
		figs.Set(k, mTRTCI, r.ci)
	}
	return experiment.SeedFigures{Source: "seed 002, Table VI.1 (Sysnet cluster, three replicas)", Values: figs}
}

func (t *Txn) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTRT, Header: "avg TRT ms", Format: "%.3f"},
			{Metric: mTRTCI, Header: "± 99% CI", Format: "%.3f"},
			{Metric: mStepBegin, Header: "begin", Format: "%.3f"},
			{Metric: mStepRead, Header: "get", Format: "%.3f"},
			{Metric: mStepWrite, Header: "set", Format: "%.3f"},
			{Metric: mStepCommit, Header: "commit", Format: "%.3f"},
			{Metric: mTput, Header: "txn/s", Format: "%.0f"},
			{Metric: mTputCI, Header: "± 99% CI", Format: "%.0f"},
			{Metric: mAborted, Header: "aborted", Format: "%.0f"},
			{Metric: mUnknown, Header: "TRYAGAIN", Format: "%.0f"},
		},
		Labels: []string{"durability"},
		Plots: []experiment.PlotSpec{{File: "trt", Title: "Transaction response time (Table VI.1)", Kind: experiment.Bars,
			Metric: mTRT, YLabel: "ms", X: "requests", XLabel: "requests per transaction", Series: []string{"operation"}}},
		Notes: []string{"optimized includes T-Paxos's Begin round trip (the seed folds it into the first request).",
			"begin/get/set/commit: mean ms of each step of one client's transactions; txn/s: the throughput cells (clients=c),",
			"mean of the rounds of --total transactions shared by c clients, each with its own connection and keys."},
	}
}

// Summary: T-Paxos's reduction of TRT (seed: 28%, 34%, 31%, 39%).
func (t *Txn) Summary(ours, seed experiment.Figures) []string {
	var out []string
	for _, src := range []struct {
		name string
		f    experiment.Figures
	}{{"seed ", seed}, {"synod", ours}} {
		var parts []string
		for _, n := range t.Sizes {
			opt, ok := src.f.Get(experiment.NewCell("operation", "optimized", "requests", strconv.Itoa(n)).Key, mTRT)
			for _, base := range []string{"read/write", "write-only"} {
				b, okb := src.f.Get(experiment.NewCell("operation", base, "requests", strconv.Itoa(n)).Key, mTRT)
				if ok && okb && b > 0 {
					parts = append(parts, fmt.Sprintf("%d-req vs %s -%.0f%%", n, base, (1-opt/b)*100))
				}
			}
		}
		if len(parts) > 0 {
			out = append(out, src.name+": T-Paxos reduces TRT: "+strings.Join(parts, ", ")+" (seed: 28% to 39%)")
		}
	}
	return out
}
