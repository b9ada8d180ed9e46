package bench

import (
	"bufio"
	"bytes"
	"cmp"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Where the time goes, per process and per client operation (issue 18: "CPU
// profile per operation on each node, allocations per operation, syscalls
// per operation, fsyncs per second and operations per fsync"). `synod
// costs` samples ProcCounters of every node, of the driver (its own
// process) and of redis-server before and after a measured run and prints
// the deltas divided by the operations the driver completed.

// ProcCounters are one process's cumulative counters at one instant.
type ProcCounters struct {
	// CPUSeconds is user + system CPU (/proc/<pid>/stat).
	CPUSeconds float64 `json:"cpu_s"`
	// Syscr and Syscw are read and write system calls (/proc/<pid>/io).
	Syscr float64 `json:"syscr"`
	Syscw float64 `json:"syscw"`
	// Mallocs is heap objects allocated (go_memstats_mallocs_total; Go
	// processes only).
	Mallocs float64 `json:"mallocs"`
	// Synod nodes only (their /metrics, NodeCounters): fdatasyncs, storage
	// commits, records persisted (synod_persists_total), peer messages
	// sent (synod_peer_messages_sent_total).
	Fsyncs   float64 `json:"fsyncs"`
	Commits  float64 `json:"commits"`
	Persists float64 `json:"persists"`
	PeerMsgs float64 `json:"peer_msgs"`
	// Handoffs are inputs and outputs passed between goroutines on the
	// request path (synod_handoffs_total; issue 28 item 5).
	Handoffs float64 `json:"handoffs"`
}

// NodeCounters takes a node's counters from its summed metrics (name to
// value, compare.SumMetrics). Fsyncs are the node's real fdatasyncs: the
// WAL frames it wrote (synod_wal_frames_total), each one write and one
// fdatasync shared by every namespace's commits it carries; Commits are
// the namespaces' storage commits (synod_wal_commits_total), so
// Commits/Fsyncs is the group commit across namespaces. A node without the
// WAL engine exports no frames: both are then synod_fsyncs_total (a
// namespace's commits, each with its own sync as far as the node can
// tell).
func NodeCounters(m map[string]float64) ProcCounters {
	c := ProcCounters{Mallocs: m["go_memstats_mallocs_total"], Persists: m["synod_persists_total"], PeerMsgs: m["synod_peer_messages_sent_total"],
		Handoffs: m["synod_handoffs_total"]}
	if frames, ok := m["synod_wal_frames_total"]; ok {
		c.Fsyncs, c.Commits = frames, m["synod_wal_commits_total"]
	} else {
		c.Fsyncs, c.Commits = m["synod_fsyncs_total"], m["synod_fsyncs_total"]
	}
	return c
}

// NodeMetricNames are the metrics NodeCounters reads.
var NodeMetricNames = []string{"go_memstats_mallocs_total", "synod_fsyncs_total", "synod_wal_frames_total", "synod_wal_commits_total",
	"synod_persists_total", "synod_peer_messages_sent_total", "synod_handoffs_total"}

// Sub returns c - b, counter by counter.
func (c ProcCounters) Sub(b ProcCounters) ProcCounters {
	return ProcCounters{
		CPUSeconds: c.CPUSeconds - b.CPUSeconds,
		Syscr:      c.Syscr - b.Syscr,
		Syscw:      c.Syscw - b.Syscw,
		Mallocs:    c.Mallocs - b.Mallocs,
		Fsyncs:     c.Fsyncs - b.Fsyncs,
		Commits:    c.Commits - b.Commits,
		Persists:   c.Persists - b.Persists,
		PeerMsgs:   c.PeerMsgs - b.PeerMsgs,
		Handoffs:   c.Handoffs - b.Handoffs,
	}
}

// Add returns c + b, counter by counter.
func (c ProcCounters) Add(b ProcCounters) ProcCounters {
	return ProcCounters{
		CPUSeconds: c.CPUSeconds + b.CPUSeconds,
		Syscr:      c.Syscr + b.Syscr,
		Syscw:      c.Syscw + b.Syscw,
		Mallocs:    c.Mallocs + b.Mallocs,
		Fsyncs:     c.Fsyncs + b.Fsyncs,
		Commits:    c.Commits + b.Commits,
		Persists:   c.Persists + b.Persists,
		PeerMsgs:   c.PeerMsgs + b.PeerMsgs,
		Handoffs:   c.Handoffs + b.Handoffs,
	}
}

// ProcCost is one process's share of a run, per client operation.
type ProcCost struct {
	// Name is the row's name: "n1 (leader)", "n2", "servers", "driver",
	// "redis-server".
	Name  string       `json:"name"`
	Delta ProcCounters `json:"delta"`
	// Per client operation.
	CPUUsPerOp    float64 `json:"cpu_us_per_op"`
	AllocsPerOp   float64 `json:"allocs_per_op"`
	ReadsPerOp    float64 `json:"syscr_per_op"`
	WritesPerOp   float64 `json:"syscw_per_op"`
	MsgsPerOp     float64 `json:"peer_msgs_per_op"`
	HandoffsPerOp float64 `json:"handoffs_per_op"`
	FsyncsPerOp   float64 `json:"fsyncs_per_op"`
	FsyncsPerS    float64 `json:"fsyncs_per_s"`
	OpsPerFsync   float64 `json:"ops_per_fsync"`     // client operations per fdatasync of this process (0: none)
	RecsPerFsync  float64 `json:"records_per_fsync"` // persisted records per fdatasync (group commit)
	// CommitsPerFsync is storage commits per fdatasync: above 1 when
	// namespaces share the node's WAL frames (NodeCounters).
	CommitsPerFsync float64 `json:"commits_per_fsync"`
	// Cores is CPU seconds per elapsed second: the share of the machine.
	Cores float64 `json:"cores"`
}

// PerOp divides a process's counter deltas by the client operations ops
// completed in elapsed seconds.
func PerOp(name string, d ProcCounters, ops int64, elapsed float64) ProcCost {
	c := ProcCost{Name: name, Delta: d}
	if ops <= 0 || elapsed <= 0 {
		return c
	}
	n := float64(ops)
	c.CPUUsPerOp = d.CPUSeconds * 1e6 / n
	c.AllocsPerOp = d.Mallocs / n
	c.ReadsPerOp = d.Syscr / n
	c.WritesPerOp = d.Syscw / n
	c.MsgsPerOp = d.PeerMsgs / n
	c.HandoffsPerOp = d.Handoffs / n
	c.FsyncsPerOp = d.Fsyncs / n
	c.FsyncsPerS = d.Fsyncs / elapsed
	if d.Fsyncs > 0 {
		c.OpsPerFsync = n / d.Fsyncs
		c.RecsPerFsync = d.Persists / d.Fsyncs
		c.CommitsPerFsync = d.Commits / d.Fsyncs
	}
	c.Cores = d.CPUSeconds / elapsed
	return c
}

// TopFunc is one function of a CPU profile, per client operation.
type TopFunc struct {
	Name string `json:"name"`
	// FlatPct and CumPct are the function's own and cumulative shares of
	// the profile's samples; FlatUs and CumUs those shares of the process's
	// CPU per client operation, in microseconds.
	FlatUs  float64 `json:"flat_us_per_op"`
	FlatPct float64 `json:"flat_pct"`
	CumUs   float64 `json:"cum_us_per_op"`
	CumPct  float64 `json:"cum_pct"`
}

// CostRun is one measured run of one system: the driver's figures and every
// process's cost per operation.
type CostRun struct {
	System     string  `json:"system"` // protocol name, or "redis-server"
	Durability string  `json:"durability"`
	Clients    int     `json:"clients"`
	ReadRatio  float64 `json:"read_ratio"`
	Ops        int64   `json:"ops"`
	ElapsedSec float64 `json:"elapsed_s"`
	OpsPerS    float64 `json:"ops_per_s"`
	P50Ms      float64 `json:"p50_ms"`
	P99Ms      float64 `json:"p99_ms"`
	// Procs are the servers' rows (nodes, leader first, or redis-server),
	// then "servers" (their sum, when more than one), then "driver".
	Procs []ProcCost `json:"procs"`
	// Top lists each node's hottest functions (--profile), by row name.
	Top      map[string][]TopFunc `json:"top,omitempty"`
	Profiles map[string]string    `json:"profiles,omitempty"`
	Load     string               `json:"load,omitempty"` // the 1-minute load average (/proc/loadavg) before and after
	Failed   string               `json:"failed,omitempty"`
}

// NewCostRun fills a CostRun from the driver's report and the counter deltas
// of the servers (in order) and of the driver.
func NewCostRun(system, durability string, rep *Report, names []string, servers []ProcCounters, driver ProcCounters) CostRun {
	r := CostRun{System: system, Durability: durability, Clients: rep.Config.Clients, ReadRatio: rep.Config.ReadRatio,
		Ops: rep.All.Count, ElapsedSec: rep.ElapsedSec, OpsPerS: rep.All.Throughput, P50Ms: rep.All.P50Ms, P99Ms: rep.All.P99Ms}
	var sum ProcCounters
	for i, d := range servers {
		r.Procs = append(r.Procs, PerOp(names[i], d, r.Ops, r.ElapsedSec))
		sum = sum.Add(d)
	}
	if len(servers) > 1 {
		r.Procs = append(r.Procs, PerOp("servers", sum, r.Ops, r.ElapsedSec))
	}
	r.Procs = append(r.Procs, PerOp("driver", driver, r.Ops, r.ElapsedSec))
	return r
}

// Print writes the run's table: one row per process.
func (r CostRun) Print(w io.Writer) {
	fmt.Fprintf(w, "\n%s, %s, %d clients, %.0f%% gets", r.System, r.Durability, r.Clients, 100*r.ReadRatio)
	if r.Load != "" {
		fmt.Fprintf(w, " (load %s)", r.Load)
	}
	fmt.Fprintln(w)
	if r.Failed != "" {
		fmt.Fprintf(w, "  FAILED: %s\n", r.Failed)
		return
	}
	fmt.Fprintf(w, "  %d ops in %.2fs: %.0f ops/s, p50 %.3f ms, p99 %.3f ms\n", r.Ops, r.ElapsedSec, r.OpsPerS, r.P50Ms, r.P99Ms)
	fmt.Fprintf(w, "  %-14s %9s %6s %9s %7s %7s %8s %8s %8s %9s %8s %8s %9s\n",
		"process", "CPU us/op", "cores", "allocs/op", "rd/op", "wr/op", "msgs/op", "hand/op", "fsync/s", "ops/fsync", "rec/fsync", "fsync/op", "cmt/fsync")
	for _, p := range r.Procs {
		fsync := func(v float64, f string) string {
			if p.Delta.Fsyncs == 0 {
				return "-"
			}
			return fmt.Sprintf(f, v)
		}
		allocs := "-"
		if p.Delta.Mallocs != 0 {
			allocs = fmt.Sprintf("%.1f", p.AllocsPerOp)
		}
		msgs := "-"
		if p.Delta.PeerMsgs != 0 {
			msgs = fmt.Sprintf("%.2f", p.MsgsPerOp)
		}
		hand := "-"
		if p.Delta.Handoffs != 0 {
			hand = fmt.Sprintf("%.2f", p.HandoffsPerOp)
		}
		fmt.Fprintf(w, "  %-14s %9.1f %6.2f %9s %7.2f %7.2f %8s %8s %8s %9s %8s %8s %9s\n", p.Name, p.CPUUsPerOp, p.Cores, allocs,
			p.ReadsPerOp, p.WritesPerOp, msgs, hand, fsync(p.FsyncsPerS, "%.0f"), fsync(p.OpsPerFsync, "%.1f"),
			fsync(p.RecsPerFsync, "%.1f"), fsync(p.FsyncsPerOp, "%.3f"), fsync(p.CommitsPerFsync, "%.2f"))
	}
	for _, p := range r.Procs {
		top := r.Top[p.Name]
		if len(top) == 0 {
			continue
		}
		fmt.Fprintf(w, "  %s: top functions, CPU us per op (flat, cum; %% of its samples)", p.Name)
		if f := r.Profiles[p.Name]; f != "" {
			fmt.Fprintf(w, ", profile %s", f)
		}
		fmt.Fprintln(w)
		for _, t := range top {
			fmt.Fprintf(w, "    %7.2f %5.1f%%  %7.2f %5.1f%%  %s\n", t.FlatUs, t.FlatPct, t.CumUs, t.CumPct, t.Name)
		}
	}
}

// ParsePprofTop reads `go tool pprof -top` output and returns its rows with
// CPU per client operation: each row's share of the profile's samples times
// cpuUsPerOp, the process's CPU per operation measured from /proc. (A
// profile's samples fall short of the CPU the kernel counts, by half on a
// loaded machine, so the shares are taken from the profile and the total
// from /proc.)
func ParsePprofTop(out []byte, cpuUsPerOp float64) ([]TopFunc, error) {
	if cpuUsPerOp <= 0 {
		return nil, fmt.Errorf("CPU per operation %g: nothing to share out", cpuUsPerOp)
	}
	var rows []TopFunc
	header := false
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) >= 5 && f[0] == "flat" && f[1] == "flat%" {
			header = true
			continue
		}
		if !header || len(f) < 6 {
			continue
		}
		_, err1 := pprofSeconds(f[0])
		flatPct, err2 := pprofPct(f[1])
		_, err3 := pprofSeconds(f[3])
		cumPct, err4 := pprofPct(f[4])
		if err := firstErr(err1, err2, err3, err4); err != nil {
			return nil, fmt.Errorf("pprof row %q: %w", sc.Text(), err)
		}
		rows = append(rows, TopFunc{Name: strings.Join(f[5:], " "), FlatUs: flatPct * cpuUsPerOp / 100, FlatPct: flatPct,
			CumUs: cumPct * cpuUsPerOp / 100, CumPct: cumPct})
	}
	if !header {
		return nil, fmt.Errorf("no pprof -top table in %q", firstLines(out, 5))
	}
	return rows, sc.Err()
}

