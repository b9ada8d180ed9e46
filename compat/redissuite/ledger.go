// Package redissuite runs Redis's own test suite (the tests/unit files of the
// Redis 7.0.15 source, in its external-server mode) against redis-server, the
// control, and against a Synod cluster, and compares the two: a test that
// passes on redis-server must pass on Synod unless the skip file names it
// with a reason. It parses the suite's output into a per-unit ledger that is
// written into docs/COMMANDS.md.
//
// scripts/redis-suite obtains the suite (Debian's redis source package) and
// runs the command in compat/redissuite/cmd; this package holds the parts
// that need no server: the output parser, the skip file, the comparison and
// the ledger's rendering.
package redissuite

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"slices"
	"sort"
	"strings"
)

// Status of one test in one run.
type Status string

const (
	Passed  Status = "ok"
	Failed  Status = "err"
	Ignored Status = "ignore" // skipped by a tag (needs:debug, ...)
	Skipped Status = "skip"   // skipped by the skip file or a test option
	// Exception: the test raised a Tcl error (for example an unknown
	// command); the suite stops the unit there.
	Exception Status = "exception"
)

// Unit is one unit file's run: the status of each test in the order the
// suite reported them, and whether the unit ran to its end.
type Unit struct {
	Name  string
	Tests []Test
	// Done: the suite reported the unit done; false when an exception or
	// a time-out stopped it (the tests after that point never ran).
	Done bool
	// Abort says what stopped the unit when it did not finish.
	Abort string
	// BlockErrors are errors raised outside any test (in a start_server
	// block's own code): with --durable the suite reports them and skips
	// the rest of that block.
	BlockErrors []string
}

// Test is one test's outcome. ID is the test's name, with "#n" appended to
// its n-th repeat (n ≥ 2) within a unit, so that IDs are unique.
type Test struct {
	ID     string
	Status Status
	Detail string // the failure's or skip's message, first line
}

var (
	ansi     = regexp.MustCompile("\x1b\\[[0-9;]*m")
	statusRE = regexp.MustCompile(`^\[(ok|err|ignore|skip|exception)\]: (.*)$`)
	doneRE   = regexp.MustCompile(`^\[\d+/\d+ done\]: (\S+)`)
	timingRE = regexp.MustCompile(` \(\d+ ms\)$`)
	// ignoreRE splits "[ignore]: <name>: <reason>"; the reasons are those
	// of tags_acceptable in tests/support/server.tcl.
	ignoreRE = regexp.MustCompile(`^(.*): (Tag: .*|Not supported .*|large memory flag not provided)$`)
)

// Parse reads one runtest run of a single unit (its standard output, colours
// or not) and returns the tests it reported.
func Parse(name string, r io.Reader) (Unit, error) {
	u := Unit{Name: name}
	seen := map[string]int{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 16<<20)
	var last *Test
	for sc.Scan() {
		line := ansi.ReplaceAllString(sc.Text(), "")
		if m := doneRE.FindStringSubmatch(line); m != nil {
			if m[1] == "unit/"+name {
				u.Done = true
			}
			continue
		}
		m := statusRE.FindStringSubmatch(line)
		if m == nil {
			// The line after "[err]: name in file" is the failure's
			// message ("Expected ... (context: ...)").
			if last != nil && last.Detail == "" && strings.TrimSpace(line) != "" {
				last.Detail = strings.TrimSpace(line)
			}
			continue
		}
		st, rest := Status(m[1]), m[2]
		if st == Exception {
			u.Abort = "exception: " + rest
			last = nil
			continue
		}
		var id, detail string
		switch st {
		case Passed:
			id = timingRE.ReplaceAllString(rest, "")
		case Failed:
			// "[err]: <name> in tests/unit/<unit>.tcl"
			suffix := " in tests/unit/" + name + ".tcl"
			if !strings.HasSuffix(rest, suffix) {
				u.BlockErrors = append(u.BlockErrors, rest)
				last = nil
				continue
			}
			id = strings.TrimSuffix(rest, suffix)
		case Skipped:
			id, detail = rest, "skip file"
		case Ignored:
			id = rest
			if m := ignoreRE.FindStringSubmatch(rest); m != nil {
				id, detail = m[1], m[2]
			}
		}
		seen[id]++
		if n := seen[id]; n > 1 {
			id = fmt.Sprintf("%s#%d", id, n)
		}
		u.Tests = append(u.Tests, Test{ID: id, Status: st, Detail: detail})
		last = &u.Tests[len(u.Tests)-1]
		if st != Failed {
			last = nil
		}
	}
	if err := sc.Err(); err != nil {
		return u, err
	}
	if !u.Done && u.Abort == "" {
		u.Abort = "the unit did not finish (time-out or crash of the test client)"
	}
	return u, nil
}

