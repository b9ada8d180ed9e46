package experiment

import (
	"bufio"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
)

// OursLabel and SeedLabel name the two sources in tables and plot legends.
const (
	OursLabel = "synod"
	SeedLabel = "seed"
)

// PrintTable writes the results table: for each cell one row of our figures
// (with the spec's labels, e.g. the durability mode, beside the numbers), and
// under it one row of the seed's figures or statement when it has any; then
// the summary and the notes.
func PrintTable(w io.Writer, r *Results, spec ReportSpec) {
	fmt.Fprintf(w, "\n%s: %s/%s, %d CPUs, %s", r.Experiment, r.Host.OS, r.Host.Arch, r.Host.CPUs, r.Host.GoVersion)
	if r.Quick {
		fmt.Fprint(w, ", --quick")
	}
	if r.Reps > 0 {
		fmt.Fprintf(w, ", %d run(s) per cell (figures are means)", r.Reps)
	}
	if r.LoadAvg[0] != "" {
		fmt.Fprintf(w, ", loadavg %s at start, %s at end", r.LoadAvg[0], r.LoadAvg[1])
	}
	fmt.Fprintln(w)
	if r.SeedSource != "" {
		fmt.Fprintf(w, "seed figures: %s\n", r.SeedSource)
	}
	fmt.Fprintln(w)
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', tabwriter.AlignRight)
	header := []string{"cell", "source"}
	for _, c := range spec.Columns {
		header = append(header, c.Header)
	}
	header = append(header, spec.Labels...)
	var notes []string
	note := func(s string) string {
		for i, n := range notes {
			if n == s {
				return fmt.Sprintf("[%d]", i+1)
			}
		}
		notes = append(notes, s)
		return fmt.Sprintf("[%d]", len(notes))
	}
	// tabwriter aligns every column right; pad the cell column to read left.
	width := len("cell")
	for _, cr := range r.Cells {
		width = max(width, len(cr.Label()))
	}
	pad := func(s string) string { return s + strings.Repeat(" ", width-len(s)) }
	header[0] = pad(header[0])
	fmt.Fprintln(tw, strings.Join(header, "\t")+"\t")
	for _, cr := range r.Cells {
		row := []string{pad(cr.Label()), OursLabel}
		if cr.Status != StatusOK {
			msg := cr.Status
			if cr.Reason != "" {
				msg += ": " + cr.Reason
			}
			row = append(row, cr.Status+" "+note(msg))
			for i := 1; i < len(spec.Columns); i++ {
				row = append(row, "")
			}
			for _, l := range spec.Labels {
				row = append(row, orDefault(cr.Labels[l], ""))
			}
		} else {
			for _, c := range spec.Columns {
				row = append(row, formatValue(cr.Metrics, c))
			}
			for _, l := range spec.Labels {
				row = append(row, orDefault(cr.Labels[l], "-"))
			}
		}
		fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		if len(cr.Seed) > 0 || cr.SeedNote != "" {
			row := []string{pad(""), SeedLabel}
			if len(cr.Seed) == 0 {
				// A statement without figures: only its note.
				row = append(row, note("the seed, on "+cr.Label()+": "+cr.SeedNote))
				for i := 1; i < len(spec.Columns); i++ {
					row = append(row, "")
				}
			} else {
				for _, c := range spec.Columns {
					row = append(row, formatValue(cr.Seed, c))
				}
				if cr.SeedNote != "" {
					row[len(row)-1] += " " + note("the seed, on "+cr.Label()+": "+cr.SeedNote)
				}
			}
			for range spec.Labels {
				row = append(row, "")
			}
			fmt.Fprintln(tw, strings.Join(row, "\t")+"\t")
		}
	}
	tw.Flush()
	for i, n := range notes {
		fmt.Fprintf(w, "  [%d] %s\n", i+1, shorten(n, 400))
	}
	if len(r.Summary) > 0 {
		fmt.Fprintln(w)
		for _, s := range r.Summary {
			fmt.Fprintln(w, s)
		}
	}
	if len(spec.Notes) > 0 {
		fmt.Fprintln(w)
		for _, n := range spec.Notes {
			fmt.Fprintln(w, n)
		}
	}
}

func formatValue(m map[string]float64, c Column) string {
	v, ok := m[c.Metric]
	if !ok {
		return "-"
	}
	f := c.Format
	if f == "" {
		f = "%.2f"
	}
	return fmt.Sprintf(f, v)
}

func shorten(s string, n int) string {
	s = strings.ReplaceAll(s, "\n", " ")
	if len(s) <= n {
		return s
	}
	return s[:n-3] + "..."
}

// SeedTable is one table as a seed prints it: a header line of column names
// and rows of a row label followed by numbers, tab- or space-separated.
type SeedTable struct {
	Columns []string
	Rows    []SeedRow
}

// SeedRow is one row of a SeedTable.
type SeedRow struct {
	Label  string
	Values []float64
}

// ParseSeedTable parses a table copied from a seed's text, for example
//
//	Ratio\Metric	Throughput (req/sec)	avg. rt (ms)	med. rt (ms)
//	0.1	2000	6.43	6.89
//
// The header is split on tabs (column names contain spaces); rows are split
// on any white space. Blank lines are skipped. Every row must have one value
// per column after the first (the row label's column).
func ParseSeedTable(text string) (SeedTable, error) {
	var t SeedTable
	sc := bufio.NewScanner(strings.NewReader(text))
	line := 0
	for sc.Scan() {
		line++
		s := strings.TrimSpace(sc.Text())
		if s == "" {
			continue
		}
		if t.Columns == nil {
			for _, f := range strings.Split(s, "\t") {
				if f = strings.TrimSpace(f); f != "" {
					t.Columns = append(t.Columns, f)
				}
			}
			if len(t.Columns) < 2 {
				return SeedTable{}, fmt.Errorf("seed table line %d: header %q needs tab-separated columns", line, s)
			}
			continue
		}
		f := strings.Fields(s)
		if len(f) != len(t.Columns) {
			return SeedTable{}, fmt.Errorf("seed table line %d: %d fields, want %d (%s)", line, len(f), len(t.Columns), strings.Join(t.Columns, " | "))
		}
		row := SeedRow{Label: f[0]}
		for _, x := range f[1:] {
			v, err := strconv.ParseFloat(x, 64)
			if err != nil {
				return SeedTable{}, fmt.Errorf("seed table line %d: %q is not a number", line, x)
			}
			row.Values = append(row.Values, v)
		}
		t.Rows = append(t.Rows, row)
	}
	if t.Columns == nil {
		return SeedTable{}, fmt.Errorf("seed table is empty")
	}
	return t, nil
}

// Value returns the value in the row labelled row and the column named col.
func (t SeedTable) Value(row, col string) (float64, error) {
	ci := -1
	for i, c := range t.Columns[1:] {
		if c == col {
			ci = i
		}
	}
	if ci < 0 {
		return 0, fmt.Errorf("seed table has no column %q", col)
	}
	for _, r := range t.Rows {
		if r.Label == row {
			return r.Values[ci], nil
		}
	}
	return 0, fmt.Errorf("seed table has no row %q", row)
}
