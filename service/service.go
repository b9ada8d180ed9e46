// Package service defines Synod's replicated data types: the state a namespace
// holds and the operations on it.
//
// A Service is a deterministic data type. Every operation says whether it only
// reads; Apply is a pure function of (state, operation); operations and results
// have a binary encoding; and the state can be snapshotted and restored. State
// machine protocols (Paxos, ESDS, primary-backup) replicate any Service. Register
// protocols (ABD, the blocking lock protocol) store one opaque value per key and
// therefore accept only the register subset of KV (get, set, del, exists).
//
// Services that ship: KV (Redis's data model: strings, hashes, lists, sets
// and sorted sets in one keyspace, expiry, per-key versions and guards for
// WATCH; every operation is listed in kv_doc.go), Counter (read, add; seed
// 000 chapter 4), String, the Matchmaker and Bank (the Grid Services thesis), Lock (T-Paxos's
// 2PL), Orca's shared objects (the Orca paper) and the sharded KV Eve executes in
// parallel (the Eve/Adam thesis).
package service

import (
	"errors"
	"fmt"

	"github.com/synod-dev/synod/internal/registry"
	"github.com/synod-dev/synod/synoderr"
	"github.com/synod-dev/synod/wire"
)

// MaxValueSize is the largest value a client may store (Redis's proto-max-bulk-len
// is 512 MB; Synod keeps values small enough to replicate in one message).
const MaxValueSize = 8 << 20

// MaxKeySize bounds a key.
const MaxKeySize = 64 << 10

// Op is one operation on a service. Kind names it ("get", "set", "add", ...);
// Key selects the object inside the namespace (empty for single-object services
// such as Counter); Args holds the operands.
type Op struct {
	Kind string
	Key  string
	Args [][]byte
}

func (o Op) String() string {
	s := o.Kind
	if o.Key != "" {
		s += " " + o.Key
	}
	for _, a := range o.Args {
		if len(a) > 32 {
			s += fmt.Sprintf(" <%d bytes>", len(a))
		} else {
			s += fmt.Sprintf(" %q", a)
		}
	}
	return s
}

// ResultType tells how to read a Result; it maps one to one onto RESP replies.
type ResultType uint8

const (
	ResultNil   ResultType = iota // no value (RESP null bulk)
	ResultOK                      // success without a value (RESP +OK)
	ResultBytes                   // Bytes holds a value (RESP bulk string)
	ResultInt                     // Int holds an integer (RESP integer)
	ResultErr                     // Err holds an error (RESP -ERR ...)
	ResultArray                   // Elems holds results (RESP array: HGETALL, LRANGE, SCAN, EXEC)
)

// MaxArrayDepth bounds the nesting of array results (SCAN's reply is an
// array holding an array; EXEC's holds the replies of its commands).
const MaxArrayDepth = 4

// Result is an operation's outcome.
type Result struct {
	Type  ResultType
	Bytes []byte
	Int   int64
	Err   string
	Elems []Result // ResultArray's elements, in order; nil for an empty array
}

// Convenience constructors.
func Nil() Result                  { return Result{Type: ResultNil} }
func OK() Result                   { return Result{Type: ResultOK} }
func Bytes(b []byte) Result        { return Result{Type: ResultBytes, Bytes: b} }
func Int(i int64) Result           { return Result{Type: ResultInt, Int: i} }
func Array(elems ...Result) Result { return Result{Type: ResultArray, Elems: elems} }

// BytesArray is an array of bulk strings (LRANGE, SMEMBERS, KEYS).
func BytesArray(bs ...[]byte) Result {
	elems := make([]Result, len(bs))
	for i, b := range bs {
		elems[i] = Bytes(b)
	}
	return Array(elems...)
}

// Errorf is an error result whose text is f's. A text that starts with
// a Redis error code ("TRYAGAIN ...") has that code's kind; any other is an
// ERR (synoderr.Parse).
func Errorf(f string, a ...any) Result {
	return Result{Type: ResultErr, Err: fmt.Sprintf(f, a...)}
}

