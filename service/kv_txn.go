package service

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/shard"
	"github.com/synod-dev/synod/wire"
)

// Cross-shard transactions' part of KV (issue 33 item 5; the protocol,
// its coordinator and the reasons are in package shard/txn). Two-phase
// commit over replica groups: every step a participant or the coordinator
// group takes is one of these operations, so it is in that group's log
// and survives the crash of any node, coordinator or leader.
//
//	txprepare <tx key> <coordinator group>[" shared"|" eval"] <op>...
//	          participant: lock the slots of the ops (shared: a read-only
//	          transaction's read locks), record them (redo log); nothing is
//	          applied. eval: also evaluate them on a scratch copy of their
//	          keys and answer their results (below)
//	txcommit  <tx key> [<op>...]   participant: apply the recorded ops,
//	          then the given ones (a computed transaction's writes, which the
//	          decision record also holds), release
//	txabort   <tx key>    participant: release, apply nothing
//	txdecide  <decision key> commit|abort [<writes>]   coordinator group:
//	          record the decision (with a computed transaction's writes)
//	          unless one is recorded; answer the recorded one
//	txforget  <decision key>   coordinator group: drop a decision all
//	          participants applied
//	txlist    <prepared key>   participant: the prepared transactions,
//	          each [id, coordinator group]
//
// The slot lock is what the slot guard (kv_slots.go) checks for every
// client request of the group: a request naming a locked slot is refused
// (GUARDFAILED slot locked), so nothing reads or writes a slot between a
// transaction's prepare and its commit or abort in that group.

func init() {
	addKVOps(map[string]kvOp{
		"txprepare": {min: 1, max: -1, check: checkTxPrepare, run: (*KVState).opTxPrepare},
		"txcommit":  {max: -1, check: checkTxCommit, run: (*KVState).opTxCommit},
		"txabort":   {run: (*KVState).opTxAbort},
		"txdecide":  {min: 1, max: 2, check: checkTxDecide, run: (*KVState).opTxDecide},
		"txforget":  {run: (*KVState).opTxForget},
		"txlist":    {read: true, run: (*KVState).opTxList},
	})
}

// txRecord is a prepared transaction's record in a participant. eval:
// its operations were evaluated at the prepare, at time now (ms) with
// environment env, and are applied at the commit with the same.
type txRecord struct {
	coord string
	slots []int
	ops   []Op
	eval  bool
	env   Env
	now   int64
}

func (r txRecord) encode() []byte {
	e := wire.Encoder{}
	e.String(r.coord)
	e.Uvarint(uint64(len(r.slots)))
	for _, s := range r.slots {
		e.Uvarint(uint64(s))
	}
	e.Uvarint(uint64(len(r.ops)))
	for _, op := range r.ops {
		EncodeOp(&e, op)
	}
	if r.eval {
		// A trailing section: records written before it have none.
		e.Byte(1)
		EncodeEnv(&e, r.env)
		e.Varint(r.now)
	}
	return e.B
}

func decodeTxRecord(b []byte) (txRecord, error) {
	d := wire.NewDecoder(b)
	r := txRecord{coord: d.String()}
	n := d.Count(shard.Slots, 1)
	for i := 0; i < n && d.Err() == nil; i++ {
		r.slots = append(r.slots, int(d.Uvarint()))
	}
	m := d.Count(1<<16, 2)
	for i := 0; i < m && d.Err() == nil; i++ {
		r.ops = append(r.ops, DecodeOp(d))
	}
	if d.Err() == nil && len(d.B) > 0 {
		r.eval = d.Byte() == 1
		r.env = DecodeEnv(d)
		r.now = d.Varint()
	}
	return r, d.Done()
}

// TxPrepareOp is the participant's prepare of transaction id, coordinated
// by group coord, whose operations in this group are ops (in order).
func TxPrepareOp(id, coord string, ops []Op) Op {
	op := Op{Kind: "txprepare", Key: shard.TxKey(id), Args: [][]byte{[]byte(coord)}}
	for _, o := range ops {
		e := wire.Encoder{}
		EncodeOp(&e, o)
		op.Args = append(op.Args, e.B)
	}
	return op
}

