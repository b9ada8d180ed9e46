package orca

import (
	"fmt"
	"math/rand"
	"sort"
	"strings"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Value is the encapsulated data of one object instance (the "local
// variables" of an abstract data type's implementation part, the Orca paper §2).
// Encode writes it in a canonical form: two values that encode alike are
// equal, which is how a read operation that changed its object is caught.
type Value interface {
	Encode(e *wire.Encoder)
}

// Operation declares one operation of an object type (the specification
// part, the Orca paper §2): whether it writes, its guard, and its code.
type Operation struct {
	// Write is false for a read: an operation that "does not change the
	// internal data of the object it is applied to" (§2). The declaration
	// is checked, not trusted: Service.CheckReads compares the object's
	// encoding before and after every read and turns a change into an error.
	Write bool
	// Guard, when set, must hold before the operation runs; until it does
	// the operation blocks (a job queue's get on an empty queue). Guards
	// are not in the Orca paper (see the package doc): they come from Orca's
	// language papers, its references [10, 12].
	Guard func(v Value, args [][]byte) bool
	// Do applies the operation indivisibly and returns its result. A
	// write may change v in place; a read must not.
	Do func(v Value, args [][]byte) service.Result
	// Arity is the number of arguments (-1: any).
	Arity int
}

// Type is an abstract data type: its name, how an instance is created and
// decoded, and its operations.
type Type struct {
	Name string
	// New creates an instance from the creation arguments.
	New func(args [][]byte) (Value, error)
	// Decode reads an instance written by Value.Encode.
	Decode func(d *wire.Decoder) Value
	Ops    map[string]Operation
	// Sim, when set, lets the simulator's random clients drive objects of
	// this type (`synod-lab sim --service orca`, checked for sequential
	// consistency by the service itself: sim.go).
	Sim *TypeSim
}

// TypeSim tells the simulator how to draw operations on a type's objects.
// Each draw uses r alone for randomness, so a seed replays the run.
type TypeSim struct {
	// Mix weighs the type's operations, "op:weight,...", "new" included
	// (creation: an object exists only once some client created it).
	Mix string
	// New draws creation arguments (after the type name).
	New func(r *rand.Rand) [][]byte
	// Args draws an operation's arguments; client and n (the client's
	// index and operation count) make written values unique, so that a
	// read identifies the write it saw.
	Args func(op string, r *rand.Rand, client, n int) [][]byte
}

// OpNames lists the type's operations, sorted.
func (t *Type) OpNames() []string {
	out := make([]string, 0, len(t.Ops))
	for n := range t.Ops {
		out = append(out, n)
	}
	sort.Strings(out)
	return out
}

// Types is a set of object types by name.
type Types map[string]*Type

// NewTypes collects types.
func NewTypes(ts ...*Type) Types {
	m := Types{}
	for _, t := range ts {
		if strings.Contains(t.Name, ".") {
			panic(fmt.Sprintf("orca: type name %q contains a dot", t.Name))
		}
		m[t.Name] = t
	}
	return m
}

// KindNew creates a named instance: Op{Kind: "new", Key: name, Args: [type, args...]}.
const KindNew = "new"

// Kind returns the operation kind naming operation op of type t ("intobj.inc").
func Kind(t, op string) string { return t + "." + op }

// SplitKind splits an operation kind into type and operation.
func SplitKind(kind string) (typ, op string, ok bool) { return strings.Cut(kind, ".") }

// Call builds the service operation applying op of type typ to object name.
func Call(typ, name, op string, args ...[]byte) service.Op {
	return service.Op{Kind: Kind(typ, op), Key: name, Args: args}
}

// New builds the service operation creating object name of type typ.
func New(typ, name string, args ...[]byte) service.Op {
	return service.Op{Kind: KindNew, Key: name, Args: append([][]byte{[]byte(typ)}, args...)}
}
