package experiment

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/spf13/pflag"
)

// fake is a tiny experiment: cells x=1..3 of kind "a" and "b"; x=2 of kind b
// is unavailable, x=3 of kind b fails, and every run cell records its order.
// Cell a/x=1 starts a helper process to check that cleanup stops it.
type fake struct {
	ran     []string
	procPID int
	cancel  context.CancelFunc // when set, called after the first cell
}

func (f *fake) Name() string            { return "fake" }
func (f *fake) Description() string     { return "A fake. It measures nothing." }
func (f *fake) Flags(fs *pflag.FlagSet) {}
func (f *fake) Cells(o Options) ([]Cell, error) {
	var cs []Cell
	for _, k := range []string{"a", "b"} {
		for _, x := range []string{"1", "2", "3"} {
			cs = append(cs, NewCell("kind", k, "x", x))
		}
	}
	return cs, nil
}

func (f *fake) RunCell(ctx context.Context, env *Env, c Cell) (Outcome, error) {
	f.ran = append(f.ran, c.Key)
	if f.cancel != nil {
		f.cancel()
	}
	if c.Key == "kind=a,x=1" {
		cmd := exec.Command("sleep", "60")
		if err := env.Start(cmd); err != nil {
			return Outcome{}, err
		}
		f.procPID = cmd.Process.Pid
	}
	if c.Key == "kind=b,x=2" {
		return Outcome{}, Unavailable("kind b needs a %s", "frobnicator")
	}
	if c.Key == "kind=b,x=3" {
		return Outcome{}, errors.New("boom")
	}
	var x float64
	fmt.Sscan(c.Get("x"), &x)
	scale := 10.0
	if c.Get("kind") == "b" {
		scale = 5
	}
	return Outcome{
		Metrics: map[string]float64{"speed": scale * x},
		Labels:  map[string]string{"mode": "pretend"},
	}, nil
}

func (f *fake) Seed() SeedFigures {
	return SeedFigures{
		Source: "the fake paper",
		Values: Figures{
			"kind=a,x=1": {"speed": 7},
			"kind=a,x=2": {"speed": 21},
			"kind=b,x=2": {"speed": 4},
		},
		Notes: map[string]string{"kind=b,x=3": "explodes"},
	}
}

func (f *fake) Report() ReportSpec {
	return ReportSpec{
		Columns: []Column{{Metric: "speed", Header: "speed", Format: "%.1f"}, {Metric: "rel", Header: "rel"}},
		Labels:  []string{"mode"},
		Plots: []PlotSpec{
			{File: "bars", Title: "speed", Kind: Bars, Metric: "speed", X: "x", Series: []string{"kind"}},
			{File: "lines", Title: "speed", Kind: Lines, Metric: "speed", X: "x", Series: []string{"kind"}},
			{File: "empty", Title: "nothing", Kind: Bars, Metric: "no-such-metric", X: "x"},
		},
		Notes: []string{"a note"},
	}
}

// Derive: speed relative to x=1 of the same kind.
func (f *fake) Derive(figs Figures) {
	for k, m := range figs {
		base := "kind=" + strings.Split(strings.TrimPrefix(k, "kind="), ",")[0] + ",x=1"
		if b, ok := figs.Get(base, "speed"); ok {
			m["rel"] = m["speed"] / b
		}
	}
}

func (f *fake) Summary(ours, seed Figures) []string {
	return []string{fmt.Sprintf("summary: ours has %d cells, seed %d", len(ours), len(seed))}
}

