package pbdurable_test

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/protocol/pbdurable"
	"github.com/synod-dev/synod/service"
)

// batchOf is a client batch of sets of keys b0..b(n-1) (the even ones
// set twice: the second set wins) with a get of b0 after its sets; ids
// from 100 up, so they never meet the harness's own.
func batchOf(n int) ([]automaton.Request, map[automaton.RequestID]service.Result) {
	var reqs []automaton.Request
	want := map[automaton.RequestID]service.Result{}
	seq := uint64(100)
	add := func(o service.Op, r service.Result) {
		seq++
		id := automaton.RequestID{Client: 7, Seq: seq}
		reqs = append(reqs, automaton.Request{ID: id, Op: o})
		want[id] = r
	}
	for i := range n {
		k := fmt.Sprintf("b%d", i)
		add(op("set", k, "v"+k), service.OK())
		if i%2 == 0 {
			add(op("set", k, "w"+k), service.OK())
		}
		if i == 0 {
			add(op("get", k), service.Bytes([]byte("w"+k)))
		}
	}
	return reqs, want
}

func sqlEffects(c *harness.Cluster, at automaton.NodeID) int {
	n := 0
	for _, e := range c.Effects() {
		if e.Node == at && e.Effect.Kind == sqlstore.EffectKind {
			n++
		}
	}
	return n
}

// TestBatchGroupCommit (issue 28, session 54; batch.go): under mapping db
// a client batch's writes go to the database as one transaction (one
// commit), nothing is answered before it commits, and then every request
// is answered once, in batch order, with its own response (a set's OK,
// the get's value after the batch's earlier sets). Before client batches
// and group commit each write was a transaction of its own, issued after
// the previous one committed: the batch left one effect per write.
func TestBatchGroupCommit(t *testing.T) {
	if !automaton.OrdersKeyRuns(pbdurable.Name) {
		t.Fatal("pbdurable does not declare that it orders a batch's same-key requests (the gateway would send them one by one)")
	}
	c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Params: map[string]string{"mapping": "db"}})
	settle(c, 1)
	reqs, want := batchOf(20)
	before := len(c.AllResponses())
	c.Step("n1", automaton.ClientBatch{Reqs: reqs})
	if n := sqlEffects(c, "n1"); n != 1 {
		t.Fatalf("%d database transactions for a batch of %d requests, want 1 (group commit)", n, len(reqs))
	}
	if got := c.AllResponses()[before:]; len(got) != 0 {
		t.Fatalf("%d answers before the batch's transaction committed: %v", len(got), got)
	}
	if c.CompleteEffects() != 1 {
		t.Fatal("more than the one transaction ran")
	}
	got := c.AllResponses()[before:]
	if len(got) != len(reqs) {
		t.Fatalf("%d answers to a batch of %d", len(got), len(reqs))
	}
	for i, r := range got {
		if r.Resp.ID != reqs[i].ID {
			t.Fatalf("answer %d is to %v, want %v (batch order)", i, r.Resp.ID, reqs[i].ID)
		}
		if !r.Resp.Result.Equal(want[r.Resp.ID]) {
			t.Errorf("%v %v: %v, want %v", r.Resp.ID, reqs[i].Op, r.Resp.Result, want[r.Resp.ID])
		}
	}
	// Each read back from the database by a new primary.
	c.Crash("n1")
	settle(c, 6)
	for i := range 20 {
		k := fmt.Sprintf("b%d", i)
		v := "v" + k
		if i%2 == 0 {
			v = "w" + k
		}
		if r := answer(t, c, "n2", op("get", k)); string(r.Bytes) != v {
			t.Errorf("%s after the fail-over: %v, want %s", k, r, v)
		}
	}
}

// TestBatchGroupLimit: a batch of more than 256 writes is committed in
// transactions of at most 256 (maxGroup), one at a time, in order.
func TestBatchGroupLimit(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Params: map[string]string{"mapping": "db"}})
	settle(c, 1)
	var reqs []automaton.Request
	for i := range 300 {
		reqs = append(reqs, automaton.Request{ID: automaton.RequestID{Client: 9, Seq: uint64(i + 1)}, Op: op("set", "k", fmt.Sprint(i))})
	}
	before := len(c.AllResponses())
	c.Step("n1", automaton.ClientBatch{Reqs: reqs})
	c.CompleteEffect(0)
	if n := len(c.AllResponses()) - before; n != 256 {
		t.Fatalf("%d answered after the first transaction, want 256", n)
	}
	if n := sqlEffects(c, "n1"); n != 1 {
		t.Fatalf("%d transactions pending after the first, want 1", n)
	}
	c.CompleteEffects()
	if n := len(c.AllResponses()) - before; n != 300 {
		t.Fatalf("%d answered, want 300", n)
	}
	if r := answer(t, c, "n1", op("get", "k")); string(r.Bytes) != "299" {
		t.Fatalf("k: %v, want 299", r)
	}
}

