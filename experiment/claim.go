package experiment

import (
	"fmt"
	"io"
	"sort"
	"strings"
)

// Claim is one of a seed's claims judged on our runs: the paper's figure,
// ours, the verdict with the statistics that decided it, and, when it does
// not hold, the measured cause.
type Claim struct {
	// Text is the seed's claim, with its section ("§5.3: multicast is
	// required for good ASP speedups").
	Text string `json:"claim"`
	// Paper is the seed's figure for it ("bcast 2.28 s vs update 16.23 s").
	Paper string `json:"paper"`
	Judgement
	// Range names where a swept claim holds (see Sweep).
	Range string `json:"range,omitempty"`
	// Cause is the measured mechanism: why it does not hold, or what the
	// figure rests on (a breakdown of where the time goes).
	Cause string `json:"cause,omitempty"`
}

// String is the claim's report line.
func (c Claim) String() string {
	var b strings.Builder
	fmt.Fprintf(&b, "%s — %s. paper: %s; ours: %s. [%s]", c.Text, strings.ToUpper(string(c.Verdict)), c.Paper, c.Ours, c.Stats)
	if c.Range != "" {
		fmt.Fprintf(&b, " Range: %s.", c.Range)
	}
	if c.Cause != "" {
		fmt.Fprintf(&b, " Cause: %s", c.Cause)
	}
	return b.String()
}

// Claimer is implemented by experiments that judge the seed's claims. Claims
// is called after every cell ran and Derive was applied; every claim's
// verdict must come from a Judgement (RatioAbove, MeanBelow, SlopeAbove,
// Sweep, Constructed...) on d's samples.
type Claimer interface {
	Claims(d Data) []Claim
}

// Data is what Claims decides from.
type Data struct {
	// Ours are our figures (means over the runs); Seed the seed's.
	Ours, Seed Figures
	// Samples are our figures by cell key and metric, one value per run
	// (or per repetition the cell measured itself, see Outcome.Samples).
	Samples map[string]map[string]Sample
	// Cells are the cells' results (status and reason for NotMeasured).
	Cells []CellResult
	Quick bool
}

// Sample returns cell's values of metric (nil when it did not run).
func (d Data) Sample(cell, metric string) Sample { return d.Samples[cell][metric] }

// Why is the reason a cell did not run ("" when it ran or is unknown).
func (d Data) Why(cell string) string {
	for _, c := range d.Cells {
		if c.Key == cell && c.Status != StatusOK {
			return c.Status + ": " + c.Reason
		}
	}
	return ""
}

// NotRun is the claim of a cell that did not run: NotMeasured, with the
// cell's reason as its cause.
func (d Data) NotRun(text, paper string, cells ...string) (Claim, bool) {
	for _, c := range cells {
		if d.Samples[c] == nil {
			why := d.Why(c)
			if why == "" {
				why = "cell " + c + " has no figures"
			}
			return Claim{Text: text, Paper: paper, Judgement: Judgement{NotMeasured, "-", "no runs of " + c}, Cause: why}, true
		}
	}
	return Claim{}, false
}

// CountVerdicts counts claims by verdict.
func CountVerdicts(cs []Claim) map[Verdict]int {
	n := map[Verdict]int{}
	for _, c := range cs {
		n[c.Verdict]++
	}
	return n
}

// FormatCounts is "3 holds, 1 does not hold, ..." in Verdicts' order.
func FormatCounts(n map[Verdict]int) string {
	var parts []string
	for _, v := range Verdicts {
		if n[v] > 0 {
			parts = append(parts, fmt.Sprintf("%d %s", n[v], v))
		}
	}
	var other []string
	for v, k := range n {
		if !knownVerdict(v) {
			other = append(other, fmt.Sprintf("%d %q", k, v))
		}
	}
	sort.Strings(other)
	parts = append(parts, other...)
	if len(parts) == 0 {
		return "no claims"
	}
	return strings.Join(parts, ", ")
}

func knownVerdict(v Verdict) bool {
	for _, k := range Verdicts {
		if v == k {
			return true
		}
	}
	return false
}

// PrintClaims writes the claims, one paragraph each.
func PrintClaims(w io.Writer, cs []Claim) {
	if len(cs) == 0 {
		return
	}
	fmt.Fprintf(w, "\nclaims (%s):\n", FormatCounts(CountVerdicts(cs)))
	for i, c := range cs {
		fmt.Fprintf(w, "  %d. %s\n", i+1, c)
	}
}
