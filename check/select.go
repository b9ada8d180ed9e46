package check

import (
	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/history"
)

// Checker judges a history against one consistency model.
type Checker func(h *history.History, opts Options) (*Report, error)

// For returns the checker of a consistency model: Porcupine's
// linearizability check, or the sequential-consistency search. (The
// eventually-serializable model needs the replicas' final orders besides the
// history: see ESDS.)
func For(guarantee automaton.Consistency) Checker {
	if guarantee == automaton.Sequential {
		return Sequential
	}
	return Linearizable
}

// ForHistory returns the checker for a history recorded under a protocol
// of the given model: a history holding transactions or atomic groups is
// judged for serializability of its committed units (strict
// serializability when the protocol is linearizable); otherwise For(model).
//
// A history of the nondeterministic Matchmaker (its recorded service, meta
// "service") is judged by MatchmakerFor.
func ForHistory(guarantee automaton.Consistency, h *history.History) Checker {
	if h.Meta["service"] == "matchmaker" {
		return MatchmakerFor
	}
	for _, op := range h.Ops {
		if op.IsTxn() {
			if guarantee == automaton.Linearizable {
				return StrictSerializable
			}
			return Serializable
		}
	}
	return For(guarantee)
}
