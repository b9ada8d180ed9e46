package seed002pbpaxos

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
)

// Throughput is the experiment "seed002-pbpaxos-throughput": c concurrent
// clients each sending exactly 1000/c requests of one kind (seed 002, Fig
// VI.4), repeated for a confidence interval.
type Throughput struct {
	Kinds      []string
	Clients    []int
	Total      int
	Reps       int
	Durability string
}

func NewThroughput() *Throughput {
	return &Throughput{Kinds: []string{"original", "read", "write"}, Clients: []int{1, 2, 4, 8, 16}, Total: 1000, Reps: 10, Durability: config.Memory}
}

func (t *Throughput) Name() string { return "seed002-pbpaxos-throughput" }

func (t *Throughput) Description() string {
	return "PB-Paxos throughput (seed 002, Fig VI.4): 1, 2, 4, 8, 16 clients each sending 1000/c requests of one kind " +
		"(original, X-Paxos read, basic write; Multi-Paxos kinds on request), mean and 99% confidence interval over repetitions."
}

func (t *Throughput) Flags(fs *pflag.FlagSet) {
	fs.StringSliceVar(&t.Kinds, "kinds", t.Kinds, "request kinds: "+strings.Join(kindNames(), ", "))
	fs.IntSliceVar(&t.Clients, "clients", t.Clients, "numbers of concurrent clients (the seed: 1..16; Fig VI.5: 8..128)")
	fs.IntVar(&t.Total, "total", t.Total, "requests per repetition, shared by the clients (the seed: 1000)")
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
	var cells []experiment.Cell
	for _, k := range t.Kinds {
		if _, ok := kindNamed(k); !ok {
			return nil, fmt.Errorf("--kinds: unknown kind %q (known: %s)", k, strings.Join(kindNames(), ", "))
		}
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
	addrs, err := liveAddrs(ctx, env, k.protocol, k.nodes, t.Durability)
	if err != nil {
		return experiment.Outcome{}, err
	}
	reps := t.Reps
	if env.Quick && reps > 2 {
		reps = 2
	}
	var tputs []float64
	for rep := 0; rep < reps; rep++ {
		// One client connection per simulated client, as the seed's processes.
		clients := make([]*client.GRPC, nc)
		for i := range clients {
			if clients[i], err = newClient(addrs); err != nil {
				return experiment.Outcome{}, err
			}
		}
		per := t.Total / nc
		var wg sync.WaitGroup
		errs := make(chan error, nc)
		t0 := time.Now()
		for i, cl := range clients {
			wg.Add(1)
			go func(i int, cl *client.GRPC) {
				defer wg.Done()
				key := "c" + strconv.Itoa(i)
				for j := 0; j < per; j++ {
					if err := request(ctx, cl, k, key, []byte("v")); err != nil {
						errs <- err
						return
					}
				}
			}(i, cl)
		}
		wg.Wait()
		elapsed := time.Since(t0)
		for _, cl := range clients {
			cl.Close()
		}
		close(errs)
		if err := <-errs; err != nil {
			return experiment.Outcome{}, fmt.Errorf("%s request: %w", k.name, err)
		}
		tputs = append(tputs, float64(per*nc)/elapsed.Seconds())
	}
	mean, half := ci99(tputs)
	return experiment.Outcome{
		Metrics: map[string]float64{mTput: mean, mTputCI: half},
		Labels:  map[string]string{"durability": t.Durability, "protocol": k.protocol},
	}, nil
}

func (t *Throughput) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{
		Source: "seed 002, Fig VI.4 (Sysnet): plotted, not tabulated; the text states read throughput at least 13% above write throughput",
		Notes: map[string]string{
			experiment.NewCell("kind", "read", "clients", "1").Key: "read throughput >= 1.13 x write throughput at every client count",
		},
	}
}

func (t *Throughput) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mTput, Header: "req/s", Format: "%.0f"},
			{Metric: mTputCI, Header: "± 99% CI", Format: "%.0f"},
		},
		Labels: []string{"protocol", "durability"},
		Plots: []experiment.PlotSpec{{File: "throughput", Title: "Throughput (seed 002, Fig VI.4)", Kind: experiment.Lines,
			Metric: mTput, YLabel: "requests/s", X: "clients", XLabel: "clients", Series: []string{"kind"}}},
	}
}

// Summary: "read throughput at least 13% higher than write throughput".
func (t *Throughput) Summary(ours, _ experiment.Figures) []string {
	var out []string
	worst, have := 0.0, false
	for _, c := range t.Clients {
		rd, ok1 := ours.Get(experiment.NewCell("kind", "read", "clients", strconv.Itoa(c)).Key, mTput)
		wr, ok2 := ours.Get(experiment.NewCell("kind", "write", "clients", strconv.Itoa(c)).Key, mTput)
		if ok1 && ok2 && wr > 0 {
			g := rd/wr - 1
			if !have || g < worst {
				worst = g
			}
			have = true
		}
	}
	if have {
		verdict := "holds"
		if worst < 0.13 {
			verdict = "does not hold"
		}
		out = append(out, fmt.Sprintf("synod: read throughput at least %.0f%% above write throughput at every client count (seed: at least 13%%): %s", worst*100, verdict))
	}
	return out
}
