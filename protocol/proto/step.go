package proto

import (
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// The base of a role's Step (issue 32 item 1). The automaton contract
// (package automaton) maps every input action to one call of Step and
// every output action to one value Step returns; Role names the four input
// actions, Dispatch routes an input to its handler, Outbox collects the
// outputs in order, and Ticker is the retransmission timer most roles keep
// running while anything is outstanding.

// Role is a role's input actions, one handler each.
type Role interface {
	OnStart(s automaton.Start)
	OnRequest(req automaton.Request)
	OnMessage(from automaton.NodeID, msg []byte)
	OnTimer(id automaton.TimerID)
}

// BatchRole is a role that steps a client batch as one input (ABD, ESDS:
// automaton.ClientBatch); a role without it is handed the batch's requests
// one by one, in order. (A batch whose requests were all invalid, and
// answered by a Validating role, does not reach it.)
type BatchRole interface {
	OnBatch(reqs []automaton.Request)
}

// EffectRole is a role that runs effects (automaton.Effect) and takes their
// completions.
type EffectRole interface {
	OnEffectDone(d automaton.EffectDone)
}

// OtherRole takes every input Dispatch has no handler for in its role
// (extensions' inputs).
type OtherRole interface {
	OnOther(in automaton.Input)
}

// Validating is a role whose clients' requests Dispatch validates, once,
// before OnRequest or OnBatch sees them (issue 32 item 4: one validation).
// The check is automaton.ValidateRequest against the service Validator
// names; a request whose Checked is set was validated by the runtime's
// edge already (the RESP and gRPC gateways, a shard group's routing) and
// is not checked again. A role then trusts its clients' requests, and its
// peers' forwarded requests too: every forward carries a request that was
// validated where it entered the cluster.
type Validating interface {
	// Validator is the service req is validated against; nil takes req
	// unvalidated (a membership change, which no service lists, or a
	// request the role refuses before any service sees it).
	Validator(req automaton.Request) service.Service
	// Invalid answers req, refused as invalid with r (Refusal).
	Invalid(req automaton.Request, r service.Result)
}

// Refusal is the answer to a request a service's Validate refused with
// err: an Invalid error, "ERR " and err's text on the wire.
func Refusal(err error) service.Result {
	return service.Fail(synoderr.Invalid, "%v", err)
}

// invalid reports whether req is an invalid request of validating role r,
// and answers it if so.
func invalid(r Role, req automaton.Request) bool {
	if req.Checked {
		return false
	}
	v, ok := r.(Validating)
	if !ok {
		return false
	}
	svc := v.Validator(req)
	if svc == nil {
		return false
	}
	if err := automaton.ValidateRequest(svc, req); err != nil {
		v.Invalid(req, Refusal(err))
		return true
	}
	return false
}

// Dispatch performs input action in on r.
func Dispatch(r Role, in automaton.Input) {
	switch in := in.(type) {
	case automaton.Start:
		r.OnStart(in)
	case automaton.ClientRequest:
		if invalid(r, in.Req) {
			return
		}
		r.OnRequest(in.Req)
	case automaton.PeerMessage:
		r.OnMessage(in.From, in.Msg)
	case automaton.TimerFired:
		r.OnTimer(in.ID)
	case automaton.ClientBatch:
		if b, ok := r.(BatchRole); ok {
			if reqs := validOnly(r, in.Reqs); len(reqs) > 0 {
				b.OnBatch(reqs)
			}
			return
		}
		for _, req := range in.Reqs {
			if !invalid(r, req) {
				r.OnRequest(req)
			}
		}
	default:
		if e, ok := r.(EffectRole); ok {
			if d, ok := in.(automaton.EffectDone); ok {
				e.OnEffectDone(d)
				return
			}
		}
		if o, ok := r.(OtherRole); ok {
			o.OnOther(in)
		}
	}
}

// validOnly is reqs without its invalid requests, which it answers
// (Validating); reqs itself when all are valid.
func validOnly(r Role, reqs []automaton.Request) []automaton.Request {
	for i := range reqs {
		if invalid(r, reqs[i]) {
			ok := reqs[:i:i] // a new array from the first append
			for _, req := range reqs[i+1:] {
				if !invalid(r, req) {
					ok = append(ok, req)
				}
			}
			return ok
		}
	}
	return reqs
}

// Outbox holds the outputs of the step under way, in order. Self is the
// node the role runs on: Send and Broadcast never address it (runtimes
// reject a Send to self). Step hands Out to the runtime, so each step
// makes a new slice; Size, when set, is the outputs a step usually makes,
// allocated at once by the step's first Emit (unset: minOut).
type Outbox struct {
	Self automaton.NodeID
	Out  []automaton.Output
	Size int
}

// Begin starts a step with no outputs.
func (o *Outbox) Begin() { o.Out = nil }

// minOut is the room the first Emit of a step makes when Size is unset.
// Grown by append from nothing, a step's list was reallocated at its 2nd,
// 3rd, 5th and 9th output: a Multi-Paxos step of three outputs (a
// Persist, a Send, a timer) allocated it three times (BenchmarkRESPSet
// paxos, one client: 86 -> 79 allocations per SET over the process).
// The outputs do not change, nor any state (Out is not state: the model
// checker's fingerprint skips it); this is capacity only.
const minOut = 8

// Emit appends an output.
func (o *Outbox) Emit(x automaton.Output) {
	if o.Out == nil {
		n := o.Size
		if n <= 0 {
			n = minOut
		}
		o.Out = make([]automaton.Output, 0, n)
	}
	o.Out = append(o.Out, x)
}

// Send sends msg to a peer; nothing when to is Self.
func (o *Outbox) Send(to automaton.NodeID, msg []byte) {
	if to != o.Self {
		o.Emit(automaton.Send{To: to, Msg: msg})
	}
}

// Broadcast sends msg to every node of nodes but Self, in their order.
func (o *Outbox) Broadcast(nodes []automaton.NodeID, msg []byte) {
	for _, n := range nodes {
		o.Send(n, msg)
	}
}

// Respond answers client request id.
func (o *Outbox) Respond(id automaton.RequestID, r service.Result) {
	o.Emit(automaton.Respond{Resp: automaton.Response{ID: id, Result: r}})
}

// Ticker is a timer kept running while its role has something outstanding
// (retransmissions, suspicion): Arm sets it unless it is set, Fired
// recognises its expiry, Stop forgets it (a new incarnation starts with no
// timer set).
type Ticker struct {
	ID    automaton.TimerID
	Every time.Duration
	set   bool
}

// Arm sets the timer through o unless it is already set.
func (t *Ticker) Arm(o *Outbox) {
	if t.set {
		return
	}
	t.set = true
	o.Emit(automaton.SetTimer{ID: t.ID, After: t.Every})
}

// Armed reports whether the timer is set.
func (t *Ticker) Armed() bool { return t.set }

// Fired reports whether id is this timer's expiry, which unsets it.
func (t *Ticker) Fired(id automaton.TimerID) bool {
	if id != t.ID {
		return false
	}
	t.set = false
	return true
}

// Stop forgets the timer (at Start: timers do not survive a crash).
func (t *Ticker) Stop() { t.set = false }
