package client

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// The fail-over client stub (the Grid Services thesis, chapter III.B, Fig. III.1).
//
// For a namespace whose protocol has a leader (Namespace.has_leader: paxos,
// primary-backup's primary), GRPC subscribes on first use to WatchLeader at
// every address it knows, as the seed's INIT_CLIENT registers with every
// backup for FAILURE notifications. Each request goes to the leader the
// notifications name (target), or round robin while none is known. When a
// notification names a new leader, FAILURE_HANDLER's part: every
// outstanding request is resubmitted to it at once, with the same
// (client id, seq), without waiting for the attempt at the old leader to
// fail (a TCP or request timeout); the first success answers (OP's
// semaphore), and answers that come later are dropped. As in the seed, the
// old attempt is abandoned rather than cancelled first: it is cancelled
// when the request completes.
//
// Choices where the seed is silent or differs:
//
//   - Duplicates. The seed's stub resubmits blindly and counts on the
//     primary's check_previous_requests. Synod resubmits a write only when
//     the namespace declares idempotent_retry (a replicated dedup table,
//     keyed by the request's (client id, seq)); otherwise a write keeps
//     the single-attempt rules of the package doc and its outcome is
//     reported unknown when its node fails. Reads are always resubmitted.
//   - Where notifications come from. Every node reports the leader it
//     believes (not only backups), and the client acts on the first report
//     of a leader different from its current one. Reports of "no leader"
//     (an election) are ignored: the client keeps its target until a new
//     one is named.
//   - Which address is the leader. A notification carries the leader's node
//     id and gRPC address. Each stream's events carry the sending node's id
//     (LeaderEvent.from), so the client learns which of its addresses is
//     which node even through proxies; it matches by node id first, by gRPC
//     address second. A leader the client has no address for leaves the
//     target unknown (round robin; any node serves).
//   - An attempt that fails while others are outstanding waits for them;
//     one that fails with nothing outstanding moves to the next address at
//     once (as the non-leader path does), since any node serves the request
//     (it forwards to the leader).
//   - Measurement. Options.OnLeaderChange is called with the time each
//     notification of a new leader arrived, for "kill -9 to first client
//     notified".

// LeaderChange reports a notification naming a new leader.
type LeaderChange struct {
	Namespace string
	// Leader is the new leader's node id; Previous the one it replaces (""
	// on the first notification after the client subscribed).
	Leader, Previous string
	// Addr is the client's address for the leader ("" when it has none).
	Addr string
	// From is the node whose notification arrived first.
	From string
	// At is when it arrived.
	At time.Time
}

// leaderState is what the client knows of one namespace's leader.
type leaderState struct {
	mu       sync.Mutex
	id       string             // current leader's node id ("" unknown)
	idx      int                // its index in GRPC.conns, -1 unknown
	epoch    context.Context    // ends (and is replaced) when idx changes
	endEpoch context.CancelFunc // ends epoch
}

func newLeaderState() *leaderState {
	st := &leaderState{idx: -1}
	st.epoch, st.endEpoch = context.WithCancel(context.Background())
	return st
}

// target returns the leader's index and a channel closed when it changes.
func (st *leaderState) target() (int, <-chan struct{}) {
	idx, epoch := st.targetEpoch()
	return idx, epoch.Done()
}

// targetEpoch returns the leader's index and a context that ends when it
// changes.
func (st *leaderState) targetEpoch() (int, context.Context) {
	st.mu.Lock()
	defer st.mu.Unlock()
	return st.idx, st.epoch
}

// watchBackoff bounds the pause before a broken WatchLeader stream is
// opened again.
const watchBackoff = 2 * time.Second

// leader returns namespace ns's leader state, starting the watches at every
// address on first use. ns is the namespace's real name.
func (c *GRPC) leader(ns string) *leaderState {
	c.mu.Lock()
	defer c.mu.Unlock()
	if st := c.leaders[ns]; st != nil {
		return st
	}
	st := newLeaderState()
	if c.leaders == nil {
		c.leaders = map[string]*leaderState{}
	}
	c.leaders[ns] = st
	for i := range c.conns {
		go c.watch(ns, i, st)
	}
	return st
}

