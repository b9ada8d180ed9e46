package service

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"maps"
	"slices"

	"github.com/synod-dev/synod/wire"
)

// NestedKV is the state of a service whose requests call another service
// (the Eve/Adam thesis §3, Adam; protocol/adam): the sharded KV plus the requests
// suspended at a nested call, each written as resumable steps (the Eve/Adam thesis
// §5.3 captures thread stacks with Javaflow continuations; here a request
// between two steps is data: Cont). The suspended requests are part of the
// state: hashed with it (so a verified checkpoint covers them, as the
// seed's Merkle tree covers the continuations), in its snapshot (a state
// transfer carries them) and restored with it (a rollback puts a request
// back right before its nested call).
//
// The program (the workload the seed's microbenchmark stands for):
//
//	SET k v   step 0 (NestedBegin): read old = k; call the callee with
//	          APPEND trail:k "<old>;" and suspend;
//	          step 1 (NestedResume, with the call's answer n): store v in
//	          k and n (the trail's length) in trail-len:k; answer OK.
//	          When the answer is an error (the callee refused the call,
//	          or the runtime could not carry it), nothing is stored and
//	          the SET answers that error.
//
// So the nested request's bytes depend on the caller's state (old), and
// the caller's state on the callee's answer. Every other operation is
// KV's, in one local step.
//
// The program is pluggable (NestedProgram, RegisterNestedProgram): Trail
// is the one above and the default; a user's binary registers its own and
// selects it with adam's parameter program=NAME.
type NestedKV struct {
	loose bool
	prog  NestedProgram // nil: Trail
}

// WithProgram returns the nested KV running prog's requests.
func (s NestedKV) WithProgram(prog NestedProgram) NestedKV { s.prog = prog; return s }

func (s NestedKV) program() NestedProgram {
	if s.prog == nil {
		return Trail
	}
	return s.prog
}

// Names of the nested KV services.
const (
	NestedKVName      = "nestedkv"
	NestedKVLooseName = "nestedkv-loose" // NestedResume declared a read of its key: replicas diverge (as shardedkv-loose)
)

// Operations only the protocol forms (clients cannot send them).
const (
	// NestedBegin runs a SET's first step. Key k; Args: v, the request's
	// identity (opaque), its tag (opaque, the protocol's: kept with the
	// suspended request).
	NestedBegin = "nested.begin"
	// NestedResume runs a suspended request's next step with the answer
	// of its call. Key k; Args: the request's identity, the answer
	// (EncodeResult).
	NestedResume = "nested.resume"
)

// TrailPrefix and TrailLenPrefix name the keys the program touches.
const (
	TrailPrefix    = "trail:"
	TrailLenPrefix = "trail-len:"
)

func init() {
	Register(NestedKV{})
	Register(NestedKV{loose: true})
}

// NestedPending is the result of a step that suspended its request: not an
// answer (the request goes on in a later step).
var NestedPending = Result{Type: ResultErr, Err: "NESTED suspended at a nested call"}

// IsNestedPending reports whether r is NestedPending.
func IsNestedPending(r Result) bool { return r.Type == ResultErr && r.Err == NestedPending.Err }

// Name implements Service.
func (s NestedKV) Name() string {
	if s.loose {
		return NestedKVLooseName
	}
	return NestedKVName
}

// Validate implements Service: the sharded KV's operations and the two
// step operations.
func (NestedKV) Validate(op Op) error {
	switch op.Kind {
	case NestedBegin:
		if len(op.Args) != 3 {
			return errors.New("nestedkv: nested.begin takes value, id, tag")
		}
		return nil
	case NestedResume:
		if len(op.Args) != 2 {
			return errors.New("nestedkv: nested.resume takes id, answer")
		}
		return nil
	}
	return ShardedKV{}.Validate(op)
}

// IsRead implements Service.
func (NestedKV) IsRead(op Op) bool {
	if op.Kind == NestedBegin || op.Kind == NestedResume {
		return false
	}
	return KV{}.IsRead(op)
}

// NewState implements Service.
func (s NestedKV) NewState() State {
	st := NewNestedState()
	st.prog = s.program()
	return st
}

