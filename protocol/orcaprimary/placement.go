package orcaprimary

import (
	"fmt"
	"slices"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

var _ automaton.PlacementReporter = (*Primary)(nil)

// Placement implements automaton.PlacementReporter: for each primary copy
// here, its copy set (§3: the primary knows every secondary), version and
// migrations so far (§3.3); for each secondary copy here, its version and
// where this node believes the primary is.
func (a *Primary) Placement() map[string]string {
	out := make(map[string]string, len(a.prim)+len(a.sec))
	for k, p := range a.prim {
		copies := []string{string(a.cfg.Self)}
		for n, ok := range p.copies {
			if ok && n != a.cfg.Self {
				copies = append(copies, string(n))
			}
		}
		slices.Sort(copies)
		out[k] = fmt.Sprintf("primary=%s copies=%s version=%d migrations=%d", a.cfg.Self, strings.Join(copies, ","), p.version, p.epoch)
	}
	for k, s := range a.sec {
		if _, dup := out[k]; dup {
			continue
		}
		out[k] = fmt.Sprintf("secondary primary=%s version=%d", a.primaryOf(k), s.version)
	}
	return out
}
