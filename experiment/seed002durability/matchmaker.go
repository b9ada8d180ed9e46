package seed002durability

import (
	"context"
	"fmt"
	"math/rand"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/matchmaker"
	"github.com/synod-dev/synod/experiment"
)

// Matchmaker is seed002-durability-matchmaker (IV.D.2): four clients each
// repeat `rounds` times: submit 1-5 jobs (one machine each), then sleep a
// random time from the computation interval; the figure is the mean
// jobSubmit latency per configuration and interval.
type Matchmaker struct {
	rounds    int
	intervals string
	db        string
	fsync     bool
}

func (e *Matchmaker) Name() string { return "seed002-durability-matchmaker" }

func (e *Matchmaker) Description() string {
	return "seed 002 IV.D.2: Matchmaker jobSubmit latency against the computation interval for the original service, PB (both objects replicated), PB+DB (MachineQueue replicated, AccountSet in the database: Figs. IV.4, IV.5) and DB (both in the database)"
}

func (e *Matchmaker) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&e.rounds, "rounds", 30, "rounds per client (the seed: 30)")
	fs.StringVar(&e.intervals, "intervals", "0-20ms,0-100ms,0-400ms", "computation intervals (the seed: seconds; scaled down)")
	fs.StringVar(&e.db, "db", "sqlite", "database: sqlite or postgres")
	fs.BoolVar(&e.fsync, "fsync", true, "state fsync of the database")
}

var mmConfigs = []string{"original", "pb", "pbdb", "db"}

func (e *Matchmaker) Cells(o experiment.Options) ([]experiment.Cell, error) {
	iv := e.intervals
	if o.Quick {
		iv = "0-5ms,0-20ms"
	}
	var cells []experiment.Cell
	for _, i := range strings.Split(iv, ",") {
		if _, _, err := parseInterval(i); err != nil {
			return nil, err
		}
		for _, cfg := range mmConfigs {
			cells = append(cells, experiment.NewCell("config", cfg, "interval", strings.TrimSpace(i)))
		}
	}
	return cells, nil
}

func parseInterval(s string) (time.Duration, time.Duration, error) {
	a, b, ok := strings.Cut(strings.TrimSpace(s), "-")
	if !ok {
		return 0, 0, fmt.Errorf("interval %q: want lo-hi, e.g. 0-100ms", s)
	}
	if !strings.ContainsAny(a, "smh") {
		a += "ms"
	}
	lo, err1 := time.ParseDuration(a)
	hi, err2 := time.ParseDuration(b)
	if err1 != nil || err2 != nil || hi < lo {
		return 0, 0, fmt.Errorf("interval %q: want lo-hi, e.g. 0-100ms", s)
	}
	return lo, hi, nil
}

const mClients = 4

