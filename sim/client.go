package sim

import (
	"strconv"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
)

// noNodeBackoff is how long a client waits when it finds no live node.
const noNodeBackoff = 10 * time.Millisecond

// client is a closed-loop simulated client: one operation at a time.
type client struct {
	idx int
	id  uint64
	seq uint64 // sequence number of the current (or last) request
	ops int    // operations issued (for unique values)

	busy    bool
	req     automaton.Request
	isRead  bool
	pending *history.Pending
	node    int    // node of the current attempt
	nodeInc uint64 // its incarnation when the attempt was sent
	attempt int    // attempts made for the current operation

	lastDone string // ESDS: id of this client's last completed operation

	jobs []string // matchmaker: this client's live jobs, oldest first (matchmaker.go)

	txn *clientTxn // the interactive transaction under way (txn.go)

	// Client-driven operations (Config.ClientDriven, clientdriven.go): the
	// coordinator of the operation under way, and the sequence number of
	// the current phase's first request (answers to earlier attempts of
	// the phase count too).
	coord      automaton.Coordination
	phaseFirst uint64
	answered   []bool // per node: answered the current phase

	startAt      time.Duration // RunWithStarts: the first operation's time (offsets.go)
	startPending bool
}

// onClientNext issues the client's next operation, if any remain.
func (s *simulator) onClientNext(c *client) {
	if c.busy {
		s.fail("client %d asked for a new operation while one is open", c.idx)
		return
	}
	if s.stopping || s.issued >= s.cfg.Ops {
		return
	}
	if s.deferStart(c) {
		return
	}
	op := s.genOp(c)
	c.seq++
	c.ops++
	c.req = automaton.Request{ID: automaton.RequestID{Client: c.id, Seq: c.seq}, Op: op}
	if s.sessions && !s.cfg.Nested {
		// One request at a time: every earlier one was answered (or given
		// up on), so this one is the lowest the client still waits for.
		// Not for nested requests: another caller replica may send a copy
		// of an earlier id, which must get the first answer (callee.go).
		c.req.Unanswered = c.seq
	}
	if s.cfg.Txns > 0 && s.rngTxn.Float64() < s.cfg.Txns {
		s.beginTxn(c, op)
	} else if s.cfg.Groups > 0 && s.rngGroup.Float64() < s.cfg.Groups {
		// An atomic group (automaton/txn.go): GroupSize operations drawn
		// from the same mix, recorded as one history entry.
		c.req.Ops = []service.Op{op}
		for len(c.req.Ops) < s.cfg.GroupSize {
			c.ops++
			c.req.Ops = append(c.req.Ops, s.genOp(c))
		}
		c.req.Op = service.Op{}
		c.isRead = automaton.IsReadRequest(s.svc, c.req)
		if c.isRead {
			c.req.Opts.Read = s.cfg.ReadMode // a read-only group reads as single reads do
		}
		c.pending = s.rec.InvokeTxn(c.idx, Namespace, history.MultiKind)
	} else {
		c.isRead = s.svc.IsRead(op)
		readMode := ""
		if c.isRead {
			c.req.Opts.Read = s.cfg.ReadMode
			readMode = s.cfg.ReadMode.String()
		}
		c.pending = s.rec.Invoke(c.idx, Namespace, op, readMode)
	}
	if s.esds {
		s.drawESDSOptions(c)
	}
	c.req.Opts = automaton.AssignOptions(s.optSpecs, c.req.ID, c.req.Opts)
	c.pending.SetOpts(c.req.Opts.Ext)
	if s.cfg.Nested && c.txn == nil {
		c.req.Nested = true // callee.go
		s.noteRequest(c.req, "client "+strconv.Itoa(c.idx))
	}
	if s.cfg.ClientDriven && !s.startCoordination(c) {
		return
	}
	c.busy = true
	c.attempt = 0
	c.node = -1
	s.busy++
	s.issued++
	s.tracef("client %d invokes %v as %v", c.idx, op, c.req.ID)
	s.sendAttempt(c)
	if s.issued >= s.cfg.Ops {
		s.tracef("last operation issued")
		s.stopIssuing()
	}
}

// nodeName names node k, or "every node" for a fanned-out attempt (-1).
func (s *simulator) nodeName(k int) string {
	if k < 0 {
		return "every node"
	}
	return string(s.ids[k])
}