// Fail is an error result of kind k: its text is k's Redis code and the
// message (the kind's wire form: package synoderr).
func Fail(k synoderr.Kind, f string, a ...any) Result {
	return Result{Type: ResultErr, Err: synoderr.New(k, fmt.Sprintf(f, a...)).Error()}
}

// AsError reads an error result's text as a typed error (synoderr.Parse);
// nil when r is not an error.
func (r Result) AsError() *synoderr.Error {
	if r.Type != ResultErr {
		return nil
	}
	return synoderr.Parse(r.Err)
}

// ErrKind is the kind of an error result (synoderr.Parse), and whether r
// is an error.
func (r Result) ErrKind() (synoderr.Kind, bool) {
	if r.Type != ResultErr {
		return synoderr.Generic, false
	}
	return synoderr.Parse(r.Err).Kind, true
}

// IsErr reports whether the result is an error.
func (r Result) IsErr() bool { return r.Type == ResultErr }

func (r Result) String() string {
	switch r.Type {
	case ResultNil:
		return "(nil)"
	case ResultOK:
		return "OK"
	case ResultBytes:
		return fmt.Sprintf("%q", r.Bytes)
	case ResultInt:
		return fmt.Sprintf("(integer) %d", r.Int)
	case ResultErr:
		return "(error) " + r.Err
	case ResultArray:
		s := "["
		for i, e := range r.Elems {
			if i > 0 {
				s += " "
			}
			s += e.String()
		}
		return s + "]"
	}
	return fmt.Sprintf("Result(%d)", r.Type)
}

// Equal compares two results by content.
func (r Result) Equal(o Result) bool {
	if r.Type != o.Type || string(r.Bytes) != string(o.Bytes) || r.Int != o.Int || r.Err != o.Err || len(r.Elems) != len(o.Elems) {
		return false
	}
	for i := range r.Elems {
		if !r.Elems[i].Equal(o.Elems[i]) {
			return false
		}
	}
	return true
}

// Service is a replicated data type.
type Service interface {
	// Name is the name used in cluster files ("kv", "counter").
	Name() string
	// Validate checks an operation's kind and arity before it is replicated, so
	// that bad input is refused at the edge rather than inside the log.
	Validate(op Op) error
	// IsRead reports whether op leaves the state unchanged.
	IsRead(op Op) bool
	// NewState returns the initial state.
	NewState() State
}

// State is one replica's copy of a service's state.
//
// A state may also implement DeltaState (versions, deltas for state updates
// and catch-up), HashedState (an incremental Merkle hash) and RangeState
// (incremental transfer of differing ranges); see transfer.go.
type State interface {
	// Apply performs op and returns its result. It must be deterministic.
	Apply(op Op) Result
	// Snapshot encodes the whole state.
	Snapshot() []byte
	// Restore replaces the state by a snapshot.
	Restore(snap []byte) error
}

var known = registry.New[Service]("service")

// Register makes a service available by name; call it from init.
func Register(s Service) { known.Register(s.Name(), s) }

// Lookup returns a registered service.
func Lookup(name string) (Service, error) { return known.Lookup(name) }

// Names lists registered services, sorted.
func Names() []string { return known.Names() }

const codecVersion = 1

// maxArgs bounds the argument count of an encoded operation.
const maxArgs = 1 << 16

// EncodeOp appends op's binary form to e.
func EncodeOp(e *wire.Encoder, op Op) {
	e.String(op.Kind)
	e.String(op.Key)
	e.Uvarint(uint64(len(op.Args)))
	for _, a := range op.Args {
		e.Bytes(a)
	}
}

// DecodeOp reads an operation written by EncodeOp. Argument slices are copied.
//
// Every replica decodes every operation it applies, so this is on the
// request path: a common kind's name is not allocated (commonKinds) and
// the arguments share one fresh buffer, each capped at its own length
// (an append to one never writes into the next). An empty argument
// decodes as nil, as a copy of it always did.
func DecodeOp(d *wire.Decoder) Op {
	var od OpDecoder
	return od.Decode(d, 0)
}

