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
//
// The state under the program is pluggable too (WithService, issue 31:
// "any service may issue nested calls"): by default the sharded KV, or
// any service's state (a user's data type). The program's steps then read
// and write through that service's operations, every other operation is
// that service's, run whole, and the service's own Validate, IsRead and
// conflict declaration apply. Such a service must declare its conflicts
// (Conflicter or Lockable: Eve's mixer needs them) and be deterministic
// (CheckNestedService); the namespace's snapshot, hash and checkpoints
// are the service state's own (Snapshot, StateHash) with the suspended
// requests beside them.
type NestedKV struct {
	loose bool
	prog  NestedProgram // nil: Trail
	inner Service       // nil: the sharded KV
}

// WithProgram returns the nested KV running prog's requests.
func (s NestedKV) WithProgram(prog NestedProgram) NestedKV { s.prog = prog; return s }

// WithService returns the nested service over svc's state instead of the
// sharded KV (nil, kv or shardedkv: the sharded KV).
func (s NestedKV) WithService(svc Service) NestedKV {
	if svc != nil && (svc.Name() == "kv" || svc.Name() == ShardedKVName) {
		svc = nil
	}
	s.inner = svc
	return s
}

// Inner returns the service under the program (nil: the sharded KV).
func (s NestedKV) Inner() Service { return s.inner }

// CheckNestedService reports why svc cannot be the state under a nested
// program (nil when it can): Adam runs a service's operations on Eve's
// parallel executor, which needs each operation's conflict keys (a
// service that declares none would run every request alone, and a
// program's step could not be told apart from the operations it may run
// beside), and replays them on every replica and after a rollback, which
// needs an Apply that is a function of the state and the operation (a
// nondeterministic service reads an environment the suspended request
// would have to carry across its call; Adam does not offer that).
func CheckNestedService(svc Service) error {
	if svc == nil || svc.Name() == "kv" || svc.Name() == ShardedKVName {
		return nil
	}
	if _, ok := ConflictKeysOf(svc, Op{}); !ok {
		return fmt.Errorf("service %s declares no conflicts (Conflicter or Lockable): Eve's parallel execution, which adam runs on, needs each operation's keys", svc.Name())
	}
	if IsNondeterministic(svc) {
		return fmt.Errorf("service %s is nondeterministic: adam replays a request's steps on every replica and after a rollback, and supports deterministic services only", svc.Name())
	}
	return nil
}

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

// Validate implements Service: the inner service's operations (the sharded
// KV's by default) and the two step operations.
func (s NestedKV) Validate(op Op) error {
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
	if s.inner != nil {
		return s.inner.Validate(op)
	}
	return ShardedKV{}.Validate(op)
}

// IsRead implements Service.
func (s NestedKV) IsRead(op Op) bool {
	if op.Kind == NestedBegin || op.Kind == NestedResume {
		return false
	}
	if s.inner != nil {
		return s.inner.IsRead(op)
	}
	return KV{}.IsRead(op)
}

// NewState implements Service.
func (s NestedKV) NewState() State {
	st := NewNestedState()
	st.prog = s.program()
	if s.inner != nil {
		st.inner, st.kv = s.inner, s.inner.NewState()
	}
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
	if s.inner != nil {
		ls, _ := ConflictKeysOf(s.inner, op) // CheckNestedService: declared
		return ls
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

// NestedState is a NestedKV replica's state: the inner service's state
// (the sharded KV by default) and the suspended requests by identity.
// Conts are immutable once stored.
type NestedState struct {
	kv    State   // a *ShardedState when inner is nil
	inner Service // nil: the sharded KV
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
	return ApplyEnv(s.kv, op, env)
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
	read := func(r Op) Result { return ApplyEnv(s.kv, r, env) }
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
	apply := func(w Op) Result { return ApplyEnv(s.kv, w, c.Env) }
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
	kv := s.newInner()
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

// newInner returns an empty inner state.
func (s *NestedState) newInner() State {
	if s.inner != nil {
		return s.inner.NewState()
	}
	return NewShardedState(DefaultShards)
}

// StateHash implements HashedState: the inner state's hash (the sharded
// KV's Merkle root; another service's StateHash: its own Merkle root, or
// the SHA-256 of its snapshot) and one leaf per suspended request, so that
// a verified state covers them.
func (s *NestedState) StateHash() [32]byte {
	kv := StateHash(s.kv)
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
// them whole in a snapshot). An inner state without a tree has an empty
// one-leaf tree: a Diff then finds nothing to fetch by ranges, and a
// transfer carries the whole snapshot.
func (s *NestedState) MerkleTree() *MerkleTree {
	if h, ok := s.kv.(HashedState); ok {
		return h.MerkleTree()
	}
	return NewMerkleTree(1)
}

// Clone returns a checkpoint: copy-on-write for the sharded KV (its shards
// are shared until written), the inner state's own Clone when it has one,
// else a copy by snapshot. Conts are immutable.
func (s *NestedState) Clone() State {
	c := &NestedState{kv: s.cloneInner(), inner: s.inner, conts: make(map[string]*Cont, len(s.conts)), prog: s.prog}
	for id, x := range s.conts {
		c.conts[id] = x
	}
	return c
}

// cloneInner copies the inner state.
func (s *NestedState) cloneInner() State {
	switch st := s.kv.(type) {
	case *ShardedState:
		return st.Checkpoint()
	case interface{ Clone() State }:
		return st.Clone()
	}
	c := s.newInner()
	if err := c.Restore(s.kv.Snapshot()); err != nil {
		panic("nestedkv: a state does not restore its own snapshot: " + err.Error())
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
