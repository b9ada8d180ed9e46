package service

import "fmt"

// Cloner is a State that copies itself more cheaply than Snapshot plus
// Restore (KVState's Clone shares values and copies on write). The copy
// must be independent: applying operations to either side never changes
// the other. Clone may write to the state it copies (KVState's gives both
// sides new ownership tokens), so two goroutines must not clone one state
// at once: the model checker, which expands one parent on several
// workers, copies by Snapshot and Restore instead (protocol/paxos
// modelstate.go).
type Cloner interface {
	Clone() State
}

// CloneState returns an independent copy of st, a state of svc: its Clone
// when it is a Cloner, else a new state restored from st's snapshot. Every
// protocol and checker that keeps a second copy of a state (a model
// checker's successor, a tentative or speculative state, a checker's
// search) copies it here, so a service gets the cheap path by implementing
// Cloner once.
func CloneState(svc Service, st State) (State, error) {
	if c, ok := st.(Cloner); ok {
		return c.Clone(), nil
	}
	n := svc.NewState()
	if err := n.Restore(st.Snapshot()); err != nil {
		return nil, fmt.Errorf("service: a state does not restore its own snapshot: %w", err)
	}
	return n, nil
}
