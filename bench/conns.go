package bench

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"sync"

	"github.com/synod-dev/synod/service"
)

// Connections and clients (issue 18): a client is one closed-loop caller
// with one operation outstanding; a connection is what it talks through.
// etcd's own benchmark tool separates the two (--conns, --clients), and so
// does this: a ConnSpec says how many connections the clients of a run
// share. The number of clients, and so the number of operations
// outstanding, stays the same whatever the spec, which keeps cells with
// different specs comparable.

// ConnSpec is a run's connection arrangement:
//
//	per-client   one connection per client (the driver's default)
//	N            N connections shared by all clients (client i uses
//	             connection i mod N); needs a target safe for concurrent use
//	pipeline:P   RESP pipelining: each connection carries up to P clients'
//	             commands at once, written together and answered in order,
//	             so clients/P connections (rounded up)
type ConnSpec struct {
	// Shared is the number of shared connections (0: see PerClient, Depth).
	Shared int
	// Depth is the pipelining depth (0: no pipelining).
	Depth int
}

// PerClient is the spec of one connection per client.
var PerClient = ConnSpec{}

// String renders the spec as ParseConnSpec accepts it.
func (s ConnSpec) String() string {
	switch {
	case s.Depth > 0:
		return "pipeline:" + strconv.Itoa(s.Depth)
	case s.Shared > 0:
		return strconv.Itoa(s.Shared)
	}
	return "per-client"
}

// ParseConnSpec parses "per-client", a positive connection count, or
// "pipeline:P" with P >= 1.
func ParseConnSpec(s string) (ConnSpec, error) {
	if s == "per-client" || s == "" {
		return PerClient, nil
	}
	if d, ok := strings.CutPrefix(s, "pipeline:"); ok {
		n, err := strconv.Atoi(d)
		if err != nil || n < 1 {
			return ConnSpec{}, fmt.Errorf("connections %q: pipelining depth must be a positive integer", s)
		}
		return ConnSpec{Depth: n}, nil
	}
	n, err := strconv.Atoi(s)
	if err != nil || n < 1 {
		return ConnSpec{}, fmt.Errorf("connections %q: want per-client, a positive number of shared connections, or pipeline:P", s)
	}
	return ConnSpec{Shared: n}, nil
}

// Conns is the number of connections the spec opens for clients clients.
func (s ConnSpec) Conns(clients int) int {
	switch {
	case s.Depth > 0:
		return (clients + s.Depth - 1) / s.Depth
	case s.Shared > 0:
		return min(s.Shared, clients)
	}
	return clients
}

// Describe says what the spec means for clients clients, for reports
// ("16 conns, 256 clients").
func (s ConnSpec) Describe(clients int) string {
	switch {
	case s.Depth > 0:
		return fmt.Sprintf("%d conns pipelining up to %d each", s.Conns(clients), min(s.Depth, clients))
	case s.Shared > 0:
		return fmt.Sprintf("%d shared conns", s.Conns(clients))
	}
	return "1 conn per client"
}

// ShareConns returns a factory whose clients share conns targets made by
// open, which must return targets safe for concurrent use (etcd's and
// ZooKeeper's clients, the gRPC client, PipelinedRedis). Client i uses
// shared target i mod conns; it is opened by the first client that needs
// it, with that client's address (the driver gives client i Addrs[i mod
// len(Addrs)], so shared target j goes to Addrs[j mod len(Addrs)]).
//
// A transport failure marks the shared target broken: every client using
// it sees the failure on its next operation or its own, the driver closes
// each client's handle and asks again, and the first to ask opens a
// replacement. The underlying target is closed when the last handle on it
// is.
func ShareConns(conns int, open TargetFactory) TargetFactory {
	if conns < 1 {
		conns = 1
	}
	p := &sharePool{open: open, slots: make([]*shared, conns)}
	return p.get
}

type sharePool struct {
	open  TargetFactory
	mu    sync.Mutex
	slots []*shared
}

// shared is one underlying target and its handles.
type shared struct {
	t      Target
	mu     sync.Mutex
	refs   int
	broken bool
}

func (p *sharePool) get(ctx context.Context, addr string, client int) (Target, error) {
	j := client % len(p.slots)
	p.mu.Lock()
	defer p.mu.Unlock() // dials hold the lock: only at connect and reconnect
	s := p.slots[j]
	if s != nil {
		s.mu.Lock()
		ok := !s.broken
		if ok {
			s.refs++
		}
		s.mu.Unlock()
		if ok {
			return &shareHandle{s: s}, nil
		}
	}
	t, err := p.open(ctx, addr, j)
	if err != nil {
		return nil, err
	}
	s = &shared{t: t, refs: 1}
	p.slots[j] = s
	return &shareHandle{s: s}, nil
}

// shareHandle is one client's handle on a shared target.
type shareHandle struct {
	s      *shared
	closed bool
}

// Do implements Target.
func (h *shareHandle) Do(ctx context.Context, op service.Op) (service.Result, error) {
	res, err := h.s.t.Do(ctx, op)
	if err != nil {
		h.s.mu.Lock()
		h.s.broken = true
		h.s.mu.Unlock()
	}
	return res, err
}

// Close implements Target: it drops the handle, and closes the target with
// the last one.
func (h *shareHandle) Close() error {
	if h.closed {
		return nil
	}
	h.closed = true
	h.s.mu.Lock()
	h.s.refs--
	last := h.s.refs == 0
	h.s.mu.Unlock()
	if last {
		return h.s.t.Close()
	}
	return nil
}

// WithConns returns the factory that arranges factory's targets as spec
// says for a run. pipelined opens one pipelined connection (nil when the
// target has none: a pipeline spec is then refused); a shared spec needs
// factory's targets to be safe for concurrent use.
func WithConns(spec ConnSpec, clients int, factory, pipelined TargetFactory) (TargetFactory, error) {
	switch {
	case spec.Depth > 0:
		if pipelined == nil {
			return nil, fmt.Errorf("connections %s: this target does not pipeline", spec)
		}
		return ShareConns(spec.Conns(clients), pipelined), nil
	case spec.Shared > 0:
		return ShareConns(spec.Conns(clients), factory), nil
	}
	return factory, nil
}
