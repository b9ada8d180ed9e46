package client

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/gateway/grpcserver"
)

// oneAtATime is a Backend that checks the contract's client: no client id
// has two requests in flight, and each client id's seqs increase.
type oneAtATime struct {
	gateway.Backend
	t *testing.T

	mu       sync.Mutex
	inflight map[uint64]bool
	last     map[uint64]uint64
}

func (o *oneAtATime) Do(ctx context.Context, ns string, req automaton.Request) (automaton.Response, error) {
	id := req.ID
	o.mu.Lock()
	if o.inflight[id.Client] {
		o.t.Errorf("request %v arrived while another of client %x is in flight", id, id.Client)
	}
	if id.Seq <= o.last[id.Client] {
		o.t.Errorf("request %v after seq %d of its client", id, o.last[id.Client])
	}
	o.inflight[id.Client], o.last[id.Client] = true, id.Seq
	o.mu.Unlock()
	time.Sleep(time.Millisecond) // let other goroutines' requests overlap
	defer func() {
		o.mu.Lock()
		o.inflight[id.Client] = false
		o.mu.Unlock()
	}()
	return o.Backend.Do(ctx, ns, req)
}

// TestConcurrentGRPCUseLanes: goroutines sharing one GRPC client never
// have two requests of one client id in flight; used by one goroutine at
// a time the client keeps its own id.
func TestConcurrentGRPCUseLanes(t *testing.T) {
	b := &oneAtATime{Backend: kvNS("pbpaxos"), t: t, inflight: map[uint64]bool{}, last: map[uint64]uint64{}}
	n := startGRPCOver(t, b, nil, grpcserver.Options{})
	c := newGRPC(t, []string{n.addr}, Options{})
	ctx := tctx(t)
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 10; i++ {
				if _, _, err := c.DoOp(ctx, "", Op("set", fmt.Sprintf("k%d", g), fmt.Sprint(i)), OpOptions{}); err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	b.mu.Lock()
	clients := len(b.last)
	b.mu.Unlock()
	if clients < 2 || clients > 8 {
		t.Errorf("%d client ids for 8 goroutines", clients)
	}
	// One goroutine again: the client's own id.
	before := c.seq.Load()
	for i := 0; i < 3; i++ {
		if _, _, err := c.DoOp(ctx, "", Op("get", "k1"), OpOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if got := b.last[c.ClientID()]; got != before+3 {
		t.Errorf("sequential requests after concurrent ones: own id's last seq %d, want %d", got, before+3)
	}
}
