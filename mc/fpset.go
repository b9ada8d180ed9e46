package mc

import (
	"sync"
	"sync/atomic"
)

// fpSet is a concurrent set of 64-bit fingerprints (the visited set of
// both searches, search.go and actor.go): 256 shards, each an open-
// addressing table of bare uint64s with linear probing, grown at 3/4
// load. A fingerprint costs 8-16 bytes and one uncontended lock, where a
// Go map[uint64]struct{} costs about 40 bytes and a hash of its own.
// Fingerprint 0 is stored as 1 (0 marks an empty slot).
type fpSet struct {
	shards [256]fpShard
	n      atomic.Int64
}

type fpShard struct {
	mu  sync.Mutex
	tab []uint64
	n   int
	_   [40]byte // keep shards on their own cache lines
}

// insert adds fp and reports whether it was new.
func (s *fpSet) insert(fp uint64) bool {
	if fp == 0 {
		fp = 1
	}
	sh := &s.shards[fp>>56]
	sh.mu.Lock()
	if sh.tab == nil {
		sh.tab = make([]uint64, 64)
	}
	if !sh.put(fp) {
		sh.mu.Unlock()
		return false
	}
	sh.n++
	if sh.n*4 > len(sh.tab)*3 {
		old := sh.tab
		sh.tab = make([]uint64, 2*len(old))
		for _, x := range old {
			if x != 0 {
				sh.put(x)
			}
		}
	}
	sh.mu.Unlock()
	s.n.Add(1)
	return true
}

// has reports whether fp is in the set.
func (s *fpSet) has(fp uint64) bool {
	if fp == 0 {
		fp = 1
	}
	sh := &s.shards[fp>>56]
	sh.mu.Lock()
	defer sh.mu.Unlock()
	if sh.tab == nil {
		return false
	}
	mask := uint64(len(sh.tab) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch sh.tab[i] {
		case 0:
			return false
		case fp:
			return true
		}
	}
}

// put places fp in the table (which has a free slot) unless present.
func (sh *fpShard) put(fp uint64) bool {
	mask := uint64(len(sh.tab) - 1)
	for i := fp & mask; ; i = (i + 1) & mask {
		switch sh.tab[i] {
		case 0:
			sh.tab[i] = fp
			return true
		case fp:
			return false
		}
	}
}

// len is the number of fingerprints in the set.
func (s *fpSet) len() int64 { return s.n.Load() }

// bytes is the memory the tables hold.
func (s *fpSet) bytes() int64 {
	var b int64
	for i := range s.shards {
		s.shards[i].mu.Lock()
		b += int64(8 * len(s.shards[i].tab))
		s.shards[i].mu.Unlock()
	}
	return b
}
