package experiment

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"time"

	"github.com/spf13/pflag"

	"github.com/synod-dev/synod/config"
)

// Experiment is one reproducible experiment. Implementations are registered
// with Register from the init function of their package (see experiment/all).
type Experiment interface {
	// Name is the command-line name, e.g. "seed001-abd-vs-blocking".
	Name() string
	// Description is one paragraph: what is measured, against which seed figures.
	Description() string
	// Flags adds the experiment's own flags (bound to fields of the value).
	Flags(fs *pflag.FlagSet)
	// Cells lists the parameter combinations to run, in order. It is called
	// after flags are parsed.
	Cells(o Options) ([]Cell, error)
	// RunCell runs one cell. Everything it starts must be started through env
	// (env.Cluster, env.Up, env.Start), which stops it by PID at the end of the
	// run, on error and on Ctrl-C. Return Unavailable(reason) for a cell that
	// cannot run here (its row says so); any other error marks the cell failed.
	RunCell(ctx context.Context, env *Env, c Cell) (Outcome, error)
	// Seed returns the figures the seed reports, per cell key and metric.
	Seed() SeedFigures
	// Report says which metrics the table shows and which plots to draw.
	Report() ReportSpec
}

// Deriver is implemented by experiments that compute metrics across cells
// (e.g. throughput relative to N=1). Derive is applied to our figures and to the
// seed's alike, after every cell ran; it adds metrics to figs in place.
type Deriver interface {
	Derive(figs Figures)
}

// Summarizer is implemented by experiments that state conclusions (does the
// seed's claim hold here?) from our figures and the seed's, after Derive.
type Summarizer interface {
	Summary(ours, seed Figures) []string
}

// Param is one named parameter of a cell.
type Param struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Cell is one parameter combination.
type Cell struct {
	// Key identifies the cell: "name=value,..." in parameter order.
	Key    string  `json:"key"`
	Params []Param `json:"params"`
}

// NewCell builds a cell from name, value pairs.
func NewCell(nameValues ...string) Cell {
	if len(nameValues)%2 != 0 {
		panic("experiment.NewCell: odd number of arguments")
	}
	var c Cell
	var parts []string
	for i := 0; i < len(nameValues); i += 2 {
		c.Params = append(c.Params, Param{nameValues[i], nameValues[i+1]})
		parts = append(parts, nameValues[i]+"="+nameValues[i+1])
	}
	c.Key = strings.Join(parts, ",")
	return c
}

// Get returns the value of parameter name ("" when absent).
func (c Cell) Get(name string) string {
	for _, p := range c.Params {
		if p.Name == name {
			return p.Value
		}
	}
	return ""
}

// Label is the cell's parameters for display: "protocol=abd N=3 get=0.9".
func (c Cell) Label() string { return strings.ReplaceAll(c.Key, ",", " ") }

// Options are the framework's settings, common to every experiment.
type Options struct {
	// Duration of one measured cell; 0 means the experiment's default.
	Duration time.Duration
	// Quick asks for short cells, for iteration and smoke tests.
	Quick bool
	// Reps is how many times each cell runs (its metrics are the mean; the
	// claims are judged on every run's value); 0 means the experiment's
	// default (Repeater) or DefaultReps.
	Reps int
}

// CellDuration is Duration when set, else quick under --quick, else def.
func (o Options) CellDuration(def, quick time.Duration) time.Duration {
	switch {
	case o.Duration > 0:
		return o.Duration
	case o.Quick:
		return quick
	}
	return def
}

// Outcome is what one cell measured.
type Outcome struct {
	// Metrics by name (units are the metric's: see the ReportSpec columns).
	Metrics map[string]float64 `json:"metrics,omitempty"`
	// Labels are statements printed beside the numbers, e.g. "durability": "fsync".
	Labels map[string]string `json:"labels,omitempty"`
	// Detail is kept verbatim in results.json (e.g. the full bench report).
	Detail any `json:"detail,omitempty"`
	// Samples are the cell's own repetitions of a metric (e.g. 20 round
	// trips, or every simulated seed it averaged): the metric's sample is
	// every run's repetitions together (Metrics keeps their mean).
	Samples map[string][]float64 `json:"-"`
}

// Figures are metric values by cell key, then metric name.
type Figures map[string]map[string]float64

// Get returns figs[cell][metric] and whether it is present.
func (f Figures) Get(cell, metric string) (float64, bool) {
	m, ok := f[cell]
	if !ok {
		return 0, false
	}
	v, ok := m[metric]
	return v, ok
}

// Set stores one value.
func (f Figures) Set(cell, metric string, v float64) {
	if f[cell] == nil {
		f[cell] = map[string]float64{}
	}
	f[cell][metric] = v
}

// SeedFigures are a seed's reported results.
type SeedFigures struct {
	// Source names where they come from: "the ABD report, Tables 1-6 (AWS t2.micro)".
	Source string
	// Values by cell key and metric.
	Values Figures
	// Notes are the seed's qualitative statements per cell key, for cells it
	// describes without numbers.
	Notes map[string]string
}

// ErrUnavailable marks cells that cannot run here.
var ErrUnavailable = errors.New("not available")

type unavailable struct{ reason string }

func (u *unavailable) Error() string { return u.reason }
func (u *unavailable) Is(t error) bool {
	return t == ErrUnavailable
}

// Unavailable returns an error that marks a cell as not runnable here
// (e.g. "protocol not available"); the run goes on with the other cells.
func Unavailable(format string, args ...any) error {
	return &unavailable{fmt.Sprintf(format, args...)}
}

var (
	regMu    sync.Mutex
	registry = map[string]Experiment{}
)

// Register makes an experiment available by name; it panics on a duplicate.
func Register(e Experiment) {
	regMu.Lock()
	defer regMu.Unlock()
	if _, dup := registry[e.Name()]; dup {
		panic("experiment: duplicate registration of " + e.Name())
	}
	registry[e.Name()] = e
}

// Lookup returns a registered experiment.
func Lookup(name string) (Experiment, error) {
	regMu.Lock()
	defer regMu.Unlock()
	e, ok := registry[name]
	if !ok {
		names := make([]string, 0, len(registry))
		for n := range registry {
			names = append(names, n)
		}
		sort.Strings(names)
		return nil, fmt.Errorf("unknown experiment %q (known: %s)", name, strings.Join(names, ", "))
	}
	return e, nil
}

// All lists the registered experiments, sorted by name.
func All() []Experiment {
	regMu.Lock()
	defer regMu.Unlock()
	out := make([]Experiment, 0, len(registry))
	for _, e := range registry {
		out = append(out, e)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Name() < out[j].Name() })
	return out
}

// CheckDurability validates an experiment's --durability flag: every
// figure is stated with the cluster's durability, fsync or memory.
func CheckDurability(d string) error {
	if d != config.Fsync && d != config.Memory {
		return fmt.Errorf("--durability %q: want %s or %s", d, config.Fsync, config.Memory)
	}
	return nil
}
