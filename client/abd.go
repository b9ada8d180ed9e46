package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// Client-driven ABD (the ABD report §3.1.2: the "ABD capable client").
//
// ABD returned by GRPC.ABD runs multi-writer ABD's two phases itself, as the
// seed's client does, against every replica of an abd namespace, whose
// replicas then only answer get-tag and conditional-store (protocol/abd,
// direct.go: requests with the option abd.phase) and never talk to each
// other. The GRPC client must be given the gRPC address of every replica of
// the namespace: a majority is counted over those addresses.
//
// Per operation, each phase is one phase to each replica it asks, sent on
// the replica's Phases stream (phases.go: the request a phase stands for in
// a compact form; the phases of all the operations running on one client
// share the streams, as the seed's threads share nothing: a stream's writer
// sends the phases queued meanwhile in one message, which the replica hands
// to its loop as one batch; an older node without Phases gets the phase as
// a call on its Pipeline stream, pipeline.go); the
// phase ends when a majority, (N/2)+1, has answered (the seed's semaphore),
// and the calls still in flight are abandoned (the seed leaves the
// stragglers open; ABD needs no more than a majority). A replica whose attempt fails without an answer
// (connection refused or broken, TRYAGAIN) is asked again after a short
// pause, doubling to abdMaxPause, until the majority is reached or the
// phase's time runs out: Options.Timeout per phase, or the context's
// deadline when earlier.
//
// Phases to a majority (a decision; the ABD report §3.1.2 is silent on
// cost: its client launches one thread per server and waits for a
// majority). A phase first asks a majority only, (N/2)+1 replicas taken
// round robin so that each replica carries its share, those that failed or
// were slow lately (abdSuspectFor) last; it asks the others too as soon as
// an asked replica fails, or once it has waited without a majority for
// abdHedge (20 ms) or, when longer, 4 times the client's recent phase time
// (a loaded machine's phases take longer, and a fixed hedge would then ask
// every replica every phase). Any majority intersects every other, which is all ABD's proof
// uses (a query sees the latest completed store), so the answers are the
// same as when every replica is asked; what changes is the work: a put is
// 4 calls instead of 6 (issue 28 item 6: client-driven ABD was about 10x
// slower than node-coordinated ABD, most of it in per-call costs on the
// client and the replicas). The price is the latency of the slower of
// two replicas instead of the second fastest of three, and the hedge on
// the first phase that finds an asked replica silent. Options.ABDAll
// restores the seed's every-replica phases.
//
// What each phase sends and when it ends is protocol/abd's Coordinator, the
// pure state machine that `synod-lab sim --client-driven` runs too:
//
//   - Write (set KEY VALUE, del KEY): query, take the highest tag (ts, w),
//     store (value or tombstone) with the tag (ts+1, this client's writer
//     id, the operation's sequence number), answer. DEL answers 1 when the highest
//     tag held a value (a hint, as for the node's coordinator).
//   - Read (get, exists): query, take the highest tag; unless a majority of
//     the answers already carries it, store it back (the write-back the
//     seed's read lacks, §3.1.2: without it reads are not linearizable);
//     answer its value.
//
// A write whose store phase did not reach a majority has an unknown outcome
// (the error wraps ErrUnknownOutcome): some replicas may hold it, and a
// later read may write it back. A write whose query phase failed stored
// nothing. A refusal (an unknown namespace, a namespace whose protocol
// declares no abd.phase option, an error answer) is returned at once.

const (
	abdFirstPause = 10 * time.Millisecond
	abdMaxPause   = 500 * time.Millisecond
	// abdHedge is the least a phase waits for the majority it asked
	// before it asks the other replicas too (hedge: abdHedgeFactor times
	// the client's recent phase time when that is longer, so that a loaded
	// machine does not ask every replica every phase); abdSuspectFor how
	// long a replica that failed or was that slow is asked after the
	// others.
	abdHedge       = 20 * time.Millisecond
	abdHedgeFactor = 4
	abdSuspectFor  = time.Second
)

// ABD is a client-driven ABD coordinator over c's connections, for
// namespace ns. It is safe for concurrent use.
type ABD struct {
	c      *GRPC
	ns     string
	writer string
}

// ABD returns the client-driven ABD coordinator for namespace ns (""
// means Options.Namespace, and then the node's default).
func (c *GRPC) ABD(ns string) *ABD {
	return &ABD{c: c, ns: ns, writer: abd.ClientWriter(c.client)}
}

