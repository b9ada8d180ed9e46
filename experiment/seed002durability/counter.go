package seed002durability

import (
	"context"
	"fmt"
	"math"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/examples/counter"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/experiment"
)

// Counter is seed002-durability-counter (IV.D.1).
type Counter struct {
	adds      int
	full      bool
	clients   string
	databases string
}

func (e *Counter) Name() string { return "seed002-durability-counter" }

func (e *Counter) Description() string {
	return "seed 002 IV.D.1: the Counter service's add latency over sequential adds (one client) and throughput for 1-16 clients, original vs PB (replication proxy, backup acknowledges each buffer) vs DB (database proxy, one transaction per add) on SQLite and PostgreSQL, state fsync on and off"
}

func (e *Counter) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&e.adds, "adds", 2000, "adds per cell (the seed: 40,000; see --full)")
	fs.BoolVar(&e.full, "full", false, "the seed's 40,000 adds per cell")
	fs.StringVar(&e.clients, "clients", "1,2,4,8,12,16", "client counts")
	fs.StringVar(&e.databases, "databases", "sqlite,postgres", "databases for the DB configuration")
}

func (e *Counter) total(o experiment.Options) int {
	switch {
	case e.full:
		return 40000
	case o.Quick:
		return 100
	}
	return e.adds
}

// configs are the (config, db, fsync) triples a run measures.
func configs(databases string) [][3]string {
	out := [][3]string{{"original", "-", "-"}, {"pb", "-", "-"}}
	for _, d := range strings.Split(databases, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, [3]string{"db", d, "on"}, [3]string{"db", d, "off"})
		}
	}
	return out
}

func (e *Counter) Cells(o experiment.Options) ([]experiment.Cell, error) {
	cs := e.clients
	if o.Quick {
		cs = "1,4"
	}
	var cells []experiment.Cell
	for _, c := range strings.Split(cs, ",") {
		n, err := strconv.Atoi(strings.TrimSpace(c))
		if err != nil || n < 1 {
			return nil, fmt.Errorf("--clients: %q", c)
		}
		for _, k := range configs(e.databases) {
			cells = append(cells, experiment.NewCell("config", k[0], "db", k[1], "fsync", k[2], "clients", strconv.Itoa(n)))
		}
	}
	return cells, nil
}

// counterHandler serves "add" on the original service or a durable one.
// The last result reads the backup's value (PB only).
func counterHandler(cfg string) (func(string) (string, durability.Work, error), *durability.Set, *durability.Set, func() int64, error) {
	if cfg == "original" {
		s := counter.NewOriginalService()
		return func(string) (string, durability.Work, error) {
			return strconv.FormatInt(s.Add(), 10), durability.Work{}, nil
		}, nil, nil, nil, nil
	}
	b, err := counter.Mappings.ReadFile(cfg + ".yaml")
	if err != nil {
		return nil, nil, nil, nil, err
	}
	m, err := durability.ParseMapping(b)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	d, err := counter.NewDurableService(m)
	if err != nil {
		return nil, nil, nil, nil, err
	}
	var bset *durability.Set
	var bval func() int64
	if cfg == "pb" {
		b, _ := counter.NewDurableService(m)
		b.Set.SetRole(durability.Backup)
		bset, bval = b.Set, b.Service.Get
	}
	return func(string) (string, durability.Work, error) {
		v, w, err := d.Add()
		return strconv.FormatInt(v, 10), w, err
	}, d.Set, bset, bval, nil
}

const (
	mLatency  = "latency_ms"
	mCI       = "ci95_ms"
	mThrough  = "throughput"
	mRelative = "latency_vs_original"
)

func (e *Counter) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	clients, _ := strconv.Atoi(c.Get("clients"))
	handle, set, bset, _, err := counterHandler(c.Get("config"))
	if err != nil {
		return experiment.Outcome{}, err
	}
	var bk *backup
	if bset != nil {
		if bk, err = startBackup(bset); err != nil {
			return experiment.Outcome{}, err
		}
	}
	st, closeDB, err := openFor(env, c, set)
	if err != nil {
		return experiment.Outcome{}, err
	}
	defer closeDB()
	svc, err := startService(handle, st, bk)
	if err != nil {
		return experiment.Outcome{}, err
	}
	per := e.total(env.Options) / clients
	lat := make([][]float64, clients)
	var wg sync.WaitGroup
	errs := make(chan error, clients)
	start := time.Now()
	for i := 0; i < clients; i++ {
		cl, err := dial(svc)
		if err != nil {
			return experiment.Outcome{}, err
		}
		wg.Add(1)
		go func(i int, cl *client) {
			defer wg.Done()
			defer cl.c.Close()
			for k := 0; k < per && ctx.Err() == nil; k++ {
				t0 := time.Now()
				if _, err := cl.call("add"); err != nil {
					errs <- err
					return
				}
				lat[i] = append(lat[i], float64(time.Since(t0).Microseconds())/1000)
			}
		}(i, cl)
	}
	wg.Wait()
	el := time.Since(start)
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
	var all []float64
	for _, l := range lat {
		all = append(all, l...)
	}
	mean, ci := meanCI(all)
	return experiment.Outcome{
		Metrics: map[string]float64{mLatency: mean, mCI: ci, mThrough: float64(len(all)) / el.Seconds()},
		Labels:  map[string]string{"state fsync": c.Get("fsync"), "adds": strconv.Itoa(len(all))},
	}, nil
}