func (e *Matchmaker) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	rounds := e.rounds
	if env.Quick {
		rounds = 5
	}
	lo, hi, _ := parseInterval(c.Get("interval"))
	cfg := c.Get("config")
	var handle func(string) (string, durability.Work, error)
	var set, bset *durability.Set
	if cfg == "original" {
		s := matchmaker.NewOriginalService()
		handle = func(l string) (string, durability.Work, error) {
			return mmDo(l, s.MachineAdvertise, s.JobSubmit), durability.Work{}, nil
		}
	} else {
		b, err := matchmaker.Mappings.ReadFile(cfg + ".yaml")
		if err != nil {
			return experiment.Outcome{}, err
		}
		m, err := durability.ParseMapping(b)
		if err != nil {
			return experiment.Outcome{}, err
		}
		d, err := matchmaker.NewDurableService(m)
		if err != nil {
			return experiment.Outcome{}, err
		}
		set = d.Set
		if set.Has(durability.Replicated) {
			b, _ := matchmaker.NewDurableService(m)
			b.Set.SetRole(durability.Backup)
			bset = b.Set
		}
		handle = func(l string) (string, durability.Work, error) {
			var w durability.Work
			var err error
			ans := mmDo(l, func(n string, cpu, mem int64) { w, err = d.MachineAdvertise(n, cpu, mem) },
				func(cl string, cpu, mem int64) (string, bool) {
					var m string
					var ok bool
					m, ok, w, err = d.JobSubmit(cl, cpu, mem)
					return m, ok
				})
			return ans, w, err
		}
	}
	var bk *backup
	var err error
	if bset != nil {
		if bk, err = startBackup(bset); err != nil {
			return experiment.Outcome{}, err
		}
	}
	fs := "off"
	if e.fsync {
		fs = "on"
	}
	dbc := experiment.NewCell("db", e.db, "fsync", fs)
	st, closeDB, err := openFor(env, dbc, set)
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer closeDB()
	svc, err := startService(handle, st, bk)
	if err != nil {
		return experiment.Outcome{}, err
	}
	// One client first advertises enough machines for every jobSubmit.
	adv, err := dial(svc)
	if err != nil {
		return experiment.Outcome{}, err
	}
	for i := 0; i < mClients*rounds*5; i++ {
		if _, err := adv.call(fmt.Sprintf("advertise m%d 2000 1024", i)); err != nil {
			return experiment.Outcome{}, err
		}
	}
	adv.c.Close()
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	errs := make(chan error, mClients)
	for i := 0; i < mClients; i++ {
		cl, err := dial(svc)
		if err != nil {
			return experiment.Outcome{}, err
		}
		rng := rand.New(rand.NewSource(int64(i + 1)))
		wg.Add(1)
		go func(i int, cl *client) {
			defer wg.Done()
			defer cl.c.Close()
			for r := 0; r < rounds && ctx.Err() == nil; r++ {
				for n := 1 + rng.Intn(5); n > 0; n-- {
					t0 := time.Now()
					ans, err := cl.call(fmt.Sprintf("submit c%d 1000 512", i))
					if err == nil && ans == "none" {
						err = fmt.Errorf("no machine left")
					}
					if err != nil {
						errs <- err
						return
					}
					mu.Lock()
					lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
					mu.Unlock()
				}
				time.Sleep(lo + time.Duration(rng.Int63n(int64(hi-lo)+1)))
			}
		}(i, cl)
	}
	wg.Wait()
	close(errs)
	if err := <-errs; err != nil {
		return experiment.Outcome{}, err
	}
	if err := svc.close(); err != nil {
		return experiment.Outcome{}, err
	}
	if bk != nil {
		if err := bk.close(); err != nil {
			return experiment.Outcome{}, err
		}
	}
	mean, ci := meanCI(lat)
	labels := map[string]string{"requests": strconv.Itoa(len(lat))}
	if set != nil && set.Has(durability.Database) {
		labels["db"], labels["state fsync"] = e.db, fs
	}
	return experiment.Outcome{Metrics: map[string]float64{mLatency: mean, mCI: ci}, Labels: labels}, nil
}

func mmDo(line string, adv func(string, int64, int64), sub func(string, int64, int64) (string, bool)) string {
	f := strings.Fields(line)
	if len(f) != 4 {
		return "ERR bad request"
	}
	switch f[0] {
	case "advertise":
		adv(f[1], atoi(f[2]), atoi(f[3]))
		return "OK"
	case "submit":
		if m, ok := sub(f[1], atoi(f[2]), atoi(f[3])); ok {
			return m
		}
		return "none"
	}
	return "ERR unknown request"
}

func (e *Matchmaker) Seed() experiment.SeedFigures {
	return experiment.SeedFigures{
		Source: "seed 002 IV.D.2, Fig. IV.6 (values only as a plot)",
		Notes: map[string]string{
			"config=pb":   "closest to the original; about 60 ms below DB",
			"config=pbdb": "between PB and DB",
			"config=db":   "highest; latency falls as the computation interval grows",
		},
	}
}

func (e *Matchmaker) Summary(ours, _ experiment.Figures) []string {
	var out []string
	for _, iv := range strings.Split(e.intervals, ",") {
		iv = strings.TrimSpace(iv)
		get := func(cfg string) float64 {
			v, _ := ours.Get(experiment.NewCell("config", cfg, "interval", iv).Key, mLatency)
			return v
		}
		o, p, pd, d := get("original"), get("pb"), get("pbdb"), get("db")
		if o == 0 || d == 0 {
			continue
		}
		out = append(out, fmt.Sprintf("interval %s: original %.2f, PB %.2f, PB+DB %.2f, DB %.2f ms; DB-PB %.2f ms (seed ~60); PB<=PB+DB<=DB holds: %v",
			iv, o, p, pd, d, d-p, p <= pd && pd <= d))
	}
	return out
}

func (e *Matchmaker) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mLatency, Header: "jobSubmit ms", Format: "%.3f"},
			{Metric: mCI, Header: "±95%", Format: "%.3f"},
		},
		Labels: []string{"db", "state fsync", "requests"},
		Plots: []experiment.PlotSpec{
			{File: "matchmaker-latency", Title: "Matchmaker latency vs computation interval (Fig. IV.6)", Kind: experiment.Lines,
				Metric: mLatency, YLabel: "ms", X: "interval", XLabel: "computation interval", Series: []string{"config"}},
		},
		Notes: []string{"intervals scaled from the seed's seconds to milliseconds; one process on loopback"},
	}
}
