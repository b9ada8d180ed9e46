package experiment

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"time"
)

// ReportSpec describes an experiment's table and plots.
type ReportSpec struct {
	// Columns are the metrics shown, one column each, in order.
	Columns []Column
	// Labels are Outcome labels printed after the metrics on our rows
	// (e.g. "durability", so the mode stands beside every number).
	Labels []string
	// Plots to draw into the output directory.
	Plots []PlotSpec
	// Notes are printed under the table.
	Notes []string
}

// Column is one metric column of the table.
type Column struct {
	Metric string
	Header string
	// Format is a fmt verb for the value; default "%.2f".
	Format string
}

// Status of a cell in the results.
const (
	StatusOK          = "ok"
	StatusUnavailable = "unavailable"
	StatusFailed      = "failed"
	StatusNotRun      = "not run"
)

// CellResult is one cell's row in results.json.
type CellResult struct {
	Cell
	Status     string  `json:"status"`
	Reason     string  `json:"reason,omitempty"`
	ElapsedSec float64 `json:"elapsed_s"`
	Outcome
	// Reps is the number of runs the metrics are the mean of; Samples holds
	// every run's value (or the cell's own repetitions, Outcome.Samples).
	Reps    int                  `json:"reps,omitempty"`
	Samples map[string][]float64 `json:"samples,omitempty"`
	// Seed holds the seed's figures for this cell, SeedNote its statement.
	Seed     map[string]float64 `json:"seed,omitempty"`
	SeedNote string             `json:"seed_note,omitempty"`
}

// Results is what results.json holds.
type Results struct {
	Experiment  string    `json:"experiment"`
	Description string    `json:"description"`
	Started     time.Time `json:"started"`
	Finished    time.Time `json:"finished"`
	DurationSec float64   `json:"cell_duration_s,omitempty"`
	Quick       bool      `json:"quick"`
	Host        Host      `json:"host"`
	SeedSource  string    `json:"seed_source,omitempty"`
	Reps        int       `json:"reps"`
	// LoadAvg is /proc/loadavg when the run started and when it ended
	// (the machine is shared: live figures are read beside it).
	LoadAvg     [2]string    `json:"loadavg"`
	Cells       []CellResult `json:"cells"`
	Summary     []string     `json:"summary,omitempty"`
	Claims      []Claim      `json:"claims,omitempty"`
	Plots       []string     `json:"plots,omitempty"`
	Interrupted bool         `json:"interrupted"`
}

// Host describes the machine the figures come from.
type Host struct {
	OS        string `json:"os"`
	Arch      string `json:"arch"`
	CPUs      int    `json:"cpus"`
	GoVersion string `json:"go_version"`
	Hostname  string `json:"hostname,omitempty"`
}

// RunOptions configure Run.
type RunOptions struct {
	Options
	// Out is the output directory; default ./results/NAME-<timestamp>.
	Out string
	// Binary is the synod executable clusters run; default this executable.
	Binary string
	// Work is the scratch directory for cluster directories, removed at the
	// end; default a new temporary directory.
	Work string
	// Log receives progress lines (default: none); Stdout the table.
	Log    io.Writer
	Stdout io.Writer
}

// DefaultOut is the default output directory for an experiment started at t.
func DefaultOut(name string, t time.Time) string {
	return filepath.Join("results", name+"-"+t.Format("20060102-150405"))
}