// ConflictKeys implements Conflicter: a step touches its key (the begin
// reads it, the resume writes it and its trail length). The loose service
// declares the resume a read of its key: a begin and a resume of one key
// may then run in either order, and the begin reads a different old value
// (so its nested request differs) on replicas that ordered them
// differently.
//
// Another program's steps lock every key it declares (NestedProgram.Keys)
// for writing, both steps alike: conservative, and never wrong.
func (s NestedKV) ConflictKeys(op Op) []Lock {
	if p := s.program(); p != Trail && (op.Kind == NestedBegin || op.Kind == NestedResume) {
		var ls []Lock
		for _, k := range p.Keys(op.Key) {
			ls = append(ls, Lock{Key: k, Write: true})
		}
		return ls
	}
	switch op.Kind {
	case NestedBegin:
		return []Lock{{Key: op.Key}}
	case NestedResume:
		return []Lock{{Key: op.Key, Write: !s.loose}, {Key: TrailLenPrefix + op.Key, Write: true}}
	}
	return ShardedKV{}.ConflictKeys(op)
}

// Cont is a request suspended at a nested call: its whole state between two
// steps.
type Cont struct {
	ID      string // the request's identity (the protocol's encoding)
	Key     string
	Step    int      // the next step
	Locals  [][]byte // local variables: v, old
	Answers []Result // the answers of its nested calls so far
	Call    Op       // the nested call it waits on
	Env     Env      // the request's environment (its later steps run in it)
	Tag     []byte   // the protocol's data (thread, origin)
}

func (c *Cont) encode(e *wire.Encoder) {
	e.String(c.ID)
	e.String(c.Key)
	e.Uvarint(uint64(c.Step))
	e.Uvarint(uint64(len(c.Locals)))
	for _, l := range c.Locals {
		e.Bytes(l)
	}
	e.Uvarint(uint64(len(c.Answers)))
	for _, r := range c.Answers {
		EncodeResult(e, r)
	}
	EncodeOp(e, c.Call)
	EncodeEnv(e, c.Env)
	e.Bytes(c.Tag)
}

func decodeCont(d *wire.Decoder) *Cont {
	c := &Cont{ID: d.String(), Key: d.String(), Step: int(d.Uvarint())}
	n := d.Count(1<<10, 1)
	for i := 0; i < n && d.Err() == nil; i++ {
		c.Locals = append(c.Locals, d.Bytes())
	}
	n = d.Count(1<<10, 1)
	for i := 0; i < n && d.Err() == nil; i++ {
		c.Answers = append(c.Answers, DecodeResult(d))
	}
	c.Call = DecodeOp(d)
	c.Env = DecodeEnv(d)
	c.Tag = d.Bytes()
	return c
}

// NestedState is a NestedKV replica's state: the sharded KV and the
// suspended requests by identity. Conts are immutable once stored.
type NestedState struct {
	kv    *ShardedState
	conts map[string]*Cont
	prog  NestedProgram
}

// NewNestedState returns an empty state.
func NewNestedState() *NestedState {
	return &NestedState{kv: NewShardedState(DefaultShards), conts: map[string]*Cont{}, prog: Trail}
}

// Conts returns the suspended requests, by identity.
func (s *NestedState) Conts() []*Cont {
	out := make([]*Cont, 0, len(s.conts))
	for _, id := range slices.Sorted(maps.Keys(s.conts)) {
		out = append(out, s.conts[id])
	}
	return out
}

// Cont returns the suspended request id, or nil.
func (s *NestedState) Cont(id string) *Cont { return s.conts[id] }

// Apply implements State.
func (s *NestedState) Apply(op Op) Result { return s.ApplyEnv(op, Env{}) }

// ApplyEnv implements EnvApplier.
func (s *NestedState) ApplyEnv(op Op, env Env) Result {
	switch op.Kind {
	case NestedBegin:
		return s.begin(op, env)
	case NestedResume:
		return s.resume(op)
	}
	return s.kv.ApplyEnv(op, env)
}

