package abd

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// Client batches and key runs.
//
// A ClientBatch's requests are each an ABD operation as alone, except
// that the later requests of the batch on a key that an operation of the
// same batch already coordinates join it as its key run (op.run), in
// batch order: the operation's one query phase serves them all, their
// results are computed in order from the highest register the query
// found (a set or del changes the register, a get or exists reads it),
// and one store phase writes the run's last register, with a new tag
// (ts+1, this node, the operation's id) if the run holds a write, or the
// query's highest register written back when only reads need it (none
// when a majority already holds it). Every request of the run is answered
// once that store has a majority.
//
// Why it is linearizable (the ABD report §3.1.2's argument, per key): the run's
// requests are concurrent with one another (they reached the node
// together), so any order among them is allowed, and batch order is the
// one the gateway relies on for a connection's pipelined commands (a
// connection's same-key commands take effect in command order). Order the
// run's reads before its first write right after the write that wrote
// the queried register (tag t), and the run's writes, each followed by
// the reads after it, right before the write of tag t' = (ts+1, node,
// id) > t that the store phase installs. No request of the run answers
// before t' (or, for reads only, t) is held by a majority, so any
// operation starting after an answer sees t' or a higher tag; any
// operation that completed before the batch arrived has a tag the query
// saw, at most t. The run's writes other than the last are never
// installed: nothing reads them but the run's own later reads, which is
// what serial execution gives. Writes to one key by several requests at
// once thus cost one round each way instead of one per request.
//
// A request joins a run only when it and the run's first request are
// linearizable (not regular reads, which skip the write-back; local reads
// never begin an operation) and the operation is still in its query
// phase in this step (with one replica, or a self answer that completes
// the phase, it has already moved on and the request begins its own).

// Round groups. Requests that reach a coordinator one by one while its
// rounds are in flight would each start rounds of their own, and a
// runtime's batches would rarely hold more than one (a request steps as
// soon as it arrives). So a coordinator keeps at most window round groups
// in flight (parameter window, default 2; 0: no limit): a group is the
// requests begun together (one request, or a client batch), and requests
// arriving while window groups are in flight wait (queue) and begin
// together, as one group with key runs and shared rounds, when a group
// finishes (all its operations answered). At low load nothing waits. The
// decision uses only the protocol's own state (no clock): pure, as the
// seed's algorithm, which says nothing of how a node schedules its
// clients' operations.

// Cohorts, and gather (issue 28; branch abd49, session 49). With closed-loop
// clients (each sends its next request when answered), a group's
// clients come back together, so the clients split into cohorts that
// begin groups together. Under window 2 the split is kept: with two
// cohorts, each finds a group slot free when it comes back (the other
// cohort's group is the only one in flight), so neither ever waits in the
// queue, and the queue is the only place cohorts merge. Which split a run
// keeps is decided by its first rounds (the first client back after a
// group finds the window empty and begins a group alone). A small cohort's
// rounds are short, so it goes round many times while the large one's
// clients are away: live at 64 clients, n1's groups went "20 2 20 2" and
// "41 23 23 41", and one client went round alone ten times running
// (docs/COSTS.md, abd49), each time paying a whole round of peer messages.
// That is the bistable rate of session 48: the requests per group, so
// the peer messages and the CPU per request, are set by the split.
//
// No rule on the coordinator's own state merges two cohorts: the small
// one would have to wait for the large one's clients, which come back
// after their group ended, when nothing of theirs is in flight. Parameter
// gather makes that wait, bounded: after a group of n > 1 requests ends,
// arriving requests wait in the queue until n are queued (its clients are
// back, in a closed loop) or a timer of gather fires; then they begin as
// one group. A group of one (a lone client) sets no wait, so one client is
// never held. When the timer fires with m < n back, later waits expect at
// most max(m, 1) until a wait is completed by its arrivals (clients that
// think, or left, are not waited for every round). The waiting requests
// are queued requests as under window (concurrent with each other and
// with the groups in flight), so the linearizability argument above is
// unchanged: only when a group begins changes, never what it does. Off by
// default: on the loaded machine gather=5ms raised the requests per group
// in 5 of 6 alternated rounds and gather=1ms did not (clients take longer
// than 1 ms to come back there); the default waits for a quiet A/B.

