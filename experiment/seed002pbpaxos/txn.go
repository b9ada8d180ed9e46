package seed002pbpaxos

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/service"
)

// Txn is the experiment "seed002-pbpaxos-txn": Table VI.1, transaction
// response time of 3- and 5-request transactions without T-Paxos
// (read/write, write-only) and with it (optimized).
type Txn struct {
	Sizes      []int
	Samples    int
	Durability string
}

func NewTxn() *Txn { return &Txn{Sizes: []int{3, 5}, Samples: 200, Durability: config.Memory} }

func (t *Txn) Name() string { return "seed002-pbpaxos-txn" }

func (t *Txn) Description() string {
	return "T-Paxos transactions (seed 002, Table VI.1): response time of 3- and 5-request transactions coordinated " +
		"request by request (read/write: X-Paxos reads, basic writes and commit; write-only) against T-Paxos " +
		"(optimized: the leader answers each request at once and coordinates only the commit), on pbpaxos, " +
		"mean with 99% confidence interval."
}

func (t *Txn) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&t.Sizes, "sizes", t.Sizes, "requests per transaction (the seed: 3 and 5)")
	fs.IntVar(&t.Samples, "samples", t.Samples, "transactions per cell; --quick uses 20")
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
	var cells []experiment.Cell
	for _, m := range txnModes {
		for _, n := range t.Sizes {
			if n < 1 || n > 100 {
				return nil, fmt.Errorf("--sizes: %d is not between 1 and 100", n)
			}
			cells = append(cells, experiment.NewCell("operation", m, "requests", strconv.Itoa(n)))
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

func (t *Txn) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	mode := c.Get("operation")
	n, _ := strconv.Atoi(c.Get("requests"))
	k, _ := kindNamed("write")
	nodes, err := liveNodes(ctx, env, k, t.Durability)
	if err != nil {
		return experiment.Outcome{}, err
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
	aborted := 0
	for s := -3; s < samples; s++ { // three unmeasured transactions warm the path
		ops := txnOps(mode, n, keys, "t"+strconv.Itoa(s))
		t0 := time.Now()
		err := runTxn(ctx, cl, mode, ops)
		if errors.Is(err, client.ErrTxnAborted) {
			aborted++
			continue
		}
		if err != nil {
			return experiment.Outcome{}, fmt.Errorf("%s transaction: %w", mode, err)
		}
		if s >= 0 {
			trts = append(trts, float64(time.Since(t0))/float64(time.Millisecond))
		}
	}
	mean, half := ci99(trts)
	return experiment.Outcome{
		Metrics: map[string]float64{mTRT: mean, mTRTCI: half, mAborted: float64(aborted)},
		Labels:  map[string]string{"durability": t.Durability},
		Samples: map[string][]float64{mTRT: trts},
	}, nil
}

// Reps: a cell times --samples transactions itself; it runs once.
func (t *Txn) Reps(experiment.Options) int { return 1 }

// Claims judges Table VI.1 on every transaction's response time, and says
// that the seed's T-Paxos throughput gains are not measured here.
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
				Judgement: experiment.RatioBelow("T-Paxos/"+base+" mean TRT", d.Sample(opt, mTRT), d.Sample(b, mTRT), 1)})
		}
	}
	out = append(out, experiment.Claim{Text: "§VI.C: T-Paxos raises transaction throughput (+42% to +138%)", Paper: "+42% to +138%",
		Judgement: experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "no throughput cell"},
		Cause:     "this experiment times one client's transactions (response time); a throughput run of concurrent transactions is not implemented"})
	return out
}

// runTxn runs one transaction. Without T-Paxos every request is an ordinary
// coordinated request and the commit is one more coordinated write (of a
// commit marker), as the seed's baseline; optimized runs Begin, the
// requests inside the transaction and Commit.
func runTxn(ctx context.Context, cl *client.GRPC, mode string, ops []service.Op) error {
	if mode != "optimized" {
		for _, op := range ops {
			res, _, err := cl.DoOp(ctx, "", op, client.OpOptions{Read: automaton.ReadDefault})
			if err != nil {
				return err
			}
			if res.IsErr() {
				return fmt.Errorf("%v: %s", op, res.Err)
			}
		}
		res, _, err := cl.DoOp(ctx, "", service.Op{Kind: "set", Key: "commit", Args: [][]byte{[]byte("1")}}, client.OpOptions{})
		if err == nil && res.IsErr() {
			err = fmt.Errorf("commit marker: %s", res.Err)
		}
		return err
	}
	tx, err := cl.Begin(ctx, "")
	if err != nil {
		return err
	}
	for _, op := range ops {
		if _, err := tx.Do(ctx, op); err != nil {
			tx.Abort(ctx)
			return err
		}
	}
	return tx.Commit(ctx)
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
			{Metric: mAborted, Header: "aborted", Format: "%.0f"},
		},
		Labels: []string{"durability"},
		Plots: []experiment.PlotSpec{{File: "trt", Title: "Transaction response time (Table VI.1)", Kind: experiment.Bars,
			Metric: mTRT, YLabel: "ms", X: "requests", XLabel: "requests per transaction", Series: []string{"operation"}}},
		Notes: []string{"optimized includes T-Paxos's Begin round trip (the seed folds it into the first request)."},
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
