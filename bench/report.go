package bench

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"strings"
	"time"

	hdrhistogram "github.com/HdrHistogram/hdrhistogram-go"
)

// Report holds a run's figures. Its JSON form is what --json writes.
type Report struct {
	Config ReportConfig `json:"config"`
	// Durability is the caller's statement of the target's durability mode.
	Durability string    `json:"durability"`
	Mode       string    `json:"mode"` // "closed" or "open"
	Start      time.Time `json:"start"`
	ElapsedSec float64   `json:"elapsed_s"`
	Reads      Stats     `json:"reads"`
	Writes     Stats     `json:"writes"`
	All        Stats     `json:"all"`
	// Series is the per-second completion count of the measured phase.
	Series []SecondStats `json:"series"`
	// Open loop only: arrivals dropped because the queue was full (or never
	// served), and operations started more than LateThreshold after arrival.
	Dropped int64 `json:"dropped"`
	Late    int64 `json:"late"`
	// Reconnects counts connections replaced after failures.
	Reconnects int64 `json:"reconnects"`
	// ErrorSamples are the first distinct error messages seen.
	ErrorSamples []string `json:"error_samples,omitempty"`
	// Interrupted: the context ended before the run completed.
	Interrupted bool `json:"interrupted"`
	// HistoryOps is the number of operations written to the history file.
	HistoryOps int `json:"history_ops,omitempty"`
}

// ReportConfig is the run's configuration as reported (no password).
type ReportConfig struct {
	Target      string   `json:"target"`
	Addrs       []string `json:"addrs"`
	Workload    string   `json:"workload,omitempty"`
	Clients     int      `json:"clients"`
	Keys        int      `json:"keys"`
	ValueSize   int      `json:"value_size"`
	ReadRatio   float64  `json:"read_ratio"`
	Dist        string   `json:"dist"`
	Rate        float64  `json:"rate,omitempty"`
	Arrivals    string   `json:"arrivals,omitempty"`
	DurationSec float64  `json:"duration_s,omitempty"`
	Ops         int64    `json:"ops,omitempty"`
	Preload     bool     `json:"preload"`
	KeyPrefix   string   `json:"key_prefix"`
	Namespace   string   `json:"namespace,omitempty"`
	ReadMode    string   `json:"read_mode,omitempty"`
	Leader      bool     `json:"leader,omitempty"`
	Seed        int64    `json:"seed"`
	History     string   `json:"history,omitempty"`
}

// Stats are the figures for one class of operations. Latencies are in
// milliseconds; Count excludes errors; Throughput is Count per elapsed second.
type Stats struct {
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	Throughput float64 `json:"throughput_ops_s"`
	MeanMs     float64 `json:"mean_ms"`
	P50Ms      float64 `json:"p50_ms"`
	P95Ms      float64 `json:"p95_ms"`
	P99Ms      float64 `json:"p99_ms"`
	P999Ms     float64 `json:"p99_9_ms"`
	MaxMs      float64 `json:"max_ms"`
}

// SecondStats is one second of the throughput series.
type SecondStats struct {
	Second int   `json:"second"`
	Ops    int64 `json:"ops"`
	Errors int64 `json:"errors"`
}

func statsOf(h *hdrhistogram.Histogram, errs int64, elapsed time.Duration) Stats {
	ms := func(us int64) float64 { return float64(us) / 1000 }
	s := Stats{Count: h.TotalCount(), Errors: errs}
	if elapsed > 0 {
		s.Throughput = float64(s.Count) / elapsed.Seconds()
	}
	if s.Count > 0 {
		s.MeanMs = h.Mean() / 1000
		s.P50Ms = ms(h.ValueAtQuantile(50))
		s.P95Ms = ms(h.ValueAtQuantile(95))
		s.P99Ms = ms(h.ValueAtQuantile(99))
		s.P999Ms = ms(h.ValueAtQuantile(99.9))
		s.MaxMs = ms(h.Max())
	}
	return s
}

func (r *runner) report(elapsed time.Duration) *Report {
	cfg := r.cfg
	m := r.st.merge(true)
	rep := &Report{
		Config: ReportConfig{
			Target: cfg.TargetName, Addrs: cfg.Addrs, Workload: cfg.Workload, Clients: cfg.Clients,
			Keys: cfg.Keys, ValueSize: cfg.ValueSize, ReadRatio: cfg.ReadRatio, Dist: r.spec.String(),
			Rate: cfg.Rate, Arrivals: cfg.arrivals(), DurationSec: cfg.Duration.Seconds(), Ops: cfg.Ops, Preload: cfg.Preload,
			KeyPrefix: cfg.keyPrefix(), Namespace: cfg.Namespace, ReadMode: cfg.ReadMode, Leader: cfg.Leader, Seed: cfg.Seed,
			History: cfg.HistoryPath,
		},
		Durability:   cfg.DurabilityLabel,
		Mode:         "closed",
		Start:        r.measureStart,
		ElapsedSec:   elapsed.Seconds(),
		Reads:        statsOf(m.reads, m.readErrors, elapsed),
		Writes:       statsOf(m.writes, m.writeErrors, elapsed),
		All:          statsOf(m.all, m.readErrors+m.writeErrors, elapsed),
		Dropped:      r.dropped.Load(),
		Late:         m.late,
		Reconnects:   r.reconnects.Load(),
		ErrorSamples: m.errSamples,
	}
	if rep.Config.Target == "" {
		rep.Config.Target = "resp"
	}
	if cfg.Rate > 0 {
		rep.Mode = "open"
	}
	n := max(len(m.perSecOps), len(m.perSecErrs))
	for i := 0; i < n; i++ {
		s := SecondStats{Second: i}
		if i < len(m.perSecOps) {
			s.Ops = m.perSecOps[i]
		}
		if i < len(m.perSecErrs) {
			s.Errors = m.perSecErrs[i]
		}
		rep.Series = append(rep.Series, s)
	}
	return rep
}