// Writer is the writer id this client puts in its tags.
func (a *ABD) Writer() string { return a.writer }

// Get returns key's value; found is false when the key does not exist.
func (a *ABD) Get(ctx context.Context, key string) (value []byte, found bool, err error) {
	r, err := a.Do(ctx, service.Op{Kind: "get", Key: key})
	if err != nil {
		return nil, false, err
	}
	return r.Bytes, r.Type == service.ResultBytes, nil
}

// Set stores value under key.
func (a *ABD) Set(ctx context.Context, key string, value []byte) error {
	_, err := a.Do(ctx, service.Op{Kind: "set", Key: key, Args: [][]byte{value}})
	return err
}

// Del deletes key and returns 1 if it held a value (a hint; see above).
func (a *ABD) Del(ctx context.Context, key string) (int64, error) {
	r, err := a.Do(ctx, service.Op{Kind: "del", Key: key})
	return r.Int, err
}

// Do runs op (get, exists, set KEY VALUE or del KEY) with ABD's two phases,
// as protocol/abd's Coordinator (the pure state machine the simulator's
// --client-driven clients run too) says. Failures are errors, never error
// results.
func (a *ABD) Do(ctx context.Context, op service.Op) (service.Result, error) {
	// A phase returns at a majority while the sends to the other replicas
	// may still be encoding the request: they get a copy of the arguments,
	// never the caller's buffers, which the caller may reuse at once.
	args := make([][]byte, len(op.Args))
	for i, b := range op.Args {
		args[i] = bytes.Clone(b)
	}
	op.Args = args
	co, err := abd.NewCoordinator(op, a.writer, a.c.seq.Add(1), len(a.c.conns), false)
	if err != nil {
		return service.Result{}, fmt.Errorf("client: %w", err)
	}
	a.c.mu.Lock()
	closed := a.c.closed
	a.c.mu.Unlock()
	if closed {
		return service.Result{}, ErrClosed
	}
	for !co.Done() {
		storing := co.Storing()
		if err := a.phase(ctx, co); err != nil {
			what := fmt.Sprintf("client-driven ABD %s %q", op.Kind, op.Key)
			switch {
			case !storing:
				return service.Result{}, fmt.Errorf("client: %s: query phase: %w", what, err)
			case co.Write():
				return service.Result{}, fmt.Errorf("client: %s: store phase: %w: %w", what, err, ErrUnknownOutcome)
			default: // a read's write-back (the ABD report §3.1.2 omits it; ABD needs it)
				return service.Result{}, fmt.Errorf("client: %s: write-back: %w", what, err)
			}
		}
	}
	return co.Result(), nil
}

