package service

import (
	"fmt"
	"sort"
	"strconv"

	"github.com/synod-dev/synod/wire"
)

// KV is a map from string keys to byte-string values, with Redis semantics.
//
// Operations (Key is the Redis key; Args as listed):
//
//	get                  -> bytes or nil
//	exists               -> int 0/1
//	set  value [nx|xx]   -> OK, or nil when the NX/XX condition fails
//	del                  -> int 0/1 (number of keys removed)
//	cas  expected new    -> int 1 if the value equalled expected and was replaced, else 0
//	append suffix        -> int: length after appending
//	incr delta           -> int: the new value; error if the value is not an integer
type KV struct{}

func init() {
	Register(KV{})
	Register(Counter{})
}

// Name implements Service.
func (KV) Name() string { return "kv" }

// RegisterKinds are the KV operations a register protocol (ABD, blocking) can run.
var RegisterKinds = map[string]bool{"get": true, "exists": true, "set": true, "del": true}

// Validate implements Service.
func (KV) Validate(op Op) error {
	if len(op.Key) > MaxKeySize {
		return fmt.Errorf("key too large (%d bytes, limit %d)", len(op.Key), MaxKeySize)
	}
	for _, a := range op.Args {
		if len(a) > MaxValueSize {
			return fmt.Errorf("value too large (%d bytes, limit %d)", len(a), MaxValueSize)
		}
	}
	switch op.Kind {
	case "get", "exists", "del":
		return arity(op, 0)
	case "set":
		if err := arity(op, 1, 2); err != nil {
			return err
		}
		if len(op.Args) == 2 && string(op.Args[1]) != "nx" && string(op.Args[1]) != "xx" {
			return fmt.Errorf("syntax error: set condition %q", op.Args[1])
		}
		return nil
	case "cas":
		return arity(op, 2)
	case "append":
		return arity(op, 1)
	case "incr":
		if err := arity(op, 1); err != nil {
			return err
		}
		if _, err := strconv.ParseInt(string(op.Args[0]), 10, 64); err != nil {
			return fmt.Errorf("value is not an integer or out of range")
		}
		return nil
	}
	return fmt.Errorf("unknown kv operation %q", op.Kind)
}

// IsRead implements Service.
func (KV) IsRead(op Op) bool { return op.Kind == "get" || op.Kind == "exists" }

// NewState implements Service.
func (KV) NewState() State { return &KVState{m: map[string][]byte{}} }

// KVState is the state of a KV replica.
type KVState struct{ m map[string][]byte }

// Len returns the number of keys.
func (s *KVState) Len() int { return len(s.m) }

// Apply implements State.
func (s *KVState) Apply(op Op) Result {
	if err := (KV{}).Validate(op); err != nil {
		return Errorf("%v", err)
	}
	v, ok := s.m[op.Key]
	switch op.Kind {
	case "get":
		if !ok {
			return Nil()
		}
		return Bytes(v)
	case "exists":
		if ok {
			return Int(1)
		}
		return Int(0)
	case "set":
		if len(op.Args) == 2 {
			if (string(op.Args[1]) == "nx") == ok {
				return Nil()
			}
		}
		s.m[op.Key] = op.Args[0]
		return OK()
	case "del":
		if !ok {
			return Int(0)
		}
		delete(s.m, op.Key)
		return Int(1)
	case "cas":
		if !ok || string(v) != string(op.Args[0]) {
			return Int(0)
		}
		s.m[op.Key] = op.Args[1]
		return Int(1)
	case "append":
		nv := make([]byte, 0, len(v)+len(op.Args[0]))
		nv = append(append(nv, v...), op.Args[0]...)
		if len(nv) > MaxValueSize {
			return Errorf("string exceeds maximum allowed size")
		}
		s.m[op.Key] = nv
		return Int(int64(len(nv)))
	case "incr":
		var cur int64
		if ok {
			c, err := strconv.ParseInt(string(v), 10, 64)
			if err != nil {
				return Errorf("value is not an integer or out of range")
			}
			cur = c
		}
		d, _ := strconv.ParseInt(string(op.Args[0]), 10, 64)
		n := cur + d
		if (d > 0 && n < cur) || (d < 0 && n > cur) {
			return Errorf("increment or decrement would overflow")
		}
		s.m[op.Key] = []byte(strconv.FormatInt(n, 10))
		return Int(n)
	}
	return Errorf("unknown kv operation %q", op.Kind)
}

// Snapshot implements State: keys in sorted order, so equal states give equal bytes.
func (s *KVState) Snapshot() []byte {
	keys := make([]string, 0, len(s.m))
	for k := range s.m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	e := wire.Encoder{B: []byte{codecVersion}}
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.String(k)
		e.Bytes(s.m[k])
	}
	return e.B
}

// Restore implements State.
func (s *KVState) Restore(snap []byte) error {
	d := wire.NewDecoder(snap)
	if v := d.Byte(); v != codecVersion {
		return fmt.Errorf("kv: snapshot version %d, want %d", v, codecVersion)
	}
	n := d.Count(1<<40, 2)
	m := make(map[string][]byte, n)
	for i := 0; i < n; i++ {
		k := d.String()
		m[k] = d.BytesCopy()
	}
	if err := d.Done(); err != nil {
		return fmt.Errorf("kv: bad snapshot: %w", err)
	}
	s.m = m
	return nil
}