// OpDecoder decodes a run of operations (a log value's batch) as DecodeOp
// decodes each, with what the run's operations can share without one
// stored value keeping another alive: their argument lists are carved
// from one array (each capped at its own length, so an append to one
// never writes into the next), and an operation whose key is the
// previous operation's key gets the previous operation's key string.
// Each operation's argument bytes stay one buffer of its own: a stored
// value keeps only its own operation's buffer, never the run's. The
// shared array is garbage once no operation of the run is (a run's
// operations are executed and dropped together). The zero OpDecoder is
// ready; TestOpDecoder holds it to DecodeOp.
//
// Per operation this takes 1 allocation instead of DecodeOp's 3 when the
// key repeats (a follower applying a pipelined SET of one key), 2 when it
// does not.
type OpDecoder struct {
	args [][]byte // the unused part of the current array
	key  string   // the previous operation's key
}

// maxArgsChunk bounds the argument-list array Decode allocates ahead.
const maxArgsChunk = 4096

// Decode reads the next operation; more is how many operations of the
// run follow this one (sizes the shared array: each is expected to take
// as many arguments as this one).
func (od *OpDecoder) Decode(d *wire.Decoder, more int) Op {
	kind := d.Bytes()
	op := Op{Kind: commonKinds[string(kind)]}
	if key := d.Bytes(); od.key != "" && string(key) == od.key {
		op.Key = od.key
	} else {
		op.Key = string(key)
		od.key = op.Key
	}
	if op.Kind == "" {
		op.Kind = string(kind)
	}
	n := d.Count(maxArgs, 1)
	if n > 0 {
		if len(od.args) < n {
			ahead := n
			if more > 0 && n <= maxArgsChunk {
				ahead = min(max(n, maxArgsChunk/n*n), n*(more+1))
			}
			od.args = make([][]byte, ahead)
		}
		op.Args = od.args[:n:n]
		od.args = od.args[n:]
		size := 0
		for i := range op.Args {
			op.Args[i] = d.Bytes() // aliases d's buffer until copied below
			size += len(op.Args[i])
		}
		if d.Err() != nil {
			clear(op.Args)
			return op
		}
		buf := make([]byte, 0, size)
		for i, a := range op.Args {
			if len(a) == 0 {
				op.Args[i] = nil
				continue
			}
			start := len(buf)
			buf = append(buf, a...)
			op.Args[i] = buf[start:len(buf):len(buf)]
		}
	}
	return op
}

// CopyOp returns the operation DecodeOp would read back from op's
// encoding, without encoding it: the same kind and key (strings, shared),
// the arguments copied into one fresh buffer, each capped at its own
// length, an empty argument as nil and no arguments as nil. A replica that
// has just encoded a batch keeps it decoded so (protocol/paxos's
// proposeAt); TestCopyOp holds it to DecodeOp.
func CopyOp(op Op) Op {
	if len(op.Args) == 0 {
		op.Args = nil
		return op
	}
	size := 0
	for _, a := range op.Args {
		size += len(a)
	}
	buf := make([]byte, 0, size)
	args := make([][]byte, len(op.Args))
	for i, a := range op.Args {
		if len(a) == 0 {
			continue
		}
		start := len(buf)
		buf = append(buf, a...)
		args[i] = buf[start:len(buf):len(buf)]
	}
	op.Args = args
	return op
}

// commonKinds interns the operation kinds most requests carry, so that
// DecodeOp finds their names without allocating (a map lookup by a byte
// slice converted in place allocates nothing).
var commonKinds = func() map[string]string {
	m := map[string]string{}
	for _, k := range []string{"set", "get", "del", "exists", "incr", "incrby", "decrby", "incrbyfloat",
		"append", "getex", "getdel", "getset", "setrange", "getrange", "strlen", "expire", "persist", "ttl",
		"type", "hset", "hget", "hdel", "hincrby", "hgetall", "lpush", "rpush", "lpop", "rpop", "lrange",
		"llen", "sadd", "srem", "smembers", "sismember", "scard", "zadd", "zrem", "zscore", "zrange",
		"zincrby", "xadd", "pfadd", "setstore", "copy"} {
		m[k] = k
	}
	return m
}()

// EncodeResult appends r's binary form to e.
func EncodeResult(e *wire.Encoder, r Result) { encodeResult(e, r, 0) }

