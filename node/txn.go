package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
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

// crossShard runs req, whose operations are parts in several groups, as a
// cross-shard transaction: up to txn.MaxAttempts attempts while prepares
// meet locked slots, each under a new id.
func (n *Node) crossShard(ctx context.Context, s *shardedNS, req automaton.Request, parts []txn.Part) (automaton.Response, error) {
	asking := gateway.ClusterModeOf(ctx).Asking
	for attempt := 1; ; attempt++ {
		out, guards := n.txnAttempt(ctx, s, parts, asking)
		switch out.Kind {
		case txn.OutDone:
			return automaton.Response{ID: req.ID, Results: out.Results}, nil
		case txn.OutWatch:
			rs := make([]service.Result, len(req.Ops))
			for i := range rs {
				rs[i] = service.Nil()
			}
			rs[out.At] = out.Res
			return automaton.Response{ID: req.ID, Results: rs}, nil
		case txn.OutRefused:
			if g := guards[out.At]; !isLockRefusal(out.Res) {
				return automaton.Response{ID: req.ID, Result: n.refusal(s, shard.SlotOfStateKey(g.Key), out.Res.Err)}, nil
			}
		case txn.OutUnknown, txn.OutLost:
			return automaton.Response{}, fmt.Errorf("cross-shard transaction: outcome unknown: %s", out.Err)
		}
		// Nothing applied (a lock, a lost prepare, a resolver's abort).
		if attempt >= txn.MaxAttempts {
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
func (n *Node) txnAttempt(ctx context.Context, s *shardedNS, parts []txn.Part, asking bool) (txn.Outcome, []service.Op) {
	id := fmt.Sprintf("%s.%016x", n.id, randUint64())
	c := txn.NewCoordinator(id, parts)
	coord := s.groups[parts[0].Group].Namespace.Name
	slotGuards := make([][]service.Op, len(parts))
	for i, p := range parts {
		gname := s.groups[p.Group].Namespace.Name
		g, ng, _ := n.guarded(s, gname, automaton.Request{Ops: p.Ops}, asking)
		slotGuards[i] = g.Ops[:ng]
	}
	refused := make([]service.Op, len(parts)) // the failed slot guard of a part that refused
	for {
		st := c.Next()
		if st.Kind == txn.StDone {
			break
		}
		run := func(i int, f func(ctx context.Context, gi int)) {
			sctx, cancel := context.WithTimeout(context.Background(), txnStepTimeout)
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
						ops := txn.Prepare(id, coord, slotGuards[i], parts[i])
						rs, err := n.groupRun(sctx, s, gi, ops)
						v := txn.ReadVote(parts[i], len(slotGuards[i]), rs, err)
						mu.Lock()
						if v.Kind == txn.Refused {
							refused[i] = slotGuards[i][v.At]
						}
						c.Prepared(i, v)
						mu.Unlock()
					case txn.StDecide:
						rs, err := n.groupRun(sctx, s, gi, []service.Op{kvOp("txdecide", shard.DecisionKey(id), txn.Commit)})
						d := ""
						if err == nil {
							d = string(rs[0].Bytes)
						}
						mu.Lock()
						c.Decided(d, err)
						mu.Unlock()
					case txn.StCommit:
						rs, err := n.groupRun(sctx, s, gi, []service.Op{kvOp("txcommit", shard.TxKey(id))})
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
	return c.Outcome(), refused
}

// groupRun runs the node's own atomic group ops on group gi (here or
// forwarded) and returns every result, failed guards included.
func (n *Node) groupRun(ctx context.Context, s *shardedNS, gi int, ops []service.Op) ([]service.Result, error) {
	g := s.groups[gi]
	req := automaton.Request{ID: n.nextInternalID(), Ops: ops}
	ctx = internalCtx(ctx)
	var resp automaton.Response
	var err error
	if n.loops[g.Namespace.Name] != nil {
		resp, err = n.do(ctx, g.Namespace.Name, req, true)
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
			for gi, g := range s.groups {
				l := n.loops[g.Namespace.Name]
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
	op := "txabort"
	if string(rs[0].Bytes) == txn.Commit {
		op = "txcommit"
	}
	_, err = n.groupRun(ctx, s, gi, []service.Op{kvOp(op, shard.TxKey(id))})
	n.log.Info("resolved a cross-shard transaction", "group", s.groups[gi].Namespace.Name, "txn", id, "decision", string(rs[0].Bytes), "err", err)
	return err
}