func TestRunFakeExperiment(t *testing.T) {
	out := t.TempDir()
	f := &fake{}
	var stdout, log bytes.Buffer
	res, err := Run(context.Background(), f, RunOptions{Options: Options{Reps: 1}, Out: out, Stdout: &stdout, Log: &log})
	if err == nil || !strings.Contains(err.Error(), "1 cell(s) failed") || !strings.Contains(err.Error(), "kind=b,x=3") {
		t.Fatalf("error %v: want one failed cell kind=b,x=3", err)
	}
	want := []string{"kind=a,x=1", "kind=a,x=2", "kind=a,x=3", "kind=b,x=1", "kind=b,x=2", "kind=b,x=3"}
	if strings.Join(f.ran, " ") != strings.Join(want, " ") {
		t.Fatalf("cells ran %v, want %v", f.ran, want)
	}

	// The helper process was stopped and reaped by cleanup.
	if f.procPID == 0 {
		t.Fatal("helper process not started")
	}
	if err := syscall.Kill(f.procPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("helper process %d still exists after Run (kill -0: %v)", f.procPID, err)
	}

	status := map[string]string{}
	for _, c := range res.Cells {
		status[c.Key] = c.Status
	}
	if status["kind=a,x=2"] != StatusOK || status["kind=b,x=2"] != StatusUnavailable || status["kind=b,x=3"] != StatusFailed {
		t.Fatalf("statuses %v", status)
	}

	// Table: our row and the seed's, labels, the unavailable reason, summary, notes.
	tab := stdout.String()
	for _, s := range []string{
		"seed figures: the fake paper",
		"kind=a x=2", "20.0", "21.0", // ours and the seed's for a/x=2
		"pretend",
		"unavailable [", "kind b needs a frobnicator",
		"failed [", "boom",
		"the seed, on kind=b x=3: explodes",
		"summary: ours has 4 cells, seed 3",
		"a note",
	} {
		if !strings.Contains(tab, s) {
			t.Errorf("table lacks %q:\n%s", s, tab)
		}
	}
	// Derived metric: a/x=3 is 3x a/x=1 for us; the seed's a/x=2 is 3x its a/x=1.
	if !strings.Contains(lineWith(tab, "kind=a x=3"), "3.00") {
		t.Errorf("derived rel missing on a/x=3 row:\n%s", tab)
	}
	if !strings.Contains(log.String(), "cell 2/6 kind=a x=2") {
		t.Errorf("progress lacks the cell counter:\n%s", log.String())
	}

	// results.json round-trips with metrics, derived metrics and seed figures.
	b, err := os.ReadFile(filepath.Join(out, "results.json"))
	if err != nil {
		t.Fatal(err)
	}
	var back Results
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatalf("results.json: %v", err)
	}
	if back.Experiment != "fake" || len(back.Cells) != 6 {
		t.Fatalf("results.json: experiment %q with %d cells", back.Experiment, len(back.Cells))
	}
	c := back.Cells[1]
	if c.Metrics["speed"] != 20 || c.Metrics["rel"] != 2 || c.Seed["speed"] != 21 || c.Seed["rel"] != 3 || c.Labels["mode"] != "pretend" {
		t.Fatalf("results.json cell a/x=2: %+v", c)
	}
	if back.Cells[5].Reason != "boom" || back.Cells[5].SeedNote != "explodes" {
		t.Fatalf("results.json failed cell: %+v", back.Cells[5])
	}

	// Plots: bars and lines in both formats, non-empty; the empty spec skipped.
	for _, name := range []string{"bars.png", "bars.svg", "lines.png", "lines.svg"} {
		st, err := os.Stat(filepath.Join(out, name))
		if err != nil || st.Size() < 1000 {
			t.Errorf("plot %s missing or tiny: %v", name, err)
		}
	}
	if _, err := os.Stat(filepath.Join(out, "empty.png")); err == nil {
		t.Error("a plot with no values was written")
	}
	if len(back.Plots) != 4 {
		t.Errorf("results list %d plots, want 4: %v", len(back.Plots), back.Plots)
	}
	png, _ := os.ReadFile(filepath.Join(out, "bars.png"))
	if !bytes.HasPrefix(png, []byte("\x89PNG")) {
		t.Error("bars.png is not a PNG")
	}
	svg, _ := os.ReadFile(filepath.Join(out, "lines.svg"))
	if !bytes.Contains(svg, []byte("<svg")) || !bytes.Contains(svg, []byte("(seed)")) {
		t.Error("lines.svg is not an SVG with the seed's series in its legend")
	}
}