func checkTxPrepare(op Op) error { return checkEncodedOps(op.Args[1:]) }

func checkTxCommit(op Op) error { return checkEncodedOps(op.Args) }

// TxCommitOp is the participant's commit of transaction id, applying
// writes after its recorded operations.
func TxCommitOp(id string, writes []Op) Op {
	op := Op{Kind: "txcommit", Key: shard.TxKey(id)}
	for _, o := range writes {
		e := wire.Encoder{}
		EncodeOp(&e, o)
		op.Args = append(op.Args, e.B)
	}
	return op
}

func checkEncodedOps(args [][]byte) error {
	for _, a := range args {
		d := wire.NewDecoder(a)
		o := DecodeOp(d)
		if err := d.Done(); err != nil {
			return fmt.Errorf("ERR transaction step: bad operation: %v", err)
		}
		if o.Kind == "txprepare" || o.Kind == "txcommit" {
			return fmt.Errorf("ERR transaction step: nested transaction operation")
		}
		if err := (KV{}).Validate(o); err != nil {
			return err
		}
	}
	return nil
}

func checkTxDecide(op Op) error {
	if d := string(op.Args[0]); d != "commit" && d != "abort" {
		return fmt.Errorf(errSyntax)
	}
	return nil
}

// txSlots is the sorted set of slots ops name.
func txSlots(ops []Op) []int {
	seen := map[int]bool{}
	var out []int
	for _, op := range ops {
		for _, l := range (KV{}).Locks(op) {
			if l.Key == "" || shard.Reserved(l.Key) {
				continue
			}
			if sl := shard.KeySlot(l.Key); !seen[sl] {
				seen[sl] = true
				out = append(out, sl)
			}
		}
	}
	sort.Ints(out)
	return out
}

// opTxPrepare records the transaction and locks its slots. A slot locked
// by another transaction fails it (TXCONFLICT) with nothing changed; the
// node's slot guards, which lead every prepare, normally refuse it first.
// Preparing a recorded transaction again answers OK and changes nothing.
//
// A read-only transaction prepares with "<coordinator group> shared" (its
// reads are answered at once, shard/txn "Read-only transactions"): its
// locks are shared, a slot's lock then holding "r:<id>,<id>..." (sharedLock),
// which other shared prepares and the slot guards of reads pass, and
// exclusive prepares and writes do not.
func (s *KVState) opTxPrepare(op Op) Result {
	id := shard.TxID(op.Key)
	if _, ok := s.live(op.Key); ok {
		return OK()
	}
	coord, mode, _ := strings.Cut(string(op.Args[0]), " ")
	shared := mode == SharedPrepare
	r := txRecord{coord: coord, eval: mode == EvalPrepare, env: s.env, now: s.now}
	for _, a := range op.Args[1:] {
		r.ops = append(r.ops, DecodeOp(wire.NewDecoder(a)))
	}
	r.slots = txSlots(r.ops)
	for _, sl := range r.slots {
		e, ok := s.live(shard.LockKey(sl))
		if !ok || string(e.v) == id {
			continue
		}
		if _, sh := strings.CutPrefix(string(e.v), sharedLock); sh && shared {
			continue
		}
		return Errorf("TXCONFLICT slot %d is locked by transaction %s", sl, e.v)
	}
	for _, sl := range r.slots {
		v := id
		if shared {
			v = sharedLock + id
			if e, ok := s.live(shard.LockKey(sl)); ok {
				v = string(e.v) + "," + id
			}
		}
		s.putString(shard.LockKey(sl), []byte(v), 0)
	}
	var results []Result
	if r.eval {
		results, r.eval = s.evalPrepared(r)
	}
	s.putString(op.Key, r.encode(), 0)
	s.opSAdd(Op{Kind: "sadd", Key: shard.PreparedKey, Args: [][]byte{[]byte(id)}})
	if r.eval {
		return Array(results...)
	}
	return OK()
}

