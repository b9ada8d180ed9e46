package all_test

import (
	"math/rand"
	"testing"

	"github.com/synod-dev/synod/automaton"
	_ "github.com/synod-dev/synod/protocol/all"
	"github.com/synod-dev/synod/protocol/proto"
	"github.com/synod-dev/synod/service"
)

// countingKV is KV counting its Validate calls.
type countingKV struct {
	service.KV
	n *int
}

func (s countingKV) Validate(op service.Op) error {
	*s.n++
	return s.KV.Validate(op)
}

// Every protocol and broken variant validates its clients' requests once,
// through the kit (proto.Validating, which proto.Dispatch consults): an
// operation the service does not know is answered "ERR unknown kv
// operation" in the step that receives it, after exactly one call of the
// service's Validate; a request marked Checked (validated at an edge) is
// not validated again.
func TestEveryProtocolValidatesThroughTheKit(t *testing.T) {
	names := append(automaton.Names(), automaton.BrokenNames()...)
	for _, name := range names {
		var calls int
		p, err := automaton.LookupAny(name)
		if err != nil {
			t.Fatal(err)
		}
		nodes := []automaton.NodeID{"n1", "n2", "n3", "n4"}
		a, err := p.New(automaton.Config{Self: "n1", Nodes: nodes, Namespace: "default",
			Service: countingKV{n: &calls}, Rand: rand.New(rand.NewSource(1))})
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if _, ok := a.(proto.Validating); !ok {
			t.Errorf("%s: its automaton %T is not a proto.Validating role", name, a)
			continue
		}
		a.Step(automaton.Start{})
		calls = 0
		bad := automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "nosuch", Key: "k"}}
		want := `ERR unknown kv operation "nosuch"`
		if got := answer(a.Step(automaton.ClientRequest{Req: bad}), bad.ID); got != want || calls != 1 {
			t.Errorf("%s: an unknown operation was answered %q after %d validations, want %q after 1", name, got, calls, want)
		}
		calls = 0
		get := automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 2}, Op: service.Op{Kind: "get", Key: "k"}, Checked: true}
		a.Step(automaton.ClientRequest{Req: get})
		a.Step(automaton.ClientBatch{Reqs: []automaton.Request{get}})
		if calls != 0 {
			t.Errorf("%s: a Checked request was validated %d times, want 0", name, calls)
		}
	}
}

// answer is the error text of id's answer among outs, "" if none.
func answer(outs []automaton.Output, id automaton.RequestID) string {
	for _, o := range outs {
		if r, ok := o.(automaton.Respond); ok && r.Resp.ID == id {
			return r.Resp.Result.Err
		}
	}
	return ""
}