// Count returns the number of tests with status st.
func (u Unit) Count(st Status) int {
	n := 0
	for _, t := range u.Tests {
		if t.Status == st {
			n++
		}
	}
	return n
}

// Skip is one entry of the skip file: a test of a unit that may fail on
// Synod with the named protocols (nil: every protocol), and why.
type Skip struct {
	Protocols          []string
	Unit, Test, Reason string
}

// Applies says whether the entry holds for protocol proto.
func (s Skip) Applies(proto string) bool {
	return s.Protocols == nil || slices.Contains(s.Protocols, proto)
}

// SkipsFor is the entries of skips that hold for protocol proto.
func SkipsFor(skips []Skip, proto string) []Skip {
	var out []Skip
	for _, s := range skips {
		if s.Applies(proto) {
			out = append(out, s)
		}
	}
	return out
}

// ParseSkips reads the skip file: one entry per line,
// "protocols | unit | test name | reason", where protocols is * (every
// protocol) or a comma-separated list (paxos,pbpaxos); blank lines and lines
// starting with # ignored. Every entry must give a reason; a test named
// twice for one protocol is an error.
func ParseSkips(r io.Reader) ([]Skip, error) {
	var out []Skip
	seen := map[[3]string]bool{}
	sc := bufio.NewScanner(r)
	n := 0
	for sc.Scan() {
		n++
		line := strings.TrimSpace(sc.Text())
		if line == "" || strings.HasPrefix(line, "#") {
			continue
		}
		f := strings.SplitN(line, " | ", 4)
		if len(f) != 4 || strings.TrimSpace(f[0]) == "" || strings.TrimSpace(f[1]) == "" || strings.TrimSpace(f[2]) == "" {
			return nil, fmt.Errorf("skip file line %d: want \"protocols | unit | test name | reason\", got %q", n, line)
		}
		s := Skip{Unit: strings.TrimSpace(f[1]), Test: strings.TrimSpace(f[2]), Reason: strings.TrimSpace(f[3])}
		protos := []string{"*"}
		if p := strings.TrimSpace(f[0]); p != "*" {
			protos = nil
			for _, x := range strings.Split(p, ",") {
				x = strings.TrimSpace(x)
				if x == "" || x == "*" {
					return nil, fmt.Errorf("skip file line %d: protocols %q: want * or a list like paxos,pbpaxos", n, p)
				}
				protos = append(protos, x)
			}
			s.Protocols = protos
		}
		if len(s.Reason) < 10 {
			return nil, fmt.Errorf("skip file line %d: %s / %s: the reason %q says too little", n, s.Unit, s.Test, s.Reason)
		}
		for _, p := range protos {
			k := [3]string{p, s.Unit, s.Test}
			if seen[k] || seen[[3]string{"*", s.Unit, s.Test}] || (p == "*" && seenAny(seen, s.Unit, s.Test)) {
				return nil, fmt.Errorf("skip file line %d: %s / %s is listed twice for protocol %s", n, s.Unit, s.Test, p)
			}
			seen[k] = true
		}
		out = append(out, s)
	}
	return out, sc.Err()
}

// seenAny says whether some protocol's entry names unit's test.
func seenAny(seen map[[3]string]bool, unit, test string) bool {
	for k := range seen {
		if k[1] == unit && k[2] == test {
			return true
		}
	}
	return false
}

