package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/shard/txn"
	"github.com/synod-dev/synod/synoderr"
)

// Cross-shard transactions (issue 33 item 5): the node that receives an
// atomic group whose operations fall in several groups of a sharded
// namespace (MULTI/EXEC, WATCH+MULTI/EXEC, MSET, DEL/MGET inside MULTI)
// coordinates it by two-phase commit over the groups, driving the pure
// machine txn.Coordinator; the leader of every group resolves the
// transactions left prepared in it. The protocol, its isolation and the
// reasons are package shard/txn's documentation.

// txnStats counts the cross-shard transactions this node coordinated
// (per client request: committed, aborted by a watched key, refused by a
// slot's migration, of unknown outcome, out of attempts) and their
// attempts, and the transactions its groups' leaders resolved (INFO
// transactions).
type txnStats struct {
	committed, computed, readOnly, watchFailed, refused, unknown, exhausted atomic.Int64
	attempts, resolvedCommit, resolvedAbort                                 atomic.Int64
	// evaluated: writing transactions answered at the decision from their
	// prepares' evaluation; evalMismatch: their commits whose results
	// differed from that answer (0 unless the evaluation is wrong).
	evaluated, evalMismatch atomic.Int64
}

func (t *txnStats) info() map[string]string {
	f := func(v *atomic.Int64) string { return strconv.FormatInt(v.Load(), 10) }
	return map[string]string{
		"txn_committed": f(&t.committed), "txn_computed": f(&t.computed), "txn_read_only": f(&t.readOnly), "txn_watch_failed": f(&t.watchFailed),
		"txn_refused": f(&t.refused), "txn_unknown": f(&t.unknown), "txn_out_of_attempts": f(&t.exhausted),
		"txn_attempts": f(&t.attempts), "txn_resolved_commit": f(&t.resolvedCommit), "txn_resolved_abort": f(&t.resolvedAbort),
		"txn_evaluated": f(&t.evaluated), "txn_eval_mismatch": f(&t.evalMismatch),
	}
}

// txnTails runs the steps of cross-shard transactions left after their
// clients were answered (txn.Coordinator.Answer: a read-only
// transaction's release, a computed one's commits and forget); shutdown
// stops new ones and waits for those running (their steps end with the
// node's stopping). A transaction this node coordinates waits, before its
// prepares, for the tails holding any of its slots here: a client's next
// transaction on the same keys would otherwise meet its previous one's
// locks, still held until the tail's release or commit, and abort and
// retry (no-wait) instead of waiting one round.
type txnTails struct {
	mu     sync.Mutex
	closed bool
	wg     sync.WaitGroup
	busy   map[int]chan struct{} // slot -> closed when the tail holding it ends
}

// start reports whether a tail holding slots may start (then it must call
// end with the returned channel).
func (t *txnTails) start(slots []int) (chan struct{}, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.closed {
		return nil, false
	}
	t.wg.Add(1)
	ch := make(chan struct{})
	if t.busy == nil {
		t.busy = map[int]chan struct{}{}
	}
	for _, sl := range slots {
		t.busy[sl] = ch
	}
	return ch, true
}

// end ends a tail started with start(slots).
func (t *txnTails) end(slots []int, ch chan struct{}) {
	t.mu.Lock()
	for _, sl := range slots {
		if t.busy[sl] == ch {
			delete(t.busy, sl)
		}
	}
	t.mu.Unlock()
	close(ch)
	t.wg.Done()
}

// wait waits until no tail of this node holds one of slots, or ctx ends.
func (t *txnTails) wait(ctx context.Context, slots []int) {
	for _, sl := range slots {
		t.mu.Lock()
		ch := t.busy[sl]
		t.mu.Unlock()
		if ch != nil {
			select {
			case <-ch:
			case <-ctx.Done():
				return
			}
		}
	}
}

// txnSlots lists the slots parts name.
func txnSlots(svc service.Service, parts []txn.Part) []int {
	var out []int
	seen := map[int]bool{}
	for _, p := range parts {
		for _, op := range p.Ops {
			for _, k := range opKeys(svc, op) {
				if sl := shard.KeySlot(k); !seen[sl] {
					seen[sl] = true
					out = append(out, sl)
				}
			}
		}
	}
	return out
}

func (t *txnTails) close() {
	t.mu.Lock()
	t.closed = true
	t.mu.Unlock()
}

