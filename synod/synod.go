// Package synod is Synod's public Go API: a user's own module imports it to
// add data types, Orca object types and parallel programs to Synod, and then
// runs Synod's whole command line with them:
//
//	package main
//
//	import "github.com/synod-dev/synod/synod"
//
//	func main() {
//		synod.MustRegisterService(Inventory{})
//		synod.Main() // node, cluster up, kv, bench, sim, orca run, mc, ...
//	}
//
// synod.Main is the full command line, server and workbench: it is
// cmd/synod-lab's main. The binary is synod-lab plus the user's types, so
// the types can be simulated and model-checked by the same binary that
// serves them: `./mysynod cluster up
// --service inventory --protocol paxos` starts node processes of that same
// binary, so every node serves the type; `./mysynod sim --service inventory
// --faults all` runs it in the simulator under faults and checks the
// history against the type itself as its sequential specification.
// cmd/synod-lab's own main is synod.Main with nothing registered. Synod's
// server binary, cmd/synod, is the lean one (node, cluster, kv, certs,
// check, bench, image; no plotting, etcd or ZooKeeper client, simulator or
// experiments); a user's binary built on this package links the workbench
// too (docs/EXTENDING.md).
//
// # One set of types
//
// The names below are aliases of the types Synod uses itself (package
// service for data types, package orca for shared objects, package
// orca/programs for parallel programs, package automaton for nested calls),
// not copies: a value of one is a value of the other, and those packages'
// documentation is the reference for every method. A user may import them
// directly for what this package does not re-export (service.DeltaState,
// service.HashedState, service.EnvApplier, wire.Encoder, ...).
//
// # Extension points (docs/EXTENDING.md, with an example module each)
//
//   - A data type: a Service (operations, read-only marks, validation) whose
//     State applies operations deterministically and snapshots itself;
//     optionally deltas and Merkle hashes (service.DeltaState,
//     service.HashedState), declared nondeterminism (service.EnvApplier), and
//     a workload for the simulator (service.Simulated). Example:
//     examples/datatype.
//   - An Orca object type (ObjectType: operations with read marks and
//     guards) and a parallel program over shared objects (Program). Example:
//     examples/orcaobject; guide docs/ORCA.md.
//   - A service whose operations call another namespace: a NestedProgram
//     run by protocol adam over the namespace's KV or its own data type
//     (any deterministic Service that declares its conflicts), whose
//     requests call a namespace that serves nested requests (paxos,
//     pbpaxos, unreplicated; of this cluster or another), each call sent
//     once its caller's state is verified (nested calls, automaton.Call).
//     Example examples/nestedcall (Orders over the KV, Demand over
//     examples/datatype's Inventory); guide docs/NESTED.md.
//
// # Versions
//
// The module follows semantic import versioning: while it is v0 (no v1
// tag), this package's API may change between minor versions; from v1 on,
// a breaking change to this package or to the packages its aliases name
// moves the module to github.com/synod-dev/synod/v2 (a new import path),
// and v1 keeps compiling. A user's module pins a version in its go.mod
// (the examples use a replace directive to the repository instead).
package synod

import (
	"fmt"

	"github.com/synod-dev/synod/internal/lab"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/orca/programs"
	"github.com/synod-dev/synod/service"
)

// Data types (package service).
type (
	// Service is a replicated data type: its name, operation validation,
	// read-only marks and initial state.
	Service = service.Service
	// State is one replica's copy: Apply (deterministic), Snapshot, Restore.
	State = service.State
	// Op is one operation: Kind, Key, Args.
	Op = service.Op
	// Result is an operation's outcome (nil, OK, bytes, integer, error, array).
	Result = service.Result
	// Simulated lets `synod-lab sim` drive a data type with random clients.
	Simulated = service.Simulated
	// Conflicter declares, per operation, the keys it reads and writes:
	// eve and adam then execute operations that do not conflict in
	// parallel (cores > 1). Without it every operation conflicts with
	// every other.
	Conflicter = service.Conflicter
	// Lock is one key an operation touches, Write when it may change it.
	Lock = service.Lock
)

// Results (package service).
var (
	OK       = service.OK
	Nil      = service.Nil
	Bytes    = service.Bytes
	Int      = service.Int
	Array    = service.Array
	Errorf   = service.Errorf
	ErrArity = service.ErrArity
)

