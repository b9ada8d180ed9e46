package seed002pb

import (
	"context"
	"errors"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// Failover is the experiment "seed002-pb-failover": Table III.4 of the Grid Services thesis
// and issue 10's live kill -9. A three-node pb cluster serves c clients
// writing and reading in closed loops through the fail-over client stub;
// the primary is killed with SIGKILL; each client is notified of the new
// primary and resubmits its outstanding request there. Per repetition it
// measures the time from the kill to the first and to the last client
// notified, and to the first acknowledged write after the kill; the history
// of every repetition (with a final read of every key) is checked for
// linearizability, so an acknowledged write that the fail-over lost fails
// the cell.
type Failover struct {
	Clients    []int
	Reps       int
	Nodes      int
	Durability string
	Params     []string
}

// NewFailover returns the experiment with the seed's parameters.
func NewFailover() *Failover {
	return &Failover{Clients: []int{1, 2, 4, 8, 16}, Reps: 20, Nodes: 3, Durability: config.Memory}
}

func (f *Failover) Name() string { return "seed002-pb-failover" }

func (f *Failover) Description() string {
	return "Primary-backup fail-over, live (seed 002, Table III.4): a pb cluster with 1..16 clients using the fail-over " +
		"client stub; kill -9 of the primary under load; time from the kill to the first and last client notified and " +
		"to the first acknowledged write, median/mean/sd over repetitions; every history checked for linearizability."
}

func (f *Failover) Flags(fs *pflag.FlagSet) {
	fs.IntSliceVar(&f.Clients, "clients", f.Clients, "numbers of clients (the seed: 1, 2, 4, 8, 16)")
	fs.IntVar(&f.Reps, "reps", f.Reps, "kills per cell (the seed: 20 round trips per cell); --quick uses 3")
	fs.IntVar(&f.Nodes, "nodes", f.Nodes, "pb replicas (the primary, the senior backup and others)")
	fs.StringVar(&f.Durability, "durability", f.Durability, "cluster durability: memory (the seed's) or fsync")
	fs.StringArrayVar(&f.Params, "param", nil, "pb parameter key=value, e.g. rate_checking=50ms (repeatable)")
}

func (f *Failover) reps(o experiment.Options) int {
	if o.Quick && f.Reps > 3 {
		return 3
	}
	return f.Reps
}

func (f *Failover) params() (map[string]string, error) {
	out := map[string]string{}
	for _, p := range f.Params {
		k, v, ok := strings.Cut(p, "=")
		if !ok || k == "" {
			return nil, fmt.Errorf("--param %q: want key=value", p)
		}
		out[k] = v
	}
	return out, nil
}

func (f *Failover) Cells(o experiment.Options) ([]experiment.Cell, error) {
	if err := experiment.CheckDurability(f.Durability); err != nil {
		return nil, err
	}
	if f.Reps < 1 || f.Nodes < 2 {
		return nil, fmt.Errorf("--reps must be positive and --nodes at least 2")
	}
	if _, err := f.params(); err != nil {
		return nil, err
	}
	var cells []experiment.Cell
	for _, c := range f.Clients {
		if c < 1 || c > 256 {
			return nil, fmt.Errorf("--clients: %d is not between 1 and 256", c)
		}
		cells = append(cells, experiment.NewCell("clients", strconv.Itoa(c)))
	}
	return cells, nil
}

// Metrics of the fail-over experiment.
const (
	mNotifyFirst = "notify_first_ms" // kill -> first client notified (median over reps)
	mNotifyAll   = "notify_all_ms"   // kill -> last client notified: the seed's fail-over duration
	mNotifyMean  = "notify_all_mean_ms"
	mNotifySD    = "notify_all_sd_ms"
	mSpread      = "notify_spread_ms" // last - first notified: the part that grows with clients in the seed
	mFirstAck    = "first_ack_ms"     // kill -> first write acknowledged after the first notification
	mNonLin      = "nonlinearizable"  // repetitions whose history is not linearizable
	mRepUnknown  = "undecided"
)

func (f *Failover) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	if _, err := automaton.Lookup("pb"); err != nil {
		return experiment.Outcome{}, experiment.Unavailable("protocol \"pb\" not available in this binary (registered: %s)", strings.Join(automaton.Names(), ", "))
	}
	nc, _ := strconv.Atoi(c.Get("clients"))
	params, _ := f.params()
	var first, all, spread, ack []time.Duration
	bad, undecided := 0, 0
	var replay []string
	for rep := 0; rep < f.reps(env.Options); rep++ {
		r, err := f.once(ctx, env, nc, params, rep)
		if err != nil {
			return experiment.Outcome{}, fmt.Errorf("repetition %d: %w", rep+1, err)
		}
		first, all, ack = append(first, r.first), append(all, r.all), append(ack, r.ack)
		spread = append(spread, r.all-r.first)
		switch r.verdict {
		case check.Illegal:
			bad++
			replay = append(replay, fmt.Sprintf("rep %d: %s", rep+1, r.detail))
		case check.Unknown:
			undecided++
		}
		env.Logf("rep %d: first notified %v, all %v, first ack %v, %s", rep+1, r.first, r.all, r.ack, r.verdict)
	}
	sAll := summarize(all)
	out := experiment.Outcome{
		Metrics: map[string]float64{
			mNotifyFirst: summarize(first).median, mNotifyAll: sAll.median, mNotifyMean: sAll.mean, mNotifySD: sAll.sd,
			mSpread: summarize(spread).median, mFirstAck: summarize(ack).median,
			mNonLin: float64(bad), mRepUnknown: float64(undecided),
		},
		Labels: map[string]string{"durability": f.Durability, "reps": strconv.Itoa(len(all))},
		// Every kill's figures: the claims' samples.
		Samples: map[string][]float64{mSpread: msOf(spread), mNotifyAll: msOf(all)},
	}
	if bad > 0 {
		out.Labels["violations"] = strings.Join(replay, "; ")
		return out, fmt.Errorf("%d repetitions produced non-linearizable histories: %s", bad, strings.Join(replay, "; "))
	}
	return out, nil
}

