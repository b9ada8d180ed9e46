package gateway

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"
)

// submitBackend is a MemBackend that hands requests over without waiting
// (SubmitBackend), as a protocol that keeps the order of the writes it is
// handed would: Submit applies the request at once, in submission order,
// and its answer comes back a random little while later, so several of a
// connection's batches are in flight. It counts what a gateway must not
// do: two requests of one client id in flight, and a request that only
// reads handed over while an earlier one is unanswered (it would take the
// read path and could miss a write still queued at the leader).
type submitBackend struct {
	*gatewaytest.MemBackend
	svc service.Service

	mu         sync.Mutex
	rng        *rand.Rand
	inFlight   map[uint64]bool // client ids with a request in flight
	most       int             // most requests in flight at once
	submits    int
	reads      int      // read-only requests submitted
	readsEarly []string // read-only requests handed over with others in flight
	twice      []string // client ids handed a second request in flight
}

func newSubmitBackend(ns config.Namespace) *submitBackend {
	svc, err := service.Lookup(ns.Service)
	if err != nil {
		panic(err)
	}
	return &submitBackend{MemBackend: gatewaytest.New(ns), svc: svc, rng: rand.New(rand.NewPCG(28, 1)), inFlight: map[uint64]bool{}}
}

var _ SubmitBackend = (*submitBackend)(nil)

func (b *submitBackend) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	reads := true
	for _, op := range append(req.Ops, req.Op) {
		if op.Kind != "" {
			reads = reads && b.svc.IsRead(op)
		}
	}
	b.mu.Lock()
	b.submits++
	if reads {
		b.reads++
	}
	if reads && len(b.inFlight) > 0 {
		b.readsEarly = append(b.readsEarly, fmt.Sprint(req.ID))
	}
	if b.inFlight[req.ID.Client] {
		b.twice = append(b.twice, fmt.Sprint(req.ID))
	}
	b.inFlight[req.ID.Client] = true
	b.most = max(b.most, len(b.inFlight))
	delay := time.Duration(b.rng.IntN(1500)) * time.Microsecond

	b.mu.Unlock()
	r, err := b.Do(ctx, ns, req) // applied now: in submission order
	return func() (automaton.Response, error) {
		time.Sleep(delay)
		b.mu.Lock()
		delete(b.inFlight, req.ID.Client)
		b.mu.Unlock()
		return r, err
	}
}

// chunkScript is pipelineScript's batched commands (SET, GET, INCR,
// APPEND on a few keys) in chunks of 1 to 24 commands: about half the
// chunks only write and a quarter only read, so a chunk read by itself is
// a batch that writes or one that only reads.
func chunkScript(r *rand.Rand, chunks int) [][][]string {
	var out [][][]string
	for range chunks {
		n := 1 + r.IntN(24)
		kind := r.IntN(4)
		var chunk [][]string
		for len(chunk) < n {
			args := pipelineScript(r, 1)[0]
			switch args[0] {
			case "SET", "INCR", "APPEND":
				if kind == 3 || len(args) > 3 || (args[0] == "INCR" && len(args) > 2) {
					continue
				}
			case "GET":
				if kind < 2 {
					continue
				}
			default:
				continue
			}
			chunk = append(chunk, args)
		}
		out = append(out, chunk)
	}
	return out
}

// writeChunks writes each chunk in one write, pausing a little after
// some, so the gateway reads many of them one by one.
func writeChunks(t *testing.T, c *tconn, chunks [][][]string, r *rand.Rand) {
	for _, chunk := range chunks {
		var sb strings.Builder
		for _, args := range chunk {
			fmt.Fprintf(&sb, "*%d\r\n", len(args))
			for _, a := range args {
				fmt.Fprintf(&sb, "$%d\r\n%s\r\n", len(a), a)
			}
		}
		if _, err := io.WriteString(c.nc, sb.String()); err != nil {
			t.Error(err)
			return
		}
		if r.IntN(2) == 0 {
			time.Sleep(time.Duration(r.IntN(300)) * time.Microsecond)
		}
	}
}

// TestPipelineBatchesInFlight: where the protocol keeps the order of the
// writes it is handed (Multi-Paxos) and the Backend hands a request over
// without waiting (SubmitBackend), a pipeline's batches go in flight
// several at once, and the replies are still exactly serial execution's,
// in command order; no client id has two requests in flight and no batch
// that only reads is handed over while an earlier one is unanswered.
func TestPipelineBatchesInFlight(t *testing.T) {
	r := rand.New(rand.NewPCG(4, 28))
	chunks := chunkScript(r, 300)
	var script [][]string
	for _, chunk := range chunks {
		script = append(script, chunk...)
	}
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	if !automaton.OrdersWrites(pxName) {
		t.Fatalf("%s does not declare automaton.WriteOrderer", pxName)
	}

	_, saddr := startServer(t, gatewaytest.New(ns), ServerOptions{})
	sc := dial(t, saddr)
	want := make([]string, len(script))
	for i, args := range script {
		want[i] = sc.do(args...)
	}

	b := newSubmitBackend(ns)
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	go writeChunks(t, c, chunks, rand.New(rand.NewPCG(5, 28)))
	expectSerial(t, c, script, want)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.most < 2 {
		t.Errorf("at most %d request in flight (%d submitted): the batches did not go in flight together", b.most, b.submits)
	}
	if len(b.twice) > 0 {
		t.Errorf("client ids with two requests in flight: %v", b.twice[:min(len(b.twice), 5)])
	}
	if len(b.readsEarly) > 0 {
		t.Errorf("%d read-only requests handed over while another was in flight: %v", len(b.readsEarly), b.readsEarly[:min(len(b.readsEarly), 5)])
	}
	t.Logf("%d commands, %d requests submitted (%d only read), at most %d in flight", len(script), b.submits, b.reads, b.most)
}
