package adam

import (
	"fmt"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/eve"
)

// Invariants (automaton.InvariantStater): eve's engine's, and Adam's
// output commit for nested requests.
var invariantNames = []string{
	"call-after-commit: a nested request leaves a replica only when its replica's committed (verified) state holds the request suspended at that very call (seed 003 §3: every exposure point comes after verification; §5.2.3: verification before every nested request)",
}

// Invariants implements automaton.InvariantStater.
func (protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return append(eve.InvariantNames(), invariantNames...), &checker{eve: eve.NewChecker(), seen: map[*ext]int{}}
}

type checker struct {
	eve  *eve.Checker
	seen map[*ext]int // calls checked, per incarnation
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	a, x := extOf(up[stepped])
	if a == nil {
		return nil
	}
	if err := c.eve.CheckEve(a); err != nil {
		return err
	}
	from := c.seen[x]
	if from > len(x.emitted) {
		from = 0 // the record was trimmed
	}
	for _, e := range x.emitted[from:] {
		if !e.committed {
			return fmt.Errorf("call-after-commit: %s sent nested request %v while its committed state (slot %d) does not hold that call", stepped, e.id, e.slot)
		}
	}
	c.seen[x] = len(x.emitted)
	return nil
}
