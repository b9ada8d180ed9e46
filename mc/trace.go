package mc

import (
	"encoding/json"
	"fmt"
	"os"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Trace is a counterexample (or any path): the configuration it was found
// in and the events from the initial state. It is saved as JSON, replayed
// from fresh automata (Replay), and opened by the explorer.
type Trace struct {
	Protocol string    `json:"protocol"`
	Model    ModelSpec `json:"model"`
	Network  string    `json:"network"`
	Crashes  int       `json:"crashes"`
	// CrashBeforeFsync: Config.CrashBeforeFsync.
	CrashBeforeFsync bool    `json:"crash_before_fsync,omitempty"`
	Timers           string  `json:"timers"`
	Events           []Event `json:"events"`
	// Prefix is how many of the first events are the model's scripted
	// prefix (automaton.ModelConfig.Prefix; prefix.go). They are replayed
	// like the others: a loaded trace does not apply the prefix again.
	Prefix int `json:"prefix,omitempty"`
	// Violation is what the last event broke ("" for a plain path).
	Violation string `json:"violation,omitempty"`
	// SearchDepth is the depth of the search whose verdict the trace
	// records when that verdict is about the whole space (a progress
	// violation, progress.go), so a replay can search again.
	SearchDepth int `json:"search_depth,omitempty"`

	cfg Config
}

// ModelSpec is the part of automaton.ModelConfig a trace file records (the
// Requests function is the protocol's: it is looked up again on load).
type ModelSpec struct {
	Nodes   int                 `json:"nodes"`
	Clients int                 `json:"clients"`
	Scripts [][]string          `json:"scripts"`
	Service string              `json:"service,omitempty"`
	Params  map[string]string   `json:"params,omitempty"`
	Target  string              `json:"target,omitempty"`
	Extra   map[string][]string `json:"extra,omitempty"`
	// ClientDriven: automaton.ModelConfig.ClientDriven.
	ClientDriven bool `json:"client_driven,omitempty"`
}

// NewTrace starts an empty trace in cfg (for the explorer's hand-driven runs).
func NewTrace(cfg Config) *Trace {
	t := &Trace{cfg: cfg}
	t.setSpec()
	return t
}

func (t *Trace) setSpec() {
	c := &t.cfg
	t.Protocol, t.Network, t.Crashes, t.CrashBeforeFsync = c.Protocol, c.Net.String(), c.Crashes, c.CrashBeforeFsync
	t.Model = ModelSpec{Nodes: c.Model.Nodes, Clients: c.Model.Clients, Service: c.Model.Service,
		Params: c.Model.Params, Target: c.Model.Target, ClientDriven: c.Model.ClientDriven}
	t.Timers = c.timerSpec()
	for i := 0; i < c.Model.Clients; i++ {
		var s []string
		for _, op := range c.script(i) {
			s = append(s, opString(op))
		}
		t.Model.Scripts = append(t.Model.Scripts, s)
	}
}

// Config returns the configuration the trace runs in.
func (t *Trace) Config() Config { return t.cfg }

// fill describes every event (replaying the trace) and records the model.
func (t *Trace) fill() error {
	t.setSpec()
	w, err := newWorld(&t.cfg)
	if err != nil {
		return err
	}
	for i := range t.Events {
		t.Events[i].Desc = w.describe(t.Events[i])
		if err := w.apply(t.Events[i]); err != nil {
			return fmt.Errorf("event %d (%s): %w", i+1, t.Events[i].Desc, err)
		}
	}
	return nil
}

// opString writes an operation as words ("set x 1"), as parseOp reads it.
func opString(op service.Op) string {
	parts := []string{op.Kind, op.Key}
	for _, a := range op.Args {
		parts = append(parts, string(a))
	}
	return strings.Join(parts, " ")
}

func parseOp(s string) service.Op {
	f := strings.Fields(s)
	op := service.Op{}
	if len(f) > 0 {
		op.Kind = f[0]
	}
	if len(f) > 1 {
		op.Key = f[1]
	}
	for _, a := range f[min(2, len(f)):] {
		op.Args = append(op.Args, []byte(a))
	}
	return op
}

// Save writes the trace as indented JSON.
func (t *Trace) Save(path string) error {
	b, err := json.MarshalIndent(t, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// LoadTrace reads a trace file and rebuilds its configuration.
func LoadTrace(path string) (*Trace, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var t Trace
	if err := json.Unmarshal(b, &t); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if _, err := automaton.LookupAny(t.Protocol); err != nil {
		return nil, err
	}
	net, err := ParseNetwork(t.Network)
	if err != nil {
		return nil, err
	}
	m := automaton.ModelOf(t.Protocol) // for its Requests function
	m.Nodes, m.Clients, m.Service, m.Params, m.Target = t.Model.Nodes, t.Model.Clients, t.Model.Service, t.Model.Params, t.Model.Target
	m.Scripts, m.Prefix = nil, nil // the prefix's events are in t.Events
	m.ClientDriven = t.Model.ClientDriven
	for _, s := range t.Model.Scripts {
		var ops []service.Op
		for _, o := range s {
			ops = append(ops, parseOp(o))
		}
		m.Scripts = append(m.Scripts, ops)
	}
	t.cfg = Config{Protocol: t.Protocol, Model: m, Net: net, Timers: t.Timers, Crashes: t.Crashes, CrashBeforeFsync: t.CrashBeforeFsync, Depth: len(t.Events)}
	return &t, nil
}

// String prints the trace step by step.
func (t *Trace) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s (%d events)\n", t.cfg.Describe(), len(t.Events))
	for i, ev := range t.Events {
		mark := ""
		if i < t.Prefix {
			mark = "  (model prefix)"
		}
		fmt.Fprintf(&b, "%3d. %s%s\n", i+1, ev.Desc, mark)
	}
	if t.Violation != "" {
		fmt.Fprintf(&b, "violated: %s\n", t.Violation)
	}
	return b.String()
}

// replay builds the state after evs from fresh automata.
func replay(cfg *Config, evs []Event) (*world, error) {
	w, err := newWorld(cfg)
	if err != nil {
		return nil, err
	}
	for i, ev := range evs {
		if err := w.apply(ev); err != nil {
			return nil, fmt.Errorf("event %d: %w", i+1, err)
		}
	}
	return w, nil
}

// Replay runs the trace from fresh automata and returns what the last
// event broke (invariant, contract or history verdict; "" when nothing):
// the check that a counterexample found by copying states is real.
func (t *Trace) Replay() (string, error) {
	if strings.HasPrefix(t.Violation, progressPrefix) {
		return t.replayProgress()
	}
	w, err := newWorld(&t.cfg)
	if err != nil {
		return "", err
	}
	if w.violation != "" {
		return w.violation, nil
	}
	var v verdicts
	for i, ev := range t.Events {
		if err := w.apply(ev); err != nil {
			return "", fmt.Errorf("event %d: %w", i+1, err)
		}
		if w.violation != "" {
			return w.violation, nil
		}
		if w.returned {
			if why := v.historyVerdict(w); why != "" {
				return why, nil
			}
		}
	}
	if len(w.enabled()) == 0 && t.cfg.Crashes == 0 && !w.timersSpent() && !w.done() {
		return "eventually: " + EventuallyDone + ": the system is quiet with requests unanswered", nil
	}
	return "", nil
}
