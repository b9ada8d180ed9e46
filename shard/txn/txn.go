// Package txn makes a request whose keys fall in several replica groups of
// a sharded namespace atomic and strictly serializable: two-phase commit
// over the groups (issue 33 item 5), where every participant and the
// coordinator's decision are replicated groups.
//
// # Protocol
//
// This is Gray and Lamport's observation ("Consensus on Transaction
// Commit", 2006) that two-phase commit blocks only because its coordinator
// and its participants are single processes: when each is a replicated
// state machine, the crash of any one node stops nothing. Here each
// participant is a group of the namespace (its own log, its own leader),
// and the coordinator's one durable fact, the decision, is recorded in the
// log of one participant group, the coordinator group (the group of the
// request's first operation). Seed 002's T-Paxos runs a transaction inside
// one group; this is the step it does not take, across groups. The steps,
// each one operation in one group's log (service/kv_txn.go):
//
//  1. Prepare, in every participant group at once: one atomic group of the
//     slot guards of the part's keys (migration's ownership check, and the
//     lock check below), the client's own guards (WATCH's versions,
//     MSETNX's existence checks), then txprepare, which locks the slots
//     of the part's keys, guarded ones included, and records its
//     operations (a redo log). Nothing is applied.
//     A failed guard applies nothing: that participant votes no.
//  2. If every participant voted yes, txdecide commit in the coordinator
//     group: the transaction commits when that entry is in the log. If any
//     voted no, the coordinator aborts the others (txabort) without logging
//     anything: presumed abort (Mohan, Lindsay and Obermarck, "Transaction
//     Management in the R* Distributed Database Management System", 1986).
//  3. txcommit in every participant: apply the recorded operations in
//     order, release the locks, answer their results (the client's answer,
//     assembled in the request's order). Then txforget drops the decision.
//
// # Read-only transactions, and answering at the decision
//
// A transaction whose every operation reads (MGET or EXISTS of keys in
// several groups, a MULTI of reads; Coordinator.ReadOnly)
// takes one round: each prepare locks the part's slots and runs its reads
// at once, under the new locks, in the same atomic group (PrepareReads);
// when every part answered, the client has its answer, and the second
// round only releases the locks (txabort), after the answer; nothing is
// logged in the coordinator group. This is R*'s read-only optimisation
// with presumed abort (Mohan, Lindsay and Obermarck 1986): a
// read-only participant has nothing to commit, so no decision is ever
// logged for it and its phase 2 carries no outcome (an abort and a commit
// are the same to it; a lost release is resolved like any prepared
// transaction, by an abort). One difference, decided here: R*'s read-only
// participant releases its locks when it votes, because its reads ran
// before the prepare while the transaction held all its locks; here the
// reads are the prepare, so a part releasing at once would let a
// transaction commit between two parts' reads (the broken variant
// "read-only-without-locks" in the simulation is exactly that, and is
// caught). The locks are held from each part's read until the release
// after the last, so the transaction's serialization point is the instant
// of its last read, inside its call. Their locks are shared
// (service.SharedPrepare): read-only transactions and single reads pass
// one another; writes and writing transactions do not.
//
// A computed transaction's answer (and a transaction's whose results are
// known before it runs, Coordinator.Known: plain SETs, as MSET across
// groups) is given once its commit decision is in the coordinator group's
// log, before the commits: that entry is the commit point (Gray and
// Lamport: the decision, once chosen, is the outcome; here it is chosen
// by the coordinator group's log), every participant applies exactly the
// writes it holds (by the coordinator's txcommit or its resolver's), and
// until a participant applies them its prepared locks refuse every request
// naming their slots, so no read after the answer misses them. This saves
// the third round's latency.
//
// A plain writing transaction (MULTI INCRBY ... EXEC, Coordinator.Eval) is
// answered at the decision too: each participant evaluates its part at
// the prepare (service.EvalPrepare), under the locks it has just taken,
// on a scratch copy of the part's keys, at the prepare's time and
// environment, and answers the results with its vote; its commit applies
// the recorded operations at that same time and environment. Between the
// two the slots are locked (no request reads or writes them, and active
// expiry passes over them), so the commit computes exactly the results
// already answered (Coordinator.Mismatched counts any that differ: the
// simulation fails on one, node's INFO counts them). Decided against:
// running it as a computed transaction, which copies every value through
// the coordinator and carries TTLs as time left. The price: a part is
// evaluated as of its prepare's time (a key expiring between the
// prepare and the commit is still there for the transaction, as Redis
// stops its clock during a MULTI/EXEC), and a part that cannot be
// evaluated alone (SPOP, whose draw depends on the state's version; a
// script; collections over 4,096 elements, which the scratch would copy
// on every replica) answers OK at the prepare and the transaction answers
// after its commits, as before. A read after the answer on a participant
// that has not applied its commit meets the prepared lock: the slot guard
// refuses it with TRYAGAIN, which the node retries for a plain client and
// a cluster client retries itself, until the commit (the coordinator's,
// or its resolver's after ResolveAfter) releases it.
//
// # Who resolves an in-doubt transaction
//
// A participant whose transaction stays prepared (the coordinator node
// died, or its messages were lost) is resolved by the leader of that
// participant group (node/txn.go, every second; after ResolveAfter): it
// runs txdecide abort in the coordinator group. txdecide records a
// decision only when none is recorded and answers the recorded one, so the
// coordinator's commit and a resolver's abort are ordered by the
// coordinator group's log, and exactly one wins; the resolver then commits
// or aborts its group accordingly. A coordinator whose txdecide commit
// answers abort aborts (and retries the transaction, which nobody saw).
// Because the decision is logged before any participant releases a lock,
// no participant ever applies a decision other participants do not.
//
// # Isolation: strictly serializable
//
// Strict two-phase locking with no-wait, where the unit of locking is the
// slot (Redis Cluster's hash slot, the unit of placement and migration):
// a prepared transaction holds every slot it names, for reads and writes
// alike, in every participant, until its commit or abort entry in that
// participant's log; the operations themselves run at commit, under those
// locks. Every client request of a group carries a slot guard per slot it
// names (node/slotmap.go), and the guard refuses a locked slot (TRYAGAIN,
// which cluster clients retry and the node retries for others), so no
// request reads or writes a slot between a prepare and its decision. A
// prepare that meets a locked slot votes no (no-wait: nothing ever waits,
// so no deadlock), and the coordinator retries the whole transaction after
// a randomised pause, up to MaxAttempts, then answers TRYAGAIN. The
// serialization point of a transaction is any instant between its last
// prepare and its first commit entry: every other request that touches
// one of its slots is, in that slot's group log, wholly before the
// prepare or wholly after the commit. Requests of one group (one slot
// group's MULTI/EXEC) are atomic groups in that log and need none of
// this. Reads hold locks too: a read that saw one participant's commit and
// another's old value would break strict serializability (the broken
// variant in the simulation shows it).
//
// Locking by slot, not by key, is a decision: the slot guard every request
// already carries (migration's ownership check) is the lock check, at no
// extra operation per request, and a migration's freeze can ask one
// question of a slot. The cost is false conflicts between keys that share
// a slot (1/16,384 for two random keys; keys of one hash tag always share).
//
// One operation whose keys are in several groups (RENAME, SMOVE,
// SINTERSTORE, LMOVE, COPY, ... across groups) needs one group's data to
// compute another's writes: it runs as a computed transaction (compute.go),
// the same protocol with the reads taken at prepare under the locks, the
// operation run by the coordinator on a scratch copy, and the writes
// recorded with the decision. Keys expiring between a transaction's
// prepare and its commit expire at the commit's time (the guards were
// checked at the prepare's), but in an evaluated transaction (Eval), whose
// operations run at the prepare's time both times.
//
// # Migrations
//
// A prepare carries the same slot guards as any write: a frozen slot votes
// no with TRYAGAIN, a handed or gone one with ASK or MOVED, and the whole
// transaction answers that refusal (a cluster client or the node follows
// it and sends the transaction again). A migration's freeze waits until no
// transaction holds the slot (node/migrate.go adds "guard <lock> exists 0"
// to the freeze, which otherwise fails and is retried by the driver): a
// commit after the final copy would be lost to the destination. Commits
// before the freeze mark their written keys dirty like any write, so the
// copy takes them.
package txn

