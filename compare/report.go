package compare

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"time"
)

// Operation names in the table (the driver's set and get).
const (
	OpPut = "put"
	OpGet = "get"
)

// Result is a comparison's outcome; its JSON form is what --json writes.
type Result struct {
	Start   time.Time      `json:"start"`
	Config  ReportConfig   `json:"config"`
	Systems []SystemReport `json:"systems"`
	// Skipped lists the systems not run because they are not installed.
	Skipped []Skipped `json:"skipped,omitempty"`
	// Cells is the sweep: every system in every client configuration.
	Cells []Cell `json:"cells"`
	// Best holds each system's best cell per op and client count
	// (BestCells); Ratios divide Synod's best by each peer's best.
	Best   []Cell  `json:"best"`
	Ratios []Ratio `json:"ratios"`
	// Interrupted: Ctrl-C (or the context) ended the run early.
	Interrupted bool `json:"interrupted"`
}

// ReportConfig is the workload, as reported.
type ReportConfig struct {
	Members     int      `json:"members"`
	Protocol    string   `json:"synod_protocol"`
	Keys        int      `json:"keys"`
	KeySize     int      `json:"key_size"`
	ValueSize   int      `json:"value_size"`
	Clients     []int    `json:"clients"`
	Ops         []string `json:"ops"`
	DurationSec float64  `json:"duration_per_cell_s"`
	WarmupSec   float64  `json:"warmup_per_cell_s"`
	Seed        int64    `json:"seed"`
	Dir         string   `json:"dir"`
	// PipelineDepths are the pipelining depths swept.
	PipelineDepths []int `json:"pipeline_depths"`
	// Isolation says whether the other systems were paused during a
	// system's cells.
	Isolation string `json:"isolation"`
	// IdleWindowSec is the window of the CPU figures of SystemReport.
	IdleWindowSec float64 `json:"idle_window_s"`
}

// SystemReport describes one system that ran.
type SystemReport struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Durability string   `json:"durability"`
	Addrs      []string `json:"addrs"`
	// IdleCPU is the cores the system's processes used while it served no
	// client, after its preload (nil: not measured); AfterTurnCPU the same
	// right after each of its turns, in order.
	IdleCPU      *float64  `json:"idle_cpu_cores,omitempty"`
	AfterTurnCPU []float64 `json:"after_turn_cpu_cores,omitempty"`
}

// Skipped is a system that was not run.
type Skipped struct {
	Name    string `json:"name"`
	Install string `json:"install"`
}

