package automaton

// TermReporter is implemented by automata that run in terms, ballots or
// views (Paxos's ballot, a primary-backup view): Term is the highest one this
// replica has seen, as a number that only grows. Runtimes export it as a
// metric (node/metrics.go: synod_term) next to the leader hint of
// LeaderReporter. Loop goroutine only, like Step.
type TermReporter interface {
	Term() uint64
}
