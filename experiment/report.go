package experiment

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/spf13/pflag"
)

// ReportOptions configure RunAll.
type ReportOptions struct {
	RunOptions
	// Names are the experiments to run, in order; empty means all of them.
	Names []string
	// Doc is the Markdown report written (docs/REPRODUCTION.md); PlotDir the
	// directory its PNG plots are copied into (docs/reproduction), named
	// relative to Doc's directory in the links.
	Doc, PlotDir string
	// Command is the command line printed at the top of the report.
	Command string
	// Note is printed in the header beside the load (why the pass is quick,
	// which sections were kept and why).
	Note string
	// Args are flags for one experiment, by name (its Flags: "--mode",
	// "sim"; and --duration, --repeat for it alone), parsed before it runs
	// and printed in its section's command.
	Args map[string][]string
}

// ReportRun is one experiment's part of the report.
type ReportRun struct {
	Results *Results
	Table   string // PrintTable's text (with the claims)
	Plots   []string
	Err     error
	Args    []string // the experiment's own flags (ReportOptions.Args)
}

// RunAll runs the experiments one after another (each with its own output
// directory under o.Out) and writes one Markdown report: for every seed,
// every experiment's table beside the seed's figures, every claim with the
// paper's figure, ours, the verdict, its statistics and its cause, and the
// plots. An experiment that fails is reported with its error and the run
// goes on; the error returned joins them.
func RunAll(ctx context.Context, o ReportOptions) ([]ReportRun, error) {
	exps := All()
	if len(o.Names) > 0 {
		exps = exps[:0:0]
		for _, n := range o.Names {
			e, err := Lookup(n)
			if err != nil {
				return nil, err
			}
			exps = append(exps, e)
		}
	}
	if o.Out == "" {
		o.Out = DefaultOut("all", time.Now())
	}
	// With Names, an earlier report's sections of the other experiments
	// are kept (each says its own command and load), so that one seed's
	// experiments can be re-run without re-running every seed's. The
	// report is written after every experiment: the sections of those not
	// run yet are the earlier report's until theirs replace them, so an
	// interrupted run leaves a whole report with what it finished.
	var earlier []keptSection
	if o.Doc != "" {
		if b, err := os.ReadFile(o.Doc); err == nil {
			earlier = parseReport(string(b), nil)
		}
	}
	pending := map[string]bool{}
	for _, e := range exps {
		pending[e.Name()] = true
	}
	kept := func() []keptSection {
		var out []keptSection
		for _, k := range earlier {
			if pending[k.Name] || len(o.Names) > 0 && !slices.Contains(o.Names, k.Name) {
				out = append(out, k)
			}
		}
		return out
	}
	if o.PlotDir != "" {
		if err := os.MkdirAll(o.PlotDir, 0o755); err != nil {
			return nil, err
		}
	}
	start := time.Now()
	load0 := LoadAvg()
	var runs []ReportRun
	var errs []error
	write := func() {
		if o.Doc == "" {
			return
		}
		var b bytes.Buffer
		WriteReport(&b, runs, reportHeader{
			Command: o.Command, Started: start, Finished: time.Now(), Load: [2]string{load0, LoadAvg()},
			Quick: o.Quick, Reps: o.Reps, DocDir: filepath.Dir(o.Doc), Kept: kept(), Note: o.Note,
		})
		if err := os.WriteFile(o.Doc, b.Bytes(), 0o644); err != nil {
			errs = append(errs, err)
		}
	}
	for _, e := range exps {
		if ctx.Err() != nil {
			break
		}
		ro := o.RunOptions
		ro.Out = filepath.Join(o.Out, e.Name())
		var buf bytes.Buffer
		ro.Stdout = &buf
		if o.Stdout != nil {
			ro.Stdout = io.MultiWriter(&buf, o.Stdout)
		}
		args := o.Args[e.Name()]
		if len(args) > 0 {
			fs := pflag.NewFlagSet(e.Name(), pflag.ContinueOnError)
			e.Flags(fs)
			// The run's own flags, for this experiment only.
			fs.DurationVar(&ro.Duration, "duration", ro.Duration, "measured length of each cell")
			fs.IntVar(&ro.Reps, "repeat", ro.Reps, "runs of every cell")
			fs.BoolVar(&ro.Quick, "quick", ro.Quick, "short cells (--quick=false: full size in a quick pass)")
			if err := fs.Parse(args); err != nil {
				return nil, fmt.Errorf("%s: %w", e.Name(), err)
			}
		}
		res, err := Run(ctx, e, ro)
		if ctx.Err() != nil && err != nil {
			break // interrupted: its earlier section stays
		}
		rr := ReportRun{Results: res, Table: buf.String(), Err: err, Args: args}
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", e.Name(), err))
		}
		if o.PlotDir != "" {
			// Its plots of an earlier report are replaced, not accumulated.
			old, _ := filepath.Glob(filepath.Join(o.PlotDir, e.Name()+"-*.png"))
			for _, f := range old {
				os.Remove(f)
			}
		}
		if res != nil && o.PlotDir != "" {
			for _, p := range res.Plots {
				if filepath.Ext(p) != ".png" {
					continue
				}
				dst := filepath.Join(o.PlotDir, e.Name()+"-"+filepath.Base(p))
				if err := copyFile(p, dst); err != nil {
					errs = append(errs, err)
					continue
				}
				rr.Plots = append(rr.Plots, dst)
			}
		}
		runs = append(runs, rr)
		delete(pending, e.Name())
		write()
	}
	// A whole run's report has only its plots: others (of experiments
	// that no longer exist) are removed.
	if o.PlotDir != "" && len(o.Names) == 0 && len(pending) == 0 {
		mine := map[string]bool{}
		for _, r := range runs {
			for _, p := range r.Plots {
				mine[p] = true
			}
		}
		old, _ := filepath.Glob(filepath.Join(o.PlotDir, "*.png"))
		for _, f := range old {
			if !mine[f] {
				os.Remove(f)
			}
		}
	}
	write()
	if ctx.Err() != nil {
		errs = append(errs, errors.New("interrupted"))
	}
	return runs, errors.Join(errs...)
}

