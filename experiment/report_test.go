package experiment

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func reportRun(name string, vs ...Verdict) ReportRun {
	res := &Results{Experiment: name, Description: name + " description", Reps: 3}
	for i, v := range vs {
		res.Claims = append(res.Claims, Claim{Text: name + " claim " + string(rune('a'+i)), Paper: "p", Judgement: Judgement{Verdict: v, Ours: "o", Stats: "s"}})
	}
	return ReportRun{Results: res, Table: name + " table\n"}
}

// Re-running some experiments of a report keeps the others' sections and
// summary rows as they were, and counts their verdicts in the header.
func TestReportKeepsOtherSections(t *testing.T) {
	var first bytes.Buffer
	WriteReport(&first, []ReportRun{reportRun("seed001-a", Holds, DoesNotHold), reportRun("seed003-b", Inconclusive), reportRun("seed004-c", Holds)},
		reportHeader{Command: "all"})
	kept := parseReport(first.String(), []string{"seed003-b"})
	if len(kept) != 2 || kept[0].Name != "seed001-a" || kept[1].Name != "seed004-c" {
		t.Fatalf("kept %+v", kept)
	}
	if len(kept[0].Rows) != 2 || len(kept[0].Verdicts) != 2 || kept[0].Verdicts[1] != DoesNotHold {
		t.Fatalf("kept rows %q verdicts %v", kept[0].Rows, kept[0].Verdicts)
	}
	var second bytes.Buffer
	WriteReport(&second, []ReportRun{reportRun("seed003-b", Holds, Holds)}, reportHeader{Command: "only b", Kept: kept})
	out := second.String()
	if !strings.Contains(out, "**5 claims: 4 holds, 1 does not hold.**") {
		t.Errorf("header counts wrong:\n%s", out)
	}
	for _, want := range []string{"seed001-a claim b", "seed004-c table", "seed003-b claim b", "## Seed 001", "## Seed 003", "## Seed 004"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
	if strings.Index(out, "### seed001-a") > strings.Index(out, "### seed003-b") || strings.Index(out, "### seed003-b") > strings.Index(out, "### seed004-c") {
		t.Errorf("sections out of order:\n%s", out)
	}
	// Kept sections survive a second partial run unchanged.
	again := parseReport(out, []string{"seed003-b"})
	for i := range kept {
		if again[i].Body != kept[i].Body || strings.Join(again[i].Rows, "\n") != strings.Join(kept[i].Rows, "\n") {
			t.Errorf("section %s changed:\n%q\n%q", kept[i].Name, kept[i].Body, again[i].Body)
		}
	}
}

// named is the fake experiment under another name (registered once).
type named struct {
	fake
	name string
}

func (n *named) Name() string { return n.name }

var keepOne, keepTwo = &named{name: "seed900-keep-one"}, &named{name: "seed900-keep-two"}

func init() {
	Register(keepOne)
	Register(keepTwo)
}

// An interrupted run leaves a whole report: the experiments it finished
// with their new sections and plots, the one it was running and those
// after it with their earlier sections and plots.
func TestRunAllInterruptedKeepsEarlierSections(t *testing.T) {
	dir := t.TempDir()
	doc, plots := filepath.Join(dir, "REPRODUCTION.md"), filepath.Join(dir, "reproduction")
	if err := os.MkdirAll(plots, 0o755); err != nil {
		t.Fatal(err)
	}
	one, two := reportRun(keepOne.name, Holds), reportRun(keepTwo.name, Inconclusive)
	for _, r := range []*ReportRun{&one, &two} {
		p := filepath.Join(plots, r.Results.Experiment+"-old.png")
		if err := os.WriteFile(p, []byte("png"), 0o644); err != nil {
			t.Fatal(err)
		}
		r.Plots = []string{p}
	}
	var b bytes.Buffer
	WriteReport(&b, []ReportRun{one, two}, reportHeader{Command: "earlier", DocDir: dir})
	if err := os.WriteFile(doc, b.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	keepOne.fake, keepTwo.fake = fake{}, fake{cancel: cancel}
	_, err := RunAll(ctx, ReportOptions{RunOptions: RunOptions{Options: Options{Reps: 1}, Out: filepath.Join(dir, "runs")},
		Names: []string{keepOne.name, keepTwo.name}, Doc: doc, PlotDir: plots, Command: "again", Note: "A note on the load."})
	if err == nil || !strings.Contains(err.Error(), "interrupted") {
		t.Fatalf("RunAll: %v", err)
	}
	out, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	report := string(out)
	for _, want := range []string{"summary: ours has", keepTwo.name + " claim a", keepTwo.name + "-old.png", keepOne.name + "-bars.png", "**1 claims: 1 inconclusive.**", "A note on the load."} {
		if !strings.Contains(report, want) {
			t.Errorf("report lacks %q:\n%s", want, report)
		}
	}
	if strings.Contains(report, keepOne.name+" claim a") || strings.Contains(report, keepOne.name+"-old.png") {
		t.Errorf("the finished experiment's earlier section is still there:\n%s", report)
	}
	if _, err := os.Stat(filepath.Join(plots, keepOne.name+"-old.png")); !os.IsNotExist(err) {
		t.Errorf("the finished experiment's old plot was not replaced: %v", err)
	}
	for _, e := range CheckReport(report, dir) {
		t.Error(e)
	}
}