// genOp draws an operation from the mix over the key set; written values are
// unique ("c<client>-<n>") so that a read identifies the write it saw.
func (s *simulator) genOp(c *client) service.Op {
	r := s.rngClient.Intn(s.mixTotal)
	kind := s.mix[len(s.mix)-1].kind
	for _, m := range s.mix {
		if r < m.weight {
			kind = m.kind
			break
		}
		r -= m.weight
	}
	if s.cfg.Service != ServiceName {
		return s.genServiceOp(c, kind)
	}
	op := service.Op{Kind: kind, Key: "k" + strconv.Itoa(s.rngClient.Intn(s.cfg.Keys))}
	if kind == "set" {
		op.Args = [][]byte{[]byte("c" + strconv.Itoa(c.idx) + "-" + strconv.Itoa(c.ops))}
	}
	return op
}

// sendAttempt sends the current request to a random live node, preferring a
// different node from the previous attempt, over a reliable connection.
func (s *simulator) sendAttempt(c *client) {
	if c.coord != nil {
		s.sendPhase(c) // clientdriven.go
		return
	}
	if s.cfg.StickyClients {
		c.node = c.idx % len(s.nodes)
		if !s.nodes[c.node].up {
			s.tracef("client %d waits for its node %s", c.idx, s.ids[c.node])
			s.after(noNodeBackoff, &event{kind: evClientRetry, client: c.idx, opSeq: c.seq, attempt: c.attempt})
			return
		}
		s.sendTo(c, c.node)
		return
	}
	if s.fanout {
		s.sendFanout(c)
		return
	}
	var live []int
	for _, n := range s.nodes {
		if n.up && (n.idx != c.node || len(s.nodes) == 1) {
			live = append(live, n.idx)
		}
	}
	if len(live) == 0 && c.node >= 0 && s.nodes[c.node].up {
		live = []int{c.node}
	}
	if len(live) == 0 {
		s.tracef("client %d finds no live node", c.idx)
		s.after(noNodeBackoff, &event{kind: evClientRetry, client: c.idx, opSeq: c.seq, attempt: c.attempt})
		return
	}
	s.sendTo(c, live[s.rngClient.Intn(len(live))])
}

// sendTo sends the current request to node k.
func (s *simulator) sendTo(c *client, k int) {
	if c.attempt > 0 {
		s.stats.Retries++
	}
	c.attempt++
	c.node = k
	c.nodeInc = s.nodes[k].inc
	s.after(s.clientLat.Sample(s.rngNet), &event{kind: evClientReq, node: k, inc: c.nodeInc, client: c.idx, req: cloneRequest(c.req)})
	s.after(s.cfg.RequestTimeout, &event{kind: evClientTimeout, client: c.idx, opSeq: c.seq, attempt: c.attempt})
}

// sendFanout sends the current request to every live node, marked Fanout
// (automaton.FanoutProtocol): Fast Paxos clients are proposers, PB-Paxos
// clients send to all replicas and one answers. The first non-silent
// answer completes the operation; a crash of one node is not the client's
// trouble (c.node is -1), only the timeout is.
func (s *simulator) sendFanout(c *client) {
	var live []int
	for _, n := range s.nodes {
		if n.up {
			live = append(live, n.idx)
		}
	}
	if len(live) == 0 {
		s.tracef("client %d finds no live node", c.idx)
		s.after(noNodeBackoff, &event{kind: evClientRetry, client: c.idx, opSeq: c.seq, attempt: c.attempt})
		return
	}
	if c.attempt > 0 {
		s.stats.Retries++
	}
	c.attempt++
	c.node = -1
	req := cloneRequest(c.req)
	req.Fanout = true
	for _, k := range live {
		s.after(s.clientLat.Sample(s.rngNet), &event{kind: evClientReq, node: k, inc: s.nodes[k].inc, client: c.idx, req: cloneRequest(req)})
	}
	s.after(s.cfg.RequestTimeout, &event{kind: evClientTimeout, client: c.idx, opSeq: c.seq, attempt: c.attempt})
}

// onClientTrouble handles a timeout, a dropped connection, or a retry after
// finding no live node, for the attempt named in e (stale events are ignored).
func (s *simulator) onClientTrouble(e *event) {
	c := s.clients[e.client]
	if !c.busy || c.seq != e.opSeq || c.attempt != e.attempt {
		return
	}
	switch e.kind {
	case evClientRetry:
		// Nothing was sent in this round: try again, no policy question.
		s.sendAttempt(c)
	case evClientTimeout:
		s.tracef("client %d: %v timed out at %s", c.idx, c.req.ID, s.nodeName(c.node))
		s.retryOrGiveUp(c)
	case evConnLost:
		s.tracef("client %d: connection to %s lost", c.idx, s.ids[c.node])
		s.retryOrGiveUp(c)
	}
}