import (
	"fmt"

	"github.com/synod-dev/synod/service"
)

// MaxAttempts bounds the attempts of a transaction whose prepares meet
// locked slots.
const MaxAttempts = 8

// ResolveAfter is how long (seconds) a prepared transaction stays prepared
// before a participant's leader resolves it.
const ResolveAfter = 5.0

// Part is one group's share of a request: its operations, in request
// order, and their positions in the request.
type Part struct {
	Group int
	Index []int
	Ops   []service.Op
}

// Split divides a request's operations by group. groupOf names the group of
// all of one operation's keys, ok false when they span groups or it names
// none (then the request cannot run as a transaction: CROSSSLOT). The
// parts are in the order of their first operation.
func Split(ops []service.Op, groupOf func(service.Op) (int, bool)) ([]Part, bool) {
	at := map[int]int{}
	var parts []Part
	for i, op := range ops {
		g, ok := groupOf(op)
		if !ok {
			return nil, false
		}
		j, seen := at[g]
		if !seen {
			j = len(parts)
			at[g] = j
			parts = append(parts, Part{Group: g})
		}
		parts[j].Index = append(parts[j].Index, i)
		parts[j].Ops = append(parts[j].Ops, op)
	}
	return parts, true
}

// Guards is the number of the part's leading client guards (GuardKind
// operations before its first other operation).
func (p Part) Guards() int {
	n := 0
	for n < len(p.Ops) && p.Ops[n].Kind == service.GuardKind {
		n++
	}
	return n
}

