package redissuite

import (
	"os"
	"strings"
	"testing"
)

// controlOut and synodOut are runtest outputs in the suite's own format
// (colours included in one, as a terminal would get them).
const controlOut = `Cleanup: may take some time... OK
Starting test server at port 21079
[ready]: 100
Testing unit/type/incr
[ok]: INCR against non existing key (1 ms)
[ok]: INCR: a name: with colons (0 ms)
[ignore]: INCR uses shared objects in the 0-9999 range: Tag: needs:debug denied
[ok]: Repeated (0 ms)
[ok]: Repeated (0 ms)
[ok]: Skipped on Synod (0 ms)
[ok]: Reached only on the control (0 ms)
[err]: Fails on both in tests/unit/type/incr.tcl
Expected 'a' to equal 'b'
[1/1 done]: unit/type/incr (0 seconds)
`

const synodOut = "Cleanup: may take some time... OK\n" +
	"\x1b[1;37;49mTesting unit/type/incr\x1b[0m\n" +
	"[\x1b[0;32;49mok\x1b[0m]: INCR against non existing key (2 ms)\n" +
	"[ok]: INCR: a name: with colons (0 ms)\n" +
	"[ignore]: INCR uses shared objects in the 0-9999 range: Tag: needs:debug denied\n" +
	"[ok]: Repeated (0 ms)\n" +
	"[err]: Repeated in tests/unit/type/incr.tcl\n" +
	"Expected '1' to equal '2' (context: ...)\n" +
	"[skip]: Skipped on Synod\n" +
	"[err]: Fails on both in tests/unit/type/incr.tcl\n" +
	"Expected 'a' to equal 'b'\n" +
	"[exception]: Executing test client: ERR unknown command 'x'.\n"

func parse(t *testing.T, s string) Unit {
	t.Helper()
	u, err := Parse("type/incr", strings.NewReader(s))
	if err != nil {
		t.Fatal(err)
	}
	return u
}

func TestParse(t *testing.T) {
	c := parse(t, controlOut)
	if !c.Done || c.Abort != "" {
		t.Fatalf("control: done %v abort %q", c.Done, c.Abort)
	}
	if got := c.Count(Passed); got != 6 {
		t.Errorf("control passed %d, want 6: %+v", got, c.Tests)
	}
	if c.Tests[1].ID != "INCR: a name: with colons" || c.Tests[2].Detail != "Tag: needs:debug denied" || c.Tests[4].ID != "Repeated#2" {
		t.Errorf("ids: %+v", c.Tests)
	}
	s := parse(t, synodOut)
	if s.Done || !strings.HasPrefix(s.Abort, "exception: Executing test client: ERR unknown command") {
		t.Errorf("synod: done %v abort %q", s.Done, s.Abort)
	}
	if s.Tests[0].ID != "INCR against non existing key" || s.Tests[4].Status != Failed || s.Tests[4].Detail != "Expected '1' to equal '2' (context: ...)" {
		t.Errorf("synod tests: %+v", s.Tests)
	}
}

// TestCompare: a test that passes on the control and fails (or never runs)
// on Synod is a regression unless the skip file names it; a skip whose
// test passes, or that names no test, is reported stale.
func TestCompare(t *testing.T) {
	skips, err := ParseSkips(strings.NewReader(`# comment
* | type/incr | Skipped on Synod | Synod refuses it by design, for testing
paxos,pbpaxos | type/incr | INCR against non existing key | listed though it passes on Synod
paxos | type/incr | No such test | a typo in the skip file, to be reported
* | other/unit | Repeated | another unit's entry, not this one's
pb | type/incr | Repeated#2 | a race seen on pb only, so not paxos's
`))
	if err != nil {
		t.Fatal(err)
	}
	r := Compare(parse(t, controlOut), parse(t, synodOut), SkipsFor(skips, "paxos"))
	if r.Control != 6 || r.Passed != 3 || r.Skipped != 1 || r.Failed != 2 || r.NotRun != 1 {
		t.Errorf("row %+v", r)
	}
	want := []string{"Repeated#2 — err: Expected '1' to equal '2' (context: ...)", "Reached only on the control — not run: the unit stopped before it"}
	if strings.Join(r.Regressions, "\n") != strings.Join(want, "\n") {
		t.Errorf("regressions:\n%s\nwant\n%s", strings.Join(r.Regressions, "\n"), strings.Join(want, "\n"))
	}
	if len(r.StaleSkips) != 2 || !strings.Contains(r.StaleSkips[0], "INCR against non existing key") || !strings.Contains(r.StaleSkips[1], "No such test") {
		t.Errorf("stale skips: %v", r.StaleSkips)
	}
	// On pb its own entry skips Repeated#2's failure, and the entries of
	// other protocols neither skip nor count as stale.
	if pb := Compare(parse(t, controlOut), parse(t, synodOut), SkipsFor(skips, "pb")); len(pb.StaleSkips) != 0 || pb.Skipped != 2 || pb.Failed != 1 || pb.Passed != 3 {
		t.Errorf("pb row %+v", pb)
	}
	// The broken variant: a Synod run that passes everything has no
	// regressions, and one whose only difference is one failing test has
	// exactly that one.
	if r := Compare(parse(t, controlOut), parse(t, controlOut), nil); r.Failed != 0 || r.Passed != 6 {
		t.Errorf("identical runs: %+v", r)
	}
	one := strings.Replace(controlOut, "[ok]: Reached only on the control (0 ms)", "[err]: Reached only on the control in tests/unit/type/incr.tcl\nboom", 1)
	if r := Compare(parse(t, controlOut), parse(t, one), nil); r.Failed != 1 || r.Regressions[0] != "Reached only on the control — err: boom" {
		t.Errorf("one failure: %+v", r)
	}
}

