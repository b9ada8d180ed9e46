package bench

import (
	"bytes"
	"math"
	"strings"
	"testing"
)

func near(a, b float64) bool { return math.Abs(a-b) < 1e-9*math.Max(1, math.Abs(b)) }

func TestPerOpDivides(t *testing.T) {
	before := ProcCounters{CPUSeconds: 1, Syscr: 100, Syscw: 50, Mallocs: 1000, Fsyncs: 10, Persists: 40, PeerMsgs: 7, Handoffs: 11}
	after := ProcCounters{CPUSeconds: 1.5, Syscr: 2100, Syscw: 1050, Mallocs: 51000, Fsyncs: 110, Persists: 840, PeerMsgs: 3007, Handoffs: 4511}
	c := PerOp("n1 (leader)", after.Sub(before), 1000, 2)
	for _, f := range []struct {
		name      string
		got, want float64
	}{
		{"CPU us/op", c.CPUUsPerOp, 500},
		{"allocs/op", c.AllocsPerOp, 50},
		{"reads/op", c.ReadsPerOp, 2},
		{"writes/op", c.WritesPerOp, 1},
		{"msgs/op", c.MsgsPerOp, 3},
		{"hand-offs/op", c.HandoffsPerOp, 4.5},
		{"fsyncs/op", c.FsyncsPerOp, 0.1},
		{"fsyncs/s", c.FsyncsPerS, 50},
		{"ops/fsync", c.OpsPerFsync, 10},
		{"records/fsync", c.RecsPerFsync, 8},
		{"cores", c.Cores, 0.25},
	} {
		if !near(f.got, f.want) {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if z := PerOp("x", after.Sub(before), 0, 2); z.CPUUsPerOp != 0 || z.Cores != 0 {
		t.Errorf("no operations: %+v, want zeros", z)
	}
	if nf := PerOp("x", ProcCounters{CPUSeconds: 1}, 10, 1); nf.OpsPerFsync != 0 || nf.RecsPerFsync != 0 {
		t.Errorf("no fsyncs: %+v, want zero per fsync", nf)
	}
	if s := before.Add(after.Sub(before)); s != after {
		t.Errorf("Add(Sub) = %+v, want %+v", s, after)
	}
}

func TestNewCostRunSumsServersAndPrints(t *testing.T) {
	rep := &Report{ElapsedSec: 2, All: Stats{Count: 10000, Throughput: 5000, P50Ms: 1.5, P99Ms: 9}}
	rep.Config.Clients, rep.Config.ReadRatio = 64, 0
	n := ProcCounters{CPUSeconds: 0.2, Syscr: 20000, Syscw: 10000, Mallocs: 300000, Fsyncs: 500, Persists: 5000, PeerMsgs: 20000, Handoffs: 25000}
	r := NewCostRun("paxos", "fsync", rep, []string{"n2 (leader)", "n1", "n3"}, []ProcCounters{n, n, n},
		ProcCounters{CPUSeconds: 0.1, Syscr: 20000, Syscw: 10000, Mallocs: 90000})
	if len(r.Procs) != 5 || r.Procs[3].Name != "servers" || r.Procs[4].Name != "driver" {
		t.Fatalf("rows %+v: want three nodes, servers, driver", r.Procs)
	}
	if s := r.Procs[3]; !near(s.CPUUsPerOp, 60) || !near(s.MsgsPerOp, 6) || !near(s.FsyncsPerS, 750) || !near(s.OpsPerFsync, 10.0/1.5) {
		t.Errorf("servers row %+v: want 60 us/op, 6 msgs/op, 750 fsyncs/s, 6.67 ops/fsync", s)
	}
	if d := r.Procs[4]; !near(d.CPUUsPerOp, 10) || !near(d.AllocsPerOp, 9) {
		t.Errorf("driver row %+v: want 10 us/op, 9 allocs/op", d)
	}
	r.Top = map[string][]TopFunc{"n2 (leader)": {{Name: "internal/runtime/syscall/linux.Syscall6", FlatUs: 7.5, FlatPct: 37.5, CumUs: 7.5, CumPct: 37.5}}}
	var b bytes.Buffer
	r.Print(&b)
	out := b.String()
	for _, want := range []string{
		"paxos, fsync, 64 clients, 0% gets",
		"10000 ops in 2.00s: 5000 ops/s, p50 1.500 ms, p99 9.000 ms",
		"  n2 (leader)         20.0   0.10      30.0    2.00    1.00     2.00     2.50      250      20.0     10.0    0.050",
		"  servers             60.0   0.30      90.0    6.00    3.00     6.00     7.50      750       6.7     10.0    0.150",
		"  driver              10.0   0.05       9.0    2.00    1.00        -        -        -         -        -        -",
		"n2 (leader): top functions",
		"     7.50  37.5%     7.50  37.5%  internal/runtime/syscall/linux.Syscall6",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("table lacks %q:\n%s", want, out)
		}
	}
	var f bytes.Buffer
	CostRun{System: "abd", Failed: "no operation completed"}.Print(&f)
	if !strings.Contains(f.String(), "FAILED: no operation completed") {
		t.Errorf("failed run printed as %q", f.String())
	}
}

const pprofTop = `File: synod
Type: cpu
Time: 2026-11-24 01:03:30 UTC
Duration: 2s, Total samples = 940ms (47.00%)
Showing nodes accounting for 900ms, 95.74% of 940ms total
Dropped 12 nodes (cum <= 0.94ms)
      flat  flat%   sum%        cum   cum%
     400ms 42.55% 42.55%      400ms 42.55%  internal/runtime/syscall/linux.Syscall6
      1.2s 12.77% 55.32%      1.50s 15.96%  runtime.futex
      10ms  1.06% 56.38%      1.5mins 40.00%  github.com/synod-dev/synod/protocol/abd.(*ABD).Step
         0     0% 56.38%      300ms 31.91%  github.com/synod-dev/synod/gateway.(*conn).serve
         0     0% 56.38%      200ms 21.28%  github.com/synod-dev/synod/node.(*nsLoop).run
         0     0% 56.38%      100ms 10.64%  bufio.(*Reader).Read (inline)
`

func TestParsePprofTop(t *testing.T) {
	rows, err := ParsePprofTop([]byte(pprofTop), 200) // the process spent 200 us per operation
	if err != nil {
		t.Fatal(err)
	}
	if len(rows) != 6 {
		t.Fatalf("%d rows, want 6: %+v", len(rows), rows)
	}
	want := []TopFunc{
		{"internal/runtime/syscall/linux.Syscall6", 85.1, 42.55, 85.1, 42.55},
		{"runtime.futex", 25.54, 12.77, 31.92, 15.96},
		{"github.com/synod-dev/synod/protocol/abd.(*ABD).Step", 2.12, 1.06, 80, 40},
		{"github.com/synod-dev/synod/gateway.(*conn).serve", 0, 0, 63.82, 31.91},
	}
	for i, w := range want {
		g := rows[i]
		if g.Name != w.Name || !near(g.FlatUs, w.FlatUs) || !near(g.FlatPct, w.FlatPct) || !near(g.CumUs, w.CumUs) || !near(g.CumPct, w.CumPct) {
			t.Errorf("row %d = %+v, want %+v", i, g, w)
		}
	}
	if rows[5].Name != "bufio.(*Reader).Read (inline)" {
		t.Errorf("name with a suffix read as %q", rows[5].Name)
	}
	if _, err := ParsePprofTop([]byte("no table here\n"), 200); err == nil {
		t.Error("output without a table accepted")
	}
	if _, err := ParsePprofTop([]byte(pprofTop), 0); err == nil {
		t.Error("no CPU per operation accepted")
	}
	bad := strings.Replace(pprofTop, "400ms 42.55% 42.55%", "400xx 42.55% 42.55%", 1)
	if _, err := ParsePprofTop([]byte(bad), 200); err == nil {
		t.Error("a bad duration accepted")
	}
}

func TestPickTopAddsOwnFunctionsByCum(t *testing.T) {
	rows, err := ParsePprofTop([]byte(pprofTop), 200)
	if err != nil {
		t.Fatal(err)
	}
	got := PickTop(rows, 2, 2, "github.com/synod-dev/synod/")
	var names []string
	for _, r := range got {
		names = append(names, r.Name)
	}
	want := []string{
		"internal/runtime/syscall/linux.Syscall6", "runtime.futex", // the two hottest by flat
		"github.com/synod-dev/synod/protocol/abd.(*ABD).Step", // own functions by cum, largest first
		"github.com/synod-dev/synod/gateway.(*conn).serve",
	}
	if strings.Join(names, "|") != strings.Join(want, "|") {
		t.Errorf("PickTop = %q, want %q", names, want)
	}
}

// TestNodeCountersPreferWALFrames: a node's fsyncs are its WAL frames
// (real fdatasyncs, shared by the namespaces' commits), not
// synod_fsyncs_total (the namespaces' commits), when the node has a WAL;
// without one, synod_fsyncs_total is all there is.
func TestNodeCountersPreferWALFrames(t *testing.T) {
	wal := NodeCounters(map[string]float64{"synod_fsyncs_total": 160, "synod_wal_commits_total": 160,
		"synod_wal_frames_total": 20, "synod_persists_total": 400, "go_memstats_mallocs_total": 9, "synod_peer_messages_sent_total": 3, "synod_handoffs_total": 12})
	if wal.Fsyncs != 20 || wal.Commits != 160 || wal.Persists != 400 || wal.Mallocs != 9 || wal.PeerMsgs != 3 || wal.Handoffs != 12 {
		t.Errorf("WAL node: %+v, want 20 fsyncs (frames), 160 commits", wal)
	}
	c := PerOp("n1", wal, 100, 1)
	if !near(c.CommitsPerFsync, 8) || !near(c.OpsPerFsync, 5) || !near(c.FsyncsPerOp, 0.2) {
		t.Errorf("per op %+v: want 8 commits/fsync, 5 ops/fsync, 0.2 fsyncs/op", c)
	}
	peb := NodeCounters(map[string]float64{"synod_fsyncs_total": 50})
	if peb.Fsyncs != 50 || peb.Commits != 50 {
		t.Errorf("node without a WAL: %+v, want 50 fsyncs and commits", peb)
	}
}