// OnBatch handles a client batch: each request as OnRequest does, begun
// together as one round group. A batch of one is OnRequest (a node's
// direct pass steps most requests that way): no list of the admitted
// ones, whose array was the one allocation a batch of one added; a larger
// batch's list is sized once.
func (a *ABD) OnBatch(reqs []automaton.Request) {
	if len(reqs) == 1 {
		a.OnRequest(reqs[0])
		return
	}
	ok, seen := a.batchReqs[:0], a.batchSeen
	for _, req := range reqs {
		if !seen[req.ID] && a.admit(req) { // a retry in the same batch joins the first
			seen[req.ID] = true
			ok = append(ok, req)
		}
	}
	clear(seen)
	a.start(ok, false) // copies what it keeps (queue, ops, runs)
	clear(ok)          // the requests' arguments are not kept beyond the step
	a.batchReqs = ok[:0]
}

// start begins admitted requests as one round group, or queues them
// while window groups are in flight; fromQueue: they are the queue,
// begun as a group ended (counted apart: RoundGroups).
func (a *ABD) start(reqs []automaton.Request, fromQueue bool) {
	if len(reqs) == 0 {
		return
	}
	if (a.window > 0 && len(a.groupLeft) >= a.window) || (!fromQueue && a.holding(len(reqs))) {
		for _, r := range reqs {
			a.reqs[r.ID] = reqState{state: reqQueued}
		}
		a.queue = append(a.queue, reqs...)
		return
	}
	if !fromQueue && len(a.queue) > 0 { // a gather's last arrival: the queue goes with it
		reqs = append(a.queue, reqs...)
		a.queue = nil
		a.backCap = 0 // they all came back
	}
	if a.gathering {
		a.gathering = false
		a.Emit(automaton.CancelTimer{ID: gatherTimer})
	}
	a.expect = 0
	if fromQueue {
		a.rounds.FromQueue.Add(len(reqs))
	} else {
		a.rounds.OnArrival.Add(len(reqs))
	}
	a.groupSeq++
	g := a.groupSeq
	a.groupLeft[g] = 1 // held while the group begins: none of its ops may end it
	if a.gather > 0 {
		a.groupReqs[g] = len(reqs)
	}
	a.beginGroup(reqs, g)
	a.leave(g)
}

// leaveGroup counts o's end in its group.
func (a *ABD) leaveGroup(o *op) {
	if o.group != 0 {
		a.leave(o.group)
	}
}

// leave counts one end in group g; the group's last end begins the queued
// requests as the next group.
func (a *ABD) leave(g uint64) {
	if a.groupLeft[g]--; a.groupLeft[g] > 0 {
		return
	}
	delete(a.groupLeft, g)
	if n := a.groupReqs[g]; a.gather > 0 {
		if a.backCap > 0 && n > a.backCap {
			n = a.backCap
		}
		if n > 1 && n > a.expect {
			a.expect = n // its clients are expected back
		}
		delete(a.groupReqs, g)
	}
	if len(a.queue) == 0 || (a.window > 0 && len(a.groupLeft) >= a.window) || a.holding(0) {
		return
	}
	q := a.queue
	a.queue = nil
	a.start(q, true)
}

// beginGroup begins reqs in group g, the ones on a key already begun in
// the group joining its key run.
func (a *ABD) beginGroup(reqs []automaton.Request, g uint64) {
	// The scratch map, taken while in use (a group begun inside this
	// one's beginning, which start's hold rules out, would make its own).
	runs := a.groupRuns
	a.groupRuns = nil
	defer func() { clear(runs); a.groupRuns = runs }()
	for _, req := range reqs {
		joins := req.Opts.Read != automaton.ReadRegular
		if o := runs[req.Op.Key]; joins && o != nil && a.ops[o.id] == o && o.phase == 1 && o.count < a.quorum() {
			o.run = append(o.run, req)
			a.reqs[req.ID] = reqState{state: reqBusy, op: o.id}
			continue
		}
		o := a.begin(req, g)
		if !joins || a.proto.noWriteBack || len(reqs) == 1 {
			continue
		}
		if runs == nil {
			runs = map[string]*op{}
		}
		runs[req.Op.Key] = o
	}
}

