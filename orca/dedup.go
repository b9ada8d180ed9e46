package orca

import (
	"slices"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// Dedup is a runtime's deduplication table: per client, its last applied
// write and that write's result, so that a retried write is answered from
// the table and never applied twice. orca-bcast replicates one table with
// the objects; orca-primary keeps one per primary copy, persisted with it.
type Dedup map[uint64]Done

// Done is a client's last applied write and its result.
type Done struct {
	Seq uint64
	Res service.Result
}

// Encode appends the table, clients in increasing order.
func (t Dedup) Encode(e *wire.Encoder) {
	clients := make([]uint64, 0, len(t))
	for c := range t {
		clients = append(clients, c)
	}
	slices.Sort(clients)
	e.Uvarint(uint64(len(clients)))
	for _, c := range clients {
		e.Uvarint(c)
		e.Uvarint(t[c].Seq)
		service.EncodeResult(e, t[c].Res)
	}
}

// DecodeDedup reads a table written by Encode.
func DecodeDedup(d *wire.Decoder) Dedup {
	t := Dedup{}
	n := d.Count(1<<24, 3)
	for i := 0; i < n && d.Err() == nil; i++ {
		c := d.Uvarint()
		t[c] = Done{Seq: d.Uvarint(), Res: service.DecodeResult(d)}
	}
	return t
}
