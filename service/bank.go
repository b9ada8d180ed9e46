package service

import (
	"fmt"
	"maps"
	"sort"
	"strconv"

	"github.com/synod-dev/synod/wire"
)

// Bank is a set of accounts holding integer balances: the transactional
// service of the Grid Services thesis VI.A.4's T-Paxos experiments, with per-account locks
// (Lockable) so that interactive transactions run under strict two-phase
// locking.
//
// Operations (Key is the account; Args as listed; amounts are positive
// decimal integers):
//
//	balance              -> int: the balance (0 for an account never used)
//	deposit  amount      -> int: the new balance
//	withdraw amount      -> int: the new balance; error when it would go below 0
//	transfer to amount   -> int: the source's new balance; error when the
//	                        source lacks the funds or names itself
//
// An error changes nothing. Money is created only by deposit and destroyed
// only by withdraw, so transfers conserve the sum of the balances.
type Bank struct{}

func init() { Register(Bank{}) }

// Name implements Service.
func (Bank) Name() string { return "bank" }

// Validate implements Service.
func (Bank) Validate(op Op) error {
	if op.Key == "" {
		return fmt.Errorf("bank: an operation names an account")
	}
	if len(op.Key) > MaxKeySize {
		return fmt.Errorf("key too large (%d bytes, limit %d)", len(op.Key), MaxKeySize)
	}
	amount := func(b []byte) error {
		n, err := strconv.ParseInt(string(b), 10, 64)
		if err != nil || n <= 0 {
			return fmt.Errorf("bank: amount %q is not a positive integer", b)
		}
		return nil
	}
	switch op.Kind {
	case "balance":
		return arity(op, 0)
	case "deposit", "withdraw":
		if err := arity(op, 1); err != nil {
			return err
		}
		return amount(op.Args[0])
	case "transfer":
		if err := arity(op, 2); err != nil {
			return err
		}
		if len(op.Args[0]) == 0 || len(op.Args[0]) > MaxKeySize {
			return fmt.Errorf("bank: bad destination account")
		}
		return amount(op.Args[1])
	}
	return fmt.Errorf("unknown bank operation %q", op.Kind)
}

// IsRead implements Service.
func (Bank) IsRead(op Op) bool { return op.Kind == "balance" }

// NewState implements Service.
func (Bank) NewState() State { return &BankState{acct: map[string]bankAcct{}} }

// Locks implements Lockable: one lock per account named, exclusive for
// every operation but balance.
func (b Bank) Locks(op Op) []Lock {
	ls := []Lock{{Key: op.Key, Write: !b.IsRead(op)}}
	if op.Kind == "transfer" && len(op.Args) == 2 && string(op.Args[0]) != op.Key {
		ls = append(ls, Lock{Key: string(op.Args[0]), Write: true})
	}
	return ls
}

// BankState is a Bank replica's state. It is a DeltaState (each account
// remembers the version of its last change; accounts are never removed)
// and can be cloned.
type BankState struct {
	acct    map[string]bankAcct
	version uint64
	floor   uint64 // the Restore baseline: Delta serves changes after it
}

type bankAcct struct {
	bal int64
	at  uint64
}

// Apply implements State.
func (s *BankState) Apply(op Op) Result {
	if err := (Bank{}).Validate(op); err != nil {
		return Errorf("ERR %v", err)
	}
	switch op.Kind {
	case "balance":
		return Int(s.acct[op.Key].bal)
	case "deposit":
		n, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		b := s.acct[op.Key].bal
		if b+n < b {
			return Errorf("ERR bank: balance would overflow")
		}
		s.set(op.Key, b+n)
		return Int(b + n)
	case "withdraw":
		n, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		b := s.acct[op.Key].bal
		if b < n {
			return Errorf("ERR bank: insufficient funds in %s", op.Key)
		}
		s.set(op.Key, b-n)
		return Int(b - n)
	case "transfer":
		to := string(op.Args[0])
		n, _ := strconv.ParseInt(string(op.Args[1]), 10, 64)
		if to == op.Key {
			return Errorf("ERR bank: transfer to the same account")
		}
		b, c := s.acct[op.Key].bal, s.acct[to].bal
		if b < n {
			return Errorf("ERR bank: insufficient funds in %s", op.Key)
		}
		if c+n < c {
			return Errorf("ERR bank: balance would overflow")
		}
		s.set(op.Key, b-n)
		s.set(to, c+n)
		return Int(b - n)
	}
	return Errorf("ERR unknown bank operation %q", op.Kind)
}

