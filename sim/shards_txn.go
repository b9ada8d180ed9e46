package sim

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/shard/txn"
)

// Cross-shard transactions in the sharded world (ShardsConfig.TxnClients;
// docs/SHARDING.md "The sharded simulation"). Bank clients move amounts
// between accounts (INCRBY a -d, INCRBY b +d, one MULTI) and read every
// account at once (MGET): a request whose keys lie in one group is one
// atomic request with its slot guards, as any; across groups it is the
// two-phase commit of shard/txn: the same Coordinator node/txn.go runs
// (prepares with slot guards and slot locks, the decision logged in the
// coordinator group, commits, answers at the decision (a transfer's
// INCRs evaluated at the prepares, Coordinator.Eval; a commit applying
// other results than the answered ones is a violation), read-only
// transactions in one round under shared locks), its steps sent as atomic
// requests to the real paxos groups of this world, through their logs,
// under every fault. Each group's leader's resolver (node/txn.go
// resolveTxns) is modelled: every 500ms it lists the group's prepared
// transactions and, for one prepared for more than 2s, logs an abort
// decision in its coordinator group (the first decision logged stays) and
// commits or aborts the part by it. A coordinator dies between two steps
// with probability 1/200 under the crash fault (its client's outcome is
// unknown; the resolvers finish its transaction).
//
// The bank's history is judged by the strict-serializability checker
// (check.StrictSerializable, bounded at txnMaxStates configurations: a
// history that needs more is Unknown, reported, never passed). Not here:
// computed transactions (RENAME, SMOVE), WATCH and interactive
// transactions (shard/txn's own simulation has them on model groups).

const (
	txnAccounts   = 4
	txnMaxStates  = 5000
	resolverEvery = 500 * time.Millisecond
	resolveAfter  = 2 * time.Second
	txnMaxRetries = 200
)

var errNoAnswer = errors.New("no answer")

// shCall is one atomic request of the transaction machinery to a group,
// retried under its id until answered or out of tries.
type shCall struct {
	id    uint64
	g     int
	ops   []service.Op
	cb    func([]service.Result, error)
	tries int
	done  bool
}

type shTxClient struct {
	idx     int
	busy    bool
	entry   *history.Op
	ops     []service.Op
	co      *txn.Coordinator
	waiting int
	gen     int
	attempt int
	tail    bool
}

func (w *shWorld) newCallID() uint64 {
	var id uint64
	for id == 0 || w.byID[id] != nil || w.calls[id] != nil {
		id = w.rngDrv.Uint64()
	}
	return id
}

// groupCall sends ops to group g as one atomic request and calls cb with
// its results, or with errNoAnswer after shMaxTries timeouts.
func (w *shWorld) groupCall(g int, ops []service.Op, cb func([]service.Result, error)) {
	c := &shCall{id: w.newCallID(), g: g, ops: ops, cb: cb}
	w.calls[c.id] = c
	w.callSend(c)
}

func (w *shWorld) callSend(c *shCall) {
	if c.done {
		return
	}
	if c.tries >= shMaxTries {
		c.done = true
		delete(w.calls, c.id)
		c.cb(nil, errNoAnswer)
		return
	}
	c.tries++
	g := w.groups[c.g]
	if r := w.pickReplica(g, w.rngDrv, c.tries == 1); r != nil {
		req := automaton.Request{ID: automaton.RequestID{Client: c.id, Seq: 1}, Ops: c.ops}
		w.after(w.clientLat.Sample(w.rngNet), &shEvent{kind: shClientReq, mach: r.m.idx, group: c.g, inc: r.m.inc, client: -1, req: req, fwd: -1})
	}
	w.after(shTimeout, &shEvent{kind: shCallTimeout, gen: c.id, attempt: c.tries})
}

func (w *shWorld) onCallTimeout(e *shEvent) {
	if c := w.calls[e.gen]; c != nil && c.tries == e.attempt {
		w.callSend(c)
	}
}