func firstErr(errs ...error) error {
	for _, e := range errs {
		if e != nil {
			return e
		}
	}
	return nil
}

func firstLines(b []byte, n int) string {
	lines := strings.SplitN(string(b), "\n", n+1)
	if len(lines) > n {
		lines = lines[:n]
	}
	return strings.Join(lines, "\n")
}

// pprofSeconds parses pprof's durations: "0", "10ms", "1.20s", "1.5mins",
// "2hrs".
func pprofSeconds(s string) (float64, error) {
	for _, u := range []struct {
		suffix string
		scale  float64
	}{{"mins", 60}, {"hrs", 3600}} {
		if v, ok := strings.CutSuffix(s, u.suffix); ok {
			f, err := strconv.ParseFloat(v, 64)
			return f * u.scale, err
		}
	}
	if s == "0" {
		return 0, nil
	}
	d, err := time.ParseDuration(s)
	return d.Seconds(), err
}

func pprofPct(s string) (float64, error) {
	v, ok := strings.CutSuffix(s, "%")
	if !ok {
		return 0, fmt.Errorf("%q is not a percentage", s)
	}
	return strconv.ParseFloat(v, 64)
}

// PickTop keeps the n rows of a flat-sorted pprof table with the most flat
// CPU, then adds the m rows with the most cumulative CPU whose names start
// with one of prefixes (the project's own functions: where in Synod the
// time is spent), each once.
func PickTop(rows []TopFunc, n, m int, prefixes ...string) []TopFunc {
	var out []TopFunc
	seen := map[string]bool{}
	for _, r := range rows {
		if len(out) == n {
			break
		}
		out = append(out, r)
		seen[r.Name] = true
	}
	var own []TopFunc
	for _, r := range rows {
		if seen[r.Name] {
			continue
		}
		for _, p := range prefixes {
			if strings.HasPrefix(r.Name, p) {
				own = append(own, r)
				break
			}
		}
	}
	// Own functions by cumulative CPU, largest first.
	slices.SortStableFunc(own, func(a, b TopFunc) int { return cmp.Compare(b.CumUs, a.CumUs) })
	if len(own) > m {
		own = own[:m]
	}
	return append(out, own...)
}
