package automaton

// TermReporter is implemented by automata that run in terms, ballots or
// views (Paxos's ballot, a primary-backup view): Term is the highest one this
// replica has seen, as a number that only grows. Runtimes export it as a
// metric (node/metrics.go: synod_term) next to the leader hint of
// LeaderReporter. Loop goroutine only, like Step.
type TermReporter interface {
	Term() uint64
}

// RoundReporter is implemented by automata that begin client requests
// together in round groups (ABD: protocol/abd/batch.go): a group's
// requests share one round of peer messages, so the requests per group
// decide the messages per request. Runtimes export the counts as a
// histogram (node: synod_round_group_requests). Loop goroutine only,
// like Step (a runtime reads it between steps).
type RoundReporter interface {
	RoundGroups() RoundGroups
}

// RoundGroups counts the round groups an automaton began, by how they
// began: OnArrival, by requests that found fewer groups in flight than
// its window allows; FromQueue, by requests that waited for a group to
// end.
type RoundGroups struct {
	OnArrival, FromQueue GroupSizes
}

// GroupSizeBounds are the upper bounds of GroupSizes.Buckets: a group of
// n requests counts in the first bucket whose bound is at least n, the
// last bucket taking the rest.
var GroupSizeBounds = [...]uint64{1, 2, 4, 8, 16, 32, 64, 128}

// GroupSizes counts groups and their requests.
type GroupSizes struct {
	Groups, Requests uint64
	// Buckets[i]: groups of at most GroupSizeBounds[i] requests and more
	// than the bound before (not cumulative); the last one, the rest.
	Buckets [len(GroupSizeBounds) + 1]uint64
}

// Add counts a group of n requests.
func (g *GroupSizes) Add(n int) {
	g.Groups++
	g.Requests += uint64(n)
	i := 0
	for i < len(GroupSizeBounds) && uint64(n) > GroupSizeBounds[i] {
		i++
	}
	g.Buckets[i]++
}
