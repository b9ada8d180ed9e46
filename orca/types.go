package orca

import (
	"fmt"
	"math/rand"
	"slices"
	"strconv"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// The built-in object types: the ones the Orca paper's micro-benchmarks and
// programs use (§5: "a replicated 4 byte integer object", "an entire 1 Kb
// array object"; TSP's bound and job queue; ASP's pivot rows).

// Builtin holds the built-in types and those a user's binary added with
// RegisterType: the types every orca namespace serves.
var Builtin = NewTypes(IntType, QueueType, RowsType, ArrayType)

// Int encodes an integer argument.
func Int(v int64) []byte { return strconv.AppendInt(nil, v, 10) }

// ParseInt reads an integer argument or result.
func ParseInt(b []byte) (int64, error) { return strconv.ParseInt(string(b), 10, 64) }

func argInt(args [][]byte, i int) int64 {
	if i >= len(args) {
		return 0
	}
	v, _ := ParseInt(args[i])
	return v
}

// IntObj is the integer object: a 4-byte integer in the paper, 64 bits here.
type IntObj struct{ V int64 }

// Encode implements Value.
func (o *IntObj) Encode(e *wire.Encoder) { e.Varint(o.V) }

// IntType: value (read), assign v, inc d (returns the new value), lower v
// (sets the value to v when v is smaller: TSP's bound; returns 1 when it
// lowered).
var IntType = &Type{
	Name: "int",
	New: func(args [][]byte) (Value, error) {
		if len(args) > 1 {
			return nil, fmt.Errorf("int takes at most an initial value")
		}
		return &IntObj{V: argInt(args, 0)}, nil
	},
	Decode: func(d *wire.Decoder) Value { return &IntObj{V: d.Varint()} },
	Ops: map[string]Operation{
		"value": {Arity: 0, Do: func(v Value, _ [][]byte) service.Result { return service.Int(v.(*IntObj).V) }},
		"assign": {Write: true, Arity: 1, Do: func(v Value, a [][]byte) service.Result {
			v.(*IntObj).V = argInt(a, 0)
			return service.OK()
		}},
		"inc": {Write: true, Arity: 1, Do: func(v Value, a [][]byte) service.Result {
			o := v.(*IntObj)
			o.V += argInt(a, 0)
			return service.Int(o.V)
		}},
		"lower": {Write: true, Arity: 1, Do: func(v Value, a [][]byte) service.Result {
			o, x := v.(*IntObj), argInt(a, 0)
			if x < o.V {
				o.V = x
				return service.Int(1)
			}
			return service.Int(0)
		}},
		// await v: a guarded read that blocks until the value reaches v
		// (a barrier, a counter of finished workers).
		"await": {Arity: 1,
			Guard: func(v Value, a [][]byte) bool { return v.(*IntObj).V >= argInt(a, 0) },
			Do:    func(v Value, _ [][]byte) service.Result { return service.Int(v.(*IntObj).V) }},
	},
	// Simulated clients create integers, read them, assign values unique to
	// the client and operation, and increment them (a read then names the
	// write it saw); await is left out (a client blocked on a value nobody
	// reaches waits for the rest of the run).
	Sim: &TypeSim{Mix: "new:1,value:3,assign:2,inc:2",
		Args: func(op string, _ *rand.Rand, client, n int) [][]byte {
			switch op {
			case "assign":
				return [][]byte{Int(int64(client)*1_000_000 + int64(n))}
			case "inc", "lower":
				return [][]byte{Int(1)}
			}
			return nil
		}},
}

// Queue is the job queue: a FIFO of opaque jobs that can be closed.
type Queue struct {
	Jobs   [][]byte
	Closed bool
}

// Encode implements Value.
func (q *Queue) Encode(e *wire.Encoder) {
	e.Bool(q.Closed)
	e.Uvarint(uint64(len(q.Jobs)))
	for _, j := range q.Jobs {
		e.Bytes(j)
	}
}

// QueueType: add job, close, get (guarded: blocks while the queue is empty
// and open; answers nil once it is empty and closed), len (read). All but
// len write (the Orca paper §5.3: "All operations applied to this object are
// write-operations").
var QueueType = &Type{
	Name: "queue",
	New:  func(args [][]byte) (Value, error) { return &Queue{}, nil },
	Decode: func(d *wire.Decoder) Value {
		q := &Queue{Closed: d.Bool()}
		n := d.Count(1<<24, 1)
		for i := 0; i < n && d.Err() == nil; i++ {
			q.Jobs = append(q.Jobs, d.BytesCopy())
		}
		return q
	},
	Ops: map[string]Operation{
		"add": {Write: true, Arity: 1, Do: func(v Value, a [][]byte) service.Result {
			q := v.(*Queue)
			if q.Closed {
				return service.Errorf("orca: queue closed")
			}
			q.Jobs = append(q.Jobs, append([]byte(nil), a[0]...))
			return service.OK()
		}},
		"close": {Write: true, Arity: 0, Do: func(v Value, _ [][]byte) service.Result {
			v.(*Queue).Closed = true
			return service.OK()
		}},
		"get": {Write: true, Arity: 0,
			Guard: func(v Value, _ [][]byte) bool { q := v.(*Queue); return len(q.Jobs) > 0 || q.Closed },
			Do: func(v Value, _ [][]byte) service.Result {
				q := v.(*Queue)
				if len(q.Jobs) == 0 {
					return service.Nil()
				}
				j := q.Jobs[0]
				q.Jobs = q.Jobs[1:]
				return service.Bytes(j)
			}},
		"len": {Arity: 0, Do: func(v Value, _ [][]byte) service.Result { return service.Int(int64(len(v.(*Queue).Jobs))) }},
	},
}

// Rows holds ASP's pivot rows: empty at first, row k added in iteration k
// (the Orca paper §5.3: "after the final iteration, it will contain all the
// pivot rows used during the computation").
type Rows struct{ R map[int64][]byte }

// Encode implements Value: rows in index order.
func (r *Rows) Encode(e *wire.Encoder) {
	keys := make([]int64, 0, len(r.R))
	for k := range r.R {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	e.Uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.Varint(k)
		e.Bytes(r.R[k])
	}
}

// RowsType: put k row (write), get k (guarded read: blocks until row k is
// there), has k (read).
var RowsType = &Type{
	Name: "rows",
	New:  func(args [][]byte) (Value, error) { return &Rows{R: map[int64][]byte{}}, nil },
	Decode: func(d *wire.Decoder) Value {
		r := &Rows{R: map[int64][]byte{}}
		n := d.Count(1<<24, 2)
		for i := 0; i < n && d.Err() == nil; i++ {
			k := d.Varint()
			r.R[k] = d.BytesCopy()
		}
		return r
	},
	Ops: map[string]Operation{
		"put": {Write: true, Arity: 2, Do: func(v Value, a [][]byte) service.Result {
			v.(*Rows).R[argInt(a, 0)] = append([]byte(nil), a[1]...)
			return service.OK()
		}},
		"get": {Arity: 1,
			Guard: func(v Value, a [][]byte) bool { _, ok := v.(*Rows).R[argInt(a, 0)]; return ok },
			Do:    func(v Value, a [][]byte) service.Result { return service.Bytes(v.(*Rows).R[argInt(a, 0)]) }},
		"has": {Arity: 1, Do: func(v Value, a [][]byte) service.Result {
			if _, ok := v.(*Rows).R[argInt(a, 0)]; ok {
				return service.Int(1)
			}
			return service.Int(0)
		}},
	},
}

// Array is a byte array (the paper's 1 Kb array object).
type Array struct{ B []byte }

// Encode implements Value.
func (a *Array) Encode(e *wire.Encoder) { e.Bytes(a.B) }

// ArrayType: new n (n zero bytes), read (the whole array), setall b
// (replace the whole array: the paper's "updating an entire 1 Kb array"),
// set i b (one byte: a large object written through a small parameter).
var ArrayType = &Type{
	Name: "array",
	New:  func(args [][]byte) (Value, error) { return &Array{B: make([]byte, argInt(args, 0))}, nil },
	Decode: func(d *wire.Decoder) Value {
		b := d.BytesCopy()
		if b == nil {
			b = []byte{}
		}
		return &Array{B: b}
	},
	Ops: map[string]Operation{
		"read": {Arity: 0, Do: func(v Value, _ [][]byte) service.Result { return service.Bytes(append([]byte(nil), v.(*Array).B...)) }},
		"setall": {Write: true, Arity: 1, Do: func(v Value, a [][]byte) service.Result {
			v.(*Array).B = append([]byte(nil), a[0]...)
			return service.OK()
		}},
		"set": {Write: true, Arity: 2, Do: func(v Value, a [][]byte) service.Result {
			arr, i := v.(*Array), argInt(a, 0)
			if i < 0 || i >= int64(len(arr.B)) || len(a[1]) != 1 {
				return service.Errorf("orca: array index %d out of range or not one byte", i)
			}
			arr.B[i] = a[1][0]
			return service.OK()
		}},
	},
}
