package sim

import (
	"bytes"
	"fmt"
	"sort"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Nested requests (automaton/call.go; the Eve/Adam thesis §1.3 and §3, Adam: a
// replicated service calling another one). See the package doc, "Nested
// requests", for the model; this file holds the callee co-simulation, the
// calls it carries, and the two output-commit checks.

// DefaultCalleeNamespace is the callee's namespace when
// Config.CalleeNamespace is empty.
const DefaultCalleeNamespace = "remote"

const (
	evCallTimeout evKind = 230 // a nested call's attempt timed out (callee side)
	evCallRetry   evKind = 231 // a nested call found no live node, or got an error answer: try again
	evNestedEcho  evKind = 232 // --nested: a second copy of a completed request leaves (main side)
)

// nestedOp is what the runtime saw of one nested RequestID: the canonical
// bytes of its first copy and of its first answer, and (callee side) its
// history entry.
type nestedOp struct {
	req, ans         []byte
	reqFrom, ansFrom string
	answered         bool
	pending          *history.Pending
	group            []service.Op
}

// call is one caller incarnation's nested request, carried like a client's:
// attempts at random live callee nodes, a timeout, retries with the same id,
// for as long as the calling incarnation lives.
type call struct {
	idx           int
	callerNode    int
	callerInc     uint64
	effect        automaton.EffectID
	req           automaton.Request
	attempt, node int
	nodeInc       uint64
	done          bool
	callerName    string
}

// calleeConfig is the callee's Config: Config.Callee, with the main run's
// seed (relabelled) and, where the callee leaves them zero, its latencies,
// timeouts and limits; it has no workload of its own.
func calleeConfig(m Config) Config {
	c := *m.Callee
	c.Seed = labeledRand(m.Seed, "callee").Int63()
	c.Clients, c.Ops = 1, 0
	c.Callee, c.Nested = nil, false
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&c.Latency, m.Latency)
	def(&c.ClientLatency, m.ClientLatency)
	def(&c.Fsync, m.Fsync)
	if c.RequestTimeout == 0 {
		c.RequestTimeout = m.RequestTimeout
	}
	if c.DrainTime == 0 {
		c.DrainTime = m.DrainTime
	}
	if c.MaxEvents == 0 {
		c.MaxEvents = m.MaxEvents
	}
	if c.CheckTimeout == 0 {
		c.CheckTimeout = m.CheckTimeout
	}
	return c
}

// initCallee builds the callee simulator of s (Config.Callee).
func (s *simulator) initCallee() error {
	if s.cfg.Callee == nil {
		return nil
	}
	c, err := newSimulator(calleeConfig(s.cfg))
	if err != nil {
		return fmt.Errorf("callee: %w", err)
	}
	c.caller = s
	c.ns = s.cfg.CalleeNamespace
	if c.ns == "" {
		c.ns = DefaultCalleeNamespace
	}
	if c.ns == Namespace {
		return fmt.Errorf("sim: the callee namespace must differ from %q", Namespace)
	}
	delay := s.cfg.CalleeDelay
	if delay == "" {
		delay = "constant:0"
	}
	if c.calleeDelay, err = ParseDist(delay); err != nil {
		return fmt.Errorf("sim: callee delay: %w", err)
	}
	c.byID = map[automaton.RequestID][]*call{}
	s.callee = c
	return nil
}

// startCallee boots the callee's nodes and its nemesis; it has no clients
// and no deadline of its own (the main run's workload decides the end).
func (s *simulator) startCallee() {
	for _, n := range s.nodes {
		if !n.out {
			s.boot(n)
		}
	}
	if s.faults != (faultSet{}) {
		s.after(s.nemesisGap(), &event{kind: evNemesis})
	}
}

// broken reports whether the run must stop (an error or a violation).
func (s *simulator) broken() bool {
	return s.err != nil || s.invErr != "" || s.conv.err != ""
}

// calleeFirst reports whether the callee's next event comes strictly before
// the main run's (ties: main first, so every hop between the namespaces,
// which has positive latency, is seen in causal order).
func (s *simulator) calleeFirst() bool {
	c := s.callee
	if c == nil || len(c.q) == 0 || c.broken() || c.finished {
		return false
	}
	return len(s.q) == 0 || c.q[0].at < s.q[0].at
}

// drainCallee runs the callee alone after the main run ended: its faults
// healed, until every open call is answered or its drain time is over.
func (s *simulator) drainCallee() {
	c := s.callee
	if c == nil || s.broken() {
		return
	}
	c.now = max(c.now, s.now)
	c.stopIssuing()
	for !c.finished && !c.broken() && c.openCalls() > 0 && len(c.q) > 0 {
		c.next()
	}
}

func (s *simulator) openCalls() int {
	k := 0
	for _, c := range s.calls {
		if !c.done {
			k++
		}
	}
	return k
}

// violate records an output-commit violation in the main run.
func (s *simulator) violate(format string, a ...any) {
	root := s
	if s.caller != nil {
		root = s.caller
	}
	if root.invErr == "" {
		root.invErr = fmt.Sprintf("nested requests (seed 003 §3): "+format, a...)
	}
}

// canonicalRequest encodes what identifies a nested request's content: its
// operation or group and its options (the environment, stamped by the
// node that receives it, is not part of it).
func canonicalRequest(r automaton.Request) []byte {
	var e wire.Encoder
	service.EncodeOp(&e, r.Op)
	e.Uvarint(uint64(len(r.Ops)))
	for _, op := range r.Ops {
		service.EncodeOp(&e, op)
	}
	e.Byte(byte(r.Opts.Read))
	names := make([]string, 0, len(r.Opts.Ext))
	for k := range r.Opts.Ext {
		names = append(names, k)
	}
	sort.Strings(names)
	for _, k := range names {
		e.String(k)
		e.Uvarint(uint64(len(r.Opts.Ext[k])))
		for _, v := range r.Opts.Ext[k] {
			e.String(v)
		}
	}
	return e.B
}

// canonicalAnswer encodes an answer's result and group results.
func canonicalAnswer(r automaton.Response) []byte {
	var e wire.Encoder
	service.EncodeResult(&e, r.Result)
	e.Uvarint(uint64(len(r.Results)))
	for _, x := range r.Results {
		service.EncodeResult(&e, x)
	}
	return e.B
}

// noteRequest applies check (a): every copy of one nested id carries the
// same request. It returns the id's record, new or not.
func (s *simulator) noteRequest(req automaton.Request, from string) (*nestedOp, bool) {
	if s.nested == nil {
		s.nested = map[automaton.RequestID]*nestedOp{}
	}
	b := canonicalRequest(req)
	o := s.nested[req.ID]
	if o == nil {
		o = &nestedOp{req: b, reqFrom: from}
		s.nested[req.ID] = o
		return o, true
	}
	if !bytes.Equal(o.req, b) {
		s.violate("two copies of nested request %v differ: %s sent %v, %s sent %v (every replica of the caller, and every re-issue, must send the same bytes)",
			req.ID, o.reqFrom, describeReq(o.req), from, describeReq(b))
	}
	return o, false
}

// noteAnswer applies check (b): every answer to one nested id equals the
// first (else the callee executed it twice, or answered a copy otherwise).
// Error answers are failed attempts, not answers.
func (s *simulator) noteAnswer(o *nestedOp, id automaton.RequestID, r automaton.Response, from string) bool {
	b := canonicalAnswer(r)
	if !o.answered {
		o.answered, o.ans, o.ansFrom = true, b, from
		return true
	}
	if !bytes.Equal(o.ans, b) {
		s.violate("nested request %v answered differently: %s answered %v, later %s answered %v (executed twice, or a copy not answered from the cache)",
			id, o.ansFrom, describeAnswer(o.ans), from, describeAnswer(b))
	}
	return false
}

func describeReq(b []byte) string {
	d := wire.NewDecoder(b)
	op := service.DecodeOp(d)
	return fmt.Sprintf("%s %s %q (%d bytes)", op.Kind, op.Key, op.Args, len(b))
}

func describeAnswer(b []byte) string {
	d := wire.NewDecoder(b)
	return service.DecodeResult(d).String()
}

// ------------------------------------------------------------ caller side

// startCall carries out n's released Effect of kind automaton.CallKind: it
// hands the Call to the callee, or answers EffectDone.Err at once when no
// namespace of that name is simulated or its protocol does not serve nested
// requests.
func (s *simulator) startCall(n *node, o automaton.Effect) {
	var c automaton.Call
	switch p := o.Payload.(type) {
	case automaton.Call:
		c = p
	case *automaton.Call:
		c = *p
	default:
		s.fail("%s emitted a %s effect with a %T payload (want automaton.Call)", n.id, automaton.CallKind, o.Payload)
		return
	}
	s.stats.Effects++
	s.stats.Calls++
	refuse := func(err error) {
		s.tracef("%s call %d refused: %v", n.id, o.ID, err)
		s.after(0, &event{kind: evEffect, node: n.idx, inc: n.inc, effect: &effectDone{id: o.ID, err: err}})
	}
	switch {
	case s.callee == nil || c.Namespace != s.callee.ns:
		refuse(fmt.Errorf("sim: no namespace %q is simulated beside this one", c.Namespace))
		return
	case !automaton.ServesNested(s.callee.cfg.Protocol):
		refuse(fmt.Errorf("sim: namespace %q runs %s, which does not serve nested requests", c.Namespace, s.callee.cfg.Protocol))
		return
	}
	req := cloneRequest(c.Req)
	req.Nested = true // the runtime marks it, whatever the caller did
	cl := s.callee
	cl.now = max(cl.now, s.now)
	k := &call{idx: len(cl.calls), callerNode: n.idx, callerInc: n.inc, effect: o.ID, req: req, node: -1,
		callerName: fmt.Sprintf("%s/%s (incarnation %d)", Namespace, n.id, n.inc)}
	cl.calls = append(cl.calls, k)
	cl.byID[req.ID] = append(cl.byID[req.ID], k)
	op, fresh := cl.noteRequest(req, k.callerName)
	if fresh {
		cl.invokeNested(op, req)
	}
	cl.tracef("call %d from %s: %v %v", k.idx, k.callerName, req.ID, req.Op)
	cl.sendCall(k)
}

// ------------------------------------------------------------ callee side

// invokeNested opens the history entry of a new nested id: one operation
// per id, invoked at its first copy.
func (s *simulator) invokeNested(o *nestedOp, req automaton.Request) {
	proc := len(s.nested)
	if len(req.Ops) > 0 {
		o.pending = s.rec.InvokeTxn(proc, s.ns, history.MultiKind)
		o.group = req.Ops
		return
	}
	mode := ""
	if s.svc.IsRead(req.Op) {
		mode = req.Opts.Read.String()
	}
	o.pending = s.rec.Invoke(proc, s.ns, req.Op, mode)
}

// callerLives reports whether k's calling incarnation still runs.
func (s *simulator) callerLives(k *call) bool {
	n := s.caller.nodes[k.callerNode]
	return n.up && n.inc == k.callerInc
}

// sendCall sends k's next attempt to a random live callee node, another
// than the last one when there is a choice.
func (s *simulator) sendCall(k *call) {
	if k.done {
		return
	}
	if !s.callerLives(k) {
		k.done = true
		s.tracef("call %d dropped: %s is gone", k.idx, k.callerName)
		return
	}
	var live []int
	for _, n := range s.nodes {
		if n.up && !n.out && (n.idx != k.node || len(s.nodes) == 1) {
			live = append(live, n.idx)
		}
	}
	if len(live) == 0 && k.node >= 0 && s.nodes[k.node].up {
		live = []int{k.node}
	}
	if len(live) == 0 {
		s.after(noNodeBackoff, &event{kind: evCallRetry, client: k.idx, attempt: k.attempt})
		return
	}
	if k.attempt > 0 {
		s.stats.Retries++
	}
	k.attempt++
	k.node = live[s.rngClient.Intn(len(live))]
	k.nodeInc = s.nodes[k.node].inc
	s.after(s.clientLat.Sample(s.rngNet), &event{kind: evClientReq, node: k.node, inc: k.nodeInc, client: k.idx, req: cloneRequest(k.req)})
	s.after(s.cfg.RequestTimeout, &event{kind: evCallTimeout, client: k.idx, attempt: k.attempt})
}

// onCallTrouble retries a call whose attempt timed out or failed.
func (s *simulator) onCallTrouble(e *event) {
	k := s.calls[e.client]
	if k.done || k.attempt != e.attempt {
		return
	}
	s.tracef("call %d: %v attempt %d at %s failed", k.idx, k.req.ID, k.attempt, s.nodeName(k.node))
	s.sendCall(k)
}

// answerCalls delivers a callee node's answer to the calls whose current
// attempt is at that node (a node answers one request id once, however
// many copies reached it: the runtime hands the answer to each). Every
// answer that is not an error goes through check (b); the first completes
// the id's history entry. As in the live node (node/call.go), an error
// answer is re-sent only when automaton.RetryableAnswer says it means
// "not now"; any other error is the call's answer, handed to the caller.
func (s *simulator) answerCalls(n *node, r automaton.Response) {
	o := s.nested[r.ID]
	if o != nil && !r.Result.IsErr() && s.noteAnswer(o, r.ID, r, nestedName(s.ns, n.id)) {
		for i, op := range o.group {
			if i < len(r.Results) {
				o.pending.Step(op, r.Results[i])
			}
		}
		o.pending.Complete(r.Result)
	}
	for _, k := range s.byID[r.ID] {
		if k.done || k.node != n.idx {
			continue
		}
		if r.Result.IsErr() && automaton.RetryableAnswer(r.Result.Err) {
			s.stats.ErrorReplies++
			s.after(s.clientLat.Sample(s.rngNet), &event{kind: evCallRetry, client: k.idx, attempt: k.attempt})
			continue
		}
		k.done = true
		resp := r
		resp.Result.Bytes = append([]byte(nil), r.Result.Bytes...)
		resp.Results = append([]service.Result(nil), r.Results...)
		d := s.clientLat.Sample(s.rngNet) + s.calleeDelay.Sample(s.rngNet)
		s.tracef("call %d: %v answered by %s: %v (back in %v)", k.idx, r.ID, n.id, r.Result, d)
		s.caller.schedule(s.now+d, &event{kind: evEffect, node: k.callerNode, inc: k.callerInc,
			effect: &effectDone{id: k.effect, res: resp}})
	}
}

// closeNested records the nested ids never answered as of unknown outcome.
func (s *simulator) closeNested() {
	ids := make([]automaton.RequestID, 0, len(s.nested))
	for id := range s.nested {
		ids = append(ids, id)
	}
	automaton.SortRequestIDs(ids)
	for _, id := range ids {
		if o := s.nested[id]; o.pending != nil && !o.answered {
			for _, op := range o.group {
				o.pending.StepUnknown(op)
			}
			o.pending.Unknown()
		}
	}
}

// ------------------------------------------------------- --nested (main)

// noteNestedReply applies check (b) to every answer a --nested client gets,
// including the answers to the echo copies and late ones.
func (s *simulator) noteNestedReply(e *event) {
	if e.resp.Silent || e.resp.Result.IsErr() {
		return
	}
	o := s.nested[e.resp.ID]
	if o == nil {
		return
	}
	s.noteAnswer(o, e.resp.ID, e.resp, nestedName(s.ns, s.ids[e.node]))
}

// echoNested sends, some time after c's request completed, one more copy of
// it to a random live node, as another replica of a caller would.
func (s *simulator) echoNested(c *client) {
	if s.rngEcho == nil {
		s.rngEcho = labeledRand(s.cfg.Seed, "nested-echo")
	}
	s.after(s.think.Sample(s.rngEcho)+time.Duration(s.rngEcho.Intn(50))*time.Millisecond,
		&event{kind: evNestedEcho, client: c.idx, req: cloneRequest(c.req)})
}

func (s *simulator) onNestedEcho(e *event) {
	var live []int
	for _, n := range s.nodes {
		if n.up && !n.out {
			live = append(live, n.idx)
		}
	}
	if len(live) == 0 {
		return
	}
	k := live[s.rngEcho.Intn(len(live))]
	s.tracef("client %d: echo copy of %v to %s", e.client, e.req.ID, s.ids[k])
	s.after(s.clientLat.Sample(s.rngEcho), &event{kind: evClientReq, node: k, inc: s.nodes[k].inc, client: e.client, req: e.req})
}

func nestedName(ns string, id automaton.NodeID) string { return ns + "/" + string(id) }
