package sim

import (
	"math/rand"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// node is one simulated server: an automaton, its disk and its timers.
type node struct {
	idx int
	id  automaton.NodeID
	a   automaton.Automaton
	// out: not in the run (a spare not added yet, or removed; membership.go).
	out bool

	up     bool
	paused bool
	// inc is bumped at every crash. Events carry the incarnation they were
	// meant for; a mismatch means the event was lost with a crash. (A message
	// sent while the node is down carries the new incarnation: if it arrives
	// after the restart, it is delivered, like a datagram to a new process.)
	inc uint64

	// Disk. durable survives crashes; buf holds persisted-but-unsynced records
	// in order. persistSeq numbers every Persist of this incarnation; syncedSeq
	// is the highest one an fsync has made durable.
	durable    map[string][]byte
	buf        []bufRec
	persistSeq uint64
	syncedSeq  uint64
	fsyncing   bool
	slowDisk   float64 // fsync time multiplier while a slow window is on (0 = off)

	// held are Send/Respond outputs waiting for the fsync of every Persist
	// emitted before them (need), in emission order. lastNeed is the need
	// of the last output emitted that was not an Early Send: what an Early
	// Send needs (automaton.Send.Early). Needs grow with emission order.
	held     []heldOut
	lastNeed uint64

	// timers maps a set timer to its generation; a TimerFired event with an
	// older generation was cancelled or replaced. Only looked up, never iterated.
	timers   map[automaton.TimerID]uint64
	timerGen uint64

	// pausedQ holds the inputs that arrived while paused, in arrival order.
	pausedQ []*event

	// applies counts the service Apply calls of the current step (cpu.go).
	applies int

	// execs are the incarnation's effect executors, created on first use
	// (effect.go).
	execs *automaton.Executors
}

type bufRec struct {
	seq uint64
	p   automaton.Persist
}

type heldOut struct {
	need uint64
	out  automaton.Output
}

// boot creates a new incarnation of n's automaton and starts it with its
// durable records.
func (s *simulator) boot(n *node) {
	n.up, n.paused = true, false
	n.timers = map[automaton.TimerID]uint64{}
	cfg := automaton.Config{
		Self:      n.id,
		Nodes:     append([]automaton.NodeID(nil), s.ids...),
		Namespace: s.ns,
		Service:   s.nodeService(n),
		Params:    copyParams(s.cfg.Params),
		Rand:      rand.New(rand.NewSource(s.rngNode.Int63())),
	}
	a, err := s.proto.New(cfg)
	if err != nil {
		s.fail("creating %s on %s: %v", s.cfg.Protocol, n.id, err)
		return
	}
	n.a = a
	if r, ok := a.(orderRecorder); ok {
		r.RecordOrder() // ESDS: keep the final order complete (esds.go)
	}
	recs := make(map[string][]byte, len(n.durable))
	for k, v := range n.durable {
		recs[k] = append([]byte(nil), v...)
	}
	s.tracef("%s start (incarnation %d, %d records)", n.id, n.inc, len(recs))
	s.step(n, automaton.Start{Records: recs})
}

func copyParams(p map[string]string) map[string]string {
	if p == nil {
		return nil
	}
	out := make(map[string]string, len(p))
	for k, v := range p {
		out[k] = v
	}
	return out
}

// crash loses n's volatile state: the automaton, unsynced writes, held
// outputs, timers, queued inputs and (through the incarnation) every message
// in flight to it. Clients connected to it see their connection drop.
func (s *simulator) crash(n *node) {
	s.tracef("%s crash (%d unsynced records, %d held outputs lost)", n.id, len(n.buf), len(n.held))
	if o, ok := s.inv.(automaton.CrashObserver); ok && len(n.buf) > 0 {
		lost := make([]string, len(n.buf))
		for i, r := range n.buf {
			lost[i] = r.p.Key
		}
		o.Crashed(n.id, lost)
	}
	s.digestEvent(n.idx, 'X', nil)
	s.stats.Crashes++
	oldInc := n.inc
	s.forgetIncarnation(n)
	s.closeExecutors(n)
	n.up, n.paused = false, false
	n.inc++
	n.a = nil
	n.buf, n.held, n.pausedQ = nil, nil, nil
	n.persistSeq, n.syncedSeq, n.fsyncing, n.lastNeed = 0, 0, false, 0
	n.timers = nil
	for _, c := range s.clients {
		if c.busy && c.node == n.idx && c.nodeInc == oldInc {
			s.after(s.clientLat.Sample(s.rngNet), &event{kind: evConnLost, client: c.idx, opSeq: c.req.ID.Seq, attempt: c.attempt})
		}
	}
}

// step delivers one input to n's automaton and carries out its outputs.
func (s *simulator) step(n *node, in automaton.Input) {
	s.stats.Steps++
	s.digestInput(n, in)
	if cr, ok := in.(automaton.ClientRequest); ok && s.replicaT != nil {
		s.replicaT[n.idx][cr.Req.ID] = s.now
	}
	n.applies = 0
	outs := n.a.Step(in)
	s.checkInvariants(n)
	s.observeState(n)
	if s.cpuOn {
		if _, start := in.(automaton.Start); !start {
			s.cpuRun(n, in, outs) // cpu.go: the outputs leave when the step's CPU time is over
			return
		}
	}
	s.carryOut(n, outs)
}

// carryOut carries out the outputs of one step of n.
func (s *simulator) carryOut(n *node, outs []automaton.Output) {
	for _, o := range outs {
		s.digestOutput(n, o)
		switch o := o.(type) {
		case automaton.Send:
			to := s.nodeIndex(o.To)
			if to < 0 {
				s.fail("%s sent to unknown node %q", n.id, o.To)
				return
			}
			if to == n.idx {
				s.fail("%s sent a message to itself (the contract forbids sends to self)", n.id)
				return
			}
			if o.Early {
				s.emitOrHoldNeeding(n, o, n.lastNeed)
			} else {
				s.emitOrHold(n, o)
			}
		case automaton.Respond, automaton.Effect:
			s.emitOrHold(n, o)
		case automaton.Persist:
			if o.Key == "" {
				s.fail("%s persisted a record with an empty key", n.id)
				return
			}
			s.stats.Persists++
			n.persistSeq++
			p := automaton.Persist{Key: o.Key, Delete: o.Delete}
			if !o.Delete {
				p.Value = append([]byte{}, o.Value...)
			}
			n.buf = append(n.buf, bufRec{seq: n.persistSeq, p: p})
		case automaton.SetTimer:
			if o.After < 0 {
				s.fail("%s set timer %d with negative duration %v", n.id, o.ID, o.After)
				return
			}
			n.timerGen++
			n.timers[o.ID] = n.timerGen
			s.after(o.After, &event{kind: evTimer, node: n.idx, inc: n.inc, timer: o.ID, gen: n.timerGen})
		case automaton.CancelTimer:
			delete(n.timers, o.ID)
		case automaton.Members:
			// Simulated links exist between all nodes: nothing to connect.
		case nil:
			s.fail("%s emitted a nil output", n.id)
			return
		default:
			s.fail("%s emitted an unknown output %T", n.id, o)
			return
		}
	}
	if n.persistSeq > n.syncedSeq && !n.fsyncing {
		s.startFsync(n)
	}
}

func (s *simulator) nodeIndex(id automaton.NodeID) int {
	for i, x := range s.ids {
		if x == id {
			return i
		}
	}
	return -1
}

// emitOrHold releases a Send or Respond now, or holds it until every Persist
// emitted before it is durable (the contract's durability rule).
func (s *simulator) emitOrHold(n *node, o automaton.Output) {
	n.lastNeed = n.persistSeq
	s.emitOrHoldNeeding(n, o, n.persistSeq)
}

// emitOrHoldNeeding releases o now if the Persist numbered need is durable
// (and nothing emitted before it waits), and otherwise holds it until it is.
// An Early Send needs only what the last output before it that was not
// Early needed, so it may leave before the records emitted since, its own
// step's among them, are durable; a crash then loses those records (the
// buffer) while the message stays in flight, as on a real node.
func (s *simulator) emitOrHoldNeeding(n *node, o automaton.Output, need uint64) {
	if need > n.syncedSeq || len(n.held) > 0 {
		n.held = append(n.held, heldOut{need: need, out: o})
		return
	}
	s.release(n, o)
}

func (s *simulator) release(n *node, o automaton.Output) {
	switch o := o.(type) {
	case automaton.Send:
		s.netSend(n.idx, s.nodeIndex(o.To), o.Msg)
	case automaton.Respond:
		s.respond(n, o.Resp)
	case automaton.Effect:
		s.runEffect(n, o)
	}
}

// releaseHeld releases, in order, the held outputs whose persists are durable.
func (s *simulator) releaseHeld(n *node) {
	i := 0
	for ; i < len(n.held) && n.held[i].need <= n.syncedSeq; i++ {
		s.release(n, n.held[i].out)
	}
	n.held = n.held[i:]
	if len(n.held) == 0 {
		n.held = nil
	}
}

// startFsync begins one fsync covering everything buffered now (group commit).
func (s *simulator) startFsync(n *node) {
	n.fsyncing = true
	s.stats.Fsyncs++
	d := s.fsyncLat.Sample(s.rngDisk)
	if n.slowDisk > 0 {
		d = durationTimes(d, n.slowDisk)
	}
	s.after(d, &event{kind: evFsync, node: n.idx, inc: n.inc, upto: n.persistSeq})
}

// onFsync makes the covered records durable and releases what waited on them.
// A paused process cannot run, but the disk finishes: records become durable
// during a pause and the held outputs go out when it resumes.
func (s *simulator) onFsync(e *event) {
	n := s.nodes[e.node]
	if !n.up || n.inc != e.inc {
		return // the crash lost this fsync with the rest of the buffer
	}
	n.fsyncing = false
	i := 0
	for ; i < len(n.buf) && n.buf[i].seq <= e.upto; i++ {
		p := n.buf[i].p
		if p.Delete {
			delete(n.durable, p.Key)
		} else {
			n.durable[p.Key] = p.Value
		}
	}
	n.buf = n.buf[i:]
	n.syncedSeq = e.upto
	s.digestEvent(n.idx, 'F', nil)
	if n.paused {
		return
	}
	s.releaseHeld(n)
	if n.persistSeq > n.syncedSeq {
		s.startFsync(n)
	}
}

// deliverable reports whether e may be delivered to its node now; if the
// node is paused the event is queued and false returned.
func (s *simulator) deliverable(e *event) bool {
	n := s.nodes[e.node]
	if !n.up || n.inc != e.inc {
		return false
	}
	if n.paused {
		e.arrived = true
		n.pausedQ = append(n.pausedQ, e)
		return false
	}
	return true
}

func (s *simulator) onPeer(e *event) {
	n := s.nodes[e.node]
	if !e.arrived && s.net.cut(e.from, e.node) {
		s.stats.MsgsDropped++
		s.tracef("%s -> %s dropped by partition on arrival", s.ids[e.from], n.id)
		return
	}
	if !n.up || n.inc != e.inc {
		s.stats.MsgsDropped++
		return
	}
	if !s.deliverable(e) || s.cpuDefer(n, e) {
		return
	}
	s.tracef("%s <- %s msg %d bytes", n.id, s.ids[e.from], len(e.msg))
	s.step(n, automaton.PeerMessage{From: s.ids[e.from], Msg: e.msg})
}

func (s *simulator) onClientReq(e *event) {
	if !s.deliverable(e) || s.cpuDefer(s.nodes[e.node], e) {
		return
	}
	n := s.nodes[e.node]
	s.tracef("%s <- client %d request %v %v", n.id, e.client, e.req.ID, e.req.Op)
	req := cloneRequest(e.req)
	// The environment the node observes on arrival (service/env.go): virtual
	// time and a draw from a stream of its own, so that runs of
	// deterministic services keep their digests.
	req.Env = service.Env{Time: s.nodeTime(n.idx), Seed: s.rngEnv.Uint64()}
	s.step(n, automaton.ClientRequest{Req: req})
}

func (s *simulator) onTimer(e *event) {
	n := s.nodes[e.node]
	if !n.up || n.inc != e.inc || n.timers[e.timer] != e.gen {
		return
	}
	if !s.deliverable(e) {
		return // fires on resume (if still set then)
	}
	if s.cpuDefer(n, e) {
		return // fires when the processor is free (if still set then)
	}
	delete(n.timers, e.timer)
	s.tracef("%s timer %d fired", n.id, e.timer)
	s.step(n, automaton.TimerFired{ID: e.timer})
}

// pause stops n: inputs queue up and timers are delayed until it resumes.
func (s *simulator) pause(n *node) {
	s.tracef("%s pause", n.id)
	s.digestEvent(n.idx, 'P', nil)
	s.stats.Pauses++
	n.paused = true
}

// resume restarts a paused node: held outputs whose fsync finished go out,
// then queued inputs are delivered in arrival order.
func (s *simulator) resume(n *node) {
	if !n.up || !n.paused {
		return
	}
	s.tracef("%s resume (%d queued inputs)", n.id, len(n.pausedQ))
	s.digestEvent(n.idx, 'R', nil)
	n.paused = false
	s.releaseHeld(n)
	if n.persistSeq > n.syncedSeq && !n.fsyncing {
		s.startFsync(n)
	}
	q := n.pausedQ
	n.pausedQ = nil
	for _, e := range q {
		s.schedule(s.now, e)
	}
}

func cloneRequest(r automaton.Request) automaton.Request {
	out := r
	out.Op = cloneOp(r.Op)
	if r.Ops != nil {
		out.Ops = make([]service.Op, len(r.Ops))
		for i, op := range r.Ops {
			out.Ops[i] = cloneOp(op)
		}
	}
	if r.Txn != nil {
		t := *r.Txn
		out.Txn = &t
	}
	if r.Opts.Ext != nil {
		out.Opts.Ext = make(map[string][]string, len(r.Opts.Ext))
		for k, v := range r.Opts.Ext {
			out.Opts.Ext[k] = append([]string(nil), v...)
		}
	}
	return out
}

func cloneOp(op service.Op) service.Op {
	if op.Args != nil {
		args := make([][]byte, len(op.Args))
		for i, a := range op.Args {
			args[i] = append([]byte{}, a...)
		}
		op.Args = args
	}
	return op
}

// sortedKeys returns m's keys in order (for digests: never iterate a map
// where the order matters).
func sortedKeys(m map[string][]byte) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
