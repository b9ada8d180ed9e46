package gatewaytest

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// AutomatonBackend really runs a protocol: one automaton of a single-node
// cluster (n1), stepped synchronously under a mutex, answering each request
// with the Respond its step emits. Persist outputs and timers are ignored
// (nothing crashes here), Effects are carried out synchronously, in the
// order emitted, before any timer fires, so it serves protocols that answer a request in
// the step that receives it on a single node (unreplicated, for example),
// and protocols that first need their timers (Multi-Paxos elects itself:
// pending timers are fired, earliest first, until the request is answered);
// tests use it to exercise the gateways and clients against a protocol's
// real behaviour (transactions) rather than MemBackend's.
type AutomatonBackend struct {
	ns config.Namespace

	mu      sync.Mutex
	a       automaton.Automaton
	log     []automaton.Request
	batches []int                               // sizes of the batches DoBatch stepped
	timers  map[automaton.TimerID]time.Duration // deadlines in virtual time
	now     time.Duration                       // virtual time: the last timer fired
	seen    map[automaton.RequestID]automaton.Response
	clock   func() time.Time // the environment's time (SetClock); wall time by default
	seeds   uint64
	exec    *automaton.Executors // Effects are carried out synchronously
	effs    []automaton.Effect   // emitted, not yet carried out
}

// SetClock makes f the time of the environment each request carries
// (automaton.Request.Env, as the node runtime observes it on arrival):
// tests of expiry move it.
func (b *AutomatonBackend) SetClock(f func() time.Time) {
	b.mu.Lock()
	b.clock = f
	b.mu.Unlock()
}

// NewAutomaton returns a backend serving namespace "default" of service svc
// with the registered protocol proto (the test imports its package).
func NewAutomaton(proto, svc string) (*AutomatonBackend, error) {
	s, err := service.Lookup(svc)
	if err != nil {
		return nil, err
	}
	p, err := automaton.LookupAny(proto)
	if err != nil {
		return nil, err
	}
	a, err := p.New(automaton.Config{Self: "n1", Nodes: []automaton.NodeID{"n1"}, Namespace: "default",
		Service: s, Rand: rand.New(rand.NewSource(1))})
	if err != nil {
		return nil, err
	}
	b := &AutomatonBackend{ns: config.Namespace{Name: "default", Protocol: proto, Service: svc}, a: a,
		timers: map[automaton.TimerID]time.Duration{}, seen: map[automaton.RequestID]automaton.Response{},
		exec: automaton.NewExecutors(automaton.ExecEnv{Self: "n1", Namespace: "default", Simulated: true, Run: "gatewaytest"},
			func(string) *rand.Rand { return rand.New(rand.NewSource(1)) })}
	b.outputs(a.Step(automaton.Start{}))
	return b, nil
}

