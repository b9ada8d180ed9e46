//go:build linux

package gateway

import (
	"context"
	"fmt"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
	_ "github.com/synod-dev/synod/protocol/abd"
	_ "github.com/synod-dev/synod/protocol/esds"
)

// indepBackend runs a protocol that steps client batches (ABD, ESDS) and
// answers independent batches by callback (BatchReplyBackend), as the
// node does: SubmitReplyBatch steps its requests as one ClientBatch
// (DoBatch) on a goroutine of its own after a random while, so a batch
// handed over out of turn would be stepped after a later command.
type indepBackend struct {
	*gatewaytest.AutomatonBackend
	mu      sync.Mutex
	rng     *rand.Rand
	sizes   []int        // the batches handed over by SubmitReplyBatch
	pending atomic.Int32 // batches handed over, not yet answered
	overlap atomic.Int32 // batches handed over while another was pending
}

func newIndepBackend(t *testing.T, proto string) *indepBackend {
	return &indepBackend{AutomatonBackend: gatewaytest.MustAutomaton(t, proto, "kv"), rng: rand.New(rand.NewPCG(52, 2))}
}

func (b *indepBackend) Submit(ctx context.Context, ns string, req automaton.Request) func() (automaton.Response, error) {
	r, err := b.Do(ctx, ns, req)
	return func() (automaton.Response, error) { return r, err }
}

func (b *indepBackend) SubmitReply(ctx context.Context, ns string, req automaton.Request, done func(automaton.Response, error)) bool {
	done(b.Do(ctx, ns, req))
	return true
}

func (b *indepBackend) Abandon(string, automaton.RequestID) bool { return false }

func (b *indepBackend) SubmitReplyBatch(ctx context.Context, ns string, reqs []automaton.Request, _ bool, done func(int, automaton.Response, error)) bool {
	b.mu.Lock()
	b.sizes = append(b.sizes, len(reqs))
	wait := time.Duration(b.rng.IntN(300)) * time.Microsecond
	b.mu.Unlock()
	if b.pending.Add(1) > 1 {
		b.overlap.Add(1)
	}
	reqs = append([]automaton.Request(nil), reqs...)
	go func() {
		time.Sleep(wait)
		resps, errs := b.DoBatch(ctx, ns, reqs)
		b.pending.Add(-1)
		for i := range reqs {
			done(i, resps[i], errs[i])
		}
	}()
	return true
}

func (b *indepBackend) handed() []int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return append([]int(nil), b.sizes...)
}

// indepRounds is a pipelined client's script: rounds of 2 to maxN
// commands (SET, GET on 12 keys; an INCR, which ABD and
// ESDS registers refuse, and a SET with a bad EX, an error plan, never
// first), distinct keys within a round when distinct, and serial
// execution's replies to it (one command at a time, a server without the
// event loop, a fresh backend of the same protocol).
func indepRounds(t *testing.T, proto string, rounds, maxN int, distinct bool) (script [][][]string, want [][]string) {
	r := rand.New(rand.NewPCG(52, 28))
	for range rounds {
		n := 2 + r.IntN(maxN-1)
		var round [][]string
		perm := r.Perm(max(12, n))
		for j := range n {
			k := fmt.Sprint("key", r.IntN(12))
			if distinct {
				k = fmt.Sprint("key", perm[j])
			}
			c := r.IntN(7)
			if j == 0 {
				c %= 4
			}
			switch c {
			case 0, 1:
				round = append(round, []string{"SET", k, fmt.Sprint(r.IntN(100))})
			case 2:
				round = append(round, []string{"GET", k})
			case 3, 4:
				round = append(round, []string{"GET", k})
			case 5:
				round = append(round, []string{"INCR", k})
			default:
				round = append(round, []string{"SET", k, "v", "EX", "x"})
			}
		}
		script = append(script, round)
	}
	return script, serialReplies(t, gatewaytest.MustAutomaton(t, proto, "kv"), script)
}

// serialReplies is b's replies to script's commands sent one at a time
// (a server without the event loop).
func serialReplies(t *testing.T, b Backend, script [][][]string) (want [][]string) {
	_, saddr := startServer(t, b, ServerOptions{})
	sc := dial(t, saddr)
	for _, round := range script {
		var w []string
		for _, args := range round {
			w = append(w, sc.do(args...))
		}
		want = append(want, w)
	}
	return want
}

// indepCase is runIndepRounds of indepRounds' script on a fresh
// indepBackend of proto.
func indepCase(t *testing.T, proto string, rounds, maxN int, distinct bool) (handoffs int64, batches []int) {
	t.Helper()
	script, want := indepRounds(t, proto, rounds, maxN, distinct)
	return runIndepRounds(t, newIndepBackend(t, proto), script, want)
}