// Row is one unit's line of the ledger.
type Row struct {
	Unit string
	// Control: tests that passed on redis-server.
	Control int
	// Passed: tests that passed on Synod (of any: a test may pass on Synod
	// that the control did not run, but the ledger counts only those that
	// passed on the control).
	Passed int
	// Skipped: tests that passed on the control and are in the skip file.
	Skipped int
	// Failed: tests that passed on the control and did not pass on Synod,
	// not counting those in the skip file (regressions); NotRun those of
	// them that never ran because the unit stopped early.
	Failed, NotRun int
	// Regressions names the failed tests with Synod's message.
	Regressions []string
	// Abort says what stopped the Synod run of the unit early ("" if
	// nothing did).
	Abort string
	// StaleSkips are skip-file entries whose test passed on Synod (the
	// entry can go) or that no control run reported (a typo).
	StaleSkips []string
}

// Compare compares one unit's Synod run with its control run, given the skip
// file's entries for the run's protocol (SkipsFor).
func Compare(control, synod Unit, skips []Skip) Row {
	r := Row{Unit: control.Name, Abort: synod.Abort}
	got := map[string]Test{}
	for _, t := range synod.Tests {
		got[t.ID] = t
	}
	skip := map[string]Skip{}
	for _, s := range skips {
		if s.Unit == control.Name {
			skip[s.Test] = s
		}
	}
	inControl := map[string]bool{}
	for _, t := range control.Tests {
		inControl[t.ID] = true
		if t.Status != Passed {
			continue
		}
		r.Control++
		s, ok := got[t.ID]
		_, skipped := skip[t.ID]
		switch {
		case ok && s.Status == Passed:
			r.Passed++
			if skipped {
				r.StaleSkips = append(r.StaleSkips, t.ID+" (passes on Synod)")
			}
		case skipped:
			r.Skipped++
		default:
			r.Failed++
			msg := "not run: the unit stopped before it"
			if ok {
				msg = string(s.Status)
				if s.Detail != "" {
					msg += ": " + s.Detail
				}
			} else {
				r.NotRun++
			}
			r.Regressions = append(r.Regressions, t.ID+" — "+msg)
		}
	}
	for _, s := range skips {
		if s.Unit == control.Name && !inControl[s.Test] {
			r.StaleSkips = append(r.StaleSkips, s.Test+" (no such test in the control run)")
		}
	}
	sort.Strings(r.StaleSkips)
	return r
}

// Ledger renders the per-unit table of one protocol's run.
func Ledger(protocol string, rows []Row) string {
	var b strings.Builder
	fmt.Fprintf(&b, "### %s\n\n", protocol)
	b.WriteString(tableHeader)
	var c, p, s, f, nr int
	for _, r := range rows {
		b.WriteString(rowLine(r) + "\n")
		c, p, s, f, nr = c+r.Control, p+r.Passed, s+r.Skipped, f+r.Failed, nr+r.NotRun
	}
	fmt.Fprintf(&b, "| **all** | **%d** | **%d** | **%d** | **%d** | **%d** | |\n", c, p, s, f, nr)
	return b.String()
}

const tableHeader = "| unit | redis-server passed | Synod passed | skipped (skip file) | failed | of which not reached | what stopped the unit |\n|---|---|---|---|---|---|---|\n"

// rowLine is a unit's row of the table.
func rowLine(r Row) string {
	abort := r.Abort
	if abort == "" {
		abort = "—"
	}
	abort = strings.ReplaceAll(abort, "|", "\\|")
	if len(abort) > 140 {
		abort = abort[:140] + "…"
	}
	return fmt.Sprintf("| %s | %d | %d | %d | %d | %d | %s |", r.Unit, r.Control, r.Passed, r.Skipped, r.Failed, r.NotRun, abort)
}

// Section markers of the ledger in docs/COMMANDS.md.
const (
	Begin = "<!-- redis-suite ledger: generated by scripts/redis-suite; do not edit -->"
	End   = "<!-- end of redis-suite ledger -->"
)

// Splice returns doc with the text between Begin and End replaced by
// section (appended, with its markers, if doc has none).
func Splice(doc, section string) string {
	i := strings.Index(doc, Begin)
	j := strings.Index(doc, End)
	block := Begin + "\n" + section + End + "\n"
	if i < 0 || j < i {
		return strings.TrimRight(doc, "\n") + "\n\n" + block
	}
	rest := doc[j+len(End):]
	rest = strings.TrimPrefix(rest, "\n")
	return doc[:i] + block + rest
}