func TestParseSkipsRejects(t *testing.T) {
	for _, in := range []string{
		"* | type/incr | no reason",
		"* | type/incr | t | short",
		"* | type/incr | t | a reason long enough\n* | type/incr | t | the same test again",
		"paxos | type/incr | t | a reason long enough\n* | type/incr | t | the same test again",
		"* | type/incr | t | a reason long enough\npb,paxos | type/incr | t | the same test again",
		"pb,paxos | type/incr | t | a reason long enough\npaxos | type/incr | t | the same test again",
		"pb, | type/incr | t | a reason long enough",
		"* |  | t | a reason long enough",
		"type/incr | t | the old form without protocols",
	} {
		if _, err := ParseSkips(strings.NewReader(in)); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
	// One test skipped for two protocols in two entries is fine.
	if _, err := ParseSkips(strings.NewReader("pb | type/incr | t | a reason long enough\npaxos | type/incr | t | another reason, paxos's")); err != nil {
		t.Error(err)
	}
}

func TestSplice(t *testing.T) {
	doc := "# Title\n\ntable\n"
	d1 := Splice(doc, "ledger one\n")
	if d1 != "# Title\n\ntable\n\n"+Begin+"\nledger one\n"+End+"\n" {
		t.Errorf("first splice:\n%s", d1)
	}
	d2 := Splice(d1+"after\n", "ledger two\n")
	if d2 != "# Title\n\ntable\n\n"+Begin+"\nledger two\n"+End+"\nafter\n" {
		t.Errorf("second splice:\n%s", d2)
	}
	if Extract(d2) != Begin+"\nledger two\n"+End+"\n" || Extract(doc) != "" {
		t.Errorf("extract: %q", Extract(d2))
	}
}

// TestMergeLedger: a run replaces only the rows it measured; the other
// rows, their notes and other protocols' sections stay; totals are the
// rows' sums; a run of every unit of a section drops its old notes.
func TestMergeLedger(t *testing.T) {
	old := Begin + "\n## old intro\n\n" + Ledger("paxos", []Row{
		{Unit: "a", Control: 10, Passed: 8, Failed: 2},
		{Unit: "b", Control: 5, Passed: 5},
	}) + "\nMeasured first.\n" + End + "\n"
	got := MergeLedger(old, "intro\n\n", []Run{
		{Protocol: "paxos", Rows: []Row{{Unit: "a", Control: 10, Passed: 9, Failed: 1, Abort: "x|y"}}, Note: "Measured a again."},
		{Protocol: "pbpaxos", Rows: []Row{{Unit: "a", Control: 10, Passed: 7, Skipped: 1, Failed: 2, NotRun: 1}}, Note: "Measured pb."},
	})
	want := "intro\n\n### paxos\n\n" + tableHeader +
		"| a | 10 | 9 | 0 | 1 | 0 | x\\|y |\n| b | 5 | 5 | 0 | 0 | 0 | — |\n| **all** | **15** | **14** | **0** | **1** | **0** | |\n\n" +
		"Measured first.\nMeasured a again.\n\n### pbpaxos\n\n" + tableHeader +
		"| a | 10 | 7 | 1 | 2 | 1 | — |\n| **all** | **10** | **7** | **1** | **2** | **1** | |\n\nMeasured pb.\n"
	if got != want {
		t.Errorf("merged:\n%s\nwant:\n%s", got, want)
	}
	// Every unit again: the old notes go.
	again := MergeLedger(Begin+"\n"+got+End+"\n", "intro\n\n", []Run{{Protocol: "paxos", Rows: []Row{{Unit: "a", Control: 1, Passed: 1}, {Unit: "b", Control: 1, Passed: 1}}, Note: "Measured all."}})
	if !strings.Contains(again, "| **all** | **2** | **2** |") || strings.Contains(again, "Measured first.") || !strings.Contains(again, "Measured pb.") {
		t.Errorf("full rerun:\n%s", again)
	}
}

// TestSkipFile: the repository's skip file parses (every entry with its
// protocols and a reason).
func TestSkipFile(t *testing.T) {
	f, err := os.Open("skip.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	skips, err := ParseSkips(f)
	if err != nil {
		t.Fatal(err)
	}
	if len(skips) == 0 {
		t.Fatal("no entries")
	}
}
