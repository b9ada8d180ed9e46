package experiment

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A written report passes CheckReport; each way of breaking it (a verdict
// outside the set, a claim without statistics or without a cause, the
// header's count or a summary row out of step with the sections, a plot
// link to a missing file) is caught.
func TestCheckReport(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "seed001-a-x.png"), []byte("png"), 0o644); err != nil {
		t.Fatal(err)
	}
	a := reportRun("seed001-a", Holds, DoesNotHold, NotMeasured)
	a.Results.Claims[1].Cause = "measured: c"
	a.Results.Claims[2].Cause = "cell did not run"
	a.Plots = []string{filepath.Join(dir, "seed001-a-x.png")}
	var b bytes.Buffer
	WriteReport(&b, []ReportRun{a, reportRun("seed003-b", Inconclusive), reportRun("seed004-c")}, reportHeader{Command: "all", DocDir: dir})
	good := b.String()
	if errs := CheckReport(good, dir); len(errs) != 0 {
		t.Fatalf("a written report fails: %v\n%s", errs, good)
	}
	claimB := "1. **seed003-b claim a** — **inconclusive**"
	for _, c := range []struct{ name, old, new, want string }{
		{"unknown verdict", claimB, "1. **seed003-b claim a** — **likely**", `verdict "likely"`},
		{"no statistics", "   - statistics: s\n   - cause: measured: c", "   - statistics: \n   - cause: measured: c", "no statistics"},
		{"no cause", "   - cause: measured: c\n", "", "names no cause"},
		{"header count", "**4 claims:", "**5 claims:", "header"},
		{"row verdict", "| seed003-b | seed003-b claim a | inconclusive |", "| seed003-b | seed003-b claim a | holds |", "in the summary table"},
		{"row verdict unknown", "| seed003-b | seed003-b claim a | inconclusive |", "| seed003-b | seed003-b claim a | maybe |", "summary row"},
		{"missing claim", claimB + "\n", "", "the sections 3"},
		{"dangling plot", "(seed001-a-x.png)", "(reproduction/gone.png)", "dangles"},
	} {
		broken := strings.Replace(good, c.old, c.new, 1)
		if broken == good {
			t.Fatalf("%s: %q not in the report:\n%s", c.name, c.old, good)
		}
		errs := CheckReport(broken, dir)
		found := false
		for _, e := range errs {
			found = found || strings.Contains(e.Error(), c.want)
		}
		if !found {
			t.Errorf("%s: not caught (want %q): %v", c.name, c.want, errs)
		}
	}
}

// The committed report (docs/REPRODUCTION.md) passes CheckReport: every
// claim has a verdict of the set with its statistics, the header counts
// them, and no plot link dangles.
func TestCommittedReport(t *testing.T) {
	doc := filepath.Join("..", "docs", "REPRODUCTION.md")
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range CheckReport(string(b), filepath.Dir(doc)) {
		t.Error(e)
	}
}