// begin is a nested request's first step: the program reads what it
// needs and names its call; the request suspends.
func (s *NestedState) begin(op Op, env Env) Result {
	id := string(op.Args[1])
	if s.conts[id] != nil {
		return NestedPending // begun already (a repeated begin changes nothing)
	}
	req, err := s.prog.Decode(op.Key, op.Args[0])
	if err != nil {
		return Errorf("ERR nestedkv: %v", err)
	}
	read := func(r Op) Result { return s.kv.ApplyEnv(r, env) }
	call, locals := s.prog.Begin(req, read)
	s.conts[id] = &Cont{ID: id, Key: op.Key, Step: 1, Env: env, Tag: op.Args[2], Locals: locals, Call: call}
	return NestedPending
}

// resume is a nested request's second step, with its call's answer; the
// request ends.
func (s *NestedState) resume(op Op) Result {
	id := string(op.Args[0])
	c := s.conts[id]
	if c == nil || c.Step != 1 {
		return NestedPending // not suspended here: nothing to resume
	}
	ans, err := DecodeResultBytes(op.Args[1])
	if err != nil {
		return Errorf("ERR nestedkv: bad answer: %v", err)
	}
	delete(s.conts, id)
	if ans.IsErr() {
		// The call failed (the callee refused it, or the runtime could
		// not carry it): the request ends with that error and stores
		// nothing. A request is never answered OK without its nested call.
		return Errorf("ERR nested call %s failed: %s", c.Call.Kind, ans.Err)
	}
	apply := func(w Op) Result { return s.kv.ApplyEnv(w, c.Env) }
	return s.prog.Resume(c.Key, c.Locals, ans, apply)
}

// Snapshot implements State.
func (s *NestedState) Snapshot() []byte {
	e := wire.Encoder{}
	e.Bytes(s.kv.Snapshot())
	cs := s.Conts()
	e.Uvarint(uint64(len(cs)))
	for _, c := range cs {
		c.encode(&e)
	}
	return e.B
}

// Restore implements State.
func (s *NestedState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	kv := NewShardedState(DefaultShards)
	if err := kv.Restore(d.Bytes()); err != nil {
		return err
	}
	conts := map[string]*Cont{}
	n := d.Count(1<<30, 3)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := decodeCont(d)
		conts[c.ID] = c
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("nestedkv: snapshot: %w", err)
	}
	s.kv, s.conts = kv, conts
	return nil
}

// StateHash implements HashedState: the sharded KV's Merkle root and one
// leaf per suspended request, so that a verified state covers them.
func (s *NestedState) StateHash() [32]byte {
	kv := s.kv.StateHash()
	h := sha256.New()
	h.Write([]byte("nestedkv\x00"))
	h.Write(kv[:])
	for _, c := range s.Conts() {
		var e wire.Encoder
		c.encode(&e)
		leaf := sha256.Sum256(e.B)
		h.Write(leaf[:])
	}
	var out [32]byte
	h.Sum(out[:0])
	return out
}

// MerkleTree implements HashedState: the KV's tree (the suspended requests
// are folded into the root only: they are few, and a transfer carries
// them whole in a snapshot).
func (s *NestedState) MerkleTree() *MerkleTree { return s.kv.MerkleTree() }

// Clone returns a copy-on-write checkpoint (the KV's shards are shared until
// written; Conts are immutable).
func (s *NestedState) Clone() State {
	c := &NestedState{kv: s.kv.Checkpoint(), conts: make(map[string]*Cont, len(s.conts)), prog: s.prog}
	for id, x := range s.conts {
		c.conts[id] = x
	}
	return c
}

// Hashed is the number of objects a hash of the state covers beyond the
// KV's (the suspended requests), for a cost model.
func (s *NestedState) Hashed() int { return len(s.conts) }

// DecodeResultBytes decodes one result written by EncodeResult.
func DecodeResultBytes(b []byte) (Result, error) {
	d := wire.NewDecoder(b)
	r := DecodeResult(d)
	return r, d.Done()
}

// EncodeResultBytes encodes one result (the inverse of DecodeResultBytes).
func EncodeResultBytes(r Result) []byte {
	var e wire.Encoder
	EncodeResult(&e, r)
	return e.B
}