// txnStepTimeout bounds one step (a prepare, the decision, a commit) of a
// transaction; forwarding resends it to the group's next node meanwhile.
const txnStepTimeout = 5 * time.Second

// crossParts splits req's operations by group when it is an atomic group
// whose operations each belong to one group and which may run as a
// cross-shard transaction: the protocol has atomic groups (the slot guards
// are the locks) and it is not the placement namespace.
func (s *shardedNS) crossParts(req automaton.Request, asking bool) ([]txn.Part, bool) {
	if len(req.Ops) < 2 || req.Txn != nil || s.ns.Name == config.PlacementName || !automaton.TransactionsOf(s.ns.Protocol).Atomic {
		return nil, false
	}
	return txn.Split(req.Ops, func(op service.Op) (int, bool) {
		gi, _, ok := s.route(automaton.Request{Op: op}, asking)
		return gi, ok
	})
}

// computed is what a computed transaction (shard/txn, compute.go) needs
// besides its parts: each part's keys and the request's operations.
type computed struct {
	keys [][]string
	ops  []service.Op
}

// computeParts splits a request one of whose operations names keys of
// several groups into the parts of a computed transaction: per group, the
// client guards on its keys, then the reads of every key the operations
// name there.
func (s *shardedNS) computeParts(req automaton.Request, asking bool) ([]txn.Part, *computed, bool) {
	if req.Txn != nil || s.ns.Name == config.PlacementName || !automaton.TransactionsOf(s.ns.Protocol).Atomic {
		return nil, nil, false
	}
	ops := req.Ops
	if len(ops) == 0 {
		ops = []service.Op{req.Op}
	}
	groupOf := func(k string) (int, bool) {
		gi, _, ok := s.route(automaton.Request{Op: service.Op{Kind: "get", Key: k}}, asking)
		return gi, ok
	}
	at := map[int]int{}
	var parts []txn.Part
	var keys [][]string
	part := func(g int) int {
		j, ok := at[g]
		if !ok {
			j = len(parts)
			at[g] = j
			parts = append(parts, txn.Part{Group: g})
			keys = append(keys, nil)
		}
		return j
	}
	for i, op := range ops {
		if op.Kind != service.GuardKind {
			continue
		}
		g, ok := groupOf(op.Key)
		if !ok {
			return nil, nil, false
		}
		j := part(g)
		parts[j].Ops = append(parts[j].Ops, op)
		parts[j].Index = append(parts[j].Index, i)
	}
	seen := map[string]bool{}
	for _, op := range ops {
		if op.Kind == service.GuardKind {
			continue
		}
		for _, k := range opKeys(s.svc, op) {
			g, ok := groupOf(k)
			if !ok {
				return nil, nil, false
			}
			if !seen[k] {
				seen[k] = true
				j := part(g)
				keys[j] = append(keys[j], k)
			}
		}
	}
	for j := range parts {
		parts[j].Ops = append(parts[j].Ops, txn.ReadOps(keys[j])...)
	}
	return parts, &computed{keys: keys, ops: ops}, true
}