func (w *shWorld) onCallResp(e *shEvent) {
	c := w.calls[e.resp.ID.Client]
	if c == nil || c.done {
		return
	}
	if e.resp.Result.IsErr() || len(e.resp.Results) < len(c.ops) {
		// The group could not run it now (no leader, ...): again, same id.
		w.after(10*time.Millisecond, &shEvent{kind: shCallTimeout, gen: c.id, attempt: c.tries})
		return
	}
	c.done = true
	delete(w.calls, c.id)
	c.cb(e.resp.Results, nil)
}

// ---- the bank clients ----

func (w *shWorld) initBank() {
	// Accounts spread over the groups owning slots at the start.
	per := map[int]int{}
	owners := 0
	for g := range w.place.Groups {
		if len(w.place.Groups[g]) > 0 {
			owners++
		}
	}
	for i := 0; len(w.accts) < txnAccounts; i++ {
		k := "acct" + strconv.Itoa(i)
		if g := w.placeMap.Group(k); per[g] < (txnAccounts+owners-1)/owners {
			per[g]++
			w.accts = append(w.accts, k)
		}
	}
	for i := 0; i < w.cfg.TxnClients; i++ {
		w.txc = append(w.txc, &shTxClient{idx: i})
		w.after(w.think.Sample(w.rngClient), &shEvent{kind: shTxNext, client: i})
	}
	w.after(resolverEvery, &shEvent{kind: shResolve})
	w.seenTx = map[string]time.Duration{}
	w.busyTx = map[string]bool{}
}

func shOp(kind, key string, args ...string) service.Op { return shKV(kind, key, args...) }

func (w *shWorld) onTxNext(c *shTxClient) {
	if c.busy || w.stopping {
		return
	}
	var ops []service.Op
	if w.rngClient.Intn(5) < 3 { // a transfer
		a := w.accts[w.rngClient.Intn(len(w.accts))]
		b := w.accts[(slices.Index(w.accts, a)+1+w.rngClient.Intn(len(w.accts)-1))%len(w.accts)]
		d := strconv.Itoa(1 + w.rngClient.Intn(5))
		ops = []service.Op{shOp("incr", a, "-"+d), shOp("incr", b, d)}
	} else { // the whole bank
		for _, a := range w.accts {
			ops = append(ops, shOp("get", a))
		}
	}
	e := &history.Op{Process: 1000 + c.idx, Call: int64(w.now), Kind: history.MultiKind}
	for _, op := range ops {
		e.Txn = append(e.Txn, history.Op{Process: e.Process, Kind: op.Kind, Key: op.Key, Args: argStrs(op)})
	}
	c.busy, c.entry, c.ops, c.attempt = true, e, ops, 0
	w.busyClients++
	w.txAttempt(c)
}

func argStrs(op service.Op) []string {
	var out []string
	for _, a := range op.Args {
		out = append(out, string(a))
	}
	return out
}

func txReadOnly(ops []service.Op) bool {
	for _, op := range ops {
		if !(service.KV{}).IsRead(op) {
			return false
		}
	}
	return true
}

// txSlotGuards are the node's slot guards for ops (node/slotmap.go
// guarded): one per slot, write mode when any operation writes.
func txSlotGuards(ops []service.Op, write bool) []service.Op {
	mode := shard.ModeRead
	if write {
		mode = shard.ModeWrite
	}
	seen := map[int]bool{}
	var out []service.Op
	for _, op := range ops {
		if sl := shard.KeySlot(op.Key); !seen[sl] {
			seen[sl] = true
			out = append(out, shOp(service.GuardKind, shard.StateKey(sl), "slot", mode))
		}
	}
	return out
}