// MustAutomaton is NewAutomaton that fails the test on an error.
func MustAutomaton(t testing.TB, proto, svc string) *AutomatonBackend {
	t.Helper()
	b, err := NewAutomaton(proto, svc)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// Do implements gateway.Backend.
func (b *AutomatonBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	if ns != b.ns.Name {
		return automaton.Response{}, fmt.Errorf("unknown namespace %q", ns)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	b.seeds++
	now := time.Now
	if b.clock != nil {
		now = b.clock
	}
	req.Env = service.Env{Time: now().UnixNano(), Seed: b.seeds}
	b.log = append(b.log, req)
	b.outputs(b.a.Step(automaton.ClientRequest{Req: req}))
	return b.answer(req)
}

// DoBatch implements gateway.BatchBackend as node.Node does: where the
// protocol steps client batches, reqs are stepped as one ClientBatch, in
// order; elsewhere they run one after the other through Do. The
// requests handed over are in Batches.
func (b *AutomatonBackend) DoBatch(ctx context.Context, ns string, reqs []automaton.Request) ([]automaton.Response, []error) {
	out := make([]automaton.Response, len(reqs))
	errs := make([]error, len(reqs))
	if ns != b.ns.Name || !automaton.StepsClientBatches(b.ns.Protocol) {
		for i, req := range reqs {
			out[i], errs[i] = b.Do(ctx, ns, req)
		}
		return out, errs
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now
	if b.clock != nil {
		now = b.clock
	}
	batch := make([]automaton.Request, len(reqs))
	for i, req := range reqs {
		b.seeds++
		req.Env = service.Env{Time: now().UnixNano(), Seed: b.seeds}
		b.log = append(b.log, req)
		batch[i] = req
	}
	b.batches = append(b.batches, len(batch))
	b.outputs(b.a.Step(automaton.ClientBatch{Reqs: batch}))
	for i, req := range batch {
		out[i], errs[i] = b.answer(req)
	}
	return out, errs
}

// Batches returns the sizes of the batches DoBatch stepped, in order.
func (b *AutomatonBackend) Batches() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.batches...)
}

// answer returns req's response once the automaton gave it (under b.mu).
func (b *AutomatonBackend) answer(req automaton.Request) (automaton.Response, error) {
	// A protocol that needs its timers (a leader election) gets them fired,
	// earliest first, until it answers.
	for i := 0; i < maxTimerRounds; i++ {
		if r, ok := b.seen[req.ID]; ok {
			delete(b.seen, req.ID)
			return r, nil
		}
		if len(b.effs) > 0 {
			b.effect()
			continue
		}
		if len(b.timers) == 0 {
			break
		}
		var next automaton.TimerID
		first := true
		for id, after := range b.timers {
			if first || after < b.timers[next] || (after == b.timers[next] && id < next) {
				next, first = id, false
			}
		}
		b.now = b.timers[next]
		delete(b.timers, next)
		b.outputs(b.a.Step(automaton.TimerFired{ID: next}))
	}
	return automaton.Response{}, fmt.Errorf("request %v: no answer", req.ID)
}

// effect carries out the first pending Effect and steps its EffectDone.
func (b *AutomatonBackend) effect() {
	e := b.effs[0]
	b.effs = b.effs[1:]
	done := automaton.EffectDone{ID: e.ID}
	x, err := b.exec.For(e.Kind)
	if err == nil {
		done.Result, done.Err = x.Execute(e.Payload)
	} else {
		done.Err = err
	}
	b.outputs(b.a.Step(done))
}

// maxTimerRounds bounds the timers and effects run while waiting for one answer.
const maxTimerRounds = 1000

// outputs records the answers and timers of one step (sends cannot
// happen: the cluster has one node).
func (b *AutomatonBackend) outputs(outs []automaton.Output) {
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Respond:
			b.seen[o.Resp.ID] = o.Resp
		case automaton.SetTimer:
			b.timers[o.ID] = b.now + o.After
		case automaton.CancelTimer:
			delete(b.timers, o.ID)
		case automaton.Effect:
			b.effs = append(b.effs, o)
		}
	}
}

// Namespaces implements gateway.Backend.
func (b *AutomatonBackend) Namespaces() []config.Namespace { return []config.Namespace{b.ns} }

// Info implements gateway.Backend.
func (b *AutomatonBackend) Info() map[string]map[string]string { return nil }

// Inspect calls f with the automaton, under the backend's lock.
func (b *AutomatonBackend) Inspect(f func(automaton.Automaton)) {
	b.mu.Lock()
	defer b.mu.Unlock()
	f(b.a)
}

// Log returns the requests received so far, in order.
func (b *AutomatonBackend) Log() []automaton.Request {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]automaton.Request(nil), b.log...)
}

// TxnSteps returns the transaction steps received so far as
// "action kind key" strings.
func (b *AutomatonBackend) TxnSteps() []string {
	var out []string
	for _, r := range b.Log() {
		if r.Txn != nil {
			out = append(out, r.Txn.Action.String()+" "+r.Op.Kind+" "+r.Op.Key)
		}
	}
	return out
}
