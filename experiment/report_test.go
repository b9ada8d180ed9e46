package experiment

import (
	"bytes"
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
