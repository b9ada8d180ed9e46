package unreplicated

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Invariants (automaton.InvariantStater), checked after every step in
// simulation and in the test harness.
//
// Why the restart check compares with the previous start and not with the
// count before the crash: a crash may lose writes that were applied in
// memory and not yet durable, together with their unreleased answers, so
// the count may drop across a crash; what may never drop is the durable
// part, and durable records only grow.
var invariantNames = []string{
	"server-only: only the server (the first configured node) holds the service state and applies operations; a forwarder's applied count stays 0",
	"applied-monotonic: the server's applied count never decreases within an incarnation, and a restart restores at least what the previous start restored",
	"persist-before-answer: in every step, each write's answer is emitted after the Persist of its record (so the durability rule holds the answer until the write survives a crash)",
}

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return invariantNames, &checker{inc: map[automaton.NodeID]*Unreplicated{},
		last: map[automaton.NodeID]uint64{}, floor: map[automaton.NodeID]uint64{}}
}

type checker struct {
	inc   map[automaton.NodeID]*Unreplicated // the incarnation last seen per node
	last  map[automaton.NodeID]uint64        // applied count last seen
	floor map[automaton.NodeID]uint64        // applied count restored at the last start
}

func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	u, ok := up[stepped].(*Unreplicated)
	if !ok {
		return nil
	}
	if !u.isServer {
		if u.st != nil || u.applied != 0 || len(u.stepWrites) != 0 {
			return fmt.Errorf("server-only: forwarder %s holds state or applied %d writes (the server is %s)", stepped, u.applied, u.server)
		}
		return nil
	}
	if c.inc[stepped] != u {
		c.inc[stepped] = u
		if u.fresh {
			c.floor[stepped] = 0 // first boot, or a wiped disk
		}
		if u.restored < c.floor[stepped] {
			return fmt.Errorf("applied-monotonic: server %s restarted with %d writes, below the %d restored at its previous start", stepped, u.restored, c.floor[stepped])
		}
		c.floor[stepped], c.last[stepped] = u.restored, u.restored
	}
	if u.applied < c.last[stepped] {
		return fmt.Errorf("applied-monotonic: server %s's applied count went from %d down to %d", stepped, c.last[stepped], u.applied)
	}
	c.last[stepped] = u.applied
	for _, w := range u.stepWrites {
		if err := persistBeforeAnswer(u, w); err != nil {
			return fmt.Errorf("persist-before-answer: server %s, write %d: %v", stepped, w.index, err)
		}
	}
	return nil
}

// persistBeforeAnswer checks the outputs of the step that applied write w.
func persistBeforeAnswer(u *Unreplicated, w stepWrite) error {
	if w.rec < 0 || w.rec >= len(u.Out) || w.ans < 0 || w.ans >= len(u.Out) {
		return fmt.Errorf("record at output %d, answer at output %d, of %d outputs", w.rec, w.ans, len(u.Out))
	}
	p, ok := u.Out[w.rec].(automaton.Persist)
	if !ok || p.Delete || p.Key != writeKey(w.index) {
		return fmt.Errorf("output %d is %T, not the Persist of %s", w.rec, u.Out[w.rec], writeKey(w.index))
	}
	switch u.Out[w.ans].(type) {
	case automaton.Respond, automaton.Send:
	default:
		return fmt.Errorf("output %d is %T, not an answer", w.ans, u.Out[w.ans])
	}
	if w.ans < w.rec {
		return fmt.Errorf("the answer (output %d) is emitted before the record %s (output %d): the runtime may release it before the write is durable", w.ans, p.Key, w.rec)
	}
	return nil
}

// Dump describes the node (the test harness's `state`).
func (u *Unreplicated) Dump() string {
	if !u.isServer {
		return fmt.Sprintf("forwarder to %s, %d requests waiting", u.server, len(u.fwds))
	}
	h := service.StateHash(u.st)
	open := ""
	if len(u.txns) > 0 {
		open = fmt.Sprintf(", %d transactions open", len(u.txns))
	}
	return fmt.Sprintf("server, %d writes applied, snapshot at %d%s, state hash %x", u.applied, u.snapAt, open, h[:6])
}

// DescribeMessage renders a peer message in one line (test traces).
func (u *Unreplicated) DescribeMessage(b []byte) string {
	m, err := unmarshal(b)
	if err != nil {
		return fmt.Sprintf("corrupt message (%v)", err)
	}
	switch m.Kind {
	case kindForward:
		return fmt.Sprintf("forward #%d req=%v %s", m.Seq, m.Req, showOps(m.Op, m.Ops))
	case kindNestedForward:
		return fmt.Sprintf("forward #%d nested req=%v %s", m.Seq, m.Req, showOps(m.Op, m.Ops))
	case kindTxnForward:
		if m.Txn.Action == automaton.TxnOp {
			return fmt.Sprintf("forward #%d req=%v txn %v %s", m.Seq, m.Req, m.Txn.Txn, m.Op)
		}
		return fmt.Sprintf("forward #%d req=%v txn %v %v", m.Seq, m.Req, m.Txn.Txn, m.Txn.Action)
	case kindReply:
		s := fmt.Sprintf("reply #%d %v", m.Seq, m.Result)
		for _, r := range m.Results {
			s += fmt.Sprintf(" [%v]", r)
		}
		return s
	}
	return fmt.Sprintf("kind %d", m.Kind)
}

func showOps(op service.Op, ops []service.Op) string {
	if len(ops) == 0 {
		return op.String()
	}
	parts := make([]string, len(ops))
	for i, o := range ops {
		parts[i] = o.String()
	}
	return "group(" + strings.Join(parts, "; ") + ")"
}
