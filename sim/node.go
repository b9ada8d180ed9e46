package sim

import (
	"math/rand"
	"sort"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/release"
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

	// rel interprets the automaton's outputs (package release, the
	// interpreter the live node runs too): it numbers every Persist of the
	// incarnation, holds each Send, Respond and Effect until the records
	// it waits for are synced, and checks the contract.
	rel *release.Interp
	io  nodeIO // what rel's decisions are carried out on (&io: no allocation per output)

	// Disk. durable survives crashes; buf holds persisted-but-unsynced
	// records in order, numbered by rel.
	durable  map[string][]byte
	buf      []bufRec
	fsyncing bool
	slowDisk float64 // fsync time multiplier while a slow window is on (0 = off)

	// timers maps a set timer to its generation; a TimerFired event with an
	// older generation was cancelled or replaced. Only looked up, never iterated.
	timers   map[automaton.TimerID]uint64
	timerGen uint64

	// pausedQ holds the inputs that arrived while paused, in arrival order.
	pausedQ []*event

	// batchQ is the open client batch: requests arrived within
	// Config.BatchWindow, not yet stepped (batch.go).
	batchQ []automaton.Request

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

// nodeIO is the simulated node's I/O, on which its interpreter's
// decisions are carried out (release.Runtime).
type nodeIO struct {
	s *simulator
	n *node
}

func (io *nodeIO) Persist(seq uint64, o automaton.Persist) {
	io.s.stats.Persists++
	p := automaton.Persist{Key: o.Key, Delete: o.Delete}
	if !o.Delete {
		p.Value = append([]byte{}, o.Value...)
	}
	io.n.buf = append(io.n.buf, bufRec{seq: seq, p: p})
}

func (io *nodeIO) Release(o automaton.Output) { io.s.release(io.n, o) }

func (io *nodeIO) SetTimer(o automaton.SetTimer) {
	s, n := io.s, io.n
	n.timerGen++
	n.timers[o.ID] = n.timerGen
	s.after(o.After, &event{kind: evTimer, node: n.idx, inc: n.inc, timer: o.ID, gen: n.timerGen})
}

func (io *nodeIO) CancelTimer(id automaton.TimerID) { delete(io.n.timers, id) }

// Members: simulated links exist between all nodes: nothing to connect.
func (io *nodeIO) Members(automaton.Members) {}

// newRelease returns node id's interpreter: it knows the run's nodes.
func (s *simulator) newRelease(id automaton.NodeID) *release.Interp {
	return release.New(release.Config{Self: id, Flaw: s.cfg.releaseFlaw,
		Known: func(to automaton.NodeID) bool { return s.nodeIndex(to) >= 0 }})
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
	s.tracef("%s crash (%d unsynced records, %d held outputs lost)", n.id, len(n.buf), n.rel.Held())
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
	n.rel.Crash() // the held outputs are lost
	n.buf, n.pausedQ, n.batchQ = nil, nil, nil
	n.fsyncing = false
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
	if s.replicaT != nil {
		switch in := in.(type) {
		case automaton.ClientRequest:
			s.replicaT[n.idx][in.Req.ID] = s.now
		case automaton.ClientBatch:
			for _, r := range in.Reqs {
				s.replicaT[n.idx][r.ID] = s.now
			}
		}
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

// carryOut carries out the outputs of one step of n: its interpreter
// (package release) decides, nodeIO does the simulated I/O.
func (s *simulator) carryOut(n *node, outs []automaton.Output) {
	io := &n.io
	for _, o := range outs {
		s.digestOutput(n, o)
		if err := n.rel.Output(o, io); err != nil {
			s.fail("%s %v", n.id, err)
			return
		}
	}
	if n.rel.Unsynced() && !n.fsyncing {
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

// startFsync begins one fsync covering everything buffered now (group commit).
func (s *simulator) startFsync(n *node) {
	n.fsyncing = true
	s.stats.Fsyncs++
	d := s.fsyncLat.Sample(s.rngDisk)
	if n.slowDisk > 0 {
		d = durationTimes(d, n.slowDisk)
	}
	s.after(d, &event{kind: evFsync, node: n.idx, inc: n.inc, upto: n.rel.Last()})
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
	s.digestEvent(n.idx, 'F', nil)
	if n.paused {
		n.rel.Synced(e.upto) // what waits leaves on resume
		return
	}
	n.rel.Durable(e.upto, &n.io)
	if n.rel.Unsynced() {
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
	if s.batchOn() {
		s.joinBatch(n, req) // batch.go
		return
	}
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
	n.rel.ReleaseReady(&n.io)
	if n.rel.Unsynced() && !n.fsyncing {
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