// Run runs every cell of e in order, then prints the table beside the seed's
// figures, writes results.json and the plots into the output directory, and
// stops everything the cells started. A cell that fails is recorded and the run
// goes on; when ctx ends (Ctrl-C) the remaining cells are marked "not run".
// The error is non-nil when a cell failed, the run was interrupted, or the
// results could not be written; the Results are returned whenever they exist.
func Run(ctx context.Context, e Experiment, o RunOptions) (res *Results, err error) {
	cells, err := e.Cells(o.Options)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", e.Name(), err)
	}
	if len(cells) == 0 {
		return nil, fmt.Errorf("%s: no cells to run", e.Name())
	}
	seen := map[string]bool{}
	for _, c := range cells {
		if seen[c.Key] {
			return nil, fmt.Errorf("%s: duplicate cell %q", e.Name(), c.Key)
		}
		seen[c.Key] = true
	}
	start := time.Now()
	if o.Out == "" {
		o.Out = DefaultOut(e.Name(), start)
	}
	if err := os.MkdirAll(o.Out, 0o755); err != nil {
		return nil, err
	}
	if o.Stdout == nil {
		o.Stdout = io.Discard
	}
	work := o.Work
	if work == "" {
		if work, err = os.MkdirTemp("", "synod-experiment-"); err != nil {
			return nil, err
		}
	}
	env := newEnv(o.Options, o.Out, o.Binary, work, o.Log)
	defer func() {
		if cerr := env.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}()

	host, _ := os.Hostname()
	res = &Results{
		Experiment: e.Name(), Description: e.Description(), Started: start,
		DurationSec: o.Duration.Seconds(), Quick: o.Quick,
		Host: Host{OS: runtime.GOOS, Arch: runtime.GOARCH, CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), Hostname: host},
	}
	seed := e.Seed()
	res.SeedSource = seed.Source
	var failed []string
	reps := o.Reps
	if reps <= 0 {
		reps = DefaultReps
		if r, ok := e.(Repeater); ok {
			reps = r.Reps(o.Options)
		}
	}
	res.Reps = reps
	res.LoadAvg[0] = LoadAvg()
	var perRun []runsOf
	for i, c := range cells {
		cr := CellResult{Cell: c}
		if ctx.Err() != nil {
			cr.Status = StatusNotRun
			res.Cells = append(res.Cells, cr)
			continue
		}
		env.mu.Lock()
		env.cell = fmt.Sprintf("cell %d/%d %s", i+1, len(cells), c.Label())
		env.cellT0 = time.Now()
		env.mu.Unlock()
		env.Logf("start")
		t0 := time.Now()
		var runs []Outcome
		var rerr error
		reps := reps
		if cr, ok := e.(CellRepeater); ok && o.Reps <= 0 {
			reps = max(1, cr.CellReps(c, o.Options))
		}
		for rep := 0; rep < reps && rerr == nil && (rep == 0 || ctx.Err() == nil); rep++ {
			env.mu.Lock()
			env.Rep = rep
			if reps > 1 {
				env.cell = fmt.Sprintf("cell %d/%d run %d/%d %s", i+1, len(cells), rep+1, reps, c.Label())
			}
			env.mu.Unlock()
			var out Outcome
			out, rerr = runCell(ctx, e, env, c)
			if rerr == nil {
				runs = append(runs, out)
			} else {
				cr.Outcome = out
			}
		}
		cr.ElapsedSec = time.Since(t0).Seconds()
		if len(runs) > 0 && rerr == nil {
			cr.Outcome = runs[len(runs)-1]
			cr.Reps = len(runs)
			perRun = append(perRun, runsOf{c.Key, runs})
		}
		switch {
		case rerr == nil:
			cr.Status = StatusOK
			env.Logf("done in %.1fs", cr.ElapsedSec)
		case errors.Is(rerr, ErrUnavailable):
			cr.Status, cr.Reason = StatusUnavailable, rerr.Error()
			env.Logf("skipped: %s", rerr)
		case ctx.Err() != nil:
			cr.Status, cr.Reason = StatusNotRun, "interrupted: "+rerr.Error()
			env.Logf("interrupted")
		default:
			cr.Status, cr.Reason = StatusFailed, rerr.Error()
			failed = append(failed, c.Key)
			env.keepLogs(c.Key)
			env.Logf("FAILED: %v", rerr)
		}
		res.Cells = append(res.Cells, cr)
	}
	env.mu.Lock()
	env.cell = ""
	env.mu.Unlock()
	if cerr := env.cleanup(); cerr != nil {
		err = errors.Join(err, cerr)
	}
	res.Interrupted = ctx.Err() != nil
	res.Finished = time.Now()

	theirs := Figures{}
	for k, m := range seed.Values {
		for name, v := range m {
			theirs.Set(k, name, v)
		}
	}
	res.LoadAvg[1] = LoadAvg()
	deriver, _ := e.(Deriver)
	if deriver != nil {
		deriver.Derive(theirs)
	}
	perRunValues, samples := collectSamples(perRun, deriver)
	ours := Figures{}
	for k, m := range perRunValues {
		for name, s := range m {
			ours.Set(k, name, s.Mean())
		}
	}
	// JSON has no NaN or infinity: a metric that is not a finite number (a
	// ratio to a zero) is left out, and shows as "-".
	ours.dropNonFinite()
	theirs.dropNonFinite()
	for i := range res.Cells {
		cr := &res.Cells[i]
		if cr.Status == StatusOK {
			cr.Metrics = ours[cr.Key]
			cr.Samples = map[string][]float64{}
			for name, s := range samples[cr.Key] {
				if len(s) > 1 {
					cr.Samples[name] = s
				}
			}
		}
		cr.Seed = theirs[cr.Key]
		cr.SeedNote = seed.Notes[cr.Key]
	}
	if s, ok := e.(Summarizer); ok {
		res.Summary = s.Summary(ours, theirs)
	}
	if cl, ok := e.(Claimer); ok {
		res.Claims = cl.Claims(Data{Ours: ours, Seed: theirs, Samples: samples, Cells: res.Cells, Quick: o.Quick})
	}

	spec := e.Report()
	PrintTable(o.Stdout, res, spec)
	PrintClaims(o.Stdout, res.Claims)
	plots, perr := DrawPlots(o.Out, res, spec)
	res.Plots = plots
	if perr != nil {
		err = errors.Join(err, fmt.Errorf("plots: %w", perr))
	}
	if werr := res.WriteJSON(filepath.Join(o.Out, "results.json")); werr != nil {
		err = errors.Join(err, werr)
	}
	fmt.Fprintf(o.Stdout, "\nresults: %s\n", filepath.Join(o.Out, "results.json"))
	for _, p := range plots {
		fmt.Fprintf(o.Stdout, "plot:    %s\n", p)
	}
	if len(failed) > 0 {
		err = errors.Join(err, fmt.Errorf("%d cell(s) failed: %v (node logs in %s)", len(failed), failed, filepath.Join(o.Out, "logs")))
	}
	if res.Interrupted {
		err = errors.Join(err, errors.New("interrupted"))
	}
	return res, err
}