// phase sends the coordinator's current phase to a majority of the
// replicas (thrifty, see "Phases to a majority" above), as a phase on each
// one's Phases stream (phases.go: the phases of every operation of this
// client share the streams, and a stream's writer sends what is queued
// together, which the replica hands to its loop as one batch), and feeds
// it the answers until the phase is over (a majority). A replica that does
// not serve Phases (UNIMPLEMENTED: an older node) is asked with a call on
// its Pipeline stream instead, as the same request with the abd.phase
// option. The other replicas are asked too once an asked one failed or the
// phase has waited abdHedge. A replica whose attempt failed without an
// answer (the stream broke or could not open, TRYAGAIN, UNAVAILABLE) is
// asked again after a pause (ask's rule). It fails at once on a refusal,
// and when a majority can no longer answer in time. The phases still in
// flight when it returns are abandoned (their replies, when they come, are
// dropped).
func (a *ABD) phase(ctx context.Context, co *abd.Coordinator) error {
	ph := co.Phase()
	ns := a.c.nsName(a.ns)
	// compact fills a call's phase (pcall.ph: one allocation for both).
	compact := func(pc *pcall) {
		p := &pc.ph
		p.Key = ph.Op.Key
		if t := ph.Ext[abd.OptTag]; len(t) > 0 {
			p.Tag = t[0]
			switch ph.Op.Kind {
			case "del":
				p.Tomb = true
			default:
				p.Value = ph.Op.Args[0]
			}
		}
		pc.phase = p
	}
	var req *synodpb.Request // the phase as a Pipeline call (made when needed)
	var subCancel context.CancelFunc
	// The phase's time: Options.Timeout, or less when ctx ends first. One
	// timer serves the hedge and then the time limit (tick); a context of
	// its own, sub, is made only for a slow path, which must end with the
	// phase.
	timeout := a.c.opts.Timeout
	hedging := !a.c.opts.ABDAll
	first := timeout
	if hedging {
		first = min(a.hedge(), timeout)
	}
	tick := a.c.phaseTimer(first)
	defer a.c.putPhaseTimer(tick)
	var pctx context.Context
	sub := func() context.Context {
		if pctx == nil {
			var cancel context.CancelFunc
			pctx, cancel = context.WithTimeout(ctx, a.c.opts.Timeout)
			subCancel = cancel
		}
		return pctx
	}
	defer func() {
		if subCancel != nil {
			subCancel()
		}
	}()
	n := len(a.c.conns)
	// done hears of every phase sent once it completed; one is in flight
	// at most per replica, so n places never block a stream.
	done := make(chan *pcall, n)
	calls := make([]*pcall, n) // each replica's phase in flight
	asked := make([]bool, n)   // replicas asked at least once
	// Made on a replica's first failure (most phases have none): pauses,
	// again (replicas whose pause is over; nil blocks) and last (each
	// replica's last failure).
	var pauses []time.Duration
	var again chan int
	var last []error
	var timers []*time.Timer
	defer func() {
		for _, t := range timers {
			t.Stop()
		}
		for i, pc := range calls {
			switch g := a.c.conns[i]; {
			case pc == nil:
			case pc.via != nil:
				if st := g.live(); st != nil {
					st.abandon(pc.via)
				}
			default:
				if ps := g.livePhases(); ps != nil {
					ps.abandon(pc)
				}
			}
		}
	}()
	start := func(i int) error {
		asked[i] = true
		pc := &pcall{ns: ns, notify: done}
		calls[i] = pc
		g := a.c.conns[i]
		if g.noPhases.Load() {
			// An older node: the phase as a call on its Pipeline stream.
			if req == nil {
				var err error
				if req, err = a.c.request(a.ns, OpOptions{Ext: ph.Ext}); err != nil {
					return err
				}
				req.Op = synodpb.FromOp(ph.Op)
				req.ClientId, req.Seq = 0, 0 // a call on a stream: the stream identifies it
				req.Terse = true             // the answer's result is all a phase reads
			}
			sc := &scall{req: req, done: make(chan struct{})}
			pc.via = sc
			pctx := sub()
			go func() {
				st, err := a.c.stream(pctx, g)
				if err == nil {
					err = st.enqueue(sc)
				}
				if err != nil {
					sc.err = err
					close(sc.done)
				}
				select {
				case <-sc.done:
					pc.complete()
				case <-pctx.Done(): // the phase is over; abandoned (above)
				}
			}()
			return nil
		}
		compact(pc)
		if ps := g.livePhases(); ps != nil && ps.enqueue(pc) == nil {
			return nil
		}
		// Slow path: wait for the connection and open a stream, without
		// holding up the phase at the other replicas.
		pctx := sub()
		go func() {
			ps, err := a.c.phases(pctx, g)
			if err == nil {
				err = ps.enqueue(pc)
			}
			if err != nil {
				pc.err = err
				pc.complete()
			}
		}()
		return nil
	}
	// askRest asks every replica not asked yet (hedging; a failure).
	askRest := func() error {
		for i := range n {
			if !asked[i] {
				if err := start(i); err != nil {
					return err
				}
			}
		}
		return nil
	}
	var pick [8]int
	for _, i := range a.majority(n, pick[:0]) {
		if err := start(i); err != nil {
			return err
		}
	}
	began := time.Now()
	if !hedging {
		if err := askRest(); err != nil {
			return err
		}
	}
	got := 0
	// accepted counts replica i's answer (co.Answer's or co.AnswerQuery's
	// outcome): ended once it completed this phase (a majority answered).
	accepted := func(i int, advanced bool, err error) (ended bool, _ error) {
		if err != nil {
			return false, fmt.Errorf("%s: %w", a.c.conns[i].addr, err)
		}
		got++
		if advanced {
			a.took(time.Since(began))
		}
		return advanced, nil
	}
	for {
		select {
		case pc := <-done:
			i := slices.Index(calls, pc)
			if i < 0 {
				continue
			}
			calls[i] = nil
			if q, ok, err := pc.queryAnswer(); ok {
				// A query's answer, read from the reply as it is.
				if err != nil {
					return fmt.Errorf("%s: %w", a.c.conns[i].addr, err)
				}
				a.c.conns[i].abdSuspect.Store(0)
				advanced, err := co.AnswerQuery(i, q)
				if ended, err := accepted(i, advanced, err); ended || err != nil {
					return err
				}
				continue
			}
			res, err := pc.result()
			switch {
			case err != nil && pc.via == nil && status.Code(err) == codes.Unimplemented:
				// An older node without Phases: ask it through Pipeline.
				a.c.conns[i].noPhases.Store(true)
				if err := start(i); err != nil {
					return err
				}
				continue
			case err != nil && definite(status.Code(err)):
				return fmt.Errorf("%s: %w", a.c.conns[i].addr, err)
			case err == nil && res.IsErr() && replyError(res.Err).Kind != synoderr.TryAgain:
				return fmt.Errorf("%s: %w", a.c.conns[i].addr, replyError(res.Err))
			case err == nil && !res.IsErr():
				a.c.conns[i].abdSuspect.Store(0)
				advanced, err := co.Answer(i, res)
				if ended, err := accepted(i, advanced, err); ended || err != nil {
					return err
				}
				continue
			case err == nil:
				err = replyError(res.Err)
			}
			if last == nil {
				pauses, again, last = make([]time.Duration, n), make(chan int, n), make([]error, n)
			}
			last[i] = fmt.Errorf("%s: %w", a.c.conns[i].addr, err)
			a.c.conns[i].suspect()
			if err := askRest(); err != nil { // the majority asked may no longer answer
				return err
			}
			// Ask again after a pause, doubling up to abdMaxPause.
			pauses[i] = min(max(2*pauses[i], abdFirstPause), abdMaxPause)
			ch := again
			timers = append(timers, time.AfterFunc(pauses[i], func() { ch <- i }))
		case <-tick.C:
			if !hedging || first >= timeout {
				return fmt.Errorf("%d of %d replicas answered, fewer than a majority (%d): %w", got, n, automaton.Majority(n), errors.Join(append(last, context.DeadlineExceeded)...))
			}
			hedging = false // the hedge: the time limit next
			tick.Reset(timeout - first)
			for i, pc := range calls {
				if pc != nil {
					a.c.conns[i].suspect() // slow: others go first for a while
				}
			}
			if err := askRest(); err != nil {
				return err
			}
		case i := <-again:
			if err := start(i); err != nil {
				return err
			}
		case <-ctx.Done():
			return fmt.Errorf("%d of %d replicas answered, fewer than a majority (%d): %w", got, n, automaton.Majority(n), errors.Join(append(last, ctx.Err())...))
		}
	}
}

