package mc

import (
	"fmt"
	"strings"
)

// Scripted prefix (automaton.ModelConfig.Prefix): events, in the words a
// trace prints them (world.describe), applied in order from the initial
// state before the search starts. The search's root is the state after
// the prefix, so it covers only the runs that start with it: a reduction
// a model declares to reach a deep bug (an election it does not need to
// vary) within a small budget. The prefix is part of every path: printed
// and saved counterexamples and sometimes witnesses hold its events, and
// replaying a trace applies them like any other.

// applyPrefix applies prefix to w, each event found among the enabled ones
// by its description, judging each state reached as the search would. It
// returns the prefix's path, and the violation a prefix state shows ("" if
// none). A prefix event that is not enabled is a configuration error
// naming it.
func (c *checker) applyPrefix(w *world, prefix []string) (*path, string, error) {
	var p *path
	for i, want := range prefix {
		ev, err := w.applyPrefixEvent(i, want)
		if err != nil {
			return nil, "", err
		}
		p = p.push(ev)
		if why := c.judge(w, p); why != "" {
			return p, why, nil
		}
	}
	return p, "", nil
}

// applyPrefixEvent applies to w the prefix's event i (from 0), described as
// want, and returns it (StartTrace applies a prefix this way too).
func (w *world) applyPrefixEvent(i int, want string) (Event, error) {
	ev, err := w.enabledEvent(want)
	if err != nil {
		return Event{}, fmt.Errorf("model prefix event %d: %w", i+1, err)
	}
	if err := w.apply(ev); err != nil {
		return Event{}, fmt.Errorf("model prefix event %d (%s): %w", i+1, want, err)
	}
	return ev, nil
}

// enabledEvent returns the enabled event described as desc.
func (w *world) enabledEvent(desc string) (Event, error) {
	evs := w.enabled()
	var have []string
	for _, ev := range evs {
		d := w.describe(ev)
		if d == desc {
			ev.Desc = d
			return ev, nil
		}
		have = append(have, d)
	}
	return Event{}, fmt.Errorf("%q is not enabled (enabled: %s)", desc, strings.Join(have, "; "))
}
