package orcaprimary

import (
	"fmt"
	"maps"
	"slices"

	"github.com/synod-dev/synod/automaton"
)

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return []string{
		"readable-copies-agree: every unlocked copy of an object (primary or secondary) holds the same version (§3.2: no process uses the new value while others still use the old one)",
		"secondary-in-copy-set: a secondary copy at the primary's committed version is in the primary's copy set",
		"version-monotonic: a primary copy's version never decreases within an incarnation",
	}, &checker{last: map[automaton.NodeID]map[string]uint64{}}
}

type checker struct {
	last map[automaton.NodeID]map[string]uint64
	prev map[automaton.NodeID]automaton.Automaton
}

// Check implements automaton.InvariantChecker.
func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	if c.prev == nil {
		c.prev = map[automaton.NodeID]automaton.Automaton{}
	}
	if a, ok := up[stepped].(*Primary); ok {
		if c.prev[stepped] != up[stepped] {
			c.last[stepped] = map[string]uint64{}
			c.prev[stepped] = up[stepped]
		}
		for k, p := range a.prim {
			if p.version < c.last[stepped][k] {
				return fmt.Errorf("version-monotonic: %s's primary copy of %q went from version %d to %d", stepped, k, c.last[stepped][k], p.version)
			}
			c.last[stepped][k] = p.version
		}
	}
	type seen struct {
		node    automaton.NodeID
		version uint64
	}
	readable := map[string]seen{}
	ids := automaton.UpNodes(up)
	check := func(node automaton.NodeID, key string, v uint64) error {
		if s, ok := readable[key]; ok && s.version != v {
			return fmt.Errorf("readable-copies-agree: %s serves %q at version %d while %s serves version %d", node, key, v, s.node, s.version)
		}
		readable[key] = seen{node, v}
		return nil
	}
	for _, id := range ids {
		a, ok := up[id].(*Primary)
		if !ok {
			continue
		}
		for _, k := range slices.Sorted(maps.Keys(a.prim)) {
			if p := a.prim[k]; p.flight == nil {
				if err := check(id, k, p.version); err != nil {
					return err
				}
			}
		}
		for _, k := range slices.Sorted(maps.Keys(a.sec)) {
			s := a.sec[k]
			if !s.locked {
				if err := check(id, k, s.version); err != nil {
					return err
				}
			}
			for _, pid := range ids { // wherever the primary copy is now (it migrates)
				if pa, ok := up[pid].(*Primary); ok {
					if p, ok := pa.prim[k]; ok && p.flight == nil && p.version == s.version && !p.copies[id] && !s.locked {
						return fmt.Errorf("secondary-in-copy-set: %s holds %q at version %d but is not in the copy set of %s", id, k, s.version, pid)
					}
				}
			}
		}
	}
	return nil
}