type failoverRun struct {
	first, all, ack time.Duration
	verdict         string
	detail          string
}

// once runs one repetition: a fresh cluster, nc clients, one kill.
func (f *Failover) once(ctx context.Context, env *experiment.Env, nc int, params map[string]string, rep int) (failoverRun, error) {
	var out failoverRun
	cl, err := env.Up(fmt.Sprintf("pb-failover-c%d", nc), cluster.UpOptions{Nodes: f.Nodes, Protocol: "pb", Durability: f.Durability, Params: params})
	if err != nil {
		return out, err
	}
	defer env.Down(cl)
	var grpcAddrs []string
	for _, n := range cl.Nodes {
		grpcAddrs = append(grpcAddrs, n.GRPC)
	}
	primary, err := experiment.WaitLeader(ctx, cl, 10*time.Second)
	if err != nil {
		return out, err
	}
	t0 := time.Now()
	rec := history.NewRecorder(func() int64 { return int64(time.Since(t0)) })
	var (
		mu       sync.Mutex
		killAt   time.Time
		notified = make([]time.Time, nc)
		acks     []time.Time
	)
	wctx, stop := context.WithCancel(ctx)
	defer stop()
	var wg sync.WaitGroup
	errc := make(chan error, nc)
	for i := 0; i < nc; i++ {
		i := i
		opts := client.Options{Timeout: 5 * time.Second}
		onNotify(&opts, func(at time.Time) {
			mu.Lock()
			if !killAt.IsZero() && notified[i].IsZero() && at.After(killAt) {
				notified[i] = at
			}
			mu.Unlock()
		})
		c, err := client.NewGRPC(grpcAddrs, opts)
		if err != nil {
			return out, err
		}
		defer c.Close()
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewSource(int64(rep*1000 + i)))
			for n := 0; wctx.Err() == nil; n++ {
				key := "k" + strconv.Itoa(rng.Intn(4))
				if rng.Intn(2) == 0 {
					p := rec.Invoke(i, "", service.Op{Kind: "get", Key: key}, "")
					v, found, err := c.Get(wctx, key)
					switch {
					case err != nil:
						p.Unknown() // a read has no effect: unknown is harmless
					case found:
						p.Complete(service.Bytes(v))
					default:
						p.Complete(service.Nil())
					}
					continue
				}
				val := []byte(fmt.Sprintf("c%d-%d", i, n))
				op := service.Op{Kind: "set", Key: key, Args: [][]byte{val}}
				p := rec.Invoke(i, "", op, "")
				if err := c.Set(wctx, key, val); err != nil {
					p.Unknown()
					if wctx.Err() == nil && !errors.Is(err, client.ErrUnknownOutcome) {
						time.Sleep(5 * time.Millisecond)
					}
					continue
				}
				p.Complete(service.OK())
				mu.Lock()
				if !killAt.IsZero() {
					acks = append(acks, time.Now())
				}
				mu.Unlock()
			}
		}()
	}
	select {
	case <-time.After(300 * time.Millisecond): // load before the kill
	case <-ctx.Done():
		return out, ctx.Err()
	}
	mu.Lock()
	killAt = time.Now()
	mu.Unlock()
	if err := env.Kill(cl, primary); err != nil {
		return out, fmt.Errorf("kill -9 %s: %w", primary, err)
	}
	// Run until every client was notified and writes flow again, or 10 s.
	deadline := time.Now().Add(10 * time.Second)
	for time.Now().Before(deadline) {
		mu.Lock()
		done := true
		var last time.Time
		for _, t := range notified {
			done = done && !t.IsZero()
			if t.After(last) {
				last = t
			}
		}
		done = done && len(acks) > 0 && acks[len(acks)-1].After(last)
		mu.Unlock()
		if done {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	time.Sleep(200 * time.Millisecond)
	stop()
	wg.Wait()
	close(errc)
	mu.Lock()
	defer mu.Unlock()
	for i, t := range notified {
		if t.IsZero() {
			return out, fmt.Errorf("client %d of %d was not notified of the fail-over within 10 s", i+1, nc)
		}
		d := t.Sub(killAt)
		if out.first == 0 || d < out.first {
			out.first = d
		}
		if d > out.all {
			out.all = d
		}
	}
	// The first write acknowledged by the new primary: answers already on
	// their way from the old one when it died do not count.
	out.ack = -1
	for _, t := range acks {
		if d := t.Sub(killAt); d >= out.first {
			out.ack = d
			break
		}
	}
	if out.ack < 0 {
		return out, fmt.Errorf("no write was acknowledged after the fail-over within 10 s of the kill")
	}
	// A final read of every key at a survivor closes the history: a lost
	// acknowledged write shows up as a read the checker cannot explain.
	var survivors []string
	for _, n := range cl.Nodes {
		if n.ID != primary {
			survivors = append(survivors, n.GRPC)
		}
	}
	fc, err := client.NewGRPC(survivors, client.Options{Timeout: 5 * time.Second})
	if err != nil {
		return out, err
	}
	defer fc.Close()
	for k := 0; k < 4; k++ {
		key := "k" + strconv.Itoa(k)
		p := rec.Invoke(nc, "", service.Op{Kind: "get", Key: key}, "")
		v, found, err := fc.Get(ctx, key)
		switch {
		case err != nil:
			p.Unknown()
		case found:
			p.Complete(service.Bytes(v))
		default:
			p.Complete(service.Nil())
		}
	}
	rpt, err := check.Linearizable(rec.History(), check.Options{Timeout: 30 * time.Second})
	if err != nil {
		return out, err
	}
	out.verdict = rpt.Result
	if rpt.Result == check.Illegal {
		out.detail = rpt.String()
	}
	return out, nil
}

func (f *Failover) Seed() experiment.SeedFigures {
	figs := experiment.Figures{}
	for n, v := range tableIII4 {
		k := experiment.NewCell("clients", strconv.Itoa(n)).Key
		figs.Set(k, mNotifyAll, v[0])
		figs.Set(k, mNotifyMean, v[1])
		figs.Set(k, mNotifySD, v[2])
	}
	return experiment.SeedFigures{
		Source: "seed 002, Table III.4: time for the new primary to notify the clients (failure detection excluded), " +
			"GT3 notifications, one notification per client in turn",
		Values: figs,
	}
}

func (f *Failover) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mNotifyFirst, Header: "first notified ms", Format: "%.1f"},
			{Metric: mNotifyAll, Header: "all notified med", Format: "%.1f"},
			{Metric: mNotifyMean, Header: "mean", Format: "%.1f"},
			{Metric: mNotifySD, Header: "sd", Format: "%.1f"},
			{Metric: mSpread, Header: "spread ms", Format: "%.1f"},
			{Metric: mFirstAck, Header: "first ack ms", Format: "%.1f"},
			{Metric: mNonLin, Header: "non-lin.", Format: "%.0f"},
		},
		Labels: []string{"durability", "reps"},
		Plots: []experiment.PlotSpec{
			{File: "failover", Title: "Fail-over: kill -9 to every client notified (Table III.4)", Kind: experiment.Lines,
				Metric: mNotifyAll, YLabel: "median ms", X: "clients", XLabel: "clients"},
		},
		Notes: []string{
			"Ours includes failure detection (rate_checking after the last heartbeat); the seed's excludes it and measures",
			"only the notification. spread = last notified - first notified is the part that depends on the number of clients.",
		},
	}
}

