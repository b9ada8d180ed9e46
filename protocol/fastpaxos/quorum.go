package fastpaxos

import (
	"bytes"
	"fmt"
)

// Quorums (package doc, "Quorums"): Lamport's Fast Paxos requirements,
// which the Grid Services thesis chapter V leaves implicit behind Table V.1's 3t+1 and
// 2t+1.
type quorums struct {
	n, classic, fast int
}

// defaultQuorums derives the sizes from n acceptors: the fast quorum is
// the seed's 2t+1 for n = 3t+1, that is ceil((2n+1)/3), and the classic
// quorum the smallest that is a majority and meets q + 2f > 2n with it.
// n=3: 2 and 3; n=4: 3 and 3; n=5: 3 and 4; n=7: 5 and 5.
func defaultQuorums(n int) quorums {
	f := (2*n + 1 + 2) / 3
	if f > n {
		f = n
	}
	c := n/2 + 1
	if m := 2*n - 2*f + 1; m > c {
		c = m
	}
	return quorums{n: n, classic: c, fast: f}
}

// validate checks the Fast Paxos quorum requirement: any two classic
// quorums intersect (2q > n), and any classic quorum and any two fast
// quorums have an acceptor in common (q + 2f > 2n), which also makes any two
// fast quorums intersect.
func (q quorums) validate() error {
	switch {
	case q.classic < 1 || q.classic > q.n:
		return fmt.Errorf("fastpaxos: classic_quorum %d out of [1, %d]", q.classic, q.n)
	case q.fast < 1 || q.fast > q.n:
		return fmt.Errorf("fastpaxos: fast_quorum %d out of [1, %d]", q.fast, q.n)
	case 2*q.classic <= q.n:
		return fmt.Errorf("fastpaxos: classic_quorum %d: two classic quorums of %d acceptors need not intersect (want 2q > n)", q.classic, q.n)
	case q.classic+2*q.fast <= 2*q.n:
		return fmt.Errorf("fastpaxos: classic_quorum %d, fast_quorum %d: a classic quorum and two fast quorums of %d acceptors need not intersect (want q + 2f > 2n = %d)", q.classic, q.fast, q.n, 2*q.n)
	}
	return nil
}

// of is the quorum size of round b: fast or classic.
func (q quorums) of(b Ballot) int {
	if isFast(b) {
		return q.fast
	}
	return q.classic
}

// report is one acceptor's phase 1b for an instance (a zero bal: no vote),
// or its phase 2b of the fast round, which serves as a 1b of the recovery
// round right after it (coordinated recovery).
type report struct {
	acc int
	bal Ballot
	val []byte
}

// pick is Lamport's rule for the value a coordinator may propose in a new
// round, given the 1b reports of a classic quorum (Fast Paxos, section
// 3.3; the Grid Services thesis V.C's worked example). Let k be the highest round voted in.
// No vote: any value (the no-op). k classic: the value voted in k. k fast:
// the value v that might have been chosen in k, that is voted in k by at
// least fast - (n - |Q|) reporters (a fast quorum whose members inside Q all
// voted v); the quorum requirement makes it unique. None: a value voted in
// k, the one with the most votes (ties: the lowest-numbered acceptor's), so
// that a request already voted for is not dropped for a no-op.
//
// ignoreRule is fastpaxos-broken-recovery's pick: the value of the
// highest-numbered reporter, whatever the counts.
func (q quorums) pick(rs []report, ignoreRule bool) []byte {
	var k Ballot
	for _, r := range rs {
		if k.Less(r.bal) {
			k = r.bal
		}
	}
	if k.IsZero() {
		return noop
	}
	type tally struct {
		val   []byte
		count int
		first int
	}
	var ts []*tally
	last := -1
	var lastVal []byte
	for _, r := range rs {
		if r.bal != k {
			continue
		}
		if r.acc > last {
			last, lastVal = r.acc, r.val
		}
		found := false
		for _, t := range ts {
			if bytes.Equal(t.val, r.val) {
				t.count++
				t.first = min(t.first, r.acc)
				found = true
				break
			}
		}
		if !found {
			ts = append(ts, &tally{val: r.val, count: 1, first: r.acc})
		}
	}
	if ignoreRule {
		return lastVal
	}
	if !isFast(k) {
		return ts[0].val // one value per classic round
	}
	need := q.fast - (q.n - len(rs))
	best := ts[0]
	for _, t := range ts {
		if t.count >= need && need > 0 {
			return t.val
		}
		if t.count > best.count || (t.count == best.count && t.first < best.first) {
			best = t
		}
	}
	return best.val
}