// txAttempt routes the operation by the current slot map (the node reads
// the newest map before it answers MOVED): one request when its keys are
// in one group, else a transaction.
func (w *shWorld) txAttempt(c *shTxClient) {
	parts, _ := txn.Split(c.ops, func(op service.Op) (int, bool) { return w.placeMap.Group(op.Key), true })
	gen := c.gen
	write := !txReadOnly(c.ops)
	if len(parts) == 1 {
		guards := txSlotGuards(c.ops, write)
		ops := append(guards, c.ops...)
		if write && w.cfg.Broken != "txn-no-dirty" {
			// The written keys' dirty marks (node/slotmap.go guarded),
			// so that a migration under way copies them again.
			for _, op := range c.ops {
				ops = append(ops, shOp("slotdirty", op.Key))
			}
		}
		c.waiting = 1
		w.groupCall(parts[0].Group, ops, func(rs []service.Result, err error) {
			if c.gen != gen {
				return
			}
			c.waiting = 0
			switch {
			case err != nil:
				w.txFinish(c, history.Unknown, nil)
			case guardFailedAt(rs, len(guards)) >= 0:
				w.txRetry(c) // MOVED, ASK, TRYAGAIN, a lock: nothing applied
			default:
				w.txFinish(c, history.OK, rs[len(guards):])
			}
		})
		return
	}
	w.stats.Txns++
	id := fmt.Sprintf("sim%d.%d.%d", c.idx, len(w.bank), c.attempt)
	c.co = txn.NewCoordinator(id, parts)
	c.co.ReadOnly = !write
	if b, ok := strings.CutPrefix(w.cfg.Broken, "txn:"); ok {
		c.co.Broken = b
	}
	if write {
		c.co.Known = txn.KnownResults(parts)
		// A transfer's INCRs: evaluated at the prepares and answered at
		// the decision, as node/txn.go does since 135b8da.
		c.co.Eval = c.co.Known == nil
	}
	w.txStep(c)
}

func guardFailedAt(rs []service.Result, n int) int {
	for i := 0; i < n && i < len(rs); i++ {
		if service.IsGuardFailure(rs[i]) {
			return i
		}
	}
	return -1
}

// txStep issues the coordinator's next step, or ends the attempt (as
// node/txn.go and shard/txn's simulation drive it).
func (w *shWorld) txStep(c *shTxClient) {
	co := c.co
	st := co.Next()
	if out, ok := co.Answer(); ok && st.Kind != txn.StDone && !c.tail {
		// Answered at the decision (or after a read-only round); the
		// steps left run on.
		w.stats.TxnEarly++
		if co.Evaluated() {
			w.stats.TxnEvaluated++
		}
		w.txFinish(c, history.OK, out.Results)
		c = &shTxClient{idx: -1, co: co, tail: true}
	}
	if st.Kind == txn.StDone {
		if k := co.Mismatched(); k > 0 {
			w.violation("transaction %s: %d of its commits applied results other than the prepares' evaluation its client was answered with", co.ID, k)
		}
		if c.tail {
			return
		}
		out := co.Outcome()
		switch out.Kind {
		case txn.OutDone:
			w.txFinish(c, history.OK, out.Results)
		case txn.OutUnknown, txn.OutLost:
			w.txFinish(c, history.Unknown, nil)
		case txn.OutWatch:
			w.txFinish(c, history.Failed, nil)
		default:
			w.txRetry(c)
		}
		return
	}
	gen := c.gen
	coord := w.groups[co.Parts[0].Group].name
	c.waiting = len(st.Parts)
	for _, i := range st.Parts {
		p := co.Parts[i]
		answer := func(f func([]service.Result, error)) func([]service.Result, error) {
			return func(rs []service.Result, err error) {
				if c.gen != gen {
					return
				}
				f(rs, err)
				if c.waiting--; c.waiting == 0 {
					if w.faults["crash"] && w.rngFault.Intn(200) == 0 && !w.stopping {
						w.tracef("transaction %s: its coordinator dies", co.ID)
						w.stats.TxnCoordDeaths++
						if !c.tail {
							w.txFinish(c, history.Unknown, nil)
						}
						c.gen++
						return
					}
					w.txStep(c)
				}
			}
		}
		switch st.Kind {
		case txn.StPrepare:
			g := txSlotGuards(p.Ops, !co.ReadOnly)
			w.groupCall(p.Group, co.PrepareOps(i, coord, g), answer(func(rs []service.Result, err error) {
				co.Prepared(i, txn.ReadVote(p, len(g), rs, err))
			}))
		case txn.StDecide:
			w.groupCall(p.Group, []service.Op{shOp("txdecide", shard.DecisionKey(co.ID), txn.Commit)}, answer(func(rs []service.Result, err error) {
				d := ""
				if err == nil {
					d, _, _ = txn.ParseDecision(rs[0].Bytes, "")
				}
				co.Decided(d, err)
			}))
		case txn.StCommit:
			w.groupCall(p.Group, []service.Op{service.TxCommitOp(co.ID, co.Writes(i))}, answer(func(rs []service.Result, err error) {
				var r service.Result
				if err == nil {
					r = rs[0]
				}
				co.Committed(i, r, err)
			}))
		case txn.StAbort:
			w.groupCall(p.Group, []service.Op{shOp("txabort", shard.TxKey(co.ID))}, answer(func([]service.Result, error) { co.Aborted(i) }))
		case txn.StForget:
			w.groupCall(p.Group, []service.Op{shOp("txforget", shard.DecisionKey(co.ID))}, answer(func([]service.Result, error) { co.Forgot() }))
		}
	}
}

