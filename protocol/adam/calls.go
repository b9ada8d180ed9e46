package adam

import (
	"bytes"
	"crypto/sha256"
	"encoding/binary"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Nested calls (the Eve/Adam thesis §3.1 and §5.2.3): a request suspended at its call
// is part of the committed state; only then does the call leave, from every
// execution replica, with an id every replica and every re-issue computes
// alike; the answer goes to the primary's PPM, which resumes the request in
// its group's next turn.

// callBase keeps call effect ids apart from the engine's execution effects.
const callBase = 1 << 48

// contID is a request's identity in the state: its client and sequence.
func contID(id automaton.RequestID) string {
	var b [16]byte
	binary.BigEndian.PutUint64(b[:8], id.Client)
	binary.BigEndian.PutUint64(b[8:], id.Seq)
	return string(b[:])
}

func requestOf(cid string) automaton.RequestID {
	b := []byte(cid)
	if len(b) != 16 {
		return automaton.RequestID{}
	}
	return automaton.RequestID{Client: binary.BigEndian.Uint64(b[:8]), Seq: binary.BigEndian.Uint64(b[8:])}
}

// nestedID is the callee-side id of a request's nested call: the client id
// derived from (caller namespace, caller's client), the caller's sequence
// number. Every replica and every re-issue after a rollback or a restart
// computes the same; each of the caller's clients has at most one request
// outstanding, so one nested client id has at most one call outstanding,
// well inside the callee's deduplication window.
func nestedID(ns string, id automaton.RequestID) automaton.RequestID {
	var e wire.Encoder
	e.String("adam-nested")
	e.String(ns)
	e.Uvarint(id.Client)
	h := sha256.Sum256(e.B)
	return automaton.RequestID{Client: binary.BigEndian.Uint64(h[:8]) | 1<<63, Seq: id.Seq}
}

// tag is what a suspended request keeps for the protocol: its thread (PPM)
// and origin (who answers its client).
type tag struct {
	thread int
	origin automaton.NodeID
}

func (t tag) encode() []byte {
	var e wire.Encoder
	e.Uvarint(uint64(t.thread))
	e.String(string(t.origin))
	return e.B
}

func decodeTag(b []byte) tag {
	d := wire.NewDecoder(b)
	t := tag{thread: int(d.Uvarint()), origin: automaton.NodeID(d.String())}
	if d.Done() != nil {
		return tag{}
	}
	return t
}

// callOf is the nested request of a suspended request.
func (x *ext) callOf(c *service.Cont) automaton.Call {
	return automaton.Call{Namespace: x.callee, Req: automaton.Request{
		ID: nestedID(x.ns, requestOf(c.ID)), Op: c.Call, Nested: true}}
}

// emittedCall is one call as it left, for the invariant call-after-commit:
// whether the committed state held the same call at that moment.
type emittedCall struct {
	id        automaton.RequestID
	committed bool
	slot      uint64
}

// emit sends c's nested call (once per incarnation).
func (x *ext) emit(a *eve.Eve, c *service.Cont, committed *service.NestedState, slot uint64) {
	if x.issued[c.ID] {
		return
	}
	if _, ok := x.answers[c.ID]; ok {
		return
	}
	x.issued[c.ID] = true
	x.effects++
	id := automaton.EffectID(callBase + x.effects)
	x.calls[id] = c.ID
	call := x.callOf(c)
	ok := false
	if committed != nil {
		if cc := committed.Cont(c.ID); cc != nil {
			ok = sameCall(x.callOf(cc), call)
		}
	}
	x.emitted = append(x.emitted, emittedCall{id: call.Req.ID, committed: ok, slot: slot})
	if len(x.emitted) > 4096 {
		x.emitted = append(x.emitted[:0:0], x.emitted[2048:]...)
	}
	a.Emit(automaton.Effect{ID: id, Kind: automaton.CallKind, Payload: call})
}

func sameCall(a, b automaton.Call) bool {
	var ea, eb wire.Encoder
	service.EncodeOp(&ea, a.Req.Op)
	service.EncodeOp(&eb, b.Req.Op)
	return a.Namespace == b.Namespace && a.Req.ID == b.Req.ID && bytes.Equal(ea.B, eb.B)
}

// committed returns the node's committed state and slot.
func committed(a *eve.Eve) (*service.NestedState, uint64) {
	slot, st := a.ServiceState()
	ns, _ := st.(*service.NestedState)
	return ns, slot
}

// Applied implements eve.Ext: after every applied slot (a verified wall,
// a rollback's re-execution, a state transfer) and after recovery, the
// calls of the requests suspended in the committed state leave (§5.2.3:
// "verification before every nested request"); answers of requests no
// longer suspended are forgotten.
func (x *ext) Applied(a *eve.Eve) {
	st, slot := committed(a)
	if st == nil {
		return
	}
	live := map[string]bool{}
	for _, c := range st.Conts() {
		live[c.ID] = true
		x.emit(a, c, st, slot)
	}
	for id := range x.answers {
		if !live[id] {
			delete(x.answers, id)
		}
	}
	for id := range x.issued {
		if !live[id] {
			delete(x.issued, id)
		}
	}
}

// Executed implements eve.Ext. The broken variant sends the calls of its
// own speculative run at once, before the verifiers decide.
func (x *ext) Executed(a *eve.Eve, spec service.State) {
	if !x.proto.callFirst {
		return
	}
	st, slot := committed(a)
	if ns, ok := spec.(*service.NestedState); ok {
		for _, c := range ns.Conts() {
			x.emit(a, c, st, slot)
		}
	}
}

// Other implements eve.Ext: a nested call's answer. A call the runtime
// cannot carry (no such namespace) is answered by its error, which the
// request's next step receives like any answer (and fails the request
// with): the primary puts the answer into the batch, so every replica
// resumes with the same one.
func (x *ext) Other(a *eve.Eve, in automaton.Input) bool {
	d, ok := in.(automaton.EffectDone)
	if !ok || uint64(d.ID) <= callBase {
		return false
	}
	cid, ok := x.calls[d.ID]
	if !ok {
		return true
	}
	delete(x.calls, d.ID)
	var res service.Result
	switch r := d.Result.(type) {
	case automaton.Response:
		res = r.Result
	case *automaton.Response:
		res = r.Result
	default:
		res = service.Errorf("ERR nested call: no answer")
	}
	if d.Err != nil {
		res = service.Errorf("ERR nested call: %v", d.Err)
	}
	if x.issued[cid] {
		x.answers[cid] = res
		a.CutBatch() // the PPM may have waited for it
	}
	return true
}