// oneBatchPerRound checks that rounds rounds went to the Backend as one
// batch each (batches) with no hand-off to a goroutine (h).
func oneBatchPerRound(t *testing.T, what string, h int64, batches []int, rounds int) {
	t.Helper()
	if h != 0 {
		t.Errorf("%s: %d hand-offs to a goroutine, want 0", what, h)
	}
	if len(batches) != rounds {
		t.Errorf("%s: %d batches through SubmitReplyBatch for %d rounds, want one per round", what, len(batches), rounds)
	}
}

// runIndepRounds serves script through the event loop on b, one round
// written at once and its replies read before the next, and checks every
// reply against serial execution's.
// It returns the hand-offs to a goroutine and the batches handed over
// during the script.
func runIndepRounds(t *testing.T, b *indepBackend, script [][][]string, want [][]string) (handoffs int64, batches []int) {
	t.Helper()
	s, addr := startServer(t, b, ServerOptions{EventLoop: true})
	dial(t, addr) // not alone (evAlone)
	waitReplyFn(t, "the idle connection", func() bool { return s.ord.conns.Load() == 1 })
	c := dial(t, addr)
	if got := c.do("SET", "x", "0"); got != "OK" { // the connection goes to the loop (handBack)
		t.Fatal(got)
	}
	h0, n0 := s.ev.handoffs.Load(), len(b.handed())
	for i, round := range script {
		writeRound(t, c, round)
		for j := range round {
			if got := c.reply().String(); got != want[i][j] {
				t.Fatalf("round %d command %d %q: %s, serial %s (round %q)", i, j, round[j], got, want[i][j], round)
			}
		}
	}
	if o := b.overlap.Load(); o != 0 {
		t.Errorf("%d batches handed over while the connection's previous one was unanswered", o)
	}
	return s.ev.handoffs.Load() - h0, b.handed()[n0:]
}

// TestEvLoopServesIndepBatches: an ABD client that pipelines rounds of
// commands on few keys (same-key runs: a SET then a GET of its key in one
// round, the pipelined read-your-write; commands the protocol refuses
// and error plans in the middle) is served by the event loop: each round
// is one batch handed over in one SubmitReplyBatch, no hand-off to a
// goroutine, and every reply is serial execution's (an error answers its
// own command only). Fails without the loop's independent batches
// (evBatch's replyIndep: no SubmitReplyBatch, the connection goes to its
// goroutine) and with batchIndep's answers written per request.
func TestEvLoopServesIndepBatches(t *testing.T) {
	const rounds = 200
	h, batches := indepCase(t, "abd", rounds, 16, false)
	oneBatchPerRound(t, "abd", h, batches, rounds)
}

// TestEvLoopIndepBatchesESDS: the same with ESDS, which does not order
// a batch's same-key requests: a round of distinct keys is one batch
// handed over whole; a round that names a key again ends its batch there
// and the rest goes to the connection's goroutine, which serves it only
// once the batch is answered (awaitIndepBatch: the SET before it is
// seen). Fails without awaitIndepBatch (a GET after a SET of its key in
// flight misses it: not serial execution's reply).
func TestEvLoopIndepBatchesESDS(t *testing.T) {
	const rounds = 100
	h, batches := indepCase(t, "esds", rounds, 12, true)
	oneBatchPerRound(t, "esds, distinct keys", h, batches, rounds)
	if _, batches := indepCase(t, "esds", rounds, 16, false); len(batches) == 0 {
		t.Error("no batch through SubmitReplyBatch")
	}
}

// TestEvLoopIndepBatchBound: rounds larger than an independent batch's
// bound (maxLanes commands): the loop hands over the first maxLanes
// commands as one batch and the rest follows after its answers (on the
// connection's goroutine); replies are serial execution's, and no batch
// exceeds the bound.
func TestEvLoopIndepBatchBound(t *testing.T) {
	script, want := indepRounds(t, "abd", 20, 3*maxLanes, false)
	b := newIndepBackend(t, "abd")
	runIndepRounds(t, b, script, want)
	batches := b.Batches() // every ClientBatch stepped: the loop's and the goroutine's (DoBatch)
	for _, n := range batches {
		if n > maxLanes {
			t.Errorf("a batch of %d requests, bound %d", n, maxLanes)
		}
	}
	if len(batches) <= len(script) {
		t.Errorf("%d batches for %d rounds of up to %d commands: no round split", len(batches), len(script), 3*maxLanes)
	}
}
