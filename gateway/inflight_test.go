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
// (SubmitBackend): Submit applies the request at once, in submission
// order, and its answer comes back a random little while later, so
// several of a connection's batches are in flight. It counts what a
// gateway must not do: two requests of one client id in flight, and a
// request handed over while an earlier one on one of its keys is
// unanswered (a protocol may apply requests in flight in any order).
type submitBackend struct {
	*gatewaytest.MemBackend

	mu       sync.Mutex
	rng      *rand.Rand
	inFlight map[uint64]bool   // client ids with a request in flight
	keys     map[string]uint64 // keys of the requests in flight: their client id
	most     int               // most requests in flight at once
	submits  int
	sameKey  []string // requests handed over with an earlier one on a key in flight
	twice    []string // client ids handed a second request in flight
}

func newSubmitBackend(ns config.Namespace) *submitBackend {
	return &submitBackend{MemBackend: gatewaytest.New(ns), rng: rand.New(rand.NewPCG(28, 1)), inFlight: map[uint64]bool{}, keys: map[string]uint64{}}
}

var _ SubmitBackend = (*submitBackend)(nil)

func (b *submitBackend) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	ops := req.Ops
	if len(ops) == 0 {
		ops = []service.Op{req.Op}
	}
	b.mu.Lock()
	b.submits++
	if b.inFlight[req.ID.Client] {
		b.twice = append(b.twice, fmt.Sprint(req.ID))
	}
	b.inFlight[req.ID.Client] = true
	for _, op := range ops {
		if o, ok := b.keys[op.Key]; ok && o != req.ID.Client {
			b.sameKey = append(b.sameKey, fmt.Sprintf("%v on %s", req.ID, op.Key))
		}
		b.keys[op.Key] = req.ID.Client
	}
	b.most = max(b.most, len(b.inFlight))
	delay := time.Duration(b.rng.IntN(1500)) * time.Microsecond
	b.mu.Unlock()
	r, err := b.Do(ctx, ns, req) // applied now: in submission order
	return func() (automaton.Response, error) {
		time.Sleep(delay)
		b.mu.Lock()
		delete(b.inFlight, req.ID.Client)
		for _, op := range ops {
			if b.keys[op.Key] == req.ID.Client {
				delete(b.keys, op.Key)
			}
		}
		b.mu.Unlock()
		return r, err
	}
}