// runQueried completes a key run's query phase: it computes every
// request's result in batch order and starts the store phase, or, when
// the run only reads a register a majority already holds, answers.
func (a *ABD) runQueried(o *op) {
	reg := o.max
	present := reg.present()
	wrote := false
	results := make([]service.Result, 0, 1+len(o.run))
	for i := -1; i < len(o.run); i++ {
		req := o.req
		if i >= 0 {
			req = o.run[i]
		}
		switch req.Op.Kind {
		case "set":
			reg.Value, reg.Tomb, present, wrote = req.Op.Args[0], false, true, true
			results = append(results, service.OK())
		case "del":
			results = append(results, service.Int(boolInt(present)))
			reg.Value, reg.Tomb, present, wrote = nil, true, false, true
		case "exists":
			results = append(results, service.Int(boolInt(present)))
		default: // get
			if present {
				results = append(results, service.Bytes(reg.Value))
			} else {
				results = append(results, service.Nil())
			}
		}
	}
	switch {
	case wrote:
		o.put = entry{Tag: Tag{TS: o.max.Tag.TS + 1, Node: string(a.cfg.Self), Seq: o.id}, Tomb: reg.Tomb, Value: reg.Value}
	case o.nMax >= a.quorum():
		a.stepDone = append(a.stepDone, keyTag{o.req.Op.Key, o.max.Tag})
		a.finishRun(o, results)
		return
	default:
		o.put = o.max // write back
	}
	o.results = results
	o.phase = 2
	o.count = 0
	for i := range o.replied {
		o.replied[i] = false
	}
	a.broadcast(o)
}

// finishRun answers a key run's requests, each with its result.
func (a *ABD) finishRun(o *op, results []service.Result) {
	delete(a.ops, o.id)
	a.Emit(automaton.CancelTimer{ID: automaton.TimerID(o.id)})
	a.answer(o.req.ID, results[0])
	for i, r := range o.run {
		a.answer(r.ID, results[i+1])
	}
	a.leaveGroup(o)
}

func boolInt(b bool) int64 {
	if b {
		return 1
	}
	return 0
}

// RoundGroups implements automaton.RoundReporter: the round groups begun
// since Start (not reset by a restart of the automaton: it is a new one).
func (a *ABD) RoundGroups() automaton.RoundGroups { return a.rounds }

// gatherTimer is the gather timer's id (operations' timers are their ids,
// below 1<<64-1: the incarnation has 32 bits).
const gatherTimer = automaton.TimerID(^uint64(0))

// holding reports whether n more arrivals wait in the queue for the
// clients of an ended group (gather), arming the gather timer.
func (a *ABD) holding(n int) bool {
	if a.gather <= 0 || a.expect <= 1 || len(a.queue)+n >= a.expect {
		return false
	}
	if !a.gathering {
		a.gathering = true
		a.Emit(automaton.SetTimer{ID: gatherTimer, After: a.gather})
	}
	return true
}

// gathered ends a gather whose timer fired: the queue begins as a group
// if the window has room, and later gathers expect no more clients back
// than came this time (backCap; at least one: none is held), until a
// gather is completed by its arrivals.
func (a *ABD) gathered() {
	if !a.gathering {
		return // cancelled before it fired
	}
	a.gathering = false
	a.expect = 0
	a.backCap = max(len(a.queue), 1)
	if len(a.queue) == 0 || (a.window > 0 && len(a.groupLeft) >= a.window) {
		return
	}
	q := a.queue
	a.queue = nil
	a.start(q, true)
}