// crossShard runs req, whose operations are parts in several groups, as a
// cross-shard transaction (comp: a computed one): up to txn.MaxAttempts
// attempts while prepares meet locked slots, each under a new id.
func (n *Node) crossShard(ctx context.Context, s *shardedNS, req automaton.Request, parts []txn.Part, comp *computed) (automaton.Response, error) {
	asking := gateway.ClusterModeOf(ctx).Asking
	for attempt := 1; ; attempt++ {
		out, guards := n.txnAttempt(ctx, s, parts, asking, comp)
		n.txs.attempts.Add(1)
		switch out.Kind {
		case txn.OutDone:
			n.txs.committed.Add(1)
			if comp != nil {
				n.txs.computed.Add(1)
			} else if readOnlyParts(s.svc, parts) {
				n.txs.readOnly.Add(1)
			}
			if len(req.Ops) == 0 {
				return automaton.Response{ID: req.ID, Result: out.Results[0]}, nil
			}
			return automaton.Response{ID: req.ID, Results: out.Results}, nil
		case txn.OutWatch:
			n.txs.watchFailed.Add(1)
			rs := make([]service.Result, len(req.Ops))
			for i := range rs {
				rs[i] = service.Nil()
			}
			rs[out.At] = out.Res
			return automaton.Response{ID: req.ID, Results: rs}, nil
		case txn.OutRefused:
			if g := guards[out.At]; !isLockRefusal(out.Res) {
				n.txs.refused.Add(1)
				return automaton.Response{ID: req.ID, Result: n.refusal(s, shard.SlotOfStateKey(g.Key), out.Res.Err)}, nil
			}
		case txn.OutUnknown, txn.OutLost:
			n.txs.unknown.Add(1)
			return automaton.Response{}, fmt.Errorf("cross-shard transaction: outcome unknown: %s", out.Err)
		}
		// Nothing applied (a lock, a lost prepare, a resolver's abort).
		if attempt >= txn.MaxAttempts {
			n.txs.exhausted.Add(1)
			return automaton.Response{ID: req.ID, Result: service.Fail(synoderr.TryAgain, "cross-shard transaction met locked slots %d times; nothing was applied (%s)", attempt, out.Err)}, nil
		}
		select {
		case <-ctx.Done():
			return automaton.Response{ID: req.ID, Result: service.Fail(synoderr.TryAgain, "cross-shard transaction: nothing was applied: %v", ctx.Err())}, nil
		case <-n.stopping:
			return automaton.Response{}, gateway.ErrShuttingDown
		case <-time.After(time.Duration(1+rand.IntN(1<<min(attempt, 6))) * time.Millisecond):
		}
	}
}

func isLockRefusal(r service.Result) bool {
	var a, b, c string
	fmt.Sscan(r.Err, &a, &b, &c)
	return c == shard.RefuseLocked
}