// Print writes the human-readable report.
func (rep *Report) Print(w io.Writer) {
	c := rep.Config
	fmt.Fprintf(w, "synod bench: target %s at %s", c.Target, strings.Join(c.Addrs, ","))
	if c.Workload != "" {
		fmt.Fprintf(w, ", workload %s", c.Workload)
	}
	if c.Namespace != "" {
		fmt.Fprintf(w, ", namespace %s", c.Namespace)
	}
	if c.ReadMode != "" {
		fmt.Fprintf(w, ", read mode %s", c.ReadMode)
	}
	if c.Leader {
		fmt.Fprint(w, ", clients sent to the leader")
	}
	fmt.Fprintln(w)
	loop := "closed loop"
	if rep.Mode == "open" {
		loop = fmt.Sprintf("open loop at %g ops/s (%s arrivals)", c.Rate, c.Arrivals)
	}
	pre := ""
	if c.Preload {
		pre = ", preloaded"
	}
	fmt.Fprintf(w, "  %d clients, %s, %d keys %s%s, %d-byte values, %.0f%% reads, seed %d\n",
		c.Clients, loop, c.Keys, c.Dist, pre, c.ValueSize, 100*c.ReadRatio, c.Seed)
	dur := rep.Durability
	if dur == "" {
		dur = "not stated (use --durability-label)"
	}
	fmt.Fprintf(w, "  durability: %s\n", dur)
	fmt.Fprintf(w, "  elapsed %.2f s", rep.ElapsedSec)
	if rep.Interrupted {
		fmt.Fprint(w, " (interrupted)")
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\n  %-7s %12s %10s %8s %9s %9s %9s %9s %9s %9s\n", "", "ops/s", "count", "errors", "mean", "p50", "p95", "p99", "p99.9", "max")
	for _, row := range []struct {
		name string
		s    Stats
	}{{"reads", rep.Reads}, {"writes", rep.Writes}, {"all", rep.All}} {
		s := row.s
		fmt.Fprintf(w, "  %-7s %12.1f %10d %8d %9.3f %9.3f %9.3f %9.3f %9.3f %9.3f\n", row.name,
			s.Throughput, s.Count, s.Errors, s.MeanMs, s.P50Ms, s.P95Ms, s.P99Ms, s.P999Ms, s.MaxMs)
	}
	fmt.Fprintf(w, "  (latencies in ms, durability: %s)\n", dur)
	if rep.Mode == "open" {
		fmt.Fprintf(w, "  open loop: %d arrivals dropped (queue full), %d operations late (> %v after arrival)\n",
			rep.Dropped, rep.Late, LateThreshold)
	}
	if rep.Reconnects > 0 {
		fmt.Fprintf(w, "  reconnects: %d\n", rep.Reconnects)
	}
	for _, e := range rep.ErrorSamples {
		fmt.Fprintf(w, "  error seen: %s\n", e)
	}
	if c.History != "" {
		fmt.Fprintf(w, "  history: %d operations in %s\n", rep.HistoryOps, c.History)
	}
}

// WriteJSON writes the report as indented JSON to path.
func (rep *Report) WriteJSON(path string) error {
	b, err := json.MarshalIndent(rep, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// isTerminal reports whether w is a character device (a terminal).
func isTerminal(w io.Writer) bool {
	f, ok := w.(*os.File)
	if !ok {
		return false
	}
	fi, err := f.Stat()
	return err == nil && fi.Mode()&os.ModeCharDevice != 0
}

// progress prints one line a second until stop closes: elapsed time, successful
// operations in the last second, p99 so far, errors so far (and, in the open
// loop, dropped and late counts). On a terminal the line is rewritten in place.
func (r *runner) progress(w io.Writer, stop <-chan struct{}) {
	if w == nil {
		return
	}
	tty := isTerminal(w)
	tick := time.NewTicker(time.Second)
	defer tick.Stop()
	var prev int64
	printed := false
	for {
		select {
		case <-stop:
			if tty && printed {
				fmt.Fprintln(w)
			}
			return
		case <-tick.C:
		}
		m := r.st.merge(false)
		total := m.all.TotalCount()
		line := fmt.Sprintf("[%5.0fs] %9d ops/s  p99 %8.3f ms  errors %d", time.Since(r.measureStart).Seconds(),
			total-prev, float64(m.all.ValueAtQuantile(99))/1000, m.readErrors+m.writeErrors)
		if r.cfg.Rate > 0 {
			line += fmt.Sprintf("  dropped %d  late %d", r.dropped.Load(), m.late)
		}
		prev = total
		if tty {
			fmt.Fprintf(w, "\r%s\x1b[K", line)
		} else {
			fmt.Fprintln(w, line)
		}
		printed = true
	}
}
