package seed002durability

import (
	"context"
	"errors"
	"fmt"
	"math"
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
	databases string
	fsync     bool
	beds      string
	ran       []string // the intervals of the cells (Cells)
	pg        pgShare
}

func (e *Matchmaker) Name() string { return "seed002-durability-matchmaker" }

func (e *Matchmaker) Description() string {
	return "seed 002 IV.D.2: Matchmaker jobSubmit latency against the computation interval for the original service, PB (both objects replicated), PB+DB (MachineQueue replicated, AccountSet in the database: Figs. IV.4, IV.5) and DB (both in the database), on pbdurable clusters (service gridmatchmaker) with SQLite and PostgreSQL"
}

func (e *Matchmaker) Flags(fs *pflag.FlagSet) {
	fs.IntVar(&e.rounds, "rounds", 30, "rounds per client (the seed: 30)")
	fs.StringVar(&e.intervals, "intervals", "0-20ms,0-100ms,0-400ms", "computation intervals (the seed: seconds; scaled down)")
	fs.StringVar(&e.databases, "databases", "sqlite,postgres", "databases for PB+DB and DB: sqlite, postgres")
	fs.BoolVar(&e.fsync, "fsync", true, "state fsync of the database")
	fs.StringVar(&e.beds, "bed", "live", "where it runs: live (pbdurable clusters of synod node processes) and/or process (the in-process bed)")
}

var mmConfigs = []string{"original", "pb", "pbdb", "db"}

// quickIntervals are the --quick run's computation intervals.
const quickIntervals = "0-5ms,0-20ms"

func mmCell(bed, cfg, db, interval string) experiment.Cell {
	return experiment.NewCell("bed", bed, "config", cfg, "db", db, "interval", interval)
}

// mmDatabases are the databases a configuration runs on: none for the
// original and PB, each of --databases for PB+DB and DB.
func (e *Matchmaker) mmDatabases(cfg string) []string {
	if cfg == "original" || cfg == "pb" {
		return []string{"-"}
	}
	var out []string
	for _, d := range strings.Split(e.databases, ",") {
		if d = strings.TrimSpace(d); d != "" {
			out = append(out, d)
		}
	}
	return out
}

func (e *Matchmaker) Cells(o experiment.Options) ([]experiment.Cell, error) {
	iv := e.intervals
	if o.Quick {
		iv = quickIntervals
	}
	bs, err := beds(e.beds)
	if err != nil {
		return nil, err
	}
	e.ran = nil
	var cells []experiment.Cell
	for _, i := range strings.Split(iv, ",") {
		i = strings.TrimSpace(i)
		if _, _, err := parseInterval(i); err != nil {
			return nil, err
		}
		e.ran = append(e.ran, i)
	}
	for _, b := range bs {
		for _, i := range e.ran {
			for _, cfg := range mmConfigs {
				for _, d := range e.mmDatabases(cfg) {
					cells = append(cells, mmCell(b, cfg, d, i))
				}
			}
		}
	}
	e.pg.expect(livePostgresCells(cells))
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

// mmLoad is the seed's load (IV.D.2): four clients, each `rounds` times
// submitting 1-5 jobs one after the other, then sleeping a random time
// from [lo, hi]. submit(i) sends client i's jobSubmit and reports whether
// a machine was found. It returns every jobSubmit's latency in ms.
func mmLoad(ctx context.Context, rounds int, lo, hi time.Duration, submit func(i int) (bool, error)) ([]float64, error) {
	var mu sync.Mutex
	var lat []float64
	var wg sync.WaitGroup
	errs := make([]error, mClients)
	for i := 0; i < mClients; i++ {
		rng := rand.New(rand.NewSource(int64(i + 1)))
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for r := 0; r < rounds && ctx.Err() == nil; r++ {
				for n := 1 + rng.Intn(5); n > 0; n-- {
					t0 := time.Now()
					ok, err := submit(i)
					if err == nil && !ok {
						err = fmt.Errorf("no machine left")
					}
					if err != nil {
						errs[i] = err
						return
					}
					mu.Lock()
					lat = append(lat, float64(time.Since(t0).Microseconds())/1000)
					mu.Unlock()
				}
				time.Sleep(lo + time.Duration(rng.Int63n(int64(hi-lo)+1)))
			}
		}(i)
	}
	wg.Wait()
	return lat, errors.Join(errs...)
}