func (f Figures) dropNonFinite() {
	for _, m := range f {
		for k, v := range m {
			if math.IsNaN(v) || math.IsInf(v, 0) {
				delete(m, k)
			}
		}
	}
}

// runCell runs one cell, turning a panic into a failure so that cleanup runs.
func runCell(ctx context.Context, e Experiment, env *Env, c Cell) (out Outcome, err error) {
	defer func() {
		if r := recover(); r != nil {
			err = fmt.Errorf("panic: %v", r)
		}
	}()
	return e.RunCell(ctx, env, c)
}

// WriteJSON writes the results as indented JSON.
func (r *Results) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// DefaultReps is how many times each cell runs when neither --reps nor the
// experiment (Repeater) says: enough for a t interval with a noise estimate.
const DefaultReps = 3

// Repeater is implemented by experiments with their own number of runs per
// cell (1 for a cell that repeats its measurement itself and reports every
// repetition in Outcome.Samples).
type Repeater interface {
	Reps(o Options) int
}

// CellRepeater is implemented by experiments whose cells need different
// numbers of runs (a simulated cell that averages many seeds and reports
// each in Outcome.Samples runs once; a live cell beside it several times).
// --repeat overrides it.
type CellRepeater interface {
	CellReps(c Cell, o Options) int
}

// LoadAvg is /proc/loadavg's first three fields ("" where there is none).
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) > 3 {
		f = f[:3]
	}
	return strings.Join(f, " ")
}

type runsOf struct {
	key  string
	runs []Outcome
}

// collectSamples turns each cell's runs into samples by metric. Derived
// metrics are computed run by run: run r of every cell makes one Figures,
// Derive adds to it, and its values join the samples (cells with fewer runs
// than r are left out of run r). A cell's own repetitions (Outcome.Samples,
// in every run) replace its per-run means for that metric.
//
// It returns each metric's per-run values (the table shows their mean) and
// the samples the claims use.
func collectSamples(perRun []runsOf, d Deriver) (perRunValues, samples map[string]map[string]Sample) {
	out := map[string]map[string]Sample{}
	add := func(k, m string, v float64) {
		if math.IsNaN(v) || math.IsInf(v, 0) {
			return
		}
		if out[k] == nil {
			out[k] = map[string]Sample{}
		}
		out[k][m] = append(out[k][m], v)
	}
	most := 0
	for _, pr := range perRun {
		most = max(most, len(pr.runs))
	}
	for r := 0; r < most; r++ {
		figs := Figures{}
		for _, pr := range perRun {
			if r < len(pr.runs) {
				for m, v := range pr.runs[r].Metrics {
					figs.Set(pr.key, m, v)
				}
				if figs[pr.key] == nil {
					figs[pr.key] = map[string]float64{}
				}
			}
		}
		if d != nil {
			d.Derive(figs)
		}
		for k, m := range figs {
			for name, v := range m {
				add(k, name, v)
			}
		}
	}
	perRunValues = map[string]map[string]Sample{}
	for k, m := range out {
		perRunValues[k] = map[string]Sample{}
		for name, s := range m {
			perRunValues[k][name] = s
		}
	}
	for _, pr := range perRun {
		// A cell that measured its own repetitions (Outcome.Samples) in
		// every run: those are the metric's sample, over all its runs.
		names := map[string]bool{}
		for m := range pr.runs[0].Samples {
			names[m] = true
		}
		for m := range names {
			var all Sample
			for _, r := range pr.runs {
				if len(r.Samples[m]) == 0 {
					all = nil
					break
				}
				all = append(all, r.Samples[m]...)
			}
			if len(all) > 0 {
				if out[pr.key] == nil {
					out[pr.key] = map[string]Sample{}
				}
				out[pr.key][m] = all
			}
		}
	}
	return perRunValues, out
}
