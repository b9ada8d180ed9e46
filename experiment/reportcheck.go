package experiment

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
)

// CheckReport checks a report in WriteReport's format (docs/REPRODUCTION.md)
// and returns every problem it finds:
//
//   - every claim of a section ("1. **claim** — **verdict**") has a verdict
//     of Verdicts, the paper's figure, ours and non-empty statistics, and a
//     cause when it does not hold;
//   - every row of the summary table has a known verdict (or "-" for an
//     experiment that judges no claim), and the rows and the sections'
//     claims agree, verdict by verdict;
//   - the header's "**N claims: ...**" counts are the rows' counts;
//   - with docDir, every plot it links exists (relative to docDir).
func CheckReport(doc, docDir string) []error {
	var errs []error
	bad := func(format string, a ...any) { errs = append(errs, fmt.Errorf(format, a...)) }
	lines := strings.Split(doc, "\n")

	rows := map[Verdict]int{}
	nRows := 0
	sections := map[Verdict]int{}
	nSections := 0
	var table summaryTable
	header := ""
	section := ""
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		if name, v, in := table.row(l); in {
			switch {
			case name == "" || v == "-" && strings.Contains(l, "(no claim judged"):
			case !knownVerdict(v):
				bad("summary row %q: verdict %q is none of %v", shorten(l, 100), v, Verdicts)
			default:
				rows[v]++
				nRows++
			}
			continue
		}
		switch {
		case header == "" && strings.HasPrefix(l, "**") && strings.Contains(l, " claims: "):
			header = l
		case strings.HasPrefix(l, "### "):
			section = strings.TrimPrefix(l, "### ")
		}
		m := claimLine.FindStringSubmatch(l)
		if m == nil {
			continue
		}
		text, v := m[1], Verdict(m[2])
		where := fmt.Sprintf("%s: claim %q", section, shorten(text, 80))
		if !knownVerdict(v) {
			bad("%s: verdict %q is none of %v", where, v, Verdicts)
		} else {
			sections[v]++
		}
		nSections++
		fields := map[string]string{}
		for j := i + 1; j < len(lines) && strings.HasPrefix(lines[j], "   - "); j++ {
			k, val, _ := strings.Cut(strings.TrimPrefix(lines[j], "   - "), ": ")
			fields[k] = strings.TrimSpace(val)
		}
		for _, k := range []string{"paper", "Synod", "statistics"} {
			if fields[k] == "" {
				bad("%s (%s): no %s", where, v, k)
			}
		}
		if v == DoesNotHold && fields["cause"] == "" {
			bad("%s: does not hold and names no cause", where)
		}
	}
	if nRows != nSections {
		bad("the summary table has %d claims, the sections %d", nRows, nSections)
	}
	for _, v := range Verdicts {
		if rows[v] != sections[v] {
			bad("%q: %d in the summary table, %d in the sections", v, rows[v], sections[v])
		}
	}
	if header == "" {
		bad("no claim count (\"**N claims: ...**\") in the header")
	} else if want := fmt.Sprintf("**%d claims: %s.**", nRows, FormatCounts(rows)); header != want {
		bad("header %q, the rows count %q", header, want)
	}
	if docDir != "" {
		for _, m := range plotLink.FindAllStringSubmatch(doc, -1) {
			if _, err := os.Stat(filepath.Join(docDir, filepath.FromSlash(m[1]))); err != nil {
				bad("plot link %s dangles: %v", m[1], err)
			}
		}
	}
	return errs
}

var (
	claimLine = regexp.MustCompile(`^` + `[0-9]+\. \*\*(.+)\*\* — \*\*([^*]+)\*\*$`)
	plotLink  = regexp.MustCompile(`!\[[^\]]*\]\(([^)]+)\)`)
)