// EvalPrepare is the word after the coordinator group in a writing
// transaction's txprepare whose results the coordinator wants at the
// prepare, to answer its client at the commit decision (shard/txn,
// "Answering at the decision").
const EvalPrepare = "eval"

// evalMaxElems bounds the collection elements a prepare evaluates over: a
// transaction on larger collections answers after its commits (the
// scratch copies a collection before it writes it, on every replica).
const evalMaxElems = 4096

// evalPrepared evaluates a prepared transaction's operations at its
// prepare: on a scratch state holding the entries of the keys they name,
// at the prepare's time and environment, the ones its commit applies them
// with (applyAt). Until the commit the slots are locked: no request
// changes those keys (the slot guards refuse them, active expiry passes
// over them), so the commit's results are these. ok false, and nothing
// evaluated, when an operation is not one whose results depend on its
// keys and environment (a script, the keyspace, versions, SPOP, which
// draws from the state's version, reserved keys) or the
// collections are over evalMaxElems.
func (s *KVState) evalPrepared(r txRecord) ([]Result, bool) {
	scratch := newKVState()
	scratch.clock = s.clock
	elems := 0
	for _, o := range r.ops {
		if o.Kind == GuardKind {
			continue
		}
		if k := kvOps[o.Kind]; k.keyspace || o.Kind == "eval" || o.Kind == "version" || o.Kind == "spop" || o.Kind == "slotdirty" || strings.HasPrefix(o.Kind, "tx") {
			return nil, false
		}
		for _, l := range (KV{}).Locks(o) {
			if shard.Reserved(l.Key) {
				return nil, false
			}
			e, ok := s.m[l.Key]
			if _, copied := scratch.m[l.Key]; !ok || copied {
				continue
			}
			if e.c != nil {
				if elems += e.c.size(); elems > evalMaxElems {
					return nil, false
				}
			}
			// Shared: the scratch's token is its own, so it copies a
			// collection before changing it, and it is dropped before
			// s changes anything.
			scratch.m[l.Key] = e
			if e.exp != 0 {
				scratch.setExp(l.Key, e.exp)
			}
		}
	}
	out := make([]Result, len(r.ops))
	for i, o := range r.ops {
		if o.Kind == GuardKind {
			out[i] = OK()
			continue
		}
		out[i] = scratch.applyAt(o, r.env.For(i+1), r.now)
	}
	return out, true
}

// applyAt applies op as ApplyEnv would with environment env at time now
// (ms), without moving the state's clock: a transaction evaluated at its
// prepare is applied at its commit at the prepare's time (a key that
// expired meanwhile is as it was then: Redis, too, stops the clock for
// a MULTI/EXEC).
func (s *KVState) applyAt(op Op, env Env, now int64) Result {
	s.env, s.timed, s.now = env, env.Time > 0, now
	return s.runOp(kvOps[op.Kind], op)
}

// release drops transaction id's record and the locks it holds.
func (s *KVState) release(key string, r txRecord) {
	id := []byte(shard.TxID(key))
	for _, sl := range r.slots {
		e, ok := s.live(shard.LockKey(sl))
		if !ok {
			continue
		}
		if rest, sh := strings.CutPrefix(string(e.v), sharedLock); sh {
			var keep []string
			for _, h := range strings.Split(rest, ",") {
				if h != string(id) {
					keep = append(keep, h)
				}
			}
			if len(keep) == 0 {
				s.del(shard.LockKey(sl))
			} else {
				s.putString(shard.LockKey(sl), []byte(sharedLock+strings.Join(keep, ",")), 0)
			}
		} else if string(e.v) == string(id) {
			s.del(shard.LockKey(sl))
		}
	}
	s.del(key)
	s.opSRem(Op{Kind: "srem", Key: shard.PreparedKey, Args: [][]byte{id}})
}

