// Package gatewaytest provides an in-memory gateway.Backend for tests of the
// gateway, the Go client and tools built on them. It applies each request to
// one service.State per namespace under a mutex (so it is trivially
// linearizable), records every request, and lets a test intercept requests to
// delay or fail them.
//
// It deliberately does not import package gateway, so that gateway's own
// tests can use it.
package gatewaytest

import (
	"context"
	"fmt"
	"strconv"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// Record is one request the backend received.
type Record struct {
	NS  string
	Req automaton.Request
}

// MemBackend is an in-memory Backend.
type MemBackend struct {
	nss []config.Namespace

	mu     sync.Mutex
	states map[string]service.State
	log    []Record
	hook   func(ctx context.Context, ns string, req automaton.Request) error
}

// New returns a backend serving nss (the first is the default). It panics on
// an unknown service name: that is a bug in the test.
func New(nss ...config.Namespace) *MemBackend {
	m := &MemBackend{nss: nss, states: map[string]service.State{}}
	for _, ns := range nss {
		svc, err := service.Lookup(ns.Service)
		if err != nil {
			panic(err)
		}
		m.states[ns.Name] = svc.NewState()
	}
	return m
}

// KV returns a backend with one KV namespace, "default".
func KV() *MemBackend {
	return New(config.Namespace{Name: "default", Protocol: "memory", Service: "kv"})
}

// SetHook installs f, called before each request is applied (outside the
// backend's lock). If f returns an error, Do returns it and the request is not
// applied. f may block, for example until ctx ends.
func (m *MemBackend) SetHook(f func(ctx context.Context, ns string, req automaton.Request) error) {
	m.mu.Lock()
	m.hook = f
	m.mu.Unlock()
}

// Do implements gateway.Backend.
func (m *MemBackend) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	m.mu.Lock()
	hook := m.hook
	m.mu.Unlock()
	if hook != nil {
		if err := hook(ctx, ns, req); err != nil {
			return automaton.Response{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return automaton.Response{}, err
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	st, ok := m.states[ns]
	if !ok {
		return automaton.Response{}, fmt.Errorf("unknown namespace %q", ns)
	}
	m.log = append(m.log, Record{NS: ns, Req: req})
	if len(req.Ops) > 0 {
		return automaton.Response{ID: req.ID, Result: service.OK(), Results: automaton.ApplyGroup(st, req.Ops, req.Env)}, nil
	}
	return automaton.Response{ID: req.ID, Result: st.Apply(req.Op)}, nil
}

// Namespaces implements gateway.Backend.
func (m *MemBackend) Namespaces() []config.Namespace {
	return append([]config.Namespace(nil), m.nss...)
}

// Info implements gateway.Backend.
func (m *MemBackend) Info() map[string]map[string]string {
	m.mu.Lock()
	defer m.mu.Unlock()
	return map[string]map[string]string{
		"memory": {"backend": "memory", "requests_applied": strconv.Itoa(len(m.log))},
	}
}

// Log returns a copy of the requests applied so far, in order.
func (m *MemBackend) Log() []Record {
	m.mu.Lock()
	defer m.mu.Unlock()
	return append([]Record(nil), m.log...)
}