func (s *BankState) set(k string, v int64) {
	s.version++
	s.acct[k] = bankAcct{bal: v, at: s.version}
}

// Balance returns an account's balance (for tests).
func (s *BankState) Balance(k string) int64 { return s.acct[k].bal }

// Total returns the sum of the balances (for tests: transfers conserve it).
func (s *BankState) Total() int64 {
	var t int64
	for _, a := range s.acct {
		t += a.bal
	}
	return t
}

// Snapshot implements State: version, then the accounts in key order.
func (s *BankState) Snapshot() []byte {
	keys := make([]string, 0, len(s.acct))
	for k := range s.acct {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e := wire.Encoder{B: []byte{snapVersion}}
	e.Uvarint(s.version)
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Varint(s.acct[k].bal)
	}
	return e.B
}

// Restore implements State.
func (s *BankState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	ver, err := snapshotHeader(d, "bank")
	if err != nil {
		return err
	}
	n := d.Count(1<<40, 2)
	m := make(map[string]bankAcct, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		k := d.String()
		m[k] = bankAcct{bal: d.Varint()}
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("bank: bad snapshot: %w", err)
	}
	s.acct, s.version, s.floor = m, ver, ver
	return nil
}

// Clone returns an independent copy.
func (s *BankState) Clone() State {
	c := *s
	c.acct = maps.Clone(s.acct)
	if c.acct == nil {
		c.acct = map[string]bankAcct{}
	}
	return &c
}

// Version implements DeltaState.
func (s *BankState) Version() uint64 { return s.version }

// Delta implements DeltaState: every account changed after since, in key
// order, with its balance and the version of its change (O(accounts)).
func (s *BankState) Delta(since uint64) ([]byte, error) {
	if since > s.version || since < s.floor {
		return nil, fmt.Errorf("%w %d (bank state at %d can serve from %d)", ErrDeltaUnavailable, since, s.version, s.floor)
	}
	var keys []string
	for k, a := range s.acct {
		if a.at > since {
			keys = append(keys, k)
		}
	}
	sort.Strings(keys)
	e := wire.Encoder{B: []byte{deltaCodec}}
	e.Uvarint(since)
	e.Uvarint(s.version)
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Uvarint(s.acct[k].at)
		e.Varint(s.acct[k].bal)
	}
	return e.B, nil
}

// ApplyDelta implements DeltaState.
func (s *BankState) ApplyDelta(delta []byte) error {
	d := wire.NewDecoder(delta)
	if v := d.Byte(); v != deltaCodec && d.Err() == nil {
		return fmt.Errorf("%w: bank delta format %d", ErrDeltaMismatch, v)
	}
	since, to := d.Uvarint(), d.Uvarint()
	n := d.Count(1<<40, 3)
	type ent struct {
		k  string
		at uint64
		b  int64
	}
	ents := make([]ent, 0, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := ent{k: d.String(), at: d.Uvarint(), b: d.Varint()}
		if d.Err() == nil && (c.at <= since || c.at > to) {
			d.Fail(fmt.Errorf("account %q changed at %d, outside (%d, %d]", c.k, c.at, since, to))
		}
		ents = append(ents, c)
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("%w: bad bank delta: %v", ErrDeltaMismatch, err)
	}
	if err := versionsFit(s.version, since, to); err != nil {
		return err
	}
	for _, c := range ents {
		s.acct[c.k] = bankAcct{bal: c.b, at: c.at}
	}
	s.version = to
	return nil
}