type reportHeader struct {
	Command, Note     string
	Started, Finished time.Time
	Load              [2]string
	Quick             bool
	Reps              int
	DocDir            string
	// Kept are sections of an earlier report kept beside runs.
	Kept []keptSection
}

// keptSection is one experiment's part of an earlier report: its rows of
// the summary table, their verdicts, and its section (from "### name").
type keptSection struct {
	Name     string
	Rows     []string
	Verdicts []Verdict
	Body     string
}

// parseReport returns the sections of an earlier report (WriteReport's
// format) of every experiment not in rerun.
func parseReport(doc string, rerun []string) []keptSection {
	byName := map[string]*keptSection{}
	var order []string
	get := func(name string) *keptSection {
		if k, ok := byName[name]; ok {
			return k
		}
		k := &keptSection{Name: name}
		byName[name] = k
		order = append(order, name)
		return k
	}
	lines := strings.Split(doc, "\n")
	var table summaryTable
	var cur *keptSection
	for _, l := range lines {
		if name, v, in := table.row(l); in {
			if name != "" {
				k := get(name)
				k.Rows = append(k.Rows, l)
				if knownVerdict(v) {
					k.Verdicts = append(k.Verdicts, v)
				}
			}
			continue
		}
		switch {
		case strings.HasPrefix(l, "### "):
			cur = nil
			if name := strings.TrimPrefix(l, "### "); !strings.HasPrefix(name, "(") {
				cur = get(name)
			}
		case strings.HasPrefix(l, "## "):
			cur = nil
		}
		if cur != nil {
			cur.Body += l + "\n"
		}
	}
	var out []keptSection
	for _, n := range order {
		if k := byName[n]; k.Body != "" && !slices.Contains(rerun, n) {
			k.Body = strings.TrimRight(k.Body, "\n") + "\n"
			out = append(out, *k)
		}
	}
	return out
}

// summaryTable reads the report's summary table line by line.
type summaryTable struct{ in bool }

// row reports whether l belongs to the table (its header, separator or a
// row) and, for a row, its experiment and verdict.
func (t *summaryTable) row(l string) (experiment string, v Verdict, in bool) {
	switch {
	case l == "| experiment | claim | verdict |":
		t.in = true
	case t.in && strings.HasPrefix(l, "|---"):
	case t.in && strings.HasPrefix(l, "| "):
		cells := strings.Split(l, " | ")
		return strings.TrimPrefix(cells[0], "| "), Verdict(strings.TrimSuffix(cells[len(cells)-1], " |")), true
	default:
		t.in = false
	}
	return "", "", t.in
}