// openFor opens the cell's database and runs init when the configuration
// has database objects.
func openFor(env *experiment.Env, c experiment.Cell, set *durability.Set) (*sqlstore.Store, func(), error) {
	if set == nil || !set.Has(durability.Database) {
		return nil, func() {}, nil
	}
	dir, err := os.MkdirTemp(env.Work, "durability-")
	if err != nil {
		return nil, nil, err
	}
	st, closeDB, err := database(c.Get("db"), dir, c.Get("fsync") == "on")
	if err != nil {
		return nil, nil, experiment.Unavailable("%v", err)
	}
	if err := st.Run(context.Background(), set, set.Init()); err != nil {
		closeDB()
		return nil, nil, err
	}
	return st, func() { closeDB(); os.RemoveAll(dir) }, nil
}

func meanCI(xs []float64) (float64, float64) {
	if len(xs) == 0 {
		return 0, 0
	}
	var s, ss float64
	for _, x := range xs {
		s += x
	}
	m := s / float64(len(xs))
	for _, x := range xs {
		ss += (x - m) * (x - m)
	}
	if len(xs) < 2 {
		return m, 0
	}
	sd := math.Sqrt(ss / float64(len(xs)-1))
	return m, 1.96 * sd / math.Sqrt(float64(len(xs)))
}

func (e *Counter) Seed() experiment.SeedFigures {
	f := experiment.Figures{}
	for _, k := range configs(e.databases) {
		key := experiment.NewCell("config", k[0], "db", k[1], "fsync", k[2], "clients", "1").Key
		switch k[0] {
		case "original", "pb":
			f.Set(key, mLatency, 139) // PB: "essentially the same"
			f.Set(key, mCI, 0.3)
		case "db":
			f.Set(key, mLatency, 171)
			f.Set(key, mCI, 0.3)
		}
	}
	return experiment.SeedFigures{
		Source: "seed 002 IV.D.1 (GT4, MySQL 4.0 InnoDB, three Pentium III machines on 1 Gbit Ethernet; Fig. IV.3 throughput only as a plot)",
		Values: f,
		Notes: map[string]string{
			experiment.NewCell("config", "pb", "db", "-", "fsync", "-", "clients", "1").Key: "PB RTT essentially the same as the original",
		},
	}
}

// Derive adds each cell's latency relative to the original at the same
// client count (the seed: DB +23%).
func (e *Counter) Derive(figs experiment.Figures) {
	for key, m := range figs {
		c := parseKey(key)
		base := experiment.NewCell("config", "original", "db", "-", "fsync", "-", "clients", c["clients"]).Key
		if b, ok := figs.Get(base, mLatency); ok && b > 0 {
			if v, ok := m[mLatency]; ok {
				m[mRelative] = v / b
			}
		}
	}
}

func (e *Counter) Summary(ours, seed experiment.Figures) []string {
	get := func(cfg, db, fs string) (float64, bool) {
		return ours.Get(experiment.NewCell("config", cfg, "db", db, "fsync", fs, "clients", "1").Key, mLatency)
	}
	var out []string
	o, ok1 := get("original", "-", "-")
	p, ok2 := get("pb", "-", "-")
	if ok1 && ok2 {
		out = append(out, fmt.Sprintf("PB costs %+.0f%% against the original (seed: essentially the same): the backup round trip on loopback", 100*(p/o-1)))
	}
	for _, d := range strings.Split(e.databases, ",") {
		for _, fs := range []string{"on", "off"} {
			if v, ok := get("db", d, fs); ok && ok1 {
				out = append(out, fmt.Sprintf("DB on %s, state fsync %s: %+.0f%% against the original (seed: +23%%)", d, fs, 100*(v/o-1)))
			}
		}
	}
	return out
}

func (e *Counter) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mLatency, Header: "RTT ms", Format: "%.3f"},
			{Metric: mCI, Header: "±95%", Format: "%.3f"},
			{Metric: mRelative, Header: "vs original", Format: "%.2f"},
			{Metric: mThrough, Header: "adds/s", Format: "%.0f"},
		},
		Labels: []string{"state fsync", "adds"},
		Plots: []experiment.PlotSpec{
			{File: "counter-throughput", Title: "Counter throughput (Fig. IV.3)", Kind: experiment.Lines, Metric: mThrough,
				YLabel: "adds/s", X: "clients", XLabel: "clients", Series: []string{"config", "db", "fsync"}},
			{File: "counter-latency", Title: "Counter add latency, one client", Kind: experiment.Bars, Metric: mLatency,
				YLabel: "ms", X: "config", XLabel: "configuration", Series: []string{"db", "fsync"}, Filter: map[string]string{"clients": "1"}},
		},
		Notes: []string{
			"one process: clients, the service, the backup and SQLite on loopback TCP; PostgreSQL a private local server; the seed had three machines and a 2006 SOAP stack, so compare ratios, not milliseconds",
		},
	}
}

func parseKey(key string) map[string]string {
	m := map[string]string{}
	for _, kv := range strings.Split(key, ",") {
		if k, v, ok := strings.Cut(kv, "="); ok {
			m[k] = v
		}
	}
	return m
}
