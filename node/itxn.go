package node

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard/txn"
)

// Interactive transactions (SYNOD BEGIN; automaton/txn.go) on a sharded
// namespace (issue 33 item 5): optimistic, validated at commit by the
// cross-shard transaction of txn.go.
//
// The node the client is connected to holds the transaction's workspace:
// a scratch KV state holding every key the transaction has named, each
// read from its group (VERSION, DUMP, PTTL in one request, guarded like
// any read, so never from a slot a prepared transaction holds) the first
// time an operation names it, with the version it had then. Each
// operation runs on the scratch state at once, so the client sees its
// answer, its own writes included. COMMIT sends one atomic request: a
// "guard k version v" for every key read, then the after-image (RESTORE
// ... REPLACE, or DEL) of every key written; over keys of several groups
// it runs as a cross-shard transaction (two-phase commit, txn.go), in
// one group as an atomic group. It commits only if no key it read has
// changed since, in the same step that applies its writes.
//
// Isolation: strictly serializable for committed transactions (the commit
// is their serialization point: every key they read is checked unchanged
// and every write applied there, under the slot locks of the two-phase
// commit); a transaction whose key changed answers EXECABORT and applies
// nothing. The reads of a transaction still open are of keys read at
// different moments and may be mutually inconsistent: an aborted
// transaction's reads promise nothing (automaton's contract). This is
// optimistic concurrency control (Kung and Robinson, 1981) with backward
// validation, chosen because the sharded namespaces' protocol (paxos) has
// no interactive transactions of its own, and a workspace at one node
// holds no lock while a client thinks. Decided here: the workspace is this
// node's memory (a node that restarts forgets it: COMMIT then answers
// ErrNoSuchTxn, reported as EXECABORT), evicted after itxIdle unused.

// itxIdle is how long an open interactive transaction may stay unused.
const itxIdle = 5 * time.Minute

type itxSession struct {
	mu      sync.Mutex
	st      service.State
	version map[string]uint64
	order   []string // keys in the order first named
	written map[string]bool
	used    time.Time
}

type itxTable struct {
	mu sync.Mutex
	m  map[automaton.RequestID]*itxSession
}

func (t *itxTable) get(id automaton.RequestID) *itxSession {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.m[id]
}

// interactive serves an interactive transaction's step on sharded
// namespace s.
func (n *Node) interactive(ctx context.Context, s *shardedNS, req automaton.Request) (automaton.Response, error) {
	fail := func(r service.Result) (automaton.Response, error) {
		return automaton.Response{ID: req.ID, Result: r}, nil
	}
	if !automaton.TransactionsOf(s.ns.Protocol).Atomic {
		return fail(service.Errorf(automaton.ErrNoInteractive, s.ns.Protocol))
	}
	id := req.Txn.Txn
	switch req.Txn.Action {
	case automaton.TxnBegin:
		now := time.Now()
		n.itx.mu.Lock()
		if n.itx.m == nil {
			n.itx.m = map[automaton.RequestID]*itxSession{}
		}
		for k, x := range n.itx.m {
			x.mu.Lock()
			idle := now.Sub(x.used) > itxIdle
			x.mu.Unlock()
			if idle {
				delete(n.itx.m, k)
			}
		}
		n.itx.m[id] = &itxSession{st: (service.KV{}).NewState(), version: map[string]uint64{}, written: map[string]bool{}, used: now}
		n.itx.mu.Unlock()
		return fail(service.OK())
	case automaton.TxnAbort:
		n.itx.mu.Lock()
		delete(n.itx.m, id)
		n.itx.mu.Unlock()
		return fail(service.OK())
	}
	x := n.itx.get(id)
	if x == nil {
		return fail(service.Errorf("%s", automaton.ErrNoSuchTxn))
	}
	x.mu.Lock()
	defer x.mu.Unlock()
	x.used = time.Now()
	if req.Txn.Action == automaton.TxnCommit {
		n.itx.mu.Lock()
		delete(n.itx.m, id)
		n.itx.mu.Unlock()
		return n.itxCommit(ctx, s, req, x)
	}
	op := req.Op
	keys := opKeys(s.svc, op)
	if len(keys) == 0 {
		return fail(service.Errorf("ERR %s spans the keyspace, which sharded namespace %s does not serve in a transaction", op.Kind, s.ns.Name))
	}
	var load []string
	for _, k := range keys {
		if _, ok := x.version[k]; !ok && !contains(load, k) {
			load = append(load, k)
		}
	}
	if len(load) > 0 {
		if r, ok := n.itxLoad(ctx, s, x, load); !ok {
			return fail(r)
		}
	}
	env := service.Env{Time: time.Now().UnixNano(), Seed: randUint64()}
	r := service.ApplyEnv(x.st, op, env)
	if !s.svc.IsRead(op) && !r.IsErr() {
		for _, k := range keys {
			x.written[k] = true
		}
	}
	return fail(r)
}