// WriteReport writes the Markdown report of runs.
func WriteReport(w io.Writer, runs []ReportRun, h reportHeader) {
	var all []Claim
	counts := map[Verdict]int{}
	for _, r := range runs {
		if r.Results != nil {
			all = append(all, r.Results.Claims...)
		}
	}
	for v, n := range CountVerdicts(all) {
		counts[v] += n
	}
	total := len(all)
	for _, k := range h.Kept {
		for _, v := range k.Verdicts {
			counts[v]++
			total++
		}
	}
	// The report's parts in name order: this run's, and kept ones.
	type part struct {
		name string
		run  *ReportRun
		kept *keptSection
	}
	var parts []part
	for i := range runs {
		name := ""
		if runs[i].Results != nil {
			name = runs[i].Results.Experiment
		}
		parts = append(parts, part{name: name, run: &runs[i]})
	}
	for i := range h.Kept {
		parts = append(parts, part{name: h.Kept[i].Name, kept: &h.Kept[i]})
	}
	if len(h.Kept) > 0 {
		sort.SliceStable(parts, func(i, j int) bool { return parts[i].name < parts[j].name })
	}
	fmt.Fprintf(w, "# Reproduction report\n\n")
	fmt.Fprintf(w, "Generated by `%s` (do not edit by hand: run it again). ", h.Command)
	if len(h.Kept) > 0 {
		fmt.Fprintf(w, "That command re-ran %d experiment(s); the sections of the %d others are kept from the earlier report, each with its own command and load. ", len(runs), len(h.Kept))
	}
	fmt.Fprintf(w, "Started %s, took %s; /proc/loadavg %s at the start and %s at the end "+
		"(the machine is shared: live figures are noisy, and the verdicts are decided on repeated runs with that noise).",
		h.Started.UTC().Format(time.RFC3339), h.Finished.Sub(h.Started).Round(time.Second), orDefault(h.Load[0], "n/a"), orDefault(h.Load[1], "n/a"))
	if h.Quick {
		fmt.Fprint(w, " **Quick pass** (`--quick`): short cells and small sizes, so more claims are inconclusive than in a full run.")
	}
	if h.Note != "" {
		fmt.Fprintf(w, " %s", h.Note)
	}
	fmt.Fprintln(w)
	fmt.Fprintf(w, "\n**%d claims: %s.**\n\n", total, FormatCounts(counts))
	fmt.Fprintln(w, "How a verdict is decided (experiment/stats.go): every cell runs several times (`--repeat`, the run count is printed with each table); "+
		"a claim is a test on those runs' values: the 95% interval of a ratio of means (percentile bootstrap), of a difference (Welch t), of a mean (t) "+
		"or of a least-squares slope lies wholly on the claimed side of its threshold (**holds**), wholly on the other side (**does not hold**), "+
		"or across it (**inconclusive**: the difference is inside the noise; one run gives no noise estimate and is always inconclusive). "+
		"A figure from a model calibrated from the seed's own numbers is **consistent by construction**. A parameter the seed does not state is swept "+
		"and the verdict names where the claim holds. A claim whose cells did not run here is **not measured**, with the reason. "+
		"Simulated cells that vary their seed by run give a real spread; a deterministic model gives identical runs, and the statistics say so.")
	fmt.Fprintln(w)

	// Summary table of every claim.
	fmt.Fprintln(w, "| experiment | claim | verdict |")
	fmt.Fprintln(w, "|---|---|---|")
	for _, p := range parts {
		if p.kept != nil {
			for _, row := range p.kept.Rows {
				fmt.Fprintln(w, row)
			}
			continue
		}
		r := p.run
		if r.Results == nil {
			continue
		}
		for _, c := range r.Results.Claims {
			fmt.Fprintf(w, "| %s | %s | %s |\n", r.Results.Experiment, mdCell(shorten(c.Text, 160)), c.Verdict)
		}
		if len(r.Results.Claims) == 0 {
			fmt.Fprintf(w, "| %s | (no claim judged: figures only) | - |\n", r.Results.Experiment)
		}
	}
	fmt.Fprintln(w)

	seed := ""
	for _, p := range parts {
		if p.kept != nil {
			if s := seedOf(p.name); s != seed {
				seed = s
				fmt.Fprintf(w, "\n## Seed %s\n", strings.TrimPrefix(s, "seed"))
			}
			fmt.Fprintf(w, "\n%s\n", p.kept.Body)
			continue
		}
		r := p.run
		if r.Results == nil {
			fmt.Fprintf(w, "\n### (failed before running)\n\n%v\n", r.Err)
			continue
		}
		res := r.Results
		if s := seedOf(res.Experiment); s != seed {
			seed = s
			fmt.Fprintf(w, "\n## Seed %s\n", strings.TrimPrefix(s, "seed"))
		}
		fmt.Fprintf(w, "\n### %s\n\n%s\n\n", res.Experiment, res.Description)
		fmt.Fprintf(w, "Command: `synod-lab experiment run %s%s%s`; %d run(s) per cell; loadavg %s → %s.\n\n",
			res.Experiment, quickFlag(res.Quick), argsFlag(r.Args), res.Reps, orDefault(res.LoadAvg[0], "n/a"), orDefault(res.LoadAvg[1], "n/a"))
		if r.Err != nil {
			fmt.Fprintf(w, "**Errors:** %s\n\n", mdCell(r.Err.Error()))
		}
		if len(res.Claims) > 0 {
			fmt.Fprintf(w, "Claims (%s):\n\n", FormatCounts(CountVerdicts(res.Claims)))
			for i, c := range res.Claims {
				fmt.Fprintf(w, "%d. **%s** — **%s**\n   - paper: %s\n   - Synod: %s\n   - statistics: %s\n", i+1, c.Text, c.Verdict, c.Paper, c.Ours, c.Stats)
				if c.Range != "" {
					fmt.Fprintf(w, "   - range: %s\n", c.Range)
				}
				if c.Cause != "" {
					fmt.Fprintf(w, "   - cause: %s\n", c.Cause)
				}
			}
			fmt.Fprintln(w)
		} else {
			fmt.Fprintln(w, "No claim is judged by this experiment (figures only).")
			fmt.Fprintln(w)
		}
		fmt.Fprintf(w, "<details><summary>Table, notes and summary</summary>\n\n```text\n%s```\n\n</details>\n\n", stripResultLines(r.Table))
		for _, p := range r.Plots {
			rel, err := filepath.Rel(h.DocDir, p)
			if err != nil {
				rel = p
			}
			fmt.Fprintf(w, "![%s](%s)\n", filepath.Base(p), filepath.ToSlash(rel))
		}
		if len(r.Plots) > 0 {
			fmt.Fprintln(w)
		}
	}
}