// Reps: a cell repeats its kill --reps times itself (the claims' samples);
// it runs once.
func (f *Failover) CellReps(experiment.Cell, experiment.Options) int { return 1 }

// Claims: "fail-over grows linearly with the number of clients" (Table
// III.4), judged on the spread of the notifications over every kill.
func (f *Failover) Claims(d experiment.Data) []experiment.Claim {
	var xs []float64
	var ys []experiment.Sample
	for _, n := range f.Clients {
		if s := d.Sample(experiment.NewCell("clients", strconv.Itoa(n)).Key, mSpread); s != nil {
			xs, ys = append(xs, float64(n)), append(ys, s)
		}
	}
	text := "Table III.4: the fail-over time grows with the number of clients (last - first client notified, per extra client)"
	if len(xs) < 2 {
		return []experiment.Claim{{Text: text, Paper: "grows linearly", Judgement: experiment.Judgement{Verdict: experiment.NotMeasured, Ours: "-", Stats: "fewer than two client counts ran"}, Cause: "no series"}}
	}
	cl := experiment.Claim{Text: text, Paper: "grows linearly (one GT3 notification after another)", Judgement: experiment.SlopeAbove("notification spread ms per client", xs, ys, 0)}
	if cl.Verdict != experiment.Holds {
		cl.Cause = "Synod's new primary pushes the change on every client's open WatchLeader stream at once, so only the spread of those pushes depends on the number of clients; the seed notified its clients one GT3 notification after another"
	}
	return []experiment.Claim{cl}
}

// Summary answers "fail-over grows linearly with the number of clients".
func (f *Failover) Summary(ours, seed experiment.Figures) []string {
	var out []string
	for _, src := range []struct {
		name, metric string
		f            experiment.Figures
	}{{"seed ", mNotifyAll, seed}, {"synod", mSpread, ours}} {
		var xs, ys []float64
		for _, n := range f.Clients {
			if v, ok := src.f.Get(experiment.NewCell("clients", strconv.Itoa(n)).Key, src.metric); ok {
				xs, ys = append(xs, float64(n)), append(ys, v)
			}
		}
		if len(xs) < 2 {
			continue
		}
		slope := (ys[len(ys)-1] - ys[0]) / (xs[len(xs)-1] - xs[0])
		out = append(out, fmt.Sprintf("%s: %s grows by %.2f ms per extra client (%.1f ms at %g clients, %.1f ms at %g)",
			src.name, src.metric, slope, ys[0], xs[0], ys[len(ys)-1], xs[len(xs)-1]))
	}
	out = append(out, "The seed's new primary notified its clients one GT3 notification after another, so the duration grew with",
		"the clients; Synod's nodes push the change on every client's open WatchLeader stream at once, so only the",
		"spread of those pushes depends on the number of clients.")
	return out
}
