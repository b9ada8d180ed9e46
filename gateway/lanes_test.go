package gateway

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/protocol/eve"
	"github.com/synod-dev/synod/protocol/orcabcast"
	"github.com/synod-dev/synod/protocol/orcaprimary"
	"github.com/synod-dev/synod/protocol/pbpaxos"
)

// reversing is a Backend that holds the next n requests until all have
// arrived and then hands them to the protocol in the reverse order of
// their keys (a multi-key command sends its keys' requests in order): the latest request of a multi-key command
// overtakes the others, as it may on a real network.
type reversing struct {
	*gatewaytest.AutomatonBackend

	mu   sync.Mutex
	n    int
	held []*heldReq
}

type heldReq struct {
	req  automaton.Request
	resp automaton.Response
	err  error
	done chan struct{}
}

// hold makes the next n requests wait for each other.
func (r *reversing) hold(n int) {
	r.mu.Lock()
	r.n = n
	r.mu.Unlock()
}

func (r *reversing) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	r.mu.Lock()
	if r.n == 0 {
		r.mu.Unlock()
		return r.AutomatonBackend.Do(ctx, ns, req)
	}
	h := &heldReq{req: req, done: make(chan struct{})}
	r.held = append(r.held, h)
	if len(r.held) < r.n {
		r.mu.Unlock()
		<-h.done
		return h.resp, h.err
	}
	batch := r.held
	r.held, r.n = nil, 0
	r.mu.Unlock()
	slices.SortFunc(batch, func(a, b *heldReq) int { return strings.Compare(b.req.Op.Key, a.req.Op.Key) })
	for _, b := range batch {
		b.resp, b.err = r.AutomatonBackend.Do(ctx, ns, b.req)
		close(b.done)
	}
	return h.resp, h.err
}

// TestMultiKeyOnPerClientDedup: a multi-key command's concurrent requests,
// arriving in reverse order, are each applied and answered on the
// protocols whose deduplication keeps one entry (the last seq) per client.
// Before lanes they shared the connection's client id, and a request
// overtaken by a later seq of its client was refused as older than the
// client's latest (pbpaxos, orca-bcast, orca-primary) or never answered.
func TestMultiKeyOnPerClientDedup(t *testing.T) {
	for _, proto := range []string{pbpaxos.Name, eve.Name, orcabcast.Name, orcaprimary.Name} {
		t.Run(proto, func(t *testing.T) {
			b := &reversing{AutomatonBackend: gatewaytest.MustAutomaton(t, proto, "kv")}
			_, addr := startServer(t, b, ServerOptions{})
			c := dial(t, addr)
			keys := []string{"k1", "k2", "k3", "k4", "k5", "k6"}
			for i, k := range keys {
				if got := c.do("SET", k, fmt.Sprint(i)); got != "OK" {
					t.Fatalf("SET %s: %s", k, got)
				}
			}
			// Where groups are atomic a multi-key command is one request
			// (TestMultiKeyAtomicGroup); elsewhere one per key.
			n := len(keys)
			if automaton.TransactionsOf(proto).Atomic {
				n = 1
			}
			b.hold(n)
			if got, want := c.do(append([]string{"MGET"}, keys...)...), "1) \"0\"\n2) \"1\"\n3) \"2\"\n4) \"3\"\n5) \"4\"\n6) \"5\""; got != want {
				t.Errorf("MGET:\n got %s\nwant %s", got, want)
			}
			b.hold(n)
			if got := c.do(append([]string{"DEL"}, keys...)...); got != "(integer) 6" {
				t.Errorf("DEL of six keys: %s", got)
			}
			if got := c.do("EXISTS", "k1", "k6"); got != "(integer) 0" {
				t.Errorf("EXISTS after DEL: %s", got)
			}
			// A later command of the connection is not refused as old.
			if got := c.do("SET", "k1", "again"); got != "OK" {
				t.Errorf("SET after DEL: %s", got)
			}
		})
	}
}
