package service

import "sort"

// Locking for interactive transactions (the Grid Services thesis VI.A.4: "any service that
// supports transactions needs to deal with concurrency of this type using
// locks or other mechanisms").
//
// A service whose operations name the objects they touch implements
// Lockable: Locks(op) lists them, each shared (the operation only reads it)
// or exclusive (it may write it). The granularity is the service's: one
// lock per account for Bank, one per key for KV (kv_lock.go). A protocol
// that runs transactions (T-Paxos, protocol/pbpaxos) keeps a LockTable
// beside the state and acquires an operation's locks before it runs the
// operation for a transaction: strict two-phase locking, every lock held
// until the transaction commits or aborts.
//
// Deadlock is avoided by no-wait: a request that conflicts with a lock
// another owner holds is refused at once (Acquire reports the holders), and
// the caller aborts the requesting transaction. Nothing ever waits, so no
// cycle of waiters can form; the price is aborts under contention, which
// the seed accepts ("the client ... can rollback and discard the data if
// the transaction is aborted"). Wait-die was not chosen because waiting
// needs queued operations at the leader and answers that are not immediate,
// against T-Paxos's "reply to each client request immediately".

// Lock names one object an operation touches and whether it may write it.
type Lock struct {
	Key   string
	Write bool
}

// Lockable is implemented by services whose operations can run in
// transactions under locks.
type Lockable interface {
	// Locks returns the objects op touches (its key and any others it
	// names), each once, exclusive when op may change it.
	Locks(op Op) []Lock
}

// StateFree is implemented by services some of whose operations answer
// the same result in every state (KV: a plain SET answers OK whatever the
// key held). A replica that computes results over a state it must first
// bring up to date (protocol/esds's tentative state) answers such an
// operation without doing so. StateFreeResult returns op's result and
// true only when every state gives op that result.
type StateFree interface {
	StateFreeResult(op Op) (Result, bool)
}

// LocksOf returns svc's locks for op, or ok=false when svc is not
// Lockable.
func LocksOf(svc Service, op Op) ([]Lock, bool) {
	l, ok := svc.(Lockable)
	if !ok {
		return nil, false
	}
	return l.Locks(op), true
}

// LockTable is a strict two-phase lock table with no-wait conflict
// handling, for owners of any comparable type (a transaction id).
type LockTable[O comparable] struct {
	held  map[string]*lockEntry[O]
	owned map[O]map[string]bool
}

type lockEntry[O comparable] struct {
	writer  O
	writing bool
	readers map[O]bool
}

// NewLockTable returns an empty table.
func NewLockTable[O comparable]() *LockTable[O] {
	return &LockTable[O]{held: map[string]*lockEntry[O]{}, owned: map[O]map[string]bool{}}
}

// Conflicts returns the owners other than o holding a lock that conflicts
// with ls (sorted by nothing in particular; callers must not depend on the
// order beyond determinism of their own iteration).
func (t *LockTable[O]) Conflicts(o O, ls []Lock) []O {
	seen := map[O]bool{}
	var out []O
	add := func(x O) {
		if x != o && !seen[x] {
			seen[x] = true
			out = append(out, x)
		}
	}
	for _, l := range ls {
		e := t.held[l.Key]
		if e == nil {
			continue
		}
		if e.writing {
			add(e.writer)
		}
		if l.Write {
			keys := make([]O, 0, len(e.readers))
			for r := range e.readers {
				keys = append(keys, r)
			}
			for _, r := range keys {
				add(r)
			}
		}
	}
	return out
}

// Acquire grants o every lock of ls, or none: when another owner holds a
// conflicting lock it changes nothing and returns false with the holders
// (no-wait). A lock o already holds is kept; a shared lock o holds is
// upgraded when it is the only reader.
func (t *LockTable[O]) Acquire(o O, ls []Lock) ([]O, bool) {
	if c := t.Conflicts(o, ls); len(c) > 0 {
		return c, false
	}
	for _, l := range ls {
		e := t.held[l.Key]
		if e == nil {
			e = &lockEntry[O]{readers: map[O]bool{}}
			t.held[l.Key] = e
		}
		if l.Write {
			e.writer, e.writing = o, true
			delete(e.readers, o)
		} else if !(e.writing && e.writer == o) {
			e.readers[o] = true
		}
		if t.owned[o] == nil {
			t.owned[o] = map[string]bool{}
		}
		t.owned[o][l.Key] = true
	}
	return nil, true
}

// Release drops every lock o holds (its commit or abort).
func (t *LockTable[O]) Release(o O) {
	for k := range t.owned[o] {
		e := t.held[k]
		if e == nil {
			continue
		}
		if e.writing && e.writer == o {
			var zero O
			e.writer, e.writing = zero, false
		}
		delete(e.readers, o)
		if !e.writing && len(e.readers) == 0 {
			delete(t.held, k)
		}
	}
	delete(t.owned, o)
}

// Held returns the keys o holds, sorted (for tests and dumps).
func (t *LockTable[O]) Held(o O) []string {
	out := make([]string, 0, len(t.owned[o]))
	for k := range t.owned[o] {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}

// Len returns the number of locked keys.
func (t *LockTable[O]) Len() int { return len(t.held) }