// retryOrGiveUp applies the retry policy after a failed attempt.
//
// A request is resent with the same RequestID to another node when the
// protocol promises that such a retry takes effect at most once
// (IdempotentRetry), and always for reads, which have no effect. A write of a
// protocol without that promise is recorded as of unknown outcome and the
// client moves on: ABD, for example, has no replicated deduplication table, so
// a second coordinator would run the write again with a new tag, and the value
// could be applied twice (overwriting a later write in between). The checker
// treats an unknown write as possibly applied at any time after its call.
func (s *simulator) retryOrGiveUp(c *client) {
	if c.txn != nil {
		s.txnTrouble(c, nil)
		return
	}
	if c.coord != nil {
		s.retryPhase(c) // clientdriven.go
		return
	}
	if c.attempt >= s.cfg.MaxAttempts || !(c.isRead || s.proto.IdempotentRetry()) {
		s.giveUp(c)
		return
	}
	s.sendAttempt(c)
}

// giveUp records the current operation as of unknown outcome. Late replies to
// it are ignored.
func (s *simulator) giveUp(c *client) {
	if c.isRead {
		s.stats.UnknownReads++
	} else {
		s.stats.UnknownWrites++
	}
	s.tracef("client %d gives up on %v (unknown outcome)", c.idx, c.req.ID)
	s.digestClient(c, 'U', nil)
	for _, op := range c.req.Ops {
		c.pending.StepUnknown(op) // answers never seen
	}
	c.pending.Unknown()
	s.finishOp(c)
}

func (s *simulator) finishOp(c *client) {
	c.coord = nil
	c.busy = false
	c.pending = nil
	s.busy--
	if s.openLoop() {
		s.openLoopDone(c)
		return
	}
	s.after(s.think.Sample(s.rngClient), &event{kind: evClientNext, client: c.idx})
}

func (s *simulator) onClientResp(e *event) {
	if s.cfg.Nested {
		s.noteNestedReply(e) // every answer, late ones too (callee.go)
	}
	c := s.clients[e.client]
	if c.coord != nil {
		s.onPhaseResp(c, e) // clientdriven.go
		return
	}
	if !c.busy || c.req.ID != e.resp.ID {
		s.stats.LateReplies++
		return
	}
	if e.resp.Silent {
		// A replica's "not mine to answer" to a fanned-out request.
		if !s.fanout {
			s.fail("client %d: %v answered Silent, but the request was not fanned out", c.idx, c.req.ID)
		}
		s.stats.Silent++
		return
	}
	res := e.resp.Result
	if c.txn != nil {
		s.onTxnResp(c, res)
		return
	}
	if res.IsErr() && (s.userService() && !automaton.RetryableAnswer(res.Err) || s.mmServiceAnswer(c.req, res)) {
		// A user's service (service.Simulated) answers errors of its own
		// (an Orca operation on an object not created yet), and so does the
		// Matchmaker ("no such job": matchmaker.go): a result, recorded as
		// such, not retried. The checker takes a write answered so as
		// applied with that reply or not at all (check/seq_generic.go).
		s.stats.ErrorReplies++
		s.tracef("client %d: %v -> error %s", c.idx, c.req.ID, res.Err)
		s.digestClient(c, 'C', &res)
		c.pending.Complete(res)
		s.noteCompleted(c)
		s.finishOp(c)
		return
	}
	if res.IsErr() {
		// For example ABD's TRYAGAIN after its own timeout: like a timeout, the
		// outcome of a write is unknown and a read may be retried.
		s.stats.ErrorReplies++
		s.tracef("client %d: %v error reply: %s", c.idx, c.req.ID, res.Err)
		s.retryOrGiveUp(c)
		return
	}
	s.tracef("client %d: %v -> %v", c.idx, c.req.ID, res)
	s.digestClient(c, 'C', &res)
	if c.req.Ops != nil {
		if len(e.resp.Results) != len(c.req.Ops) {
			s.fail("client %d: group %v of %d operations answered with %d results", c.idx, c.req.ID, len(c.req.Ops), len(e.resp.Results))
			return
		}
		for i, op := range c.req.Ops {
			c.pending.Step(op, e.resp.Results[i])
		}
	}
	c.pending.Complete(res)
	s.noteCompleted(c)
	if c.req.Nested {
		s.echoNested(c)
	}
	s.finishOp(c)
}