// watch keeps a WatchLeader stream open at conns[i] until Close.
func (c *GRPC) watch(ns string, i int, st *leaderState) {
	g := c.conns[i]
	pause := 50 * time.Millisecond
	for c.life.Err() == nil {
		stream, err := g.sideStub.WatchLeader(c.withAuth(c.life), &synodpb.WatchLeaderRequest{Namespace: ns})
		for err == nil {
			var ev *synodpb.LeaderEvent
			if ev, err = stream.Recv(); err == nil {
				pause = 50 * time.Millisecond
				c.learnNode(i, ev.GetFrom())
				c.noteLeader(ns, st, ev, time.Now())
			}
		}
		if code := status.Code(err); code == codes.FailedPrecondition || code == codes.Unimplemented || code == codes.NotFound {
			return // this node will never announce: no leader, or an old server
		}
		select {
		case <-time.After(pause):
		case <-c.life.Done():
			return
		}
		pause = min(2*pause, watchBackoff)
	}
}

// noteLeader handles one notification.
func (c *GRPC) noteLeader(ns string, st *leaderState, ev *synodpb.LeaderEvent, at time.Time) {
	c.mu.Lock()
	for i, g := range c.conns {
		if g.addr == ev.GetGrpcAddr() && ev.GetGrpcAddr() != "" && c.nodeIDs[i] == "" {
			c.nodeIDs[i] = ev.GetNodeId()
		}
	}
	idx := -1
	for i, id := range c.nodeIDs {
		if id != "" && id == ev.GetNodeId() {
			idx = i
		}
	}
	c.mu.Unlock()
	if ev.GetNodeId() == "" {
		return
	}
	st.mu.Lock()
	if st.id == ev.GetNodeId() && (st.idx == idx || idx < 0) {
		st.mu.Unlock()
		return
	}
	ch := LeaderChange{Namespace: ns, Leader: ev.GetNodeId(), Previous: st.id, From: ev.GetFrom(), At: at}
	isNew := st.id != ev.GetNodeId()
	st.id, st.idx = ev.GetNodeId(), idx
	st.endEpoch()
	st.epoch, st.endEpoch = context.WithCancel(context.Background())
	st.mu.Unlock()
	if idx >= 0 {
		ch.Addr = c.conns[idx].addr
		c.prefer(idx)
	}
	if isNew && c.opts.OnLeaderChange != nil {
		c.opts.OnLeaderChange(ch)
	}
}

// learnNode records that conns[i] is node id (from a LeaderEvent's from).
func (c *GRPC) learnNode(i int, id string) {
	if id == "" {
		return
	}
	c.mu.Lock()
	c.nodeIDs[i] = id
	c.mu.Unlock()
}

// attemptResult is the outcome of one attempt at one address.
type attemptResult struct {
	idx  int
	resp *synodpb.Response
	res  service.Result
	sent bool
	err  error
}

