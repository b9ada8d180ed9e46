package service

import (
	"bytes"
	"fmt"
	"strconv"

	"github.com/synod-dev/synod/internal/registry"
)

// NestedProgram is the part of a nested-call service a user writes (seed
// 003 §3 and §5.3, Adam; protocol/adam): which client operations call
// another namespace, and what their two steps do over the namespace's
// state: the KV's, or the namespace's data type's (NestedKV.WithService:
// any deterministic service that declares its conflicts). A request of the
// program runs as
//
//	step 0 (Begin): read the state, name the nested request (an
//	        operation on the callee namespace) and the locals to keep;
//	        the request suspends, its locals part of the replicated,
//	        hashed state (service.Cont)
//	step 1 (Resume): with the callee's answer, write the state and
//	        answer the client.
//
// Adam sends the call only once the state holding the suspended request
// is verified, and re-sends it byte for byte after a rollback or a
// restart; the callee (paxos, any automaton.NestedCallee) executes it once.
// A call that fails (the callee answers an error, or the runtime cannot
// carry it) fails the request with that error and Resume is not run.
//
// Both steps must be deterministic functions of their inputs; Begin may
// only read (through read), and both may touch only the keys Keys
// returns for the request's key (they are its conflict declaration for
// Eve's parallel execution).
type NestedProgram interface {
	// Name selects the program: adam's parameter program=NAME.
	Name() string
	// Nested reports whether a client operation is one of the program's
	// requests; every other operation is the namespace's service's (KV's
	// by default), run whole in one step. Clients send that service's
	// operations (its Validate checks them).
	Nested(op Op) bool
	// Encode and Decode carry a request inside its first step (the key
	// travels beside it).
	Encode(op Op) []byte
	Decode(key string, b []byte) (Op, error)
	// Begin is step 0.
	Begin(op Op, read func(Op) Result) (call Op, locals [][]byte)
	// Resume is step 1, with the call's (non-error) answer.
	Resume(key string, locals [][]byte, answer Result, apply func(Op) Result) Result
	// Keys lists every key the two steps of a request on key touch.
	Keys(key string) []string
}

var nestedPrograms = registry.New[NestedProgram]("nested program")

func init() { RegisterNestedProgram(Trail) }

// RegisterNestedProgram makes a program available to adam namespaces
// (program=NAME). It panics on a duplicate name; call it from init or
// before synod.Main.
func RegisterNestedProgram(p NestedProgram) { nestedPrograms.Register(p.Name(), p) }

// LookupNestedProgram returns a registered program.
func LookupNestedProgram(name string) (NestedProgram, error) { return nestedPrograms.Lookup(name) }

// NestedProgramNames lists the registered programs.
func NestedProgramNames() []string { return nestedPrograms.Names() }

// Trail is the default program (the seed's microbenchmark): SET k v reads
// old = k, calls APPEND trail:k "<old>;" and stores v in k and the
// trail's new length in trail-len:k.
var Trail NestedProgram = trail{}

type trail struct{}

func (trail) Name() string { return "trail" }

func (trail) Nested(op Op) bool { return op.Kind == "set" && len(op.Args) == 1 }

func (trail) Encode(op Op) []byte { return op.Args[0] }

func (trail) Decode(key string, b []byte) (Op, error) {
	return Op{Kind: "set", Key: key, Args: [][]byte{b}}, nil
}

func (trail) Begin(op Op, read func(Op) Result) (Op, [][]byte) {
	old := read(Op{Kind: "get", Key: op.Key})
	var ob []byte
	if old.Type == ResultBytes {
		ob = old.Bytes
	}
	return Op{Kind: "append", Key: TrailPrefix + op.Key, Args: [][]byte{append(bytes.Clone(ob), ';')}},
		[][]byte{op.Args[0], ob}
}

func (trail) Resume(key string, locals [][]byte, ans Result, apply func(Op) Result) Result {
	n := []byte(ans.String())
	if ans.Type == ResultInt {
		n = []byte(strconv.FormatInt(ans.Int, 10))
	}
	apply(Op{Kind: "set", Key: key, Args: [][]byte{locals[0]}})
	apply(Op{Kind: "set", Key: TrailLenPrefix + key, Args: [][]byte{n}})
	return OK()
}

func (trail) Keys(key string) []string { return []string{key, TrailLenPrefix + key} }

// EncodeNestedOp and DecodeNestedOp are an Encode and Decode any program
// may use: the whole operation (MarshalOp), its key checked on decoding.
func EncodeNestedOp(op Op) []byte { return MarshalOp(op) }

// DecodeNestedOp is EncodeNestedOp's inverse.
func DecodeNestedOp(key string, b []byte) (Op, error) {
	op, err := UnmarshalOp(b)
	if err == nil && op.Key != key {
		err = fmt.Errorf("nested request for key %q carried under key %q", op.Key, key)
	}
	return op, err
}
