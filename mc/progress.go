package mc

import (
	"fmt"
	"slices"
	"strings"
)

// Required progress (automaton.ModelConfig.Progress): bounded liveness
// judged on the whole space. A "sometimes" property the model requires
// and that no path of an exhausted search reaches is a violation: within
// the model's budgets (timer firings, crashes, the depth), no run makes
// that progress. It is judged only when the space is exhausted (no state
// left at the depth bound, no state bound hit), since a path beyond the
// bounds might reach it. Its counterexample is not one path but the whole
// space: the trace holds the search's root path (the model's prefix), and
// replaying it runs the search again from there (replayProgress).

// progressPrefix starts every progress verdict.
const progressPrefix = "progress: "

// progressViolation returns the progress violation of a finished search
// whose root path is root (nil when the model requires nothing, the space
// was not exhausted, or every required property was reached).
func (c *checker) progressViolation(root *path) *Trace {
	req := c.cfg.Model.Progress
	if len(req) == 0 || c.res.Frontier > 0 || c.cfg.full(c.res.States) {
		return nil
	}
	for _, name := range req {
		pr, ok := c.some[name]
		if !ok || pr.Reached {
			continue
		}
		why := fmt.Sprintf("%s%q holds on no path of the exhausted model (%d states within depth %d after the prefix, timers %s, %d crashes)",
			progressPrefix, name, c.res.States, c.cfg.Depth, c.cfg.timerSpec(), c.cfg.Crashes)
		return &Trace{cfg: c.cfg, Events: root.events(), Violation: why, Prefix: len(c.cfg.Model.Prefix), SearchDepth: c.cfg.Depth}
	}
	return nil
}

// checkProgressNames refuses a required property the checker does not know.
func checkProgressNames(names []string) error {
	for _, n := range names {
		if !slices.Contains(sometimesProps, n) {
			return fmt.Errorf("model requires progress %q: not a sometimes property (have %s)", n, strings.Join(sometimesProps, ", "))
		}
	}
	return nil
}

// replayProgress replays a progress violation: the search again, from the
// trace's events as a prefix, to the depth it had. It returns the verdict
// when the space is again exhausted without the progress.
func (t *Trace) replayProgress() (string, error) {
	cfg := t.cfg
	cfg.Model.Prefix = nil
	for _, ev := range t.Events {
		cfg.Model.Prefix = append(cfg.Model.Prefix, ev.Desc)
	}
	// cfg.Model.Progress is the search's requirement, or for a loaded
	// trace the protocol's declared one (LoadTrace starts from ModelOf).
	cfg.Depth, cfg.MaxStates, cfg.KeepGoing = t.SearchDepth, 0, false
	r, err := Check(cfg)
	if err != nil {
		return "", err
	}
	if r.Violation == nil || !strings.HasPrefix(r.Violation.Violation, progressPrefix) {
		return "", nil
	}
	return r.Violation.Violation, nil
}