// opTxCommit applies the prepared transaction's operations in order (as
// an atomic group would: guards were checked at prepare and answer OK),
// marks the written keys dirty for a migration, releases its locks, and
// answers the array of the operations' results. Nil: no such prepared
// transaction (already committed or aborted), nothing applied.
func (s *KVState) opTxCommit(op Op) Result {
	e, ok := s.live(op.Key)
	if !ok {
		return Nil()
	}
	r, err := decodeTxRecord(e.v)
	if err != nil {
		return Errorf("ERR txcommit: bad record: %v", err)
	}
	env := s.env
	s.release(op.Key, r)
	ops := r.ops
	for _, a := range op.Args {
		ops = append(ops, DecodeOp(wire.NewDecoder(a)))
	}
	out := make([]Result, len(ops))
	for i, o := range ops {
		if o.Kind == GuardKind {
			out[i] = OK()
			continue
		}
		if r.eval && i < len(r.ops) {
			out[i] = s.applyAt(o, r.env.For(i+1), r.now)
		} else {
			out[i] = s.ApplyEnv(o, env.For(i+1))
		}
		if !(KV{}).IsRead(o) {
			for _, l := range (KV{}).Locks(o) {
				if l.Key != "" {
					s.opSlotDirty(Op{Kind: "slotdirty", Key: l.Key})
				}
			}
		}
	}
	s.env = env
	return Array(out...)
}

// opTxAbort releases the prepared transaction and applies nothing. Nil:
// no such prepared transaction.
func (s *KVState) opTxAbort(op Op) Result {
	e, ok := s.live(op.Key)
	if !ok {
		return Nil()
	}
	r, err := decodeTxRecord(e.v)
	if err != nil {
		return Errorf("ERR txabort: bad record: %v", err)
	}
	s.release(op.Key, r)
	return OK()
}

// opTxDecide records a decision once: the first txdecide of a transaction
// wins (the coordinator's commit or a resolver's abort, whichever its
// group's log orders first) and every txdecide answers the recorded one.
//
// The recorded value is the decision, then, for a computed transaction's
// commit, a newline and its writes (shard/txn.EncodeWrites).
func (s *KVState) opTxDecide(op Op) Result {
	if e, ok := s.live(op.Key); ok {
		return Bytes(e.v)
	}
	v := op.Args[0]
	if len(op.Args) > 1 && len(op.Args[1]) > 0 {
		v = append(append(append([]byte(nil), v...), '\n'), op.Args[1]...)
	}
	s.putString(op.Key, v, 0)
	return Bytes(v)
}

func (s *KVState) opTxForget(op Op) Result {
	if _, ok := s.live(op.Key); ok {
		s.del(op.Key)
		return Int(1)
	}
	return Int(0)
}

// opTxList answers the prepared transactions, each [id, coordinator
// group], by id.
func (s *KVState) opTxList(op Op) Result {
	_, c, _ := s.liveOf(shard.PreparedKey, tSet)
	var out []Result
	for _, id := range members(c) {
		coord := ""
		if e, ok := s.live(shard.TxKey(id)); ok {
			if r, err := decodeTxRecord(e.v); err == nil {
				coord = r.coord
			}
		}
		out = append(out, Array(Bytes([]byte(id)), Bytes([]byte(coord))))
	}
	return Array(out...)
}

// SharedPrepare is the word after the coordinator group in a read-only
// transaction's txprepare: its locks are shared.
const SharedPrepare = "shared"

// sharedLock begins a slot lock's value held by read-only transactions
// (their ids follow, comma-separated).
const sharedLock = "r:"

// writeLocked reports whether key's slot is held by a writing
// transaction (an exclusive lock).
func (s *KVState) writeLocked(key string) bool {
	e, ok := s.m[shard.LockKey(shard.KeySlot(key))]
	return ok && !strings.HasPrefix(string(e.v), sharedLock)
}

// slotLocked is the slot guard's lock check: the transaction(s) holding
// the slot of state key key, if any, for a request of mode (a read passes
// a shared lock).
func (s *KVState) slotLocked(key, mode string) (string, bool) {
	sl := shard.SlotOfStateKey(key)
	if sl < 0 {
		return "", false
	}
	if e, ok := s.live(shard.LockKey(sl)); ok {
		if mode == shard.ModeRead && strings.HasPrefix(string(e.v), sharedLock) {
			return "", false
		}
		return string(e.v), true
	}
	return "", false
}