// Cell is one system's figures for one operation at one client count.
type Cell struct {
	System string `json:"system"`
	// Config names the client configuration (ClientConfig.Name) and Conns
	// the connections it opened.
	Config string `json:"config"`
	Conns  int    `json:"conns"`
	// Fsync is the system's durability in short, printed beside the figure.
	Fsync      string  `json:"fsync"`
	Op         string  `json:"op"`
	Clients    int     `json:"clients"`
	Throughput float64 `json:"throughput_ops_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	Count      int64   `json:"count"`
	Errors     int64   `json:"errors"`
	// ErrorSamples are the first distinct errors the driver saw.
	ErrorSamples []string `json:"error_samples,omitempty"`
	// Failed is set when the cell could not run at all (clients could not
	// connect); its figures are then zero and mean nothing.
	Failed string `json:"failed,omitempty"`
}

// Ratio compares Synod with one peer at one op and client count, best
// configuration against best configuration: Synod's figure divided by the
// peer's. Throughput above 1 and latencies below 1 favour Synod. A nil
// ratio means one side has no usable figure (missing, failed, or zero).
type Ratio struct {
	Op          string   `json:"op"`
	Clients     int      `json:"clients"`
	Peer        string   `json:"peer"`
	SynodConfig string   `json:"synod_config"`
	PeerConfig  string   `json:"peer_config"`
	Throughput  *float64 `json:"throughput"`
	P50         *float64 `json:"p50"`
	P99         *float64 `json:"p99"`
}

// Synod is the system the others are compared with.
const Synod = "synod"

// usable reports whether a cell's figures can enter a ratio.
func (c Cell) usable() bool { return c.Failed == "" && c.Count > 0 }

func div(a, b float64) *float64 {
	if b == 0 {
		return nil
	}
	r := a / b
	return &r
}

// BestCells picks, for every system, op and client count, the cell of the
// configuration with the highest throughput among usable cells (ties: the
// lower p99, then the first swept), or the first cell when none is usable
// (so that a failure still shows). The order is that of the groups' first
// cells.
func BestCells(cells []Cell) []Cell {
	type key struct {
		system, op string
		clients    int
	}
	idx := map[key]int{}
	var out []Cell
	for _, c := range cells {
		k := key{c.System, c.Op, c.Clients}
		i, ok := idx[k]
		if !ok {
			idx[k] = len(out)
			out = append(out, c)
			continue
		}
		b := out[i]
		switch {
		case !c.usable():
		case !b.usable(),
			c.Throughput > b.Throughput,
			c.Throughput == b.Throughput && c.P99Ms < b.P99Ms:
			out[i] = c
		}
	}
	return out
}

// ComputeRatios pairs Synod's best cell (BestCells) with each peer's best
// cell of the same op and client count, for the given peers in order.
func ComputeRatios(cells []Cell, peers []string) []Ratio {
	type key struct {
		system, op string
		clients    int
	}
	best := BestCells(cells)
	idx := map[key]Cell{}
	for _, c := range best {
		idx[key{c.System, c.Op, c.Clients}] = c
	}
	var out []Ratio
	for _, s := range best {
		if s.System != Synod {
			continue
		}
		for _, p := range peers {
			r := Ratio{Op: s.Op, Clients: s.Clients, Peer: p, SynodConfig: s.Config}
			pc, ok := idx[key{p, s.Op, s.Clients}]
			if ok {
				r.PeerConfig = pc.Config
			}
			if ok && pc.usable() && s.usable() {
				r.Throughput = div(s.Throughput, pc.Throughput)
				r.P50 = div(s.P50Ms, pc.P50Ms)
				r.P99 = div(s.P99Ms, pc.P99Ms)
			}
			out = append(out, r)
		}
	}
	return out
}

// rank is s's place in list (len(list) when absent).
func rank(list []string, s string) int {
	for i, x := range list {
		if x == s {
			return i
		}
	}
	return len(list)
}

// sortedCells orders cells by op (put first), clients, then system order.
func sortedCells(cells []Cell, ops []string, systems []string) []Cell {
	out := append([]Cell(nil), cells...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(ops, a.Op), rank(ops, b.Op); ra != rb {
			return ra < rb
		}
		if a.Clients != b.Clients {
			return a.Clients < b.Clients
		}
		return rank(systems, a.System) < rank(systems, b.System)
	})
	return out
}

func fmtRatio(r *float64) string {
	if r == nil {
		return "-"
	}
	return fmt.Sprintf("%.2f", *r)
}

// Print writes the human-readable tables: the sweep (every system in
// every client configuration), each system's best configuration, and the
// ratios best against best. Every figure has its durability beside it.
func (r *Result) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "synod-lab compare: clusters of %d members on 127.0.0.1 (Redis: one server), durability beside every figure\n", c.Members)
	fmt.Fprintf(w, "  workload: %d keys of %d bytes, %d-byte values, uniform keys, closed loop, %gs per cell after %gs unmeasured; puts and linearizable gets measured separately\n",
		c.Keys, c.KeySize, c.ValueSize, c.DurationSec, c.WarmupSec)
	var names []string
	for _, s := range r.Systems {
		names = append(names, s.Name)
		fmt.Fprintf(w, "  %-9s %s; durability %s\n", s.Name, s.Version, s.Durability)
	}
	if c.Isolation != "" {
		fmt.Fprintf(w, "  isolation: %s\n", c.Isolation)
	}
	r.printIdleCPU(w)
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  %-9s not run: not installed (install with: %s)\n", s.Name, s.Install)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "  INTERRUPTED: the tables hold the cells measured before Ctrl-C")
	}
	fmt.Fprintf(w, "\n  sweep: every client configuration (clients = operations outstanding; conns = connections they share)\n")
	r.printCells(w, sortedCells(r.Cells, c.Ops, names), true)

	best := r.Best
	if best == nil {
		best = BestCells(r.Cells)
	}
	fmt.Fprintf(w, "\n  best configuration of each system (highest ops/s in the sweep)\n")
	r.printCells(w, sortedCells(best, c.Ops, names), false)

	var peers []string
	for _, n := range names {
		if n != Synod {
			peers = append(peers, n)
		}
	}
	if len(peers) == 0 || len(r.Ratios) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  ratios Synod/peer, best against best (ops/s above 1: Synod faster; p50, p99 below 1: Synod faster)\n")
	fmt.Fprintf(w, "  %-4s %7s  %-9s %6s %7s %7s  %s\n", "op", "clients", "peer", "ops/s", "p50", "p99", "configurations (synod vs peer)")
	fsync := map[string]string{}
	for _, cell := range r.Cells {
		if cell.Fsync != "" {
			fsync[cell.System] = cell.Fsync
		}
	}
	for _, ra := range sortedRatios(r.Ratios, c.Ops, peers) {
		fmt.Fprintf(w, "  %-4s %7d  %-9s %6s %7s %7s  %s [%s] vs %s [%s]\n", ra.Op, ra.Clients, ra.Peer,
			fmtRatio(ra.Throughput), fmtRatio(ra.P50), fmtRatio(ra.P99),
			orDash(ra.SynodConfig), fsync[Synod], orDash(ra.PeerConfig), fsync[ra.Peer])
	}
	fmt.Fprintln(w, "  (ratios from one run on one machine; a shared machine makes every figure noisy)")
}

// printIdleCPU writes each system's CPU while it served no client: after
// its preload, and after each of its turns (mean and max).
func (r *Result) printIdleCPU(w io.Writer) {
	header := false
	for _, s := range r.Systems {
		if s.IdleCPU == nil && len(s.AfterTurnCPU) == 0 {
			continue
		}
		if !header {
			fmt.Fprintf(w, "  CPU while serving no client (cores; utime+stime of the system's processes over %gs):\n", r.Config.IdleWindowSec)
			header = true
		}
		idle := "-"
		if s.IdleCPU != nil {
			idle = fmt.Sprintf("%.3f", *s.IdleCPU)
		}
		line := fmt.Sprintf("    %-9s idle after the preload %s", s.Name, idle)
		if n := len(s.AfterTurnCPU); n > 0 {
			var sum, mx float64
			for _, c := range s.AfterTurnCPU {
				sum += c
				mx = max(mx, c)
			}
			line += fmt.Sprintf("; right after its turns: mean %.3f, max %.3f (%d turns)", sum/float64(n), mx, n)
		}
		fmt.Fprintln(w, line)
	}
}

// printCells writes one table of cells; withErrors adds the conns and
// errors columns.
func (r *Result) printCells(w io.Writer, cells []Cell, sweep bool) {
	if sweep {
		fmt.Fprintf(w, "  %-4s %7s  %-9s %-24s %5s %12s %9s %9s %7s  %s\n", "op", "clients", "system", "configuration", "conns", "ops/s", "p50 ms", "p99 ms", "errors", "durability")
	} else {
		fmt.Fprintf(w, "  %-4s %7s  %-9s %-24s %12s %9s %9s  %s\n", "op", "clients", "system", "configuration", "ops/s", "p50 ms", "p99 ms", "durability")
	}
	for _, cell := range cells {
		cfg := orDash(cell.Config)
		if cell.Failed != "" {
			fmt.Fprintf(w, "  %-4s %7d  %-9s %-24s FAILED: %s\n", cell.Op, cell.Clients, cell.System, cfg, cell.Failed)
			continue
		}
		if sweep {
			fmt.Fprintf(w, "  %-4s %7d  %-9s %-24s %5d %12.1f %9.3f %9.3f %7d  %s\n", cell.Op, cell.Clients, cell.System, cfg, cell.Conns,
				cell.Throughput, cell.P50Ms, cell.P99Ms, cell.Errors, orDash(cell.Fsync))
		} else {
			fmt.Fprintf(w, "  %-4s %7d  %-9s %-24s %12.1f %9.3f %9.3f  %s\n", cell.Op, cell.Clients, cell.System, cfg,
				cell.Throughput, cell.P50Ms, cell.P99Ms, orDash(cell.Fsync))
		}
	}
}

// sortedRatios orders ratios by op, clients, then peer order.
func sortedRatios(rs []Ratio, ops, peers []string) []Ratio {
	out := append([]Ratio(nil), rs...)
	sort.SliceStable(out, func(i, j int) bool {
		a, b := out[i], out[j]
		if ra, rb := rank(ops, a.Op), rank(ops, b.Op); ra != rb {
			return ra < rb
		}
		if a.Clients != b.Clients {
			return a.Clients < b.Clients
		}
		return rank(peers, a.Peer) < rank(peers, b.Peer)
	})
	return out
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// WriteJSON writes the result as indented JSON.
func (r *Result) WriteJSON(path string) error {
	b, err := json.MarshalIndent(r, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(path, append(b, '\n'), 0o644)
}

// ParseClients parses a comma-separated list of client counts.
func ParseClients(s string) ([]int, error) {
	var out []int
	seen := map[int]bool{}
	for _, f := range strings.Split(s, ",") {
		f = strings.TrimSpace(f)
		var n int
		if _, err := fmt.Sscanf(f, "%d", &n); err != nil || fmt.Sprint(n) != f || n < 1 {
			return nil, fmt.Errorf("--clients %q: %q is not a positive integer", s, f)
		}
		if seen[n] {
			return nil, fmt.Errorf("--clients %q: %d is listed twice", s, n)
		}
		seen[n] = true
		out = append(out, n)
	}
	return out, nil
}
