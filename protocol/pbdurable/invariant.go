package pbdurable

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/proto"
)

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return []string{
		"one-primary: no two up nodes are primary of one view",
		"reply-after-durable: an answer leaves only after its database transaction committed and every member acknowledged its update buffer",
		"backup-prefix: a synced backup of the primary's view prepared no more updates than the primary executed",
		"all-or-nothing: a new primary's replicated objects hold every request whose database transaction committed (every update up to the database's commit index) and no update of a request whose transaction did not commit",
	}, &checker{}
}

type checker struct{}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	primaries := map[proto.Ballot]automaton.NodeID{}
	for _, id := range automaton.UpNodes(up) {
		a, ok := up[id].(*PBD)
		if !ok || !a.primary {
			continue
		}
		if o, dup := primaries[a.view]; dup {
			return fmt.Errorf("one-primary: %s and %s are both primary of view %s", o, id, a.view)
		}
		primaries[a.view] = id
		for _, bid := range automaton.UpNodes(up) {
			b, ok := up[bid].(*PBD)
			if !ok || b.primary || !b.synced || b.view != a.view {
				continue
			}
			if b.index > a.index {
				return fmt.Errorf("backup-prefix: backup %s applied %d updates of view %s, its primary %s executed %d", bid, b.index, a.view, id, a.index)
			}
		}
	}
	if a, ok := up[stepped].(*PBD); ok {
		if r := a.recovered; r != nil && a.twoMechanisms() {
			if a.applied < r.dbCommit {
				return fmt.Errorf("all-or-nothing: new primary %s (view %s) applied updates up to %d, the database committed request %d", stepped, a.view, a.applied, r.dbCommit)
			}
			if a.dbApplied > r.dbCommit {
				return fmt.Errorf("all-or-nothing: new primary %s (view %s) applied update %d, whose database transaction did not commit (the database's commit index is %d)", stepped, a.view, a.dbApplied, r.dbCommit)
			}
		}
		for _, p := range a.released {
			if !a.primary {
				continue // a primary stepping down answers TRYAGAIN
			}
			if !p.dbDone {
				return fmt.Errorf("reply-after-durable: %s answered %s before its database transaction committed", stepped, p.id)
			}
			for _, mid := range a.memberIDs() {
				m := a.members[mid]
				if p.ship > 0 && (m.needsState || m.acked < p.ship) {
					return fmt.Errorf("reply-after-durable: %s answered %s (update %d) before member %s acknowledged it", stepped, p.id, p.ship, mid)
				}
			}
		}
	}
	return nil
}

// Dump describes the automaton for traces.
func (a *PBD) Dump() string {
	return fmt.Sprintf("view=%s primary=%v ready=%v synced=%v index=%d applied=%d commit=%d members=%d queue=%d", a.view, a.primary, a.ready, a.synced, a.index, a.applied, a.commit, len(a.members), len(a.queue))
}
