package node

import (
	"strings"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// placementEvery bounds how often a namespace's placement is recomputed.
const placementEvery = 100 * time.Millisecond

// placementCache holds, per namespace whose automaton reports placement
// (automaton.PlacementReporter: Orca's primary-copy runtime), the latest
// report, refreshed on the loop goroutine after the namespace's steps (at
// most every placementEvery: a report can miss the steps of the last
// 100 ms before the namespace went idle), and read by INFO (section
// Placement) from any goroutine. The metric synod_orca_copies counts them
// by role (descriptions starting "primary=" are primaries, the others
// secondaries: automaton.PlacementReporter).
type placementCache struct {
	mu   sync.Mutex
	seen map[string]time.Time
	by   map[string]map[string]string
}

// notePlacement refreshes the namespace's placement report when due. Loop
// goroutine only (it reads the automaton).
func (l *nsLoop) notePlacement() {
	pr, ok := l.a.(automaton.PlacementReporter)
	if !ok || l.n == nil {
		return
	}
	c := &l.n.place
	now := time.Now()
	c.mu.Lock()
	due := now.Sub(c.seen[l.ns.Name]) >= placementEvery
	if due {
		if c.seen == nil {
			c.seen, c.by = map[string]time.Time{}, map[string]map[string]string{}
		}
		c.seen[l.ns.Name] = now
	}
	c.mu.Unlock()
	if !due {
		return
	}
	p := pr.Placement()
	c.mu.Lock()
	c.by[l.ns.Name] = p
	c.mu.Unlock()
	if l.n.m != nil {
		prim := 0
		for _, v := range p {
			if strings.HasPrefix(v, "primary=") {
				prim++
			}
		}
		l.n.m.copies.WithLabelValues(l.ns.Name, "primary").Set(float64(prim))
		l.n.m.copies.WithLabelValues(l.ns.Name, "secondary").Set(float64(len(p) - prim))
	}
}

// placementInfo is INFO's Placement section: "<ns>.<object>" and where its
// copies are, as this node last reported it.
func (n *Node) placementInfo() map[string]string {
	n.place.mu.Lock()
	defer n.place.mu.Unlock()
	out := map[string]string{}
	for ns, p := range n.place.by {
		for obj, v := range p {
			out[ns+"."+obj] = v
		}
	}
	return out
}