// ErrResultTooDeep is what an array result nested deeper than MaxArrayDepth
// is written as. DecodeResult refuses such nesting, so writing it as is would
// make a record or log entry that carries it undecodable at every replica
// (PB-Paxos's log carries results: every replica panicked on one in a
// stream test). Every replica writes the same error instead; the node that
// executed the operation may still answer the deep result it holds.
const ErrResultTooDeep = "ERR reply nested deeper than 4 arrays"

func encodeResult(e *wire.Encoder, r Result, depth int) {
	if r.Type == ResultArray && depth >= MaxArrayDepth {
		r = Result{Type: ResultErr, Err: ErrResultTooDeep}
	}
	e.Byte(byte(r.Type))
	switch r.Type {
	case ResultBytes:
		e.Bytes(r.Bytes)
	case ResultInt:
		e.Varint(r.Int)
	case ResultErr:
		e.String(r.Err)
	case ResultArray:
		e.Uvarint(uint64(len(r.Elems)))
		for _, x := range r.Elems {
			encodeResult(e, x, depth+1)
		}
	}
}

// DecodeResult reads a result written by EncodeResult.
func DecodeResult(d *wire.Decoder) Result { return decodeResult(d, 0) }

// maxArrayElems bounds one array's length on decoding.
const maxArrayElems = 1 << 24

func decodeResult(d *wire.Decoder, depth int) Result {
	r := Result{Type: ResultType(d.Byte())}
	switch r.Type {
	case ResultNil, ResultOK:
	case ResultBytes:
		r.Bytes = d.BytesCopy()
		if r.Bytes == nil {
			r.Bytes = []byte{}
		}
	case ResultInt:
		r.Int = d.Varint()
	case ResultErr:
		r.Err = d.String()
	case ResultArray:
		if depth >= MaxArrayDepth {
			d.Fail(fmt.Errorf("service: array results nested deeper than %d", MaxArrayDepth))
			return r
		}
		n := d.Count(maxArrayElems, 1)
		if n > 0 {
			r.Elems = make([]Result, n)
			for i := range r.Elems {
				r.Elems[i] = decodeResult(d, depth+1)
			}
		}
	default:
		d.Fail(fmt.Errorf("service: bad result type %d", r.Type))
	}
	return r
}

// MarshalOp encodes op alone, with a version byte.
func MarshalOp(op Op) []byte {
	e := wire.Encoder{B: []byte{codecVersion}}
	EncodeOp(&e, op)
	return e.B
}

// UnmarshalOp decodes MarshalOp's output.
func UnmarshalOp(b []byte) (Op, error) {
	d := wire.NewDecoder(b)
	if v := d.Byte(); v != codecVersion {
		return Op{}, fmt.Errorf("service: op codec version %d, want %d", v, codecVersion)
	}
	op := DecodeOp(d)
	return op, d.Done()
}

// Guards: conditions checked inside an atomic group's step (Redis's WATCH).
//
// An atomic group (automaton.ApplyGroup) may begin with operations of kind
// GuardKind. A guard only reads: it answers OK when its condition holds and
// an error whose text starts with GuardFailed when it does not, and then the
// group stops before anything is applied. A service that offers guards
// (KV: "guard key version v", the key's write version) lists GuardKind in
// Validate and IsRead like any operation.
const (
	GuardKind   = "guard"
	GuardFailed = "GUARDFAILED"
)

// GuardFailure is a failed guard's result.
func GuardFailure(why string) Result { return Errorf("%s %s", GuardFailed, why) }

// IsGuardFailure reports whether r is a failed guard's result.
func IsGuardFailure(r Result) bool {
	return r.Type == ResultErr && len(r.Err) >= len(GuardFailed) && r.Err[:len(GuardFailed)] == GuardFailed
}

// ErrArity is wrapped by Validate errors about argument counts.
var ErrArity = errors.New("wrong number of arguments")

func arity(op Op, want ...int) error {
	for _, w := range want {
		if len(op.Args) == w {
			return nil
		}
	}
	return fmt.Errorf("%w for '%s' command", ErrArity, op.Kind)
}