// phaseTimer is a stopped timer of the client's reset to d: phases take
// one each (a timer and its channel were a phase's largest allocation;
// since Go 1.23 a timer stopped or reset delivers nothing stale).
func (c *GRPC) phaseTimer(d time.Duration) *time.Timer {
	if t, _ := c.timers.Get().(*time.Timer); t != nil {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

// putPhaseTimer stops t and keeps it for another phase.
func (c *GRPC) putPhaseTimer(t *time.Timer) {
	t.Stop()
	c.timers.Put(t)
}

// majority picks the replicas a phase asks first: a majority, taken round
// robin over the replicas (so that each carries its share of the phases),
// those not suspected first (a replica is suspected for abdSuspectFor after
// a failed call or a call slower than abdHedge, until it answers),
// appended to pick.
func (a *ABD) majority(n int, pick []int) []int {
	q := automaton.Majority(n)
	off := int(a.c.abdNext.Add(1) % uint64(n))
	now := time.Now().UnixNano()
	for pass := range 2 {
		for k := range n {
			i := (off + k) % n
			fresh := a.c.conns[i].abdSuspect.Load() <= now
			if fresh == (pass == 0) && len(pick) < q {
				pick = append(pick, i)
			}
		}
	}
	return pick
}

// hedge is how long a phase waits for the majority it asked (abdHedge).
func (a *ABD) hedge() time.Duration {
	return max(abdHedge, abdHedgeFactor*time.Duration(a.c.abdPhase.Load()))
}

// took folds a phase's time d into the client's recent phase time, a
// moving average over about 16 phases (racing updates may drop one: it
// is an estimate).
func (a *ABD) took(d time.Duration) {
	old := a.c.abdPhase.Load()
	a.c.abdPhase.Store(old + (int64(d)-old)/16)
}

// suspect marks g as suspected by client-driven ABD's phases (majority).
func (g *gconn) suspect() {
	g.abdSuspect.Store(time.Now().Add(abdSuspectFor).UnixNano())
}
