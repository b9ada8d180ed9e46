package esds

import (
	"fmt"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// Invariants (automaton.InvariantStater), checked by the simulator after
// every step.
//
// The ESDS thesis states no lemma about ESDSAlg in so many words (its one numbered
// invariant, 3.3.1, is about the reservation protocol of §3.3.5); it refers
// to [1] for the proofs. What it does state, and what these checks assert:
//
//   - §4.2.3: "Using replica identifiers guarantees system-wide uniqueness of
//     minlabels" (labels unique).
//   - Figs. 4.2, 4.5: minlabel_r = min(minlabel_r, L), and every other effect
//     on done_r[i] and solid_r[i] is a union (labels only decrease; done and
//     solid sets only grow).
//   - done_r[i] is "the operations r knows that i has done", solid_r[i] "the
//     operations that r knows are stable at i", and an operation enters
//     solid_r[r] when it is in ⋂_i done_r[i]: knowledge, so it must be true
//     (knowledge is true; stable implies done everywhere).
//   - §3.3.5, Invariant 3.3.1 (impl=simple only): for processes i ≠ j, P_i
//     in holding-reservation_j ⇒ P_j in reserved_i (reservation 3.3.1).
//     Checked against the incarnation of P_j that granted: a restarted
//     process is a new one, which starts free (reserve.go), and the holder
//     finds out when its "Initiate X" is rejected. The check also asks that
//     P_j be reserved for the same request (its number), which the seed's
//     one-reservation-at-a-time statuses imply.
//   - §4.3.1: once max-stable_r is stable, "the order of operations up to
//     and including max-stable_r can never be altered again at replica r",
//     and eventual serializability makes that one order for every replica
//     (stable orders agree).
//
// Decisions where the seed is silent: sets "only grow" within one
// incarnation of a replica (what it did not persist before a crash, it never
// revealed, and may lose); across restarts the checks are the ones about
// what others know (knowledge is true) and the stable orders, which hold
// because a replica persists what it reveals before revealing it. A removed
// member (see the package doc) is left out of every check that names it.
//
// The stable orders across a crash (the ESDS thesis has no crashes; automaton's
// durability rule and CrashObserver): a replica may act on its own records
// before they are durable, and its stable order does: it applies x once x
// is done everywhere, its own do_it of x included, while the record of
// that do_it (x's label) may still be unsynced. If the crash loses the
// record, nothing that rested on it left (the sends and responses after it
// wait for it), and the restarted replica, whose counter is restored from
// its durable records, may label x again, even reuse the label, and place
// x elsewhere. So the checker
// (Crashed) forgets the crashed incarnation's stable order from the first
// operation whose record the crash lost, unless a live replica or an
// earlier incarnation holds it; before it, and after a crash that lost
// nothing, the order stays binding. A protocol that revealed a label or a
// stable flag before persisting it is still caught: whoever received it
// holds the order it implies, or contradicts the restarted replica's
// knowledge or labels. Found by seed 6 of synod-lab sim --protocol esds
// --nodes 3 --clients 16 --ops 1500 --keys 40 --faults crash,slow --strict
// 0.2 --prev 0.2 (20 of seeds 1-60 failed; TestCrashForgetsUnrevealedStableOrder).
//
// The checks are incremental: after a step of replica r they look at the
// operations the step changed (a.dirty, which every label, done or solid
// change of a live operation marks) and at the new part of r's stable order;
// a replica's first step after a (re)start is checked in full, together
// with what the others claim about it. The stable-order check needs
// RecordOrder (the simulator calls it); esds-unopt keeps no stable state, so
// that check is empty for it.

// Invariant names, as reported in violations.
const (
	invLabelsUnique   = "labels unique"
	invLabelsDecrease = "labels only decrease"
	invSetsGrow       = "done and solid sets only grow"
	invKnowledgeTrue  = "knowledge is true"
	invStableDone     = "stable implies done everywhere"
	invStableOrders   = "stable orders agree"
	invReservation    = "reservation 3.3.1"
)

// Invariants implements automaton.InvariantStater.
func (p protocol) Invariants() ([]string, automaton.InvariantChecker) {
	return []string{
			invLabelsUnique + ": among the replicas that are up, a label names at most one operation (seed 000 §4.2.3)",
			invLabelsDecrease + ": at a replica an operation's label never grows, and never changes once the operation is stable there (Figs. 4.2, 4.5; §4.3.1)",
			invSetsGrow + ": within an incarnation, done_r[i] and solid_r[i] never lose an operation; one done here stays labelled or is collected (Figs. 4.2, 4.5)",
			invKnowledgeTrue + ": x in done_r[i] means replica i, if up, has done x or collected it, across restarts (Figs. 4.2, 4.5)",
			invStableDone + ": x stable at r means every member that is up has done x or collected it, across restarts (Fig. 4.2: solid_r[r] grows by ⋂_i done_r[i])",
			invStableOrders + ": the replicas' stable orders are prefixes of one another, across restarts (§4.3.1)",
			invReservation + ": impl=simple: P_i in holding-reservation_j implies P_j (the incarnation that granted) in reserved_i for that request (seed 000 §3.3.5, Invariant 3.3.1)",
		}, &checker{
			views:  map[automaton.NodeID]*view{},
			labels: map[Label]labelUse{},
		}
}

// checker holds, per replica, what it last saw of that replica, and across
// replicas the labels held and the longest stable order seen.
type checker struct {
	views  map[automaton.NodeID]*view
	labels map[Label]labelUse
	order  []string
	// kept is the longest prefix of order held by an incarnation that is
	// gone, minus what its crash lost (Crashed): what no live replica holds
	// beyond it is forgotten when an incarnation goes (forget).
	kept int
}

// view is what the checker last saw of one incarnation of a replica.
type view struct {
	a      *ESDS
	ops    map[string]opView
	orderN int // entries of a.orderLog checked against c.order
}

type opView struct {
	label       Label
	done, solid uint64
}

// labelUse: the operation a label names, and how many views hold it.
type labelUse struct {
	id string
	n  int
}

func violation(inv, format string, args ...any) error {
	return fmt.Errorf("esds invariant %q violated: %s", inv, fmt.Sprintf(format, args...))
}

// Check implements automaton.InvariantChecker.
func (c *checker) Check(stepped automaton.NodeID, up map[automaton.NodeID]automaton.Automaton) error {
	// Forget incarnations that are gone (crashed, or restarted: a new
	// automaton), releasing the labels they held.
	for id, v := range c.views {
		if a, ok := up[id].(*ESDS); !ok || a != v.a {
			c.forget(id, v.orderN)
		}
	}
	a, ok := up[stepped].(*ESDS)
	if !ok || a.ops == nil {
		return nil // not ours, or not started
	}
	if a.resv != nil {
		if err := checkReservations(up); err != nil {
			return err
		}
	}
	v := c.views[stepped]
	if v == nil {
		v = &view{a: a, ops: make(map[string]opView, len(a.ops))}
		c.views[stepped] = v
		for _, o := range a.sortedOps() {
			if err := c.observe(v, o, up); err != nil {
				return err
			}
		}
		if err := c.othersClaims(a, up); err != nil {
			return err
		}
	} else {
		for _, o := range a.dirtyOps {
			if !o.dirty {
				continue // collected in the step: its record was not written
			}
			id := o.id
			if a.ops[id] != o {
				o = nil
			}
			if o == nil {
				if ov, had := v.ops[id]; had && ov.label.Set && !a.gcd.has(id) {
					return violation(invSetsGrow, "%s: %q, done here with label %v, vanished without being collected", a.cfg.Self, id, ov.label)
				}
				continue
			}
			if err := c.observe(v, o, up); err != nil {
				return err
			}
		}
	}
	return c.checkOrder(v)
}

// observe checks operation o of v's replica against what the checker saw
// of it before and against the other replicas, and records it.
func (c *checker) observe(v *view, o *op, up map[automaton.NodeID]automaton.Automaton) error {
	a := v.a
	self := a.cfg.Self
	prev, seen := v.ops[o.id]
	if seen && prev.label.Set {
		switch {
		case !o.label.Set:
			return violation(invSetsGrow, "%s: %q was done here (label %v) and is no longer", self, o.id, prev.label)
		case prev.label.Less(o.label):
			return violation(invLabelsDecrease, "%s: the label of %q grew from %v to %v", self, o.id, prev.label, o.label)
		case prev.solid&a.bit() != 0 && prev.label != o.label:
			return violation(invLabelsDecrease, "%s: %q is stable here and its label changed from %v to %v", self, o.id, prev.label, o.label)
		}
	}
	if lost := prev.done &^ o.done; lost != 0 {
		return violation(invSetsGrow, "%s: %q left done[i] for replicas %b", self, o.id, lost)
	}
	if lost := prev.solid &^ o.solid; lost != 0 {
		return violation(invSetsGrow, "%s: %q left solid[i] for replicas %b", self, o.id, lost)
	}
	if prev.label != o.label {
		c.release(prev.label)
		if o.label.Set {
			u := c.labels[o.label]
			if u.n > 0 && u.id != o.id {
				return violation(invLabelsUnique, "%s gives %q the label %v, which names %q elsewhere", self, o.id, o.label, u.id)
			}
			c.labels[o.label] = labelUse{id: o.id, n: u.n + 1}
		}
	}
	// Knowledge is true: what r newly claims about the others.
	m := a.members() &^ a.bit()
	inv, claims := invKnowledgeTrue, (o.done&^prev.done)&m
	if o.solid&a.bit() != 0 && prev.solid&a.bit() == 0 {
		inv, claims = invStableDone, m // stable here: done by every member
	}
	for i := 0; claims != 0 && i < len(a.cfg.Nodes); i++ {
		if claims&(1<<i) == 0 {
			continue
		}
		if err := c.claim(inv, a, a.cfg.Nodes[i], o.id, up); err != nil {
			return err
		}
	}
	v.ops[o.id] = opView{label: o.label, done: o.done, solid: o.solid}
	return nil
}

// claim checks that replica n, if up, has done operation id (or collected
// it), as replica a knows.
func (c *checker) claim(inv string, a *ESDS, n automaton.NodeID, id string, up map[automaton.NodeID]automaton.Automaton) error {
	b, ok := up[n].(*ESDS)
	if !ok || b.ops == nil {
		return nil // down: nothing to compare with
	}
	if o := b.ops[id]; (o != nil && o.label.Set) || b.gcd.has(id) {
		return nil
	}
	return violation(inv, "%s knows that %s has done %q, but %s has not done it", a.cfg.Self, n, id, n)
}

// othersClaims checks, when replica a (re)starts, everything the other
// replicas know about it: it must not have forgotten what it revealed.
func (c *checker) othersClaims(a *ESDS, up map[automaton.NodeID]automaton.Automaton) error {
	for _, n := range automaton.UpNodes(up) {
		x := up[n]
		b, ok := x.(*ESDS)
		if !ok || b == a || b.ops == nil {
			continue
		}
		i, ok := b.index[a.cfg.Self]
		if !ok || b.members()&(1<<i) == 0 {
			continue
		}
		for _, o := range b.ops {
			inv := invKnowledgeTrue
			if o.solid&b.bit() != 0 {
				inv = invStableDone
			} else if !o.label.Set || o.done&(1<<i) == 0 {
				continue
			}
			if err := c.claim(inv, b, a.cfg.Self, o.id, up); err != nil {
				return fmt.Errorf("%w (after %s restarted; %s's view)", err, a.cfg.Self, n)
			}
		}
	}
	return nil
}

// checkOrder checks the new part of v's stable order against the longest
// stable order seen.
func (c *checker) checkOrder(v *view) error {
	log := v.a.orderLog
	for k := v.orderN; k < len(log); k++ {
		if k == len(c.order) {
			c.order = append(c.order, log[k])
			continue
		}
		if c.order[k] != log[k] {
			return violation(invStableOrders, "%s applied %q at position %d of its stable order, where another replica (or incarnation) applied %q", v.a.cfg.Self, log[k], k, c.order[k])
		}
	}
	v.orderN = len(log)
	return nil
}

// Crashed implements automaton.CrashObserver. The crashed incarnation's
// stable order is kept up to the first operation whose record ("o/<id>":
// label, done and stable flags) the crash lost, and forgotten from there,
// unless a live replica holds it too. That part rested on state never
// revealed: every send and response after a Persist waits until it is
// durable (automaton's durability rule; ESDS sends nothing Early), so no
// one else saw that label or that stable flag, and the next incarnation
// may label the operation again and place it elsewhere (seed 6 of
// TestCrashForgetsUnrevealedStableOrder). Everything before it rests on
// durable records: labels below max-stable_r are all applied, in label
// order, so a lost label lies above every position kept, and the restart
// restores those operations, their labels and flags.
func (c *checker) Crashed(id automaton.NodeID, lost []string) {
	v := c.views[id]
	if v == nil {
		return
	}
	gone := make(map[string]bool, len(lost))
	for _, k := range lost {
		if x, ok := strings.CutPrefix(k, recOp); ok {
			gone[x] = true
		}
	}
	keep := v.orderN
	for k, x := range v.a.orderLog[:v.orderN] {
		if gone[x] {
			keep = k
			break
		}
	}
	c.forget(id, keep)
}

// forget drops the view of a gone incarnation of replica id, releasing its
// labels; its stable order is kept up to keep, and the checker's longest
// order shrinks to what the live views and the kept prefixes hold.
func (c *checker) forget(id automaton.NodeID, keep int) {
	v := c.views[id]
	for _, ov := range v.ops {
		c.release(ov.label)
	}
	delete(c.views, id)
	c.kept = max(c.kept, keep)
	n := c.kept
	for _, w := range c.views {
		n = max(n, w.orderN)
	}
	c.order = c.order[:min(n, len(c.order))]
}

func (c *checker) release(l Label) {
	if !l.Set {
		return
	}
	u := c.labels[l]
	if u.n <= 1 {
		delete(c.labels, l)
		return
	}
	u.n--
	c.labels[l] = u
}

// checkReservations checks Invariant 3.3.1 (the ESDS thesis §3.3.5) over every
// replica that is up: each one holding a reservation from P_j finds P_j, if
// the incarnation that granted is still up, reserved for it and for the same
// request.
func checkReservations(up map[automaton.NodeID]automaton.Automaton) error {
	for _, n := range automaton.UpNodes(up) {
		h, ok := up[n].(*ESDS)
		if !ok || h.resv == nil || h.resv.status != statusHolding {
			continue
		}
		r := h.resv
		gid := h.cfg.Nodes[r.peer]
		g, ok := up[gid].(*ESDS)
		if !ok || g.resv == nil || g.inc != r.peerInc {
			continue // the granting process is gone
		}
		gr := g.resv
		if gr.status != statusReserved || gr.peer != h.self || gr.seq != r.seq || gr.peerInc != h.inc {
			what := gr.status.String()
			if gr.status != statusFree {
				what += fmt.Sprintf(" %s #%d", g.cfg.Nodes[gr.peer], gr.seq)
			}
			return violation(invReservation, "%s holds reservation #%d from %s, which is %s, not reserved for it", n, r.seq, gid, what)
		}
	}
	return nil
}