// Prepare is the atomic group a participant runs for part p of
// transaction id coordinated by group coord: the slot guards (the node's,
// ownership and locks), the part's client guards, then txprepare of the
// part's operations.
func Prepare(id, coord string, slotGuards []service.Op, p Part) []service.Op {
	g := p.Guards()
	out := make([]service.Op, 0, len(slotGuards)+g+1)
	out = append(out, slotGuards...)
	out = append(out, p.Ops[:g]...)
	// The record holds the guards too, so that their keys' slots are
	// locked (a watched key must not change before the commit: the guard
	// is a read) and txcommit answers OK for each.
	return append(out, service.TxPrepareOp(id, coord, p.Ops))
}

// VoteKind is a participant's answer to its prepare.
type VoteKind int

const (
	Unknown  VoteKind = iota // no answer: it may have prepared
	Yes                      // prepared
	Refused                  // a slot guard failed: nothing applied
	Watch                    // a client guard failed: nothing applied
	Conflict                 // txprepare met a lock: nothing applied
)

// Vote is a participant's answer.
type Vote struct {
	Kind  VoteKind
	At    int            // Refused: the slot guard's index; Watch: the request's operation index
	Res   service.Result // the failed guard's result
	Err   string
	Reads []service.Result // Yes, for a computed transaction: its reads' answers
	Eval  []service.Result // Yes, for a prepare with service.EvalPrepare that evaluated: its operations' results
}

// ReadVote reads the answer to Prepare(..., slotGuards, p) with nslot slot
// guards: results (nil with err set when none came).
func ReadVote(p Part, nslot int, results []service.Result, err error) Vote {
	if err != nil {
		return Vote{Kind: Unknown, Err: err.Error()}
	}
	g := p.Guards()
	if len(results) < nslot+g+1 {
		return Vote{Kind: Unknown, Err: fmt.Sprintf("%d results for a prepare of %d operations", len(results), nslot+g+1)}
	}
	for i := 0; i < nslot+g; i++ {
		if service.IsGuardFailure(results[i]) {
			if i < nslot {
				return Vote{Kind: Refused, At: i, Res: results[i]}
			}
			return Vote{Kind: Watch, At: p.Index[i-nslot], Res: results[i]}
		}
	}
	last := results[nslot+g]
	if last.IsErr() {
		return Vote{Kind: Conflict, Err: last.Err}
	}
	v := Vote{Kind: Yes, Reads: results[nslot+g+1:]}
	if last.Type == service.ResultArray {
		v.Eval = last.Elems
	}
	return v
}

// KnownResults returns the client's results of the request split into
// parts (in request order) before anything is applied, when no
// operation's answer depends on the state: each a plain SET (no NX, XX,
// GET, EX: it answers OK whatever the key held) or a client guard
// (checked at prepare: OK when the transaction commits). Nil otherwise.
func KnownResults(parts []Part) []service.Result {
	n := 0
	for _, p := range parts {
		n += len(p.Index)
	}
	out := make([]service.Result, n)
	for _, p := range parts {
		for j, op := range p.Ops {
			if op.Kind != service.GuardKind && (op.Kind != "set" || len(op.Args) != 1) {
				return nil
			}
			out[p.Index[j]] = service.OK()
		}
	}
	return out
}

// Decision values (txdecide's).
const (
	Commit = "commit"
	Abort  = "abort"
)