func contains(xs []string, x string) bool {
	for _, y := range xs {
		if y == x {
			return true
		}
	}
	return false
}

// itxLoad reads keys (their version, value and time to live) into the
// transaction's workspace: one request, a read-only cross-shard
// transaction when they span groups.
func (n *Node) itxLoad(ctx context.Context, s *shardedNS, x *itxSession, keys []string) (service.Result, bool) {
	ops := make([]service.Op, 0, 3*len(keys))
	for _, k := range keys {
		ops = append(ops, kvOp("version", k), kvOp("dump", k), kvOp("pttl", k))
	}
	resp, err := n.doSharded(ctx, s.ns.Name, automaton.Request{ID: freshID(), Ops: ops})
	if err != nil {
		return service.Errorf("ERR reading %v for the transaction: %v", keys, err), false
	}
	if resp.Result.IsErr() {
		return resp.Result, false
	}
	if len(resp.Results) != len(ops) {
		return service.Errorf("ERR reading %v for the transaction: %d results for %d operations", keys, len(resp.Results), len(ops)), false
	}
	env := service.Env{Time: time.Now().UnixNano()}
	for i, k := range keys {
		v, d, t := resp.Results[3*i], resp.Results[3*i+1], resp.Results[3*i+2]
		if v.IsErr() || d.IsErr() || t.IsErr() {
			return service.Errorf("ERR reading %q for the transaction: %v %v %v", k, v.Err, d.Err, t.Err), false
		}
		x.version[k] = uint64(v.Int)
		x.order = append(x.order, k)
		if d.Type != service.ResultBytes {
			continue
		}
		ttl := "0"
		if t.Type == service.ResultInt && t.Int > 0 {
			ttl = strconv.FormatInt(t.Int, 10)
		}
		if r := service.ApplyEnv(x.st, service.Op{Kind: "restore", Key: k, Args: [][]byte{[]byte(ttl), d.Bytes, []byte("replace")}}, env); r.IsErr() {
			return service.Errorf("ERR restoring %q for the transaction: %s", k, r.Err), false
		}
	}
	return service.Result{}, true
}

// itxCommit validates and applies the transaction: one atomic request of
// the read keys' version guards and the written keys' after-images.
func (n *Node) itxCommit(ctx context.Context, s *shardedNS, req automaton.Request, x *itxSession) (automaton.Response, error) {
	out := func(r service.Result) (automaton.Response, error) {
		return automaton.Response{ID: req.ID, Result: r}, nil
	}
	var ops []service.Op
	for _, k := range x.order {
		ops = append(ops, service.Op{Kind: service.GuardKind, Key: k, Args: [][]byte{[]byte("version"), []byte(strconv.FormatUint(x.version[k], 10))}})
	}
	nguards := len(ops)
	env := service.Env{Time: time.Now().UnixNano()}
	for _, k := range x.order {
		if x.written[k] {
			ops = append(ops, txn.AfterImage(x.st, k, env))
		}
	}
	if len(ops) == 0 {
		return out(service.OK())
	}
	resp, err := n.doSharded(ctx, s.ns.Name, automaton.Request{ID: freshID(), Ops: ops})
	if err != nil {
		return automaton.Response{}, err
	}
	if resp.Result.IsErr() {
		// Refused as a whole (a slot's migration, locks held too long):
		// nothing was applied.
		return out(service.Errorf("%s (%s)", automaton.ErrTxnAborted, resp.Result.Err))
	}
	if at, ok := automaton.GroupAborted(ops, resp.Results); ok && at < nguards {
		return out(service.Errorf("%s (%s: a key it read changed before its commit)", automaton.ErrTxnAborted, x.order[at]))
	}
	if len(resp.Results) != len(ops) {
		return automaton.Response{}, fmt.Errorf("interactive transaction commit: %d results for %d operations", len(resp.Results), len(ops))
	}
	return out(service.OK())
}