// sendLeader runs req on a namespace with a leader (Fig. III.1's OP): the
// first attempt at the target, another at each newly notified leader, and
// the next address when every outstanding attempt failed. Only reads and
// writes of namespaces with idempotent_retry come here.
func (c *GRPC) sendLeader(ctx context.Context, req *synodpb.Request, what reqName, p nsProps) (*synodpb.Response, service.Result, error) {
	st := c.leader(p.name)
	// The first attempt at a known leader runs on the calling goroutine (no
	// hand-off to an attempt goroutine and back, two per call): a
	// notification of a new leader cancels it (only reads and deduplicated
	// writes come here, so the resubmission below under the same identity
	// takes effect once), and the loop below takes over, at the new leader;
	// a failure without a change moves to the next address, as in the loop.
	first, maySent := -1, false
	var errs []error
	if target, epoch := st.targetEpoch(); target >= 0 {
		g := c.conns[target]
		var resp *synodpb.Response
		var res service.Result
		var sent, changed bool
		var err error
		if g.h2 != nil {
			// The direct transport ends the call when epoch ends itself:
			// no context of the attempt's own.
			if testHookAttempt != nil {
				testHookAttempt()
			}
			resp, res, sent, err = c.attemptDirect(ctx, g, req, epoch)
			changed = epoch.Err() != nil
		} else {
			actx, acancel := context.WithCancel(ctx)
			stop := context.AfterFunc(epoch, acancel)
			resp, res, sent, err = c.attempt(actx, g, req)
			changed = !stop() || epoch.Err() != nil
			acancel()
		}
		if err == nil {
			if res.Type != service.ResultErr {
				c.prefer(target)
				return resp, res, nil // no error to parse (2 allocations per call)
			}
			e := replyError(res.Err)
			if e.Kind != synoderr.TryAgain {
				c.prefer(target)
				return resp, res, nil
			}
			errs = append(errs, fmt.Errorf("%s: %w", g.addr, e))
		} else {
			if definite(status.Code(err)) && !changed {
				return nil, service.Result{}, fmt.Errorf("client: %s at %s: %w", what, g.addr, err)
			}
			errs = append(errs, fmt.Errorf("%s: %w", g.addr, err))
		}
		maySent = sent && !p.read
		if cerr := ctxDone(ctx); cerr != nil {
			return nil, service.Result{}, c.giveUp(what, p.read, maySent, fmt.Errorf("%w (last error: %v)", cerr, errs[len(errs)-1]))
		}
		if !changed {
			first = target
		}
	}
	sctx, scancel := context.WithCancel(ctx) // ends every attempt on return
	defer scancel()
	stop := context.AfterFunc(c.life, scancel)
	defer stop()
	results := make(chan attemptResult)
	tried := make([]bool, len(c.conns))
	inflight := make([]bool, len(c.conns))
	outstanding := 0
	launch := func(idx int) {
		tried[idx], inflight[idx] = true, true
		outstanding++
		go func() {
			resp, res, sent, err := c.attempt(sctx, c.conns[idx], req)
			select {
			case results <- attemptResult{idx, resp, res, sent, err}:
			case <-sctx.Done():
			}
		}()
	}
	next := func() int { // the next untried address, round robin from the preferred one
		c.mu.Lock()
		start := c.cur
		c.mu.Unlock()
		for i := range c.conns {
			if idx := (start + i) % len(c.conns); !tried[idx] {
				return idx
			}
		}
		return -1
	}
	target, changed := st.target()
	if first >= 0 {
		tried[first] = true // it failed: the next address (the leader unchanged)
		if target == first {
			target = next()
		}
	}
	if target < 0 || tried[target] {
		target = next()
	}
	if target < 0 {
		return nil, service.Result{}, c.giveUp(what, p.read, maySent, fmt.Errorf("failed at every address: %w", errors.Join(errs...)))
	}
	launch(target)
	for {
		select {
		case r := <-results:
			outstanding--
			inflight[r.idx] = false
			g := c.conns[r.idx]
			if r.err == nil {
				if r.res.Type != service.ResultErr {
					c.prefer(r.idx)
					return r.resp, r.res, nil
				}
				e := replyError(r.res.Err)
				if e.Kind != synoderr.TryAgain {
					c.prefer(r.idx)
					return r.resp, r.res, nil
				}
				errs = append(errs, fmt.Errorf("%s: %w", g.addr, e))
			} else {
				if definite(status.Code(r.err)) {
					return nil, service.Result{}, fmt.Errorf("client: %s at %s: %w", what, g.addr, r.err)
				}
				errs = append(errs, fmt.Errorf("%s: %w", g.addr, r.err))
			}
			maySent = maySent || (r.sent && !p.read)
			if cerr := ctxDone(ctx); cerr != nil {
				return nil, service.Result{}, c.giveUp(what, p.read, maySent, fmt.Errorf("%w (last error: %v)", cerr, errs[len(errs)-1]))
			}
			if outstanding > 0 {
				continue // wait for the others (Fig. III.1: a failure does not signal)
			}
			idx := next()
			if idx < 0 {
				return nil, service.Result{}, c.giveUp(what, p.read, maySent, fmt.Errorf("failed at every address: %w", errors.Join(errs...)))
			}
			launch(idx)
		case <-changed:
			// FAILURE_HANDLER: resubmit at the new leader at once.
			var idx int
			idx, changed = st.target()
			if idx >= 0 && !inflight[idx] {
				launch(idx)
			}
		case <-ctx.Done():
			return nil, service.Result{}, c.giveUp(what, p.read, maySent || !p.read, fmt.Errorf("%w (%d attempts outstanding)", ctx.Err(), outstanding))
		case <-c.life.Done():
			return nil, service.Result{}, ErrClosed
		}
	}
}

// Leader returns the leader of namespace ns ("" means Options.Namespace,
// and then the node's default) as the client's notifications name it, and
// the client's address for it ("" when it has none yet). The first call
// for a namespace subscribes to its notifications and usually returns ""
// until the first one arrives. A namespace whose protocol has no leader
// returns "", "".
func (c *GRPC) Leader(ctx context.Context, ns string) (id, addr string, err error) {
	if ns == "" {
		ns = c.opts.Namespace
	}
	p, err := c.nsProps(ctx, ns)
	if err != nil || !p.hasLeader || c.opts.NoLeaderWatch {
		return "", "", err
	}
	st := c.leader(p.name)
	st.mu.Lock()
	defer st.mu.Unlock()
	if st.idx >= 0 {
		addr = c.conns[st.idx].addr
	}
	return st.id, addr, nil
}