// TestBatchCrashBeforeCommit: the primary crashes while its batch's
// transaction is in flight (it never commits): none of the batch is
// answered, and the new primary recovers every acknowledged write and
// none of the batch's (the transaction is all or nothing), under db; under
// pb and pbdb the same, with the batch's update buffers prepared at the
// backups.
func TestBatchCrashBeforeCommit(t *testing.T) {
	for _, m := range []string{"db", "pbdb"} {
		t.Run(m, func(t *testing.T) {
			c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Params: map[string]string{"mapping": m}})
			settle(c, 1)
			if r := answer(t, c, "n1", op("set", "acked", "1")); !r.Equal(service.OK()) {
				t.Fatalf("set acked: %v", r)
			}
			reqs, _ := batchOf(10)
			before := len(c.AllResponses())
			c.Step("n1", automaton.ClientBatch{Reqs: reqs})
			c.DeliverAll() // the buffers reach the backups (pbdb), and the transaction is issued
			if n := sqlEffects(c, "n1"); n != 1 {
				t.Fatalf("%d transactions in flight, want the batch's one", n)
			}
			c.Crash("n1")
			if got := c.AllResponses()[before:]; len(got) != 0 {
				t.Fatalf("answers of a batch whose transaction never committed: %v", got)
			}
			settle(c, 8)
			if r := answer(t, c, "n2", op("get", "acked")); string(r.Bytes) != "1" {
				t.Errorf("acknowledged write after the fail-over: %v, want 1", r)
			}
			for i := range 10 {
				k := fmt.Sprintf("b%d", i)
				if r := answer(t, c, "n2", op("get", k)); !r.Equal(service.Nil()) {
					t.Errorf("%s, of the uncommitted batch, after the fail-over: %v, want nil", k, r)
				}
			}
		})
	}
}

// TestBatchMessages: under mapping pb a client batch's update buffers
// reach each backup as one batch message, which the backup acknowledges
// once (the cumulative acknowledgement of the last); every request is
// then answered. Before session 54 each buffer was a message of its own,
// acknowledged on its own.
func TestBatchMessages(t *testing.T) {
	c := harness.New(t, harness.Options{Protocol: pbdurable.Name, Nodes: 3, Params: map[string]string{"mapping": "pb"}})
	settle(c, 1)
	reqs, want := batchOf(8)
	writes := 0
	for _, r := range reqs {
		if r.Op.Kind == "set" {
			writes++
		}
	}
	before := len(c.AllResponses())
	outs := c.Step("n1", automaton.ClientBatch{Reqs: reqs})
	a := c.Node("n1").(*pbdurable.PBD)
	sends := map[automaton.NodeID]int{}
	for _, o := range outs {
		if s, ok := o.(automaton.Send); ok {
			sends[s.To]++
			if d := a.DescribeMessage(s.Msg); !strings.HasPrefix(d, fmt.Sprintf("batch of %d:", writes)) {
				t.Errorf("to %s: %s, want a batch of the %d update buffers", s.To, d, writes)
			}
		}
	}
	if sends["n2"] != 1 || sends["n3"] != 1 {
		t.Fatalf("messages to the backups: %v, want one each", sends)
	}
	acks := 0
	c.Observe(func(id automaton.NodeID, o automaton.Output) {
		if s, ok := o.(automaton.Send); ok && id != "n1" && s.To == "n1" {
			acks++
			if d := a.DescribeMessage(s.Msg); !strings.HasSuffix(d, fmt.Sprintf("index=%d", writes)) {
				t.Errorf("%s's acknowledgement: %s, want index=%d", id, d, writes)
			}
		}
	})
	c.DeliverAll()
	c.Observe(nil)
	if acks != 2 {
		t.Errorf("%d acknowledgements of the batch, want one per backup", acks)
	}
	drive(c)
	got := c.AllResponses()[before:]
	if len(got) != len(reqs) {
		t.Fatalf("%d answers to a batch of %d", len(got), len(reqs))
	}
	for i, r := range got {
		if r.Resp.ID != reqs[i].ID || !r.Resp.Result.Equal(want[r.Resp.ID]) {
			t.Errorf("answer %d: %v %v, want %v %v", i, r.Resp.ID, r.Resp.Result, reqs[i].ID, want[reqs[i].ID])
		}
	}
}
