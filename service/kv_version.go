package service

import (
	"fmt"
	"strconv"
	"strings"
)

// Per-key versions and guards (Redis's WATCH; package documentation,
// "Per-key versions"): a present key's version is its generation; an
// absent key's is the version it had at its deletion while the state
// remembers it (wt), and never less than gone. The proof that a guard
// cannot pass a changed key is in the package documentation.

func init() {
	addKVOps(map[string]kvOp{
		"version": {read: true, run: (*KVState).opVersion},
		GuardKind: {read: true, min: 2, max: 2, check: checkGuard, run: (*KVState).opGuard},
	})
}

// KeyVersion returns key's write version at the operation's time. An
// expired key not yet removed answers its generation plus one (its expiry
// is a change), the version its removal will give it.
func (s *KVState) KeyVersion(key string) uint64 {
	if e, ok := s.m[key]; ok {
		if e.exp != 0 && e.exp <= s.now {
			return e.gen + 1
		}
		return e.gen
	}
	return s.absentVersion(key)
}

// absentVersion is the version of a key the map does not hold.
func (s *KVState) absentVersion(key string) uint64 { return max(s.wt[key], s.gone) }

// forget records that key, whose version is now v, was deleted; when more
// than tombLimit deleted keys would be remembered, all are forgotten at
// once and gone takes the largest of their versions (a flush depends only
// on the history, so replicas flush alike; an oldest-first eviction would
// depend on the order each replica learnt the deletions in).
func (s *KVState) forget(key string, v uint64) {
	s.ownWT()
	s.wt[key] = v
	if len(s.wt) > s.tombLimit {
		s.flushWT()
	}
}

// flushWT forgets every deleted key's version into gone.
func (s *KVState) flushWT() {
	for _, v := range s.wt {
		s.gone = max(s.gone, v)
	}
	s.wt, s.wtShared, s.wflush = nil, false, s.version
}

func (s *KVState) opVersion(op Op) Result { return Int(int64(s.KeyVersion(op.Key))) }

func checkGuard(op Op) error {
	switch strings.ToLower(string(op.Args[0])) {
	case "version":
		if _, err := strconv.ParseUint(string(op.Args[1]), 10, 64); err != nil {
			return fmt.Errorf(errNotInt)
		}
		return nil
	case "exists":
		if a := string(op.Args[1]); a == "0" || a == "1" {
			return nil
		}
	case "slot": // slot migration's ownership check (kv_slots.go)
		return nil
	}
	return fmt.Errorf(errSyntax)
}

// opGuard is "guard version v" (the key's version is v) and "guard exists
// 0|1": OK when the condition holds, a GUARDFAILED error otherwise.
func (s *KVState) opGuard(op Op) Result {
	if strings.ToLower(string(op.Args[0])) == "slot" {
		return s.slotGuard(op) // kv_slots.go
	}
	if strings.ToLower(string(op.Args[0])) == "version" {
		want, _ := strconv.ParseUint(string(op.Args[1]), 10, 64)
		if v := s.KeyVersion(op.Key); v != want {
			return GuardFailure(fmt.Sprintf("key %q changed (version %d, watched %d)", op.Key, v, want))
		}
		return OK()
	}
	_, ok := s.live(op.Key)
	if ok != (string(op.Args[1]) == "1") {
		return GuardFailure(fmt.Sprintf("key %q exists: %v", op.Key, ok))
	}
	return OK()
}