// txnAttempt drives one attempt to its end. It returns the outcome and,
// per part, the slot guard that refused it (OutRefused: Outcome.At is the
// part).
func (n *Node) txnAttempt(ctx context.Context, s *shardedNS, parts []txn.Part, asking bool, comp *computed) (txn.Outcome, []service.Op) {
	id := fmt.Sprintf("%s.%016x", n.id, randUint64())
	c := txn.NewCoordinator(id, parts)
	c.Computed = comp != nil
	c.ReadOnly = comp == nil && readOnlyParts(s.svc, parts)
	if comp == nil && !c.ReadOnly {
		c.Known = txn.KnownResults(parts) // MSET: answered at the decision
		// Any other writing transaction (MULTI INCRBY ... EXEC): its parts
		// evaluated at their prepares, answered at the decision too.
		c.Eval = c.Known == nil
	}
	coord := s.groups[parts[0].Group].Namespace.Name
	slotGuards := make([][]service.Op, len(parts))
	names := make([]string, len(parts))
	for i, p := range parts {
		names[i] = s.groups[p.Group].Namespace.Name
		forGuards := p.Ops
		if comp != nil {
			// The reads name the keys; the guards' mode is the request's.
			forGuards = append(append([]service.Op(nil), p.Ops...), comp.ops...)
			forGuards = keepGroup(s, forGuards, p.Group, asking)
		}
		g, ng, _ := n.guarded(s, names[i], automaton.Request{Ops: forGuards}, asking)
		slotGuards[i] = g.Ops[:ng]
	}
	refused := make([]service.Op, len(parts)) // the failed slot guard of a part that refused
	wctx, wcancel := context.WithTimeout(ctx, txnStepTimeout)
	n.tails.wait(wctx, txnSlots(s.svc, parts))
	wcancel()
	base := context.Background()
	// steps runs the coordinator's steps to the end, or (early) until the
	// client's answer is final; it reports whether steps remain.
	steps := func(early bool) bool {
		for {
			st := c.Next()
			if st.Kind == txn.StDone {
				return false
			}
			if _, ok := c.Answer(); ok && early {
				return true
			}
			if st.Kind == txn.StCompute {
				reads := make([][]service.Result, len(parts))
				for i := range parts {
					reads[i] = c.Reads(i)
				}
				rs, writes, err := txn.Compute(comp.keys, reads, comp.ops, service.Env{Time: time.Now().UnixNano(), Seed: randUint64()})
				if err != nil {
					rs = make([]service.Result, len(comp.ops))
					for i := range rs {
						rs[i] = service.Errorf("ERR cross-shard command: %v", err)
					}
					writes = nil
				}
				c.ComputedResults(rs, writes)
				continue
			}
			run := func(i int, f func(ctx context.Context, gi int)) {
				sctx, cancel := context.WithTimeout(base, txnStepTimeout)
				if st.Kind == txn.StPrepare {
					sctx, cancel = context.WithTimeout(ctx, txnStepTimeout)
				}
				defer cancel()
				f(sctx, parts[i].Group)
			}
			var mu sync.Mutex
			var wg sync.WaitGroup
			for _, i := range st.Parts {
				wg.Add(1)
				go func() {
					defer wg.Done()
					run(i, func(sctx context.Context, gi int) {
						switch st.Kind {
						case txn.StPrepare:
							ops := c.PrepareOps(i, coord, slotGuards[i])
							rs, err := n.groupRun(sctx, s, gi, ops)
							v := txn.ReadVote(parts[i], len(slotGuards[i]), rs, err)
							mu.Lock()
							if v.Kind == txn.Refused {
								refused[i] = slotGuards[i][v.At]
							}
							c.Prepared(i, v)
							mu.Unlock()
						case txn.StDecide:
							dec := kvOp("txdecide", shard.DecisionKey(id), txn.Commit)
							if comp != nil {
								ws := make([][]service.Op, len(parts))
								for j := range parts {
									ws[j] = c.Writes(j)
								}
								dec.Args = append(dec.Args, txn.EncodeWrites(names, ws))
							}
							rs, err := n.groupRun(sctx, s, gi, []service.Op{dec})
							d := ""
							if err == nil {
								d, _, _ = txn.ParseDecision(rs[0].Bytes, "")
							}
							mu.Lock()
							c.Decided(d, err)
							mu.Unlock()
						case txn.StCommit:
							rs, err := n.groupRun(sctx, s, gi, []service.Op{service.TxCommitOp(id, c.Writes(i))})
							var r service.Result
							if err == nil {
								r = rs[0]
							}
							mu.Lock()
							c.Committed(i, r, err)
							mu.Unlock()
						case txn.StAbort:
							_, _ = n.groupRun(sctx, s, gi, []service.Op{kvOp("txabort", shard.TxKey(id))})
							mu.Lock()
							c.Aborted(i)
							mu.Unlock()
						case txn.StForget:
							_, _ = n.groupRun(sctx, s, gi, []service.Op{kvOp("txforget", shard.DecisionKey(id))})
							mu.Lock()
							c.Forgot()
							mu.Unlock()
						}
					})
				}()
			}
			wg.Wait()
		}
	}
	if !steps(true) {
		return c.Outcome(), refused
	}
	out, _ := c.Answer()
	if c.Evaluated() {
		n.txs.evaluated.Add(1)
	}
	slots := txnSlots(s.svc, parts)
	ended, ok := n.tails.start(slots)
	if !ok {
		steps(false) // the node is stopping: the client waits for the rest
		return out, refused
	}
	tctx, cancel := n.untilStop(context.Background())
	base = tctx
	go func() {
		defer n.tails.end(slots, ended)
		defer cancel()
		if h := n.opts.txnTailHook; h != nil && c.Evaluated() {
			h()
		}
		steps(false)
		if m := c.Mismatched(); m > 0 {
			n.txs.evalMismatch.Add(int64(m))
			n.log.Error("a cross-shard transaction's commit applied other results than its prepares evaluated and answered", "txn", id, "parts", m)
		}
	}()
	return out, refused
}

// readOnlyParts says whether every operation of parts reads (their client
// guards do too): the transaction answers after its prepares (package
// shard/txn, "Read-only transactions").
func readOnlyParts(svc service.Service, parts []txn.Part) bool {
	for _, p := range parts {
		for _, op := range p.Ops {
			if op.Kind != service.GuardKind && !svc.IsRead(op) {
				return false
			}
		}
	}
	return true
}

// groupRun runs the node's own atomic group ops on group gi (here or
// forwarded) and returns every result, failed guards included.
func (n *Node) groupRun(ctx context.Context, s *shardedNS, gi int, ops []service.Op) ([]service.Result, error) {
	g := s.group(gi) // its incarnated name (groups.go)
	req := automaton.Request{ID: n.nextInternalID(), Ops: ops}
	ctx = internalCtx(ctx)
	var resp automaton.Response
	var err error
	if n.serves(g.Namespace.Name) {
		resp, err = n.do(ctx, g.Namespace.Name, req)
	} else {
		resp, err = n.forward(ctx, s, g, req)
	}
	if err != nil {
		return nil, err
	}
	if resp.Result.IsErr() {
		return nil, errors.New(resp.Result.Err)
	}
	if len(resp.Results) != len(ops) {
		return nil, fmt.Errorf("%d results for %d operations", len(resp.Results), len(ops))
	}
	return resp.Results, nil
}

