// Package registry is a name -> value table filled from init functions: the
// protocols and the services register themselves in one.
package registry

import (
	"fmt"
	"sort"
)

// Registry holds values of one kind ("protocol", "service") by name.
type Registry[T any] struct {
	kind string
	m    map[string]T
}

// New returns an empty registry; kind names the values in error messages.
func New[T any](kind string) *Registry[T] { return &Registry[T]{kind: kind, m: map[string]T{}} }

// Register adds v under name. It panics on a duplicate: registration happens in
// init, and two packages claiming one name is a programming error.
func (r *Registry[T]) Register(name string, v T) {
	if _, dup := r.m[name]; dup {
		panic(fmt.Sprintf("%s %q registered twice", r.kind, name))
	}
	r.m[name] = v
}

// Lookup returns the value registered under name.
func (r *Registry[T]) Lookup(name string) (T, error) {
	v, ok := r.m[name]
	if !ok {
		return v, fmt.Errorf("unknown %s %q (known: %v)", r.kind, name, r.Names())
	}
	return v, nil
}

// Names lists the registered names, sorted.
func (r *Registry[T]) Names() []string {
	out := make([]string, 0, len(r.m))
	for n := range r.m {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}
