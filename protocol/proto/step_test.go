package proto

import (
	"reflect"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// role records which handler each input reached.
type role struct{ got []string }

func (r *role) OnStart(automaton.Start)       { r.got = append(r.got, "start") }
func (r *role) OnRequest(q automaton.Request) { r.got = append(r.got, "request "+q.Op.Key) }
func (r *role) OnMessage(from automaton.NodeID, _ []byte) {
	r.got = append(r.got, "message "+string(from))
}
func (r *role) OnTimer(id automaton.TimerID) { r.got = append(r.got, "timer") }

func TestDispatch(t *testing.T) {
	r := &role{}
	for _, in := range []automaton.Input{automaton.Start{}, automaton.ClientRequest{Req: automaton.Request{Op: service.Op{Key: "k"}}},
		automaton.PeerMessage{From: "n2"}, automaton.TimerFired{ID: 3}} {
		Dispatch(r, in)
	}
	if want := []string{"start", "request k", "message n2", "timer"}; !reflect.DeepEqual(r.got, want) {
		t.Fatalf("handlers reached %v, want %v", r.got, want)
	}
}

// fullRole takes batches, effect completions and other inputs too.
type fullRole struct{ role }

func (r *fullRole) OnBatch(reqs []automaton.Request)  { r.got = append(r.got, "batch "+reqs[0].Op.Key) }
func (r *fullRole) OnEffectDone(automaton.EffectDone) { r.got = append(r.got, "effect") }
func (r *fullRole) OnOther(automaton.Input)           { r.got = append(r.got, "other") }

// otherInput is an input no role handler names.
type otherInput struct{ automaton.EffectDone }

// A batch reaches OnBatch, or each request OnRequest in order; an effect's
// completion reaches OnEffectDone; anything else OnOther, or nothing.
func TestDispatchBatchesAndEffects(t *testing.T) {
	batch := automaton.ClientBatch{Reqs: []automaton.Request{{Op: service.Op{Key: "a"}}, {Op: service.Op{Key: "b"}}}}
	ins := []automaton.Input{batch, automaton.EffectDone{}, otherInput{}}
	r := &role{}
	for _, in := range ins {
		Dispatch(r, in)
	}
	if want := []string{"request a", "request b"}; !reflect.DeepEqual(r.got, want) {
		t.Fatalf("a four-handler role reached %v, want %v", r.got, want)
	}
	f := &fullRole{}
	for _, in := range ins {
		Dispatch(f, in)
	}
	if want := []string{"batch a", "effect", "other"}; !reflect.DeepEqual(f.got, want) {
		t.Fatalf("a full role reached %v, want %v", f.got, want)
	}
}

// The outbox never addresses its own node, keeps the order of outputs, and
// the ticker is set once until it fires or stops.
func TestOutboxAndTicker(t *testing.T) {
	o := Outbox{Self: "n1"}
	tk := Ticker{ID: 7, Every: time.Second}
	o.Begin()
	o.Broadcast([]automaton.NodeID{"n1", "n2", "n3"}, []byte("m"))
	o.Send("n1", []byte("self"))
	tk.Arm(&o)
	tk.Arm(&o)
	o.Respond(automaton.RequestID{Client: 1, Seq: 2}, service.OK())
	want := []automaton.Output{
		automaton.Send{To: "n2", Msg: []byte("m")}, automaton.Send{To: "n3", Msg: []byte("m")},
		automaton.SetTimer{ID: 7, After: time.Second},
		automaton.Respond{Resp: automaton.Response{ID: automaton.RequestID{Client: 1, Seq: 2}, Result: service.OK()}},
	}
	if !reflect.DeepEqual(o.Out, want) {
		t.Fatalf("outputs %v, want %v", o.Out, want)
	}
	if tk.Fired(8) || !tk.Armed() || !tk.Fired(7) || tk.Armed() {
		t.Fatal("Fired must recognise only its own id and unset the timer")
	}
	tk.Arm(&o)
	tk.Stop()
	if tk.Armed() {
		t.Fatal("Stop left the timer set")
	}
	o.Begin()
	if len(o.Out) != 0 {
		t.Fatal("Begin kept the last step's outputs")
	}
	o.Size = 5
	o.Emit(automaton.SetTimer{ID: 1})
	if len(o.Out) != 1 || cap(o.Out) != 5 {
		t.Fatalf("with Size 5 the first Emit made %d outputs of capacity %d, want 1 of 5", len(o.Out), cap(o.Out))
	}
}

// validRole validates against KV, leaves key "member" unvalidated, and
// records the refusals it answers.
type validRole struct{ fullRole }

func (r *validRole) Validator(req automaton.Request) service.Service {
	if req.Op.Key == "member" {
		return nil
	}
	return service.KV{}
}
func (r *validRole) Invalid(req automaton.Request, res service.Result) {
	r.got = append(r.got, "invalid "+req.Op.Key+": "+res.Err)
}

// A validating role's invalid requests are answered by Invalid, alone or
// out of a batch, and never reach OnRequest or OnBatch; a Checked request
// or one the role keeps from its validator is not validated.
func TestDispatchValidatesOnce(t *testing.T) {
	get := func(k string) automaton.Request { return automaton.Request{Op: service.Op{Kind: "get", Key: k}} }
	bad := func(k string) automaton.Request { return automaton.Request{Op: service.Op{Kind: "nosuch", Key: k}} }
	checked := bad("c")
	checked.Checked = true
	r := &validRole{}
	for _, in := range []automaton.Input{
		automaton.ClientRequest{Req: get("a")},
		automaton.ClientRequest{Req: bad("b")},
		automaton.ClientRequest{Req: checked},
		automaton.ClientRequest{Req: bad("member")},
		automaton.ClientBatch{Reqs: []automaton.Request{bad("d"), get("e"), bad("f"), get("g")}},
		automaton.ClientBatch{Reqs: []automaton.Request{bad("h")}},
	} {
		Dispatch(r, in)
	}
	want := []string{"request a", `invalid b: ERR unknown kv operation "nosuch"`, "request c", "request member",
		`invalid d: ERR unknown kv operation "nosuch"`, `invalid f: ERR unknown kv operation "nosuch"`, "batch e",
		`invalid h: ERR unknown kv operation "nosuch"`}
	if !reflect.DeepEqual(r.got, want) {
		t.Fatalf("handlers reached %q, want %q", r.got, want)
	}
}