// resolveTxns is the participants' side: every second, the leader of each
// group of this node lists the transactions prepared there, and one seen
// prepared for txn.ResolveAfter is resolved: txdecide abort in its
// coordinator group answers the decision (the coordinator's commit if it
// was logged first), which is then applied here.
func (n *Node) resolveTxns() {
	defer n.bg.Done()
	seen := map[string]time.Time{} // group + id -> first seen prepared
	t := time.NewTicker(time.Second)
	defer t.Stop()
	for {
		select {
		case <-n.stopping:
			return
		case <-t.C:
		}
		now := time.Now()
		listed := map[string]bool{}
		for _, s := range n.shards {
			if s.ns.Name == config.PlacementName || !automaton.TransactionsOf(s.ns.Protocol).Atomic {
				continue
			}
			for gi := range s.groups {
				g := s.group(gi)
				l := n.loop(g.Namespace.Name)
				if l == nil {
					continue
				}
				if p := l.leader.Load(); p == nil || *p != n.id {
					continue
				}
				ctx, cancel := context.WithTimeout(context.Background(), txnStepTimeout)
				rs, err := n.groupRun(ctx, s, gi, []service.Op{kvOp("txlist", shard.PreparedKey)})
				cancel()
				if err != nil {
					continue
				}
				for _, e := range rs[0].Elems {
					if len(e.Elems) != 2 {
						continue
					}
					id, coord := string(e.Elems[0].Bytes), string(e.Elems[1].Bytes)
					k := g.Namespace.Name + " " + id
					listed[k] = true
					if _, ok := seen[k]; !ok {
						seen[k] = now
					}
					if now.Sub(seen[k]).Seconds() < txn.ResolveAfter {
						continue
					}
					if err := n.resolveTxn(s, gi, id, coord); err != nil {
						n.log.Debug("resolving a cross-shard transaction failed", "group", g.Namespace.Name, "txn", id, "err", err)
					}
				}
			}
		}
		for k := range seen {
			if !listed[k] {
				delete(seen, k)
			}
		}
	}
}

// resolveTxn resolves transaction id prepared in group gi.
func (n *Node) resolveTxn(s *shardedNS, gi int, id, coord string) error {
	ci, ok := s.index[coord]
	if !ok {
		return fmt.Errorf("unknown coordinator group %q", coord)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*txnStepTimeout)
	defer cancel()
	rs, err := n.groupRun(ctx, s, ci, []service.Op{kvOp("txdecide", shard.DecisionKey(id), txn.Abort)})
	if err != nil {
		return err
	}
	d, writes, err := txn.ParseDecision(rs[0].Bytes, s.groups[gi].Namespace.Name)
	if err != nil {
		return err
	}
	op := kvOp("txabort", shard.TxKey(id))
	if d == txn.Commit {
		op = service.TxCommitOp(id, writes)
	}
	_, err = n.groupRun(ctx, s, gi, []service.Op{op})
	if err == nil && d == txn.Commit {
		n.txs.resolvedCommit.Add(1)
	} else if err == nil {
		n.txs.resolvedAbort.Add(1)
	}
	n.log.Info("resolved a cross-shard transaction", "group", s.groups[gi].Namespace.Name, "txn", id, "decision", d, "err", err)
	return err
}

// keepGroup keeps the operations of ops that name a key of group g, each
// cut down to a read of that key when it names keys of other groups too
// (for the slot guards of a computed transaction's part: their mode is
// write when any operation writes).
func keepGroup(s *shardedNS, ops []service.Op, g int, asking bool) []service.Op {
	var out []service.Op
	for _, op := range ops {
		for _, k := range opKeys(s.svc, op) {
			if gi, _, ok := s.route(automaton.Request{Op: service.Op{Kind: "get", Key: k}}, asking); ok && gi == g {
				kind := "get"
				if !s.svc.IsRead(op) && op.Kind != service.GuardKind {
					kind = "set"
				}
				o := service.Op{Kind: kind, Key: k}
				if kind == "set" {
					o.Args = [][]byte{nil}
				}
				out = append(out, o)
			}
		}
	}
	return out
}