// Extract returns the Begin..End block of doc (markers included, with its
// final newline), or "" if it has none.
func Extract(doc string) string {
	i := strings.Index(doc, Begin)
	j := strings.Index(doc, End)
	if i < 0 || j < i {
		return ""
	}
	return doc[i:j+len(End)] + "\n"
}

// rowRE reads back a unit's row of a rendered ledger table.
var rowRE = regexp.MustCompile(`^\| (\S+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (\d+) \| (.*) \|$`)

// section is one protocol's part of a rendered ledger block: its rows by
// unit, in order, and the notes after its table (how each row was measured).
type section struct {
	units []string
	rows  map[string]string // unit -> its row's line
	notes []string
}

// parseSections reads the "### protocol" sections of a ledger block (from
// Extract), in order.
func parseSections(block string) (order []string, secs map[string]*section) {
	secs = map[string]*section{}
	var cur *section
	for _, line := range strings.Split(block, "\n") {
		switch {
		case strings.HasPrefix(line, "### "):
			name := strings.TrimPrefix(line, "### ")
			cur = &section{rows: map[string]string{}}
			secs[name] = cur
			order = append(order, name)
		case cur == nil, line == Begin, line == End, strings.TrimSpace(line) == "":
		case rowRE.MatchString(line):
			u := rowRE.FindStringSubmatch(line)[1]
			if u == "**all**" {
				continue
			}
			cur.units = append(cur.units, u)
			cur.rows[u] = line
		case strings.HasPrefix(line, "|"): // the table's header
		default:
			cur.notes = append(cur.notes, line)
		}
	}
	return order, secs
}

// Run is one protocol's run for MergeLedger: its rows and the note saying
// when and how it was measured.
type Run struct {
	Protocol string
	Rows     []Row
	Note     string
}

// MergeLedger renders the ledger block's section text (for Splice): intro,
// then every protocol's section. A protocol this run measured gets its new
// rows; the rows of units it did not run, and the sections of protocols it
// did not run, are kept from old (the current block, from Extract), with
// their notes, and the run's note is added after them. So a run of some
// units or of one protocol updates only what it measured; every row keeps
// a note that says when it was measured.
func MergeLedger(old, intro string, runs []Run) string {
	order, secs := parseSections(old)
	for _, r := range runs {
		s, ok := secs[r.Protocol]
		if !ok {
			s = &section{rows: map[string]string{}}
			secs[r.Protocol] = s
			order = append(order, r.Protocol)
		}
		ran := map[string]bool{}
		for _, row := range r.Rows {
			ran[row.Unit] = true
		}
		all := true
		for _, u := range s.units {
			all = all && ran[u]
		}
		if all {
			s.notes = nil // every old row is replaced: so are their notes
		}
		for _, row := range r.Rows {
			if _, ok := s.rows[row.Unit]; !ok {
				s.units = append(s.units, row.Unit)
			}
			s.rows[row.Unit] = rowLine(row)
		}
		s.notes = append(s.notes, r.Note)
	}
	var b strings.Builder
	b.WriteString(intro)
	for _, p := range order {
		s := secs[p]
		fmt.Fprintf(&b, "### %s\n\n", p)
		b.WriteString(tableHeader)
		var tot [5]int
		for _, u := range s.units {
			line := s.rows[u]
			m := rowRE.FindStringSubmatch(line)
			for i := range tot {
				var n int
				fmt.Sscan(m[2+i], &n)
				tot[i] += n
			}
			b.WriteString(line + "\n")
		}
		fmt.Fprintf(&b, "| **all** | **%d** | **%d** | **%d** | **%d** | **%d** | |\n\n", tot[0], tot[1], tot[2], tot[3], tot[4])
		for _, n := range s.notes {
			b.WriteString(n + "\n")
		}
		b.WriteString("\n")
	}
	return strings.TrimSuffix(b.String(), "\n")
}
