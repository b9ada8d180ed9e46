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
	Cells   []Cell    `json:"cells"`
	Ratios  []Ratio   `json:"ratios"`
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
}

// SystemReport describes one system that ran.
type SystemReport struct {
	Name       string   `json:"name"`
	Version    string   `json:"version"`
	Durability string   `json:"durability"`
	Addrs      []string `json:"addrs"`
}

// Skipped is a system that was not run.
type Skipped struct {
	Name    string `json:"name"`
	Install string `json:"install"`
}

// Cell is one system's figures for one operation at one client count.
type Cell struct {
	System     string  `json:"system"`
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

// Ratio compares Synod with one peer in one cell: Synod's figure divided by
// the peer's. Throughput above 1 and latencies below 1 favour Synod. A nil
// ratio means one side has no usable figure (missing, failed, or zero).
type Ratio struct {
	Op         string   `json:"op"`
	Clients    int      `json:"clients"`
	Peer       string   `json:"peer"`
	Throughput *float64 `json:"throughput"`
	P50        *float64 `json:"p50"`
	P99        *float64 `json:"p99"`
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

// ComputeRatios pairs every Synod cell with each peer's cell of the same op
// and client count, for the given peers in order.
func ComputeRatios(cells []Cell, peers []string) []Ratio {
	type key struct {
		system, op string
		clients    int
	}
	idx := map[key]Cell{}
	for _, c := range cells {
		idx[key{c.System, c.Op, c.Clients}] = c
	}
	var out []Ratio
	for _, s := range cells {
		if s.System != Synod {
			continue
		}
		for _, p := range peers {
			r := Ratio{Op: s.Op, Clients: s.Clients, Peer: p}
			if pc, ok := idx[key{p, s.Op, s.Clients}]; ok && pc.usable() && s.usable() {
				r.Throughput = div(s.Throughput, pc.Throughput)
				r.P50 = div(s.P50Ms, pc.P50Ms)
				r.P99 = div(s.P99Ms, pc.P99Ms)
			}
			out = append(out, r)
		}
	}
	return out
}

// sortedCells orders cells by op (put first), clients, then system order.
func sortedCells(cells []Cell, ops []string, systems []string) []Cell {
	rank := func(list []string, s string) int {
		for i, x := range list {
			if x == s {
				return i
			}
		}
		return len(list)
	}
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

// Print writes the human-readable tables.
func (r *Result) Print(w io.Writer) {
	c := r.Config
	fmt.Fprintf(w, "synod compare: %d-member clusters on 127.0.0.1, fsync on for every system\n", c.Members)
	fmt.Fprintf(w, "  workload: %d keys of %d bytes, %d-byte values, uniform keys, closed loop, %gs per cell after %gs unmeasured; puts and linearizable gets measured separately\n",
		c.Keys, c.KeySize, c.ValueSize, c.DurationSec, c.WarmupSec)
	var names []string
	for _, s := range r.Systems {
		names = append(names, s.Name)
		fmt.Fprintf(w, "  %-9s %s; durability %s\n", s.Name, s.Version, s.Durability)
	}
	for _, s := range r.Skipped {
		fmt.Fprintf(w, "  %-9s not run: not installed (install with: %s)\n", s.Name, s.Install)
	}
	if r.Interrupted {
		fmt.Fprintln(w, "  INTERRUPTED: the tables hold the cells measured before Ctrl-C")
	}
	fmt.Fprintf(w, "\n  %-4s %7s  %-9s %12s %9s %9s %8s\n", "op", "clients", "system", "ops/s", "p50 ms", "p99 ms", "errors")
	for _, cell := range sortedCells(r.Cells, c.Ops, names) {
		if cell.Failed != "" {
			fmt.Fprintf(w, "  %-4s %7d  %-9s FAILED: %s\n", cell.Op, cell.Clients, cell.System, cell.Failed)
			continue
		}
		fmt.Fprintf(w, "  %-4s %7d  %-9s %12.1f %9.3f %9.3f %8d\n", cell.Op, cell.Clients, cell.System,
			cell.Throughput, cell.P50Ms, cell.P99Ms, cell.Errors)
	}
	fmt.Fprintln(w, "  (fsync on in every system; latencies in ms)")

	var peers []string
	for _, n := range names {
		if n != Synod {
			peers = append(peers, n)
		}
	}
	if len(peers) == 0 || len(r.Ratios) == 0 {
		return
	}
	fmt.Fprintf(w, "\n  ratios Synod/peer per cell (ops/s above 1: Synod faster; p50, p99 below 1: Synod faster)\n")
	fmt.Fprintf(w, "  %-4s %7s ", "", "")
	for _, p := range peers {
		fmt.Fprintf(w, "  %-22s", "synod/"+p)
	}
	fmt.Fprintf(w, "\n  %-4s %7s ", "op", "clients")
	for range peers {
		fmt.Fprintf(w, "  %6s %7s %7s", "ops/s", "p50", "p99")
	}
	fmt.Fprintln(w)
	type cellKey struct {
		op      string
		clients int
	}
	byCell := map[cellKey]map[string]Ratio{}
	for _, ra := range r.Ratios {
		k := cellKey{ra.Op, ra.Clients}
		if byCell[k] == nil {
			byCell[k] = map[string]Ratio{}
		}
		byCell[k][ra.Peer] = ra
	}
	for _, cell := range sortedCells(r.Cells, c.Ops, names) {
		rs, ok := byCell[cellKey{cell.Op, cell.Clients}]
		if !ok || cell.System != Synod {
			continue
		}
		fmt.Fprintf(w, "  %-4s %7d ", cell.Op, cell.Clients)
		for _, p := range peers {
			ra := rs[p]
			fmt.Fprintf(w, "  %6s %7s %7s", fmtRatio(ra.Throughput), fmtRatio(ra.P50), fmtRatio(ra.P99))
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintln(w, "  (ratios from one run on one machine, all systems fsync on)")
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
