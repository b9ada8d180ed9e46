package gatewaytest

import (
	"context"
	"fmt"
	"math/rand"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// AutomatonBackend really runs a protocol: one automaton of a single-node
// cluster (n1), stepped synchronously under a mutex, answering each request
// with the Respond its step emits. Persist outputs and timers are ignored
// (nothing crashes here), so it serves protocols that answer a request in
// the step that receives it on a single node (unreplicated, for example);
// tests use it to exercise the gateways and clients against a protocol's
// real behaviour (transactions) rather than MemBackend's.
type AutomatonBackend struct {
	ns config.Namespace

	mu  sync.Mutex
	a   automaton.Automaton
	log []automaton.Request
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
	a.Step(automaton.Start{})
	return &AutomatonBackend{ns: config.Namespace{Name: "default", Protocol: proto, Service: svc}, a: a}, nil
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
	b.log = append(b.log, req)
	for _, o := range b.a.Step(automaton.ClientRequest{Req: req}) {
		if r, ok := o.(automaton.Respond); ok && r.Resp.ID == req.ID {
			return r.Resp, nil
		}
	}
	return automaton.Response{}, fmt.Errorf("request %v: no answer in its step", req.ID)
}

// Namespaces implements gateway.Backend.
func (b *AutomatonBackend) Namespaces() []config.Namespace { return []config.Namespace{b.ns} }

// Info implements gateway.Backend.
func (b *AutomatonBackend) Info() map[string]map[string]string { return nil }

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