// seedOf is "seed004" for "seed004-asp".
func seedOf(name string) string {
	if i := strings.IndexAny(name, "-"); i > 0 {
		s := name[:i]
		// seed000frontends and seed000simple belong to seed000.
		if strings.HasPrefix(s, "seed") && len(s) >= 7 {
			return s[:7]
		}
		return s
	}
	return name
}

func argsFlag(args []string) string {
	if len(args) == 0 {
		return ""
	}
	return " " + strings.Join(args, " ")
}

func quickFlag(q bool) string {
	if q {
		return " --quick"
	}
	return ""
}

func mdCell(s string) string {
	return strings.ReplaceAll(strings.ReplaceAll(s, "|", "\\|"), "\n", " ")
}

// stripResultLines drops the "results:" and "plot:" lines (paths of a
// temporary directory) from a table's text.
func stripResultLines(s string) string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if strings.HasPrefix(l, "results: ") || strings.HasPrefix(l, "plot:    ") {
			continue
		}
		out = append(out, l)
	}
	return strings.TrimLeft(strings.Join(out, "\n"), "\n")
}

func copyFile(src, dst string) error {
	b, err := os.ReadFile(src)
	if err != nil {
		return err
	}
	return os.WriteFile(dst, b, 0o644)
}

// UnjudgedExperiments lists the registered experiments that judge no claim
// (implement no Claimer), sorted.
func UnjudgedExperiments() []string {
	var out []string
	for _, e := range All() {
		if _, ok := e.(Claimer); !ok {
			out = append(out, e.Name())
		}
	}
	sort.Strings(out)
	return out
}