// machinesNeeded is how many machines the advertising client offers
// first: enough for every jobSubmit (at most 5 per round and client).
func machinesNeeded(rounds int) int { return mClients * rounds * 5 }

func (e *Matchmaker) fsyncLabel() string {
	if e.fsync {
		return "on"
	}
	return "off"
}

func (e *Matchmaker) RunCell(ctx context.Context, env *experiment.Env, c experiment.Cell) (experiment.Outcome, error) {
	rounds := e.rounds
	if env.Quick {
		rounds = 5
	}
	lo, hi, _ := parseInterval(c.Get("interval"))
	var lat []float64
	var err error
	inNode, dbCommit := math.NaN(), math.NaN()
	if c.Get("bed") == bedLive {
		lat, inNode, dbCommit, err = runLiveMatchmaker(ctx, env, &e.pg, c, e.fsyncLabel(), rounds, lo, hi)
	} else {
		lat, err = e.runProcessMatchmaker(ctx, env, c, rounds, lo, hi)
	}
	if err != nil {
		return experiment.Outcome{}, err
	}
	mean, ci := meanCI(lat)
	labels := map[string]string{"requests": strconv.Itoa(len(lat)), "state fsync": "- (no database)"}
	if c.Get("db") != "-" {
		labels["state fsync"] = e.fsyncLabel()
	}
	labels["load"] = loadAvg()
	if c.Get("bed") == bedLive {
		labels["runs on"] = liveLabel(matchmaker.ServiceName, c.Get("config"))
	} else {
		labels["runs on"] = "one process (no runtime)"
	}
	met := map[string]float64{mLatency: mean, mCI: ci}
	if !math.IsNaN(inNode) {
		met[mInNode], met[mDBCommit], met[mOutside] = inNode, dbCommit, mean-inNode
	}
	return experiment.Outcome{Metrics: met, Labels: labels}, nil
}

// runProcessMatchmaker is one cell on the in-process bed (bed.go).
func (e *Matchmaker) runProcessMatchmaker(ctx context.Context, env *experiment.Env, c experiment.Cell, rounds int, lo, hi time.Duration) ([]float64, error) {
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
			return nil, err
		}
		m, err := durability.ParseMapping(b)
		if err != nil {
			return nil, err
		}
		d, err := matchmaker.NewDurableService(m)
		if err != nil {
			return nil, err
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
			return nil, err
		}
	}
	dbc := experiment.NewCell("db", c.Get("db"), "fsync", e.fsyncLabel())
	st, closeDB, err := openFor(env, dbc, set)
	if err != nil {
		return nil, err
	}
	defer closeDB()
	svc, err := startService(handle, st, bk)
	if err != nil {
		return nil, err
	}
	adv, err := dial(svc)
	if err != nil {
		return nil, err
	}
	for i := 0; i < machinesNeeded(rounds); i++ {
		if _, err := adv.call(fmt.Sprintf("advertise m%d 2000 1024", i)); err != nil {
			return nil, err
		}
	}
	adv.c.Close()
	cls := make([]*client, mClients)
	for i := range cls {
		if cls[i], err = dial(svc); err != nil {
			return nil, err
		}
		defer cls[i].c.Close()
	}
	lat, err := mmLoad(ctx, rounds, lo, hi, func(i int) (bool, error) {
		ans, err := cls[i].call(fmt.Sprintf("submit c%d 1000 512", i))
		return ans != "none", err
	})
	if err != nil {
		return nil, err
	}
	if err := svc.close(); err != nil {
		return nil, err
	}
	if bk != nil {
		if err := bk.close(); err != nil {
			return nil, err
		}
	}
	return lat, nil
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
	notes := map[string]string{}
	bs, _ := beds(e.beds)
	for _, b := range bs {
		for _, iv := range e.ran {
			for _, cfg := range mmConfigs {
				for _, d := range e.mmDatabases(cfg) {
					notes[mmCell(b, cfg, d, iv).Key] = map[string]string{
						"original": "the lowest; latency falls as the computation interval grows",
						"pb":       "closest to the original; about 60 ms below DB",
						"pbdb":     "between PB and DB",
						"db":       "highest; about 60 ms above PB",
					}[cfg]
				}
			}
		}
	}
	return experiment.SeedFigures{Source: "seed 002 IV.D.2, Fig. IV.6 (values only as a plot; intervals in seconds)", Notes: notes}
}

