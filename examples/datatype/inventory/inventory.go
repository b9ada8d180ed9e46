package inventory

import (
	"fmt"
	"maps"
	"math/rand"
	"slices"
	"strconv"

	"github.com/synod-dev/synod/synod"
	"github.com/synod-dev/synod/wire"
)

// Inventory is a user's data type: a stock count per item.
//
//	stock ITEM N   add N units; answers the new count
//	take ITEM N    remove N units; answers the new count, or an error when
//	               fewer than N are in stock (nothing is taken then)
//	count ITEM     the count (a read)
//
// Clients send them as SYNOD OP (redis-cli -p PORT synod op stock apples 5)
// or with the Go client's DoOp.
type Inventory struct{}

// Name is the service's name in cluster files and flags (--service inventory).
func (Inventory) Name() string { return "inventory" }

// Validate refuses bad operations at the edge, before they are replicated.
func (Inventory) Validate(op synod.Op) error {
	switch op.Kind {
	case "stock", "take":
		if len(op.Args) != 1 {
			return fmt.Errorf("%w for '%s' command", synod.ErrArity, op.Kind)
		}
		if n, err := strconv.ParseInt(string(op.Args[0]), 10, 64); err != nil || n < 0 {
			return fmt.Errorf("%s: %q is not a non-negative integer", op.Kind, op.Args[0])
		}
	case "count":
		if len(op.Args) != 0 {
			return fmt.Errorf("%w for 'count' command", synod.ErrArity)
		}
	default:
		return fmt.Errorf("inventory: unknown operation %q (stock, take, count)", op.Kind)
	}
	if op.Key == "" {
		return fmt.Errorf("inventory: %s names an item", op.Kind)
	}
	return nil
}

// IsRead marks the operations that leave the state unchanged.
func (Inventory) IsRead(op synod.Op) bool { return op.Kind == "count" }

// ConflictKeys declares what each operation touches (synod.Conflicter):
// its item, written by stock and take, read by count. Under eve with
// cores > 1 operations on different items then run in parallel.
func (Inventory) ConflictKeys(op synod.Op) []synod.Lock {
	return []synod.Lock{{Key: op.Key, Write: op.Kind != "count"}}
}

// NewState is an empty inventory.
func (Inventory) NewState() synod.State { return &stock{n: map[string]int64{}} }

// stock is one replica's state. Apply must be deterministic.
type stock struct{ n map[string]int64 }

func (s *stock) Apply(op synod.Op) synod.Result {
	var k int64
	if len(op.Args) > 0 {
		k, _ = strconv.ParseInt(string(op.Args[0]), 10, 64) // Validate checked it
	}
	switch op.Kind {
	case "stock":
		s.n[op.Key] += k
	case "take":
		if s.n[op.Key] < k {
			return synod.Errorf("ERR out of stock: %d %s left", s.n[op.Key], op.Key)
		}
		s.n[op.Key] -= k
	}
	return synod.Int(s.n[op.Key])
}

// Snapshot encodes the whole state canonically (items sorted).
func (s *stock) Snapshot() []byte {
	var e wire.Encoder
	items := slices.Sorted(maps.Keys(s.n))
	e.Uvarint(uint64(len(items)))
	for _, it := range items {
		e.String(it)
		e.Varint(s.n[it])
	}
	return e.B
}

// Restore replaces the state by a snapshot.
func (s *stock) Restore(b []byte) error {
	d := wire.NewDecoder(b)
	n := map[string]int64{}
	for i, c := 0, d.Count(1<<24, 2); i < c && d.Err() == nil; i++ {
		n[d.String()] = d.Varint()
	}
	if err := d.Done(); err != nil {
		return err
	}
	s.n = n
	return nil
}

// SimMix and SimOp let `synod-lab sim --service inventory` drive the type with
// random clients (synod.Simulated); the simulator checks the history
// against Inventory itself.
func (Inventory) SimMix() string { return "count:2,stock:3,take:3" }

func (Inventory) SimOp(kind string, r *rand.Rand, keys, client, n int) synod.Op {
	op := synod.Op{Kind: kind, Key: "item" + strconv.Itoa(r.Intn(keys))}
	if kind != "count" {
		op.Args = [][]byte{[]byte(strconv.Itoa(1 + r.Intn(3)))}
	}
	return op
}
