package orca

import (
	"bytes"
	"fmt"
	"sort"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// ServiceName is the name of the object service in cluster files.
const ServiceName = "orca"

func init() { service.Register(&Service{Types: Builtin}) }

// Service is a namespace of named shared data-objects: a Synod service
// whose operations create instances ("new") and apply a type's operations
// ("<type>.<op>") to one instance each (the Orca paper §2: "all operations apply
// to single objects"). Every operation is applied indivisibly by Apply.
type Service struct {
	Types Types
	// CheckReads makes every read compare its object's encoding before
	// and after, and answer an error when the read changed it (the
	// declaration of reads is checked, not trusted). Tests set it.
	CheckReads bool
}

// Name implements service.Service.
func (s *Service) Name() string { return ServiceName }

// ErrReadWrote is the error a read answers under CheckReads when it
// changed its object.
const ErrReadWrote = "ORCA read operation changed its object"

// Validate implements service.Service.
func (s *Service) Validate(op service.Op) error {
	if op.Key == "" {
		return fmt.Errorf("orca: an operation names its object")
	}
	if op.Kind == KindNew {
		if len(op.Args) < 1 {
			return fmt.Errorf("orca: new needs a type")
		}
		if _, ok := s.Types[string(op.Args[0])]; !ok {
			return fmt.Errorf("orca: unknown object type %q", op.Args[0])
		}
		return nil
	}
	_, o, err := s.lookup(op.Kind)
	if err != nil {
		return err
	}
	if o.Arity >= 0 && len(op.Args) != o.Arity {
		return fmt.Errorf("orca: %s takes %d arguments, got %d", op.Kind, o.Arity, len(op.Args))
	}
	return nil
}

func (s *Service) lookup(kind string) (*Type, Operation, error) {
	tn, on, ok := SplitKind(kind)
	if !ok {
		return nil, Operation{}, fmt.Errorf("orca: unknown operation %q (want new or <type>.<op>)", kind)
	}
	t, ok := s.Types[tn]
	if !ok {
		return nil, Operation{}, fmt.Errorf("orca: unknown object type %q", tn)
	}
	o, ok := t.Ops[on]
	if !ok {
		return nil, Operation{}, fmt.Errorf("orca: type %s has no operation %q (it has %v)", tn, on, t.OpNames())
	}
	return t, o, nil
}

// IsRead implements service.Service: the type's declaration decides.
func (s *Service) IsRead(op service.Op) bool {
	if op.Kind == KindNew {
		return false
	}
	_, o, err := s.lookup(op.Kind)
	return err == nil && !o.Write
}

// NewState implements service.Service.
func (s *Service) NewState() service.State {
	return &State{svc: s, objs: map[string]*instance{}}
}

// State is one node's replica of every object of a namespace.
type State struct {
	svc  *Service
	objs map[string]*instance
}

type instance struct {
	typ *Type
	v   Value
}

// Value returns object name's value and type name (nil when absent), for
// programs and tests that inspect a replica.
func (st *State) Value(name string) (Value, string) {
	in, ok := st.objs[name]
	if !ok {
		return nil, ""
	}
	return in.v, in.typ.Name
}

// Size returns the encoded size of object name (0 when absent): what an
// invalidation protocol ships when it installs a copy.
func (st *State) Size(name string) int {
	in, ok := st.objs[name]
	if !ok {
		return 0
	}
	var e wire.Encoder
	in.v.Encode(&e)
	return len(e.B)
}

// Ready implements service.GuardedState. An operation on an object that
// does not exist yet waits for its creation when it has a guard; without a
// guard it answers an error at once.
func (st *State) Ready(op service.Op) bool {
	if op.Kind == KindNew {
		return true
	}
	t, o, err := st.svc.lookup(op.Kind)
	if err != nil || o.Guard == nil {
		return true
	}
	in, ok := st.objs[op.Key]
	if !ok {
		return false
	}
	if in.typ != t {
		return true // answered with a type error
	}
	return o.Guard(in.v, op.Args)
}

// Apply implements service.State.
func (st *State) Apply(op service.Op) service.Result {
	if err := st.svc.Validate(op); err != nil {
		return service.Errorf("%v", err)
	}
	if op.Kind == KindNew {
		if _, ok := st.objs[op.Key]; ok {
			return service.Errorf("orca: object %q exists", op.Key)
		}
		t := st.svc.Types[string(op.Args[0])]
		v, err := t.New(op.Args[1:])
		if err != nil {
			return service.Errorf("orca: new %s: %v", t.Name, err)
		}
		st.objs[op.Key] = &instance{typ: t, v: v}
		return service.OK()
	}
	t, o, _ := st.svc.lookup(op.Kind)
	in, ok := st.objs[op.Key]
	if !ok {
		return service.Errorf("orca: no object %q", op.Key)
	}
	if in.typ != t {
		return service.Errorf("orca: object %q is a %s, not a %s", op.Key, in.typ.Name, t.Name)
	}
	if o.Guard != nil && !o.Guard(in.v, op.Args) {
		return service.Errorf(service.ErrGuardBlocked)
	}
	if o.Write || !st.svc.CheckReads {
		return o.Do(in.v, op.Args)
	}
	var before, after wire.Encoder
	in.v.Encode(&before)
	res := o.Do(in.v, op.Args)
	in.v.Encode(&after)
	if !bytes.Equal(before.B, after.B) {
		return service.Errorf("%s: %s on %q", ErrReadWrote, op.Kind, op.Key)
	}
	return res
}

// Snapshot implements service.State: the objects sorted by name, each with
// its type and encoded value.
func (st *State) Snapshot() []byte {
	names := make([]string, 0, len(st.objs))
	for n := range st.objs {
		names = append(names, n)
	}
	sort.Strings(names)
	var e wire.Encoder
	e.Uvarint(uint64(len(names)))
	for _, n := range names {
		in := st.objs[n]
		e.String(n)
		e.String(in.typ.Name)
		var v wire.Encoder
		in.v.Encode(&v)
		e.Bytes(v.B)
	}
	return e.B
}

// Restore implements service.State.
func (st *State) Restore(b []byte) error {
	d := wire.NewDecoder(b)
	n := d.Count(1<<24, 3)
	objs := make(map[string]*instance, n)
	for i := 0; i < n && d.Err() == nil; i++ {
		name, tn, vb := d.String(), d.String(), d.Bytes()
		t, ok := st.svc.Types[tn]
		if !ok {
			return fmt.Errorf("orca: snapshot names unknown type %q", tn)
		}
		vd := wire.NewDecoder(vb)
		v := t.Decode(vd)
		if err := vd.Done(); err != nil {
			return fmt.Errorf("orca: object %q: %w", name, err)
		}
		objs[name] = &instance{typ: t, v: v}
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("orca: snapshot: %w", err)
	}
	st.objs = objs
	return nil
}