// Summary states, per bed, database and interval, whether the seed's
// ordering holds, the DB-PB gap beside the seed's 60 ms, and per
// configuration whether latency falls as the interval grows.
func (e *Matchmaker) Summary(ours, _ experiment.Figures) []string {
	var out []string
	bs, _ := beds(e.beds)
	for _, b := range bs {
		for _, db := range e.mmDatabases("db") {
			get := func(cfg, iv string) (float64, bool) {
				d := db
				if cfg == "original" || cfg == "pb" {
					d = "-"
				}
				return ours.Get(mmCell(b, cfg, d, iv).Key, mLatency)
			}
			for _, iv := range e.ran {
				o, ok1 := get("original", iv)
				p, ok2 := get("pb", iv)
				pd, ok3 := get("pbdb", iv)
				d, ok4 := get("db", iv)
				if !(ok1 && ok2 && ok3 && ok4) {
					continue
				}
				out = append(out, fmt.Sprintf("%s, %s, state fsync %s, interval %s: original %.2f, PB %.2f, PB+DB %.2f, DB %.2f ms; DB-PB %.2f ms (seed ~60 ms on 2006 hardware); PB closest to the original %s; PB < PB+DB < DB %s",
					b, db, e.fsyncLabel(), iv, o, p, pd, d, d-p, holds(p <= pd && p <= d), holds(p < pd && pd < d)))
			}
		}
		if len(e.ran) < 2 {
			continue
		}
		first, last := e.ran[0], e.ran[len(e.ran)-1]
		for _, cfg := range mmConfigs {
			for _, d := range e.mmDatabases(cfg) {
				a, ok1 := ours.Get(mmCell(b, cfg, d, first).Key, mLatency)
				z, ok2 := ours.Get(mmCell(b, cfg, d, last).Key, mLatency)
				if ok1 && ok2 {
					out = append(out, fmt.Sprintf("%s: %s: latency %.2f ms at %s, %.2f ms at %s: seed \"falls as the interval grows\" %s",
						b, strings.Join(nonDash([]string{cfg, d}), " on "), a, first, z, last, holds(z < a)))
				}
			}
		}
	}
	return out
}

func (e *Matchmaker) Report() experiment.ReportSpec {
	return experiment.ReportSpec{
		Columns: []experiment.Column{
			{Metric: mLatency, Header: "jobSubmit ms", Format: "%.3f"},
			{Metric: mCI, Header: "±95%", Format: "%.3f"},
			{Metric: mInNode, Header: "in nodes", Format: "%.3f"},
			{Metric: mDBCommit, Header: "of which db", Format: "%.3f"},
			{Metric: mOutside, Header: "outside", Format: "%.3f"},
		},
		Labels: []string{"state fsync", "requests", "load"},
		Plots: []experiment.PlotSpec{
			{File: "matchmaker-latency", Title: "Matchmaker latency vs computation interval (Fig. IV.6)", Kind: experiment.Lines,
				Metric: mLatency, YLabel: "ms", X: "interval", XLabel: "computation interval", Series: []string{"bed", "config", "db"}},
		},
		Notes: []string{
			"intervals scaled from the seed's seconds to milliseconds",
			"load: the machine's one-minute load average at the end of the cell (the machine is shared; a high load makes the figures noise)",
			"in nodes: mean time per client request inside the nodes (request submitted to response released, the nodes' synod_request_duration_seconds); of which db: the database transactions (pbdurable's durability.sql effects, timed by the node around its executor: synod_effect_duration_seconds) per request; outside: client, RESP, loopback",
			"bed=live: pbdurable clusters (service gridmatchmaker) of synod node processes on loopback (3 nodes; original: 1 node, mapping original: both objects kept nowhere), node records in memory, rate_checking 1s (no failures injected), the database shared by every node (one SQLite file, or a fresh database on a private PostgreSQL 15); clients send to the primary",
			"bed=process: the in-process bed (one process on loopback TCP, SQLite or a private PostgreSQL)",
		},
	}
}