func (w *shWorld) txRetry(c *shTxClient) {
	c.co = nil
	c.gen++
	c.attempt++
	w.stats.TxnRetries++
	if c.attempt > txnMaxRetries {
		w.txFinish(c, history.Failed, nil)
		return
	}
	w.after(5*time.Millisecond+time.Duration(w.rngClient.Int63n(int64(20*time.Millisecond))), &shEvent{kind: shTxRetry, client: c.idx, gen: uint64(c.gen)})
}

func (w *shWorld) txFinish(c *shTxClient, out history.Outcome, rs []service.Result) {
	e := c.entry
	e.Return, e.Outcome = int64(w.now), out
	if out == history.OK {
		e.Result = history.FromResult(service.OK())
		for i := range e.Txn {
			e.Txn[i].Outcome, e.Txn[i].Result = history.OK, history.FromResult(rs[i])
		}
	}
	w.bank = append(w.bank, *e)
	c.busy, c.entry, c.co = false, nil, nil
	c.gen++
	w.busyClients--
	w.after(w.think.Sample(w.rngClient), &shEvent{kind: shTxNext, client: c.idx})
}

// onResolve is every group's leader's resolver (node/txn.go resolveTxns).
func (w *shWorld) onResolve() {
	w.after(resolverEvery, &shEvent{kind: shResolve})
	for g := range w.groups {
		w.groupCall(g, []service.Op{shOp("txlist", shard.PreparedKey)}, func(rs []service.Result, err error) {
			if err != nil {
				return
			}
			for _, e := range rs[0].Elems {
				if len(e.Elems) < 2 {
					continue
				}
				id, coord := string(e.Elems[0].Bytes), strings.Fields(string(e.Elems[1].Bytes))
				k := strconv.Itoa(g) + " " + id
				if _, ok := w.seenTx[k]; !ok {
					w.seenTx[k] = w.now
				}
				if w.now-w.seenTx[k] < resolveAfter || w.busyTx[k] || len(coord) == 0 {
					continue
				}
				ci := -1
				for j, gr := range w.groups {
					if gr.name == coord[0] {
						ci = j
					}
				}
				if ci < 0 {
					w.fail("transaction %s prepared in %s names an unknown coordinator %q", id, w.groups[g].name, coord[0])
					return
				}
				w.busyTx[k] = true
				w.groupCall(ci, []service.Op{shOp("txdecide", shard.DecisionKey(id), txn.Abort)}, func(rs []service.Result, err error) {
					if err != nil {
						w.busyTx[k] = false
						return
					}
					d, writes, err := txn.ParseDecision(rs[0].Bytes, w.groups[g].name)
					if err != nil {
						w.fail("transaction %s: decision: %v", id, err)
						return
					}
					w.stats.TxnResolved++
					op := shOp("txabort", shard.TxKey(id))
					if d == txn.Commit {
						op = service.TxCommitOp(id, writes)
					}
					w.groupCall(g, []service.Op{op}, func([]service.Result, error) { w.busyTx[k] = false })
				})
			}
		})
	}
}
