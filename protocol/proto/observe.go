package proto

import "sync"

// Observation hooks for experiments. A protocol that lets an experiment
// watch its automata declares a String parameter (by convention "observe")
// naming a Recorder, registered beforehand by the experiment in the
// protocol's Recorders; the automaton looks the name up in New (an unknown
// name is an error) and, when it has a recorder, calls Emit where the
// observed action happens. Observation only: nothing an automaton does may
// depend on it, and without the parameter nothing is called, so behaviour
// and simulation digests are unchanged. An automaton has no clock: a caller
// that wants times stamps the events itself (the simulator's trace gives
// the virtual time of the step in progress).

// Recorder receives the events E of the automata whose observe parameter
// names it. OnEvent, set before the run, is called for every event from the
// step that caused it, under the recorder's lock (the simulator steps one
// node at a time; live nodes emit concurrently).
type Recorder[E any] struct {
	mu      sync.Mutex
	OnEvent func(E)
}

// Emit reports one event (nothing when OnEvent is unset).
func (r *Recorder[E]) Emit(e E) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.OnEvent != nil {
		r.OnEvent(e)
	}
}

// Recorders is one protocol's table of named recorders (its zero value is
// ready). Names are process-wide for that protocol: experiments pick unique
// ones.
type Recorders[E any] struct{ m sync.Map }

// New registers a recorder under name, replacing any, and returns it.
func (rs *Recorders[E]) New(name string) *Recorder[E] {
	r := &Recorder[E]{}
	rs.m.Store(name, r)
	return r
}

// Drop forgets the recorder of name.
func (rs *Recorders[E]) Drop(name string) { rs.m.Delete(name) }

// Lookup returns the recorder of name, nil if none.
func (rs *Recorders[E]) Lookup(name string) *Recorder[E] {
	v, _ := rs.m.Load(name)
	r, _ := v.(*Recorder[E])
	return r
}
