package abd

import (
	"testing"

	"github.com/synod-dev/synod/automaton"
)

// BenchmarkReplica is a replica's cost of a peer's message: n2 of three,
// its 10,000 registers written once, steps batch messages of 7 queries
// (query-above, as a round group's first sending) or 7 stores (higher tags
// each time, so every store is applied and persisted) from coordinator n1,
// on keys spread over the registers, 100-byte values: the target regime's
// groups (session 59 abd59 §3). Figures per batch message (7 messages).
//
//	go test ./protocol/abd -run '^$' -bench Replica -benchmem
func BenchmarkReplica(b *testing.B) {
	const group = 7
	for _, kind := range []string{"query", "store"} {
		b.Run(kind, func(b *testing.B) {
			c := newStepCluster(b)
			keys, val := preloaded(c)
			n2 := c.nodes["n2"]
			ts := uint64(1 << 20) // above every tag the preload wrote
			var msgs []automaton.Output
			next := func(i int) []byte {
				msgs = msgs[:0]
				for j := range group {
					k := keys[(i*group+j*1409)%len(keys)]
					var m []byte
					if kind == "query" {
						m = appendQueryAbove(nil, uint64(i*group+j), k, Tag{TS: 1, Node: "n1", Seq: 1}, true)
					} else {
						ts++
						m = appendRegister(nil, kindStore, uint64(i*group+j), k, Tag{TS: ts, Node: "n1", Seq: 1}, false, val)
					}
					msgs = append(msgs, automaton.Send{To: "n2", Msg: m})
				}
				return header.Coalesce(msgs, kindBatch)[0].(automaton.Send).Msg
			}
			in := make([][]byte, 256)
			for i := range in {
				in[i] = next(i)
			}
			var outs int
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				if kind == "store" && i > 0 && i%len(in) == 0 {
					b.StopTimer() // fresh tags: an old one would be ignored
					for j := range in {
						in[j] = next(i + j)
					}
					b.StartTimer()
				}
				outs += len(n2.Step(automaton.PeerMessage{From: "n1", Msg: in[i%len(in)]}))
			}
			if outs == 0 {
				b.Fatal("no outputs")
			}
		})
	}
}