func lineWith(s, sub string) string {
	for _, l := range strings.Split(s, "\n") {
		if strings.Contains(l, sub) {
			return l
		}
	}
	return ""
}

func TestRunInterruptedMarksRemainingCells(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	f := &fake{cancel: cancel}
	res, err := Run(ctx, f, RunOptions{Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("error %v, want interrupted", err)
	}
	if len(f.ran) != 1 {
		t.Fatalf("ran %v after cancel, want only the first cell", f.ran)
	}
	if res.Cells[1].Status != StatusNotRun || res.Cells[5].Status != StatusNotRun || !res.Interrupted {
		t.Fatalf("cells after the interrupt: %+v", res.Cells[1:])
	}
	if err := syscall.Kill(f.procPID, 0); !errors.Is(err, syscall.ESRCH) {
		t.Fatalf("helper process %d survived the interrupted run", f.procPID)
	}
}

type dupCells struct{ fake }

func (d *dupCells) Cells(Options) ([]Cell, error) {
	return []Cell{NewCell("a", "1"), NewCell("a", "1")}, nil
}

func TestRunRejectsDuplicateCells(t *testing.T) {
	_, err := Run(context.Background(), &dupCells{}, RunOptions{Out: t.TempDir()})
	if err == nil || !strings.Contains(err.Error(), "duplicate cell") {
		t.Fatalf("error %v, want duplicate cell", err)
	}
}

func TestParseSeedTable(t *testing.T) {
	tab, err := ParseSeedTable("Ratio\\Metric\tThroughput (req/sec)\tavg. rt (ms)\n0.1\t2000\t6.43\n\n0.9  9000 5.23\n")
	if err != nil {
		t.Fatal(err)
	}
	if len(tab.Columns) != 3 || tab.Columns[1] != "Throughput (req/sec)" || len(tab.Rows) != 2 {
		t.Fatalf("parsed %+v", tab)
	}
	if v, err := tab.Value("0.9", "avg. rt (ms)"); err != nil || v != 5.23 {
		t.Fatalf("Value(0.9, avg) = %v, %v", v, err)
	}
	if _, err := tab.Value("0.5", "avg. rt (ms)"); err == nil || !strings.Contains(err.Error(), `no row "0.5"`) {
		t.Errorf("missing row: %v", err)
	}
	if _, err := tab.Value("0.1", "p99"); err == nil || !strings.Contains(err.Error(), `no column "p99"`) {
		t.Errorf("missing column: %v", err)
	}
	for _, bad := range []struct{ text, want string }{
		{"", "empty"},
		{"just one column\n", "tab-separated"},
		{"a\tb\tc\n1\t2\n", "2 fields, want 3"},
		{"a\tb\n1\tx7\n", `"x7" is not a number`},
	} {
		if _, err := ParseSeedTable(bad.text); err == nil || !strings.Contains(err.Error(), bad.want) {
			t.Errorf("ParseSeedTable(%q) = %v, want an error with %q", bad.text, err, bad.want)
		}
	}
}

func TestCellDuration(t *testing.T) {
	o := Options{}
	if d := o.CellDuration(10*time.Second, time.Second); d != 10*time.Second {
		t.Errorf("default: %v", d)
	}
	o.Quick = true
	if d := o.CellDuration(10*time.Second, time.Second); d != time.Second {
		t.Errorf("quick: %v", d)
	}
	o.Duration = 3 * time.Second
	if d := o.CellDuration(10*time.Second, time.Second); d != 3*time.Second {
		t.Errorf("explicit: %v", d)
	}
}

func TestNonFiniteMetricsDropped(t *testing.T) {
	f := Figures{"c": {"ok": 1, "nan": 0}}
	f["c"]["nan"] = f["c"]["ok"] / 0 * 0 // NaN
	f.Set("c", "inf", f["c"]["ok"]/0)
	f.dropNonFinite()
	if len(f["c"]) != 1 {
		t.Fatalf("after dropNonFinite: %v", f["c"])
	}
}
