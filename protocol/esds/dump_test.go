package esds

import "fmt"

func (a *ESDS) dump() string {
	s := ""
	for _, o := range a.sortedOps() {
		s += fmt.Sprintf("%s label=%v done=%b solid=%b applied=%v pending=%d\n", o.id, o.label, o.done, o.solid, o.applied, len(a.pending[o.id]))
	}
	for j, p := range a.peers {
		s += fmt.Sprintf("peer %d: acked=%d sent=%d q=%d inNext=%d\n", j, p.acked, p.sentUpTo, len(p.queue), p.inNext)
	}
	return s
}