// chunkScript is a pipeline of SET, GET, INCR and APPEND on 40 keys (the
// commands that go in batches) in chunks of 1 to 24 commands, a chunk's
// keys drawn from 8 of them, so that chunks read one by one are batches
// of which some share keys with the batches in flight and some do not.
func chunkScript(r *rand.Rand, chunks int) [][][]string {
	var out [][][]string
	for range chunks {
		n := 1 + r.IntN(24)
		base := r.IntN(5) * 8
		var chunk [][]string
		for range n {
			k := fmt.Sprint("key", base+r.IntN(8))
			switch x := r.IntN(4); x {
			case 0:
				chunk = append(chunk, []string{"SET", k, fmt.Sprint(r.IntN(100))})
			case 1:
				chunk = append(chunk, []string{"GET", k})
			case 2:
				chunk = append(chunk, []string{"INCR", k})
			default:
				chunk = append(chunk, []string{"APPEND", k, "7"})
			}
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

// TestPipelineBatchesInFlight: where the protocol applies atomic groups
// and the Backend hands a request over without waiting (SubmitBackend), a
// pipeline's batches go in flight several at once, and the replies are
// still exactly serial execution's, in command order; no client id has
// two requests in flight and no batch is handed over while an earlier one
// on one of its keys is unanswered.
func TestPipelineBatchesInFlight(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	chunks, script, want := inFlightScript(t, ns)
	b := newSubmitBackend(ns)
	_, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	go writeChunks(t, c, chunks, rand.New(rand.NewPCG(5, 28)))
	expectSerial(t, c, script, want)
	b.checkInFlight(t, len(script))
}

// inFlightScript is TestPipelineBatchesInFlight's pipeline (chunkScript)
// and serial execution's replies to it.
func inFlightScript(t *testing.T, ns config.Namespace) (chunks [][][]string, script [][]string, want []string) {
	chunks = chunkScript(rand.New(rand.NewPCG(4, 28)), 300)
	for _, chunk := range chunks {
		script = append(script, chunk...)
	}
	_, saddr := startServer(t, gatewaytest.New(ns), ServerOptions{})
	sc := dial(t, saddr)
	want = make([]string, len(script))
	for i, args := range script {
		want[i] = sc.do(args...)
	}
	return chunks, script, want
}

// checkInFlight fails t unless batches went in flight together, no client
// id had two requests in flight and no request was handed over with an
// earlier one on its keys in flight.
func (b *submitBackend) checkInFlight(t *testing.T, commands int) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.most < 2 {
		t.Errorf("at most %d request in flight (%d submitted): the batches did not go in flight together", b.most, b.submits)
	}
	if len(b.twice) > 0 {
		t.Errorf("client ids with two requests in flight: %v", b.twice[:min(len(b.twice), 5)])
	}
	if len(b.sameKey) > 0 {
		t.Errorf("%d requests handed over while an earlier one on the same key was in flight: %v", len(b.sameKey), b.sameKey[:min(len(b.sameKey), 5)])
	}
	t.Logf("%d commands, %d requests submitted, at most %d in flight", commands, b.submits, b.most)
}

// gatedBackend is a MemBackend that hands requests over without waiting
// (SubmitBackend) and holds the answer of every request naming the key
// "held" until release is closed; the others are answered at once. held
// gets each held request as it is handed over.
type gatedBackend struct {
	*gatewaytest.MemBackend
	release chan struct{}
	held    chan automaton.Request
}

func (b *gatedBackend) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	held := req.Op.Key == "held"
	for _, op := range req.Ops {
		held = held || op.Key == "held"
	}
	r, err := b.Do(ctx, ns, req)
	if held {
		b.held <- req
	}
	return func() (automaton.Response, error) {
		if held {
			<-b.release
		}
		return r, err
	}
}

// TestBatchKeyspaceEventsDoNotWait: a pipeline batch's keyspace events
// are published when its answer arrives, not once the previous batch's
// replies are written: with the first batch's answer held, the second
// batch (other keys, in flight beside it) notifies a subscriber at once;
// the replies still go out in command order once the first is answered.
func TestBatchKeyspaceEventsDoNotWait(t *testing.T) {
	ns := config.Namespace{Name: "default", Protocol: pxName, Service: "kv"}
	b := &gatedBackend{MemBackend: gatewaytest.New(ns), release: make(chan struct{}), held: make(chan automaton.Request, 4)}
	_, addr := startServer(t, b, ServerOptions{})
	admin := dial(t, addr)
	if got := admin.do("CONFIG", "SET", "notify-keyspace-events", "KA"); got != "OK" {
		t.Fatalf("CONFIG SET: %s", got)
	}
	sub := dial(t, addr)
	sub.send("SUBSCRIBE", "__keyspace@0__:free")
	sub.reply()

	c := dial(t, addr)
	chunk := func(cmds ...[]string) {
		for _, args := range cmds {
			c.send(args...)
		}
		if err := c.w.Flush(); err != nil {
			t.Fatal(err)
		}
	}
	chunk([]string{"SET", "held", "1"}, []string{"SET", "held", "2"}) // the first batch: answer held
	select {
	case req := <-b.held: // handed over: the next chunk is a batch of its own
		if len(req.Ops) != 2 {
			t.Fatalf("the first batch handed over %d operations, want its 2 (%v)", len(req.Ops), req)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("the first batch was not handed over")
	}
	chunk([]string{"SET", "free", "1"}, []string{"SET", "other", "1"})

	got := make(chan string, 1)
	go func() {
		sub.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
		r, err := sub.r.ReadReply()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- r.String()
	}()
	select {
	case m := <-got:
		if !strings.Contains(m, "__keyspace@0__:free") || !strings.Contains(m, "set") {
			t.Errorf("the subscriber got %q, want the set event of free", m)
		}
	case <-time.After(20 * time.Second):
		close(b.release)
		t.Fatal("the second batch's event waited for the first batch's held answer")
	}
	close(b.release)
	for i, want := range []string{"OK", "OK", "OK", "OK"} {
		if r := c.reply().String(); r != want {
			t.Fatalf("reply %d: %s, want %s", i+1, r, want)
		}
	}
}