// Orca shared objects and programs (packages orca and orca/programs).
type (
	// ObjectType is an abstract data type: New, Decode and operations.
	ObjectType = orca.Type
	// ObjectOp declares one operation: Write (false: a read, checked), Guard, Do, Arity.
	ObjectOp = orca.Operation
	// ObjectSim lets `synod sim --service orca` drive a type's objects
	// (ObjectType.Sim): the mix of its operations and their arguments.
	ObjectSim = orca.TypeSim
	// Value is an object instance's data; Encode writes it canonically.
	Value = orca.Value
	// Program is a parallel program: Setup, one Worker per node, Finish.
	Program = programs.Program
	// Process is a program's process: Must (an operation on a shared
	// object through its node) and Compute.
	Process = programs.Process
)

// Nested calls (package service; protocol adam).
type (
	// NestedProgram says which client operations of an adam namespace call
	// its callee namespace, and their Begin and Resume steps over the KV
	// state (service.NestedProgram; docs/NESTED.md).
	NestedProgram = service.NestedProgram
)

// EncodeNestedOp and DecodeNestedOp carry a client operation inside its
// first step, for any NestedProgram's Encode and Decode.
var (
	EncodeNestedOp = service.EncodeNestedOp
	DecodeNestedOp = service.DecodeNestedOp
)

// Object operations (package orca).
var (
	// NewObject builds the operation creating object name of type typ.
	NewObject = orca.New
	// CallObject builds the operation applying op of type typ to object name.
	CallObject = orca.Call
)

// RegisterService makes a data type available by its name, in cluster
// files (`service: NAME`), `synod cluster up --service NAME` and `synod-lab sim
// --service NAME`. Call it before Main (from init or main). It returns an
// error for an empty name or one already registered (kv, counter, ...).
func RegisterService(s Service) error {
	if s == nil || s.Name() == "" {
		return fmt.Errorf("synod: a service needs a name")
	}
	if _, err := service.Lookup(s.Name()); err == nil {
		return fmt.Errorf("synod: service %q is already registered", s.Name())
	}
	service.Register(s)
	return nil
}

// RegisterObjectType adds an object type to every orca namespace (service
// "orca"). Call it before Main. See orca.RegisterType for what it refuses.
func RegisterObjectType(t *ObjectType) error { return orca.RegisterType(t) }

// RegisterProgram makes a parallel program runnable by `synod-lab orca run
// NAME` (simulated, or --live on clusters of this binary's nodes). Call it
// before Main.
func RegisterProgram(p Program) error { return programs.RegisterProgram(p) }

// RegisterNestedProgram makes a nested-call program available to adam
// namespaces, selected by their parameter program=NAME (`synod cluster up
// --protocol adam --param program=NAME`). Call it before Main. It returns an
// error for an empty name or one already registered (trail, ...).
func RegisterNestedProgram(p NestedProgram) error {
	if p == nil || p.Name() == "" {
		return fmt.Errorf("synod: a nested program needs a name")
	}
	if _, err := service.LookupNestedProgram(p.Name()); err == nil {
		return fmt.Errorf("synod: nested program %q is already registered", p.Name())
	}
	service.RegisterNestedProgram(p)
	return nil
}

// MustRegisterNestedProgram is RegisterNestedProgram that panics on an error.
func MustRegisterNestedProgram(p NestedProgram) { must(RegisterNestedProgram(p)) }

// MustRegisterService is RegisterService that panics on an error (for
// init functions).
func MustRegisterService(s Service) { must(RegisterService(s)) }

// MustRegisterObjectType is RegisterObjectType that panics on an error.
func MustRegisterObjectType(t *ObjectType) { must(RegisterObjectType(t)) }

// MustRegisterProgram is RegisterProgram that panics on an error.
func MustRegisterProgram(p Program) { must(RegisterProgram(p)) }

func must(err error) {
	if err != nil {
		panic(err)
	}
}

// Main runs Synod's whole command line, the server's commands and the
// workbench's (os.Args), with every protocol and everything registered so
// far, and exits with status 1 on an error. It is cmd/synod-lab's main.
func Main() { lab.Main() }
