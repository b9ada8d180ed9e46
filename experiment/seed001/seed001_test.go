package seed001

import (
	"bytes"
	"context"
	"github.com/spf13/pflag"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
)

// The embedded tables are the seed's, line for line (when the seed text is
// present in this checkout's shared folder).
func TestSeedTablesMatchSeedText(t *testing.T) {
	paths, _ := filepath.Glob("../../../shared/seeds/001_*.txt")
	if len(paths) != 1 {
		t.Skip("seed 001 text not found beside the repository")
	}
	b, err := os.ReadFile(paths[0])
	if err != nil {
		t.Fatal(err)
	}
	caption := regexp.MustCompile(`^Table (\d): Response times for (ABD|blocking) protocol, \$N=(\d)\$$`)
	lines := strings.Split(string(b), "\n")
	found := 0
	for i, l := range lines {
		m := caption.FindStringSubmatch(strings.TrimSpace(l))
		if m == nil {
			continue
		}
		k, _ := strconv.Atoi(m[1])
		n, _ := strconv.Atoi(m[3])
		// The caption, a blank line, the header and two rows.
		text := strings.Join(lines[i+2:i+5], "\n") + "\n"
		st := seedTables[k-1]
		if st.table != k || st.protocol != strings.ToLower(m[2]) || st.n != n || st.text != text {
			t.Errorf("table %d: embedded %+v, seed text has %s N=%d:\n%q", k, st, m[2], n, text)
		}
		found++
	}
	if found != 6 {
		t.Fatalf("found %d table captions in the seed text, want 6", found)
	}
}

