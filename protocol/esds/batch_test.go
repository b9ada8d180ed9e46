package esds

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// A front-end-only node given a ClientBatch (send=all) sends each replica
// one batch message holding every request; each replica answers the batch
// with one message; every request is answered with its own value, and the
// replicas agree on one order holding them all.
func TestClientBatchOneMessagePerReplica(t *testing.T) {
	c := feCluster(t, map[string]string{"send": "all"})
	var reqs []automaton.Request
	for i := range 6 {
		reqs = append(reqs, automaton.Request{ID: automaton.RequestID{Client: 77, Seq: uint64(i + 1)},
			Op: service.Op{Kind: "add", Args: [][]byte{[]byte("1")}}, Opts: opts(fmt.Sprint("b", i), i%2 == 0)})
	}
	c.Step("n4", automaton.ClientBatch{Reqs: reqs})
	to := inFlight(c, "n4")
	if len(to) != 3 {
		t.Fatalf("n4 sent %d messages (to %v), want one per replica", len(to), to)
	}
	for _, m := range c.Queue() {
		if m.From == "n4" {
			if m.Msg[1] != kindBatch {
				t.Fatalf("to %s: kind %d, want a batch", m.To, m.Msg[1])
			}
			parts, err := header.SplitBatch(m.Msg, kindBatch)
			if err != nil || len(parts) != 6 {
				t.Fatalf("to %s: %d requests, %v", m.To, len(parts), err)
			}
		}
	}
	c.DeliverAll()
	for i := 0; i < 50; i++ {
		c.tick()
		c.DeliverAll()
	}
	for _, r := range reqs {
		if res := c.mustAnswer(r.ID); res.Type != service.ResultInt || res.Int < 1 || res.Int > 6 {
			t.Errorf("request %v: %v", r.ID, res)
		}
	}
	if o := replicaOrders(t, c); len(o) != 6 {
		t.Errorf("replicas ordered %v, want the 6 operations", o)
	}
}
