package main

import (
	"fmt"
	"math/rand"
	"strconv"

	"github.com/synod-dev/synod/synod"
	"github.com/synod-dev/synod/wire"
)

// Bucket is a user's Orca object type: a bounded buffer of opaque items
// that can be closed (the Orca paper §2: an abstract data type whose operations
// apply indivisibly to one object; guards from Orca's language papers).
//
//	new NAME bucket CAP   a bucket holding at most CAP items
//	put ITEM              guarded write: blocks while the bucket is full
//	get                   guarded write: blocks while the bucket is empty
//	                      and open; answers nil once it is empty and closed
//	close                 write: no more puts
//	len                   read
var Bucket = &synod.ObjectType{
	Name: "bucket",
	New: func(args [][]byte) (synod.Value, error) {
		if len(args) != 1 {
			return nil, fmt.Errorf("bucket takes its capacity")
		}
		c, err := strconv.Atoi(string(args[0]))
		if err != nil || c < 1 {
			return nil, fmt.Errorf("bucket capacity %q: want a positive integer", args[0])
		}
		return &bucket{Cap: c}, nil
	},
	Decode: func(d *wire.Decoder) synod.Value {
		b := &bucket{Cap: int(d.Uvarint()), Closed: d.Bool()}
		for i, n := 0, d.Count(1<<24, 1); i < n && d.Err() == nil; i++ {
			b.Items = append(b.Items, d.BytesCopy())
		}
		return b
	},
	Ops: map[string]synod.ObjectOp{
		"put": {Write: true, Arity: 1,
			Guard: func(v synod.Value, _ [][]byte) bool { b := v.(*bucket); return len(b.Items) < b.Cap || b.Closed },
			Do: func(v synod.Value, a [][]byte) synod.Result {
				b := v.(*bucket)
				if b.Closed {
					return synod.Errorf("bucket closed")
				}
				b.Items = append(b.Items, append([]byte(nil), a[0]...))
				return synod.OK()
			}},
		"get": {Write: true, Arity: 0,
			Guard: func(v synod.Value, _ [][]byte) bool { b := v.(*bucket); return len(b.Items) > 0 || b.Closed },
			Do: func(v synod.Value, _ [][]byte) synod.Result {
				b := v.(*bucket)
				if len(b.Items) == 0 {
					return synod.Nil()
				}
				it := b.Items[0]
				b.Items = b.Items[1:]
				return synod.Bytes(it)
			}},
		"close": {Write: true, Arity: 0, Do: func(v synod.Value, _ [][]byte) synod.Result {
			v.(*bucket).Closed = true
			return synod.OK()
		}},
		"len": {Arity: 0, Do: func(v synod.Value, _ [][]byte) synod.Result { return synod.Int(int64(len(v.(*bucket).Items))) }},
	},
	// In the simulator (`orcaobject sim --service orca`): buckets of 1000
	// items, puts of items unique to the client and operation (a get names
	// the put it took), gets, lengths; close is left out (it would end
	// every later put).
	Sim: &synod.ObjectSim{Mix: "new:1,put:4,get:2,len:1",
		New: func(*rand.Rand) [][]byte { return [][]byte{[]byte("1000")} },
		Args: func(op string, _ *rand.Rand, client, n int) [][]byte {
			if op == "put" {
				return [][]byte{[]byte(fmt.Sprintf("c%d.%d", client, n))}
			}
			return nil
		}},
}

type bucket struct {
	Cap    int
	Closed bool
	Items  [][]byte
}

// Encode writes the bucket canonically (a read that changed it is caught
// by comparing encodings).
func (b *bucket) Encode(e *wire.Encoder) {
	e.Uvarint(uint64(b.Cap))
	e.Bool(b.Closed)
	e.Uvarint(uint64(len(b.Items)))
	for _, it := range b.Items {
		e.Bytes(it)
	}
}