func TestSeedFiguresKeyedLikeCells(t *testing.T) {
	figs, err := seedFigures()
	if err != nil {
		t.Fatal(err)
	}
	cells, err := NewThroughput().Cells(experiment.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// abd, abd-client, blocking x N 1, 3, 5 x two mixes x closed and 50/s.
	if len(cells) != 36 || len(figs) != 36 {
		t.Fatalf("%d cells, %d seed cells; want 36 each", len(cells), len(figs))
	}
	for _, c := range cells {
		if len(figs[c.Key]) != 5 {
			t.Errorf("cell %s: seed metrics %v", c.Key, figs[c.Key])
		}
	}
	// Spot checks against the seed's tables: Table 6 row 0.1, Table 2 row 0.9.
	for _, want := range []struct {
		key, metric string
		v           float64
	}{
		{"protocol=blocking,N=5,get=0.1,load=closed", mThroughput, 1320},
		{"protocol=blocking,N=5,get=0.1,load=uniform-50", mP99, 10.1},
		{"protocol=abd,N=3,get=0.9,load=closed", mP50, 6.31},
		{"protocol=abd-client,N=3,get=0.9,load=uniform-50", mP50, 6.31},
		{"protocol=abd,N=1,get=0.1,load=closed", mMean, 6.43},
	} {
		if v, ok := figs.Get(want.key, want.metric); !ok || v != want.v {
			t.Errorf("%s %s = %v (%v), want %v", want.key, want.metric, v, ok, want.v)
		}
	}
}

func figsFrom(tput map[string]float64) experiment.Figures {
	f := experiment.Figures{}
	for k, v := range tput {
		f.Set(k, mThroughput, v)
		f.Set(k, mMean, 1000/v)
	}
	return f
}

func TestDeriveAndClaimVerdict(t *testing.T) {
	e := NewThroughput()
	e.Ratios = []string{"0.9"}
	holds := figsFrom(map[string]float64{
		cellKey("abd", 1, "0.9", loadClosed): 1000, cellKey("abd", 3, "0.9", loadClosed): 900, cellKey("abd", 5, "0.9", loadClosed): 800,
		cellKey("blocking", 1, "0.9", loadClosed): 2000, cellKey("blocking", 3, "0.9", loadClosed): 1000, cellKey("blocking", 5, "0.9", loadClosed): 600,
	})
	e.Derive(holds)
	if v, _ := holds.Get(cellKey("blocking", 5, "0.9", loadClosed), mRelThroughput); v != 0.3 {
		t.Fatalf("blocking N=5 relative throughput %v, want 0.3", v)
	}
	if v, _ := holds.Get(cellKey("abd", 3, "0.9", loadClosed), mRelMean); v < 1.11 || v > 1.12 {
		t.Fatalf("abd N=3 relative mean %v, want 1000/900", v)
	}
	lines := strings.Join(e.Summary(holds, experiment.Figures{}), "\n")
	if !strings.Contains(lines, "synod get=0.9: N=3: abd 0.90 vs blocking 0.50") || !strings.Contains(lines, "ABD degrades less: HOLDS") ||
		strings.Contains(lines, "abd-client") {
		t.Fatalf("summary:\n%s", lines)
	}
	if !strings.Contains(lines, "seed  get=0.9: not enough cells") {
		t.Fatalf("summary without seed figures:\n%s", lines)
	}

	// Blocking keeps more of its N=1 throughput at N=5: the claim fails.
	fails := figsFrom(map[string]float64{
		cellKey("abd", 1, "0.9", loadClosed): 1000, cellKey("abd", 3, "0.9", loadClosed): 900, cellKey("abd", 5, "0.9", loadClosed): 500,
		cellKey("blocking", 1, "0.9", loadClosed): 1000, cellKey("blocking", 3, "0.9", loadClosed): 800, cellKey("blocking", 5, "0.9", loadClosed): 700,
	})
	fails.Set(cellKey(abdClient, 1, "0.9", loadClosed), mThroughput, 2000)
	fails.Set(cellKey(abdClient, 3, "0.9", loadClosed), mThroughput, 1500)
	e.Derive(fails)
	if lines := strings.Join(e.Summary(fails, experiment.Figures{}), "\n"); !strings.Contains(lines, "DOES NOT HOLD") ||
		!strings.Contains(lines, "N=3: abd 0.90 vs blocking 0.80 of N=1 (abd/blocking 1.12x), abd-client 0.75 of N=1 (abd-client/abd 1.67x)") {
		t.Fatalf("summary for a failing claim:\n%s", lines)
	}
}

func ms2d(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }

// every returns writes issued every step ms from from to to, each taking lat ms.
func every(from, to, step, lat float64) []probeWrite {
	var out []probeWrite
	for t := from; t < to; t += step {
		out = append(out, probeWrite{ms2d(t), ms2d(t + lat)})
	}
	return out
}

func TestWindows(t *testing.T) {
	// Writes every 10 ms taking 1 ms; a write issued at 2000 ms blocks until
	// 3500 ms (issued after the fault at 1000 ms); nothing else completes
	// between 995 ms and 3500 ms.
	succ := append(every(4, 1000, 10, 1), probeWrite{ms2d(2000), ms2d(3500)})
	succ = append(succ, every(3500, 5000, 10, 1)...)
	w := windows(succ, ms2d(1000), ms2d(1500), ms2d(5000))
	if w.longestGap != ms2d(3500-995) || w.gapFrom != ms2d(995) {
		t.Errorf("longest gap %v from %v, want 2.505s from 995ms", w.longestGap, w.gapFrom)
	}
	if !w.recovered || w.recovery != ms2d(2500) {
		t.Errorf("recovery %v (recovered %v), want 2.5s", w.recovery, w.recovered)
	}
	if w.baselineGap != 10*time.Millisecond {
		t.Errorf("baseline %v", w.baselineGap)
	}

	// A write issued before the fault that completes after it is no recovery.
	succ = append(every(4, 1000, 10, 1), probeWrite{ms2d(990), ms2d(1200)})
	succ = append(succ, every(3000, 4000, 10, 1)...)
	w = windows(succ, ms2d(1000), ms2d(1500), ms2d(4000))
	if w.recovery != ms2d(2001) || w.longestGap != ms2d(3001-1200) {
		t.Errorf("late pre-fault write: recovery %v gap %v", w.recovery, w.longestGap)
	}

	// No write after the fault: not recovered, the gap runs to the end.
	w = windows(every(4, 1000, 10, 1), ms2d(1000), ms2d(1500), ms2d(4000))
	if w.recovered || w.longestGap != ms2d(4000-995) {
		t.Errorf("no recovery: %+v", w)
	}

	// Unaffected (ABD): the first write after the fault succeeds at once, and a
	// later jitter gap is reported as the longest gap without undoing recovery.
	succ = append(every(4, 3000, 10, 1), every(3300, 5000, 10, 1)...)
	w = windows(succ, ms2d(1000), ms2d(1500), ms2d(5000))
	if !w.recovered || w.recovery != ms2d(5) || w.longestGap != ms2d(3301-2995) || w.gapFrom != ms2d(2995) {
		t.Errorf("unaffected with jitter: %+v", w)
	}

	// The case: the first write after a crash succeeds at once (a
	// quick 5 ms), then writes stall for 490 ms while the lock times out:
	// the stall ends at 1500 ms, 500 ms after the fault, not 5 ms.
	succ = append(every(4, 1000, 10, 1), probeWrite{ms2d(1000), ms2d(1005)}, probeWrite{ms2d(1010), ms2d(1500)})
	succ = append(succ, every(1500, 3000, 10, 1)...)
	w = windows(succ, ms2d(1000), ms2d(1600), ms2d(3000))
	if !w.recovered || w.recovery != ms2d(500) || w.longestGap != ms2d(495) {
		t.Errorf("stall after a quick first write: %+v", w)
	}
}

// --open-rates none leaves only the closed-loop cells; a list adds one
// open-loop cell per rate and configuration.
func TestOpenRatesFlag(t *testing.T) {
	for _, c := range []struct {
		arg   string
		cells int
		bad   bool
	}{{"none", 2, false}, {"50", 4, false}, {"20,50", 6, false}, {"fast", 0, true}} {
		e := NewThroughput()
		e.Nodes, e.Ratios, e.Protocols = []int{1}, []string{"0.9"}, []string{"abd", "blocking"}
		fs := pflag.NewFlagSet("t", pflag.ContinueOnError)
		e.Flags(fs)
		err := fs.Parse([]string{"--open-rates", c.arg})
		if (err != nil) != c.bad {
			t.Fatalf("--open-rates %s: %v", c.arg, err)
		}
		if c.bad {
			continue
		}
		cells, err := e.Cells(experiment.Options{})
		if err != nil || len(cells) != c.cells {
			t.Errorf("--open-rates %s: %d cells (want %d), %v", c.arg, len(cells), c.cells, err)
		}
	}
}

func TestCellsValidation(t *testing.T) {
	e := NewThroughput()
	e.Durability = "paper"
	if _, err := e.Cells(experiment.Options{}); err == nil || !strings.Contains(err.Error(), "--durability") {
		t.Errorf("bad durability: %v", err)
	}
	e = NewThroughput()
	e.Ratios = []string{"1.5"}
	if _, err := e.Cells(experiment.Options{}); err == nil || !strings.Contains(err.Error(), "--get-ratios") {
		t.Errorf("bad ratio: %v", err)
	}
	f := NewFaults()
	f.Nodes = []int{1}
	if _, err := f.Cells(experiment.Options{}); err == nil || !strings.Contains(err.Error(), "2-99") {
		t.Errorf("N=1 faults: %v", err)
	}
	f = NewFaults()
	f.Scenarios = []string{"flood"}
	if _, err := f.Cells(experiment.Options{}); err == nil || !strings.Contains(err.Error(), "unknown scenario") {
		t.Errorf("bad scenario: %v", err)
	}
	f = NewFaults()
	f.Stall = 20 * time.Second
	if _, err := f.Cells(experiment.Options{}); err == nil || !strings.Contains(err.Error(), "shorter than --observe") {
		t.Errorf("stall longer than observation: %v", err)
	}
}

// Real cells, live, 1 s each: node-coordinated and client-driven ABD at
// N=1 (one cluster), closed loop and uniform arrivals at 50/s, through
// cluster.Up and bench.Run; then the cluster is gone.
func TestLiveQuickCell(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a real node process")
	}
	bin, err := cluster.BuildSynod(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := NewThroughput()
	e.Protocols = []string{"abd", abdClient, "no-such-protocol"}
	e.Nodes = []int{1}
	e.Ratios = []string{"0.9"}
	work := t.TempDir()
	out := t.TempDir()
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{
		Options: experiment.Options{Duration: time.Second, Reps: 1},
		Out:     out, Binary: bin, Work: work, Stdout: &stdout,
	})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	c := res.Cells[0]
	if c.Status != experiment.StatusOK || c.Metrics[mThroughput] <= 0 || c.Metrics[mP99] < c.Metrics[mP50] || c.Labels["durability"] != "fsync" {
		t.Fatalf("abd cell: %+v", c)
	}
	if c.Seed[mThroughput] != 9000 {
		t.Fatalf("abd cell's seed figures: %v", c.Seed)
	}
	if c := res.Cells[1]; c.Status != experiment.StatusOK || c.Metrics[mThroughput] <= 0 || c.Labels["target"] != "abd-client" || c.Metrics[mErrors] != 0 {
		t.Fatalf("client-driven abd cell: %+v", c)
	}
	if res.Cells[2].Status != experiment.StatusUnavailable || !strings.Contains(res.Cells[2].Reason, "not available") {
		t.Fatalf("unregistered protocol cell: %+v", res.Cells[2])
	}
	// The open loop at 50/s: about 50 arrivals in the second, all served.
	for _, c := range res.Cells[3:5] {
		if c.Status != experiment.StatusOK || c.Metrics[mThroughput] < 25 || c.Metrics[mThroughput] > 75 || c.Metrics[mErrors] != 0 {
			t.Fatalf("open-loop cell %s: %+v", c.Key, c)
		}
	}
	if !strings.Contains(stdout.String(), "fsync") {
		t.Fatalf("table does not state the durability:\n%s", stdout.String())
	}
	if _, err := os.Stat(filepath.Join(out, "results.json")); err != nil {
		t.Fatal(err)
	}
	// Nothing of the cluster is left: no process runs a config under work.
	procs, _ := filepath.Glob("/proc/[0-9]*/cmdline")
	for _, p := range procs {
		b, _ := os.ReadFile(p)
		if bytes.Contains(b, []byte(work)) {
			t.Errorf("process %s still runs: %q", p, b)
		}
	}
	if _, err := os.Stat(work); !os.IsNotExist(err) {
		t.Errorf("work directory %s not removed: %v", work, err)
	}
}

func TestParseParams(t *testing.T) {
	pp, err := parseParams([]string{"abd.retransmit=20ms", "blocking.lease=2s", "abd.op_timeout=1s"})
	if err != nil {
		t.Fatal(err)
	}
	if pp["abd"]["retransmit"] != "20ms" || pp["abd"]["op_timeout"] != "1s" || pp["blocking"]["lease"] != "2s" {
		t.Fatalf("parsed %v", pp)
	}
	if s := settings("abd", pp["abd"]); !strings.Contains(s, "retransmit 50ms") || !strings.Contains(s, "set with --param: op_timeout 1s, retransmit 20ms") {
		t.Fatalf("settings: %s", s)
	}
	for _, bad := range []string{"lease=2s", "blocking.lease", ".lease=1s", "blocking.=1s", "blocking.lease="} {
		if _, err := parseParams([]string{bad}); err == nil {
			t.Errorf("--param %q accepted", bad)
		}
	}
}
