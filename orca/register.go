package orca

import (
	"fmt"
	"maps"
	"slices"
	"strings"
)

// RegisterType adds a user's object type to the types every orca
// namespace serves (Builtin: the service "orca" registered by this
// package holds that map, and so do the Orca runtimes' simulated worlds).
// Call it from init or before synod.Main, never while a node runs: the
// registry is read without a lock. A node process started by `synod
// cluster up` runs the same binary, so it registers the same types.
//
// It refuses a type it could not serve: no name, a name with a dot (an
// operation's kind is "<type>.<op>") or "new", a missing New or Decode,
// an operation without Do or with a dot in its name, or a name already
// registered (a built-in one included).
func RegisterType(t *Type) error {
	if err := checkType(t); err != nil {
		return err
	}
	if _, dup := Builtin[t.Name]; dup {
		return fmt.Errorf("orca: object type %q registered twice", t.Name)
	}
	Builtin[t.Name] = t
	return nil
}

func checkType(t *Type) error {
	switch {
	case t == nil:
		return fmt.Errorf("orca: nil object type")
	case t.Name == "" || t.Name == KindNew || strings.ContainsAny(t.Name, ". \t\n"):
		return fmt.Errorf("orca: object type name %q: want a word without dots or spaces, not %q", t.Name, KindNew)
	case t.New == nil || t.Decode == nil:
		return fmt.Errorf("orca: object type %q needs New and Decode", t.Name)
	case len(t.Ops) == 0:
		return fmt.Errorf("orca: object type %q has no operations", t.Name)
	}
	for name, o := range t.Ops {
		if name == "" || strings.ContainsAny(name, ". \t\n") {
			return fmt.Errorf("orca: object type %q: operation name %q", t.Name, name)
		}
		if o.Do == nil {
			return fmt.Errorf("orca: object type %q: operation %q has no Do", t.Name, name)
		}
		if o.Arity < -1 {
			return fmt.Errorf("orca: object type %q: operation %q: arity %d (want -1 or more)", t.Name, name, o.Arity)
		}
	}
	return nil
}

// TypeNames lists the types orca namespaces serve, sorted.
func TypeNames() []string { return slices.Sorted(maps.Keys(Builtin)) }
