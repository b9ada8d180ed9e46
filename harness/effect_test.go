package harness

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// effectProto answers each request after an effect of kind "harness.len"
// (the length of the op's key) has run.
type effectProto struct{}

func (effectProto) Name() string          { return "test-harness-effect" }
func (effectProto) IdempotentRetry() bool { return false }
func (effectProto) New(cfg automaton.Config) (automaton.Automaton, error) {
	return &effectAut{waiting: map[automaton.EffectID]automaton.RequestID{}}, nil
}

type effectAut struct {
	next    automaton.EffectID
	waiting map[automaton.EffectID]automaton.RequestID
}

func (a *effectAut) Step(in automaton.Input) []automaton.Output {
	switch in := in.(type) {
	case automaton.ClientRequest:
		a.next++
		a.waiting[a.next] = in.Req.ID
		return []automaton.Output{automaton.Effect{ID: a.next, Kind: "harness.len", Payload: in.Req.Op.Key}}
	case automaton.EffectDone:
		id := a.waiting[in.ID]
		delete(a.waiting, in.ID)
		return []automaton.Output{automaton.Respond{Resp: automaton.Response{ID: id, Result: service.Int(int64(in.Result.(int)))}}}
	}
	return nil
}

type lenExec struct{ closed *int }

func (x lenExec) Execute(p any) (any, error) { return len(p.(string)), nil }
func (x lenExec) Close() error               { *x.closed++; return nil }

var lenClosed int

func init() {
	automaton.Register(effectProto{})
	automaton.RegisterExecutor("harness.len", func(env automaton.ExecEnv) (automaton.Executor, error) {
		return lenExec{closed: &lenClosed}, nil
	})
}

func TestEffectsWaitForTheTest(t *testing.T) {
	lenClosed = 0
	c := New(t, Options{Protocol: "test-harness-effect", Nodes: 2, NoInvariants: true})
	r1 := c.Request("n1", service.Op{Kind: "get", Key: "abc"}, automaton.Options{})
	r2 := c.Request("n2", service.Op{Kind: "get", Key: "hello"}, automaton.Options{})
	if _, ok := c.Response(r1); ok || len(c.Effects()) != 2 {
		t.Fatalf("answered before its effect ran: effects %v", c.Effects())
	}
	if got := fmt.Sprint(c.Effects()); got != "[n1 effect 1 harness.len n2 effect 1 harness.len]" {
		t.Fatalf("pending: %s", got)
	}
	c.Crash("n2") // its pending effect is lost, its executor (none yet) closed
	if n := c.CompleteEffects(); n != 1 {
		t.Fatalf("completed %d effects, want 1", n)
	}
	if r, ok := c.Response(r1); !ok || !r.Equal(service.Int(3)) {
		t.Fatalf("r1 = %v %v", r, ok)
	}
	if _, ok := c.Response(r2); ok {
		t.Fatal("a crashed node's effect completed")
	}
	c.Crash("n1")
	if lenClosed != 1 {
		t.Fatalf("executors closed %d times, want 1", lenClosed)
	}
}
