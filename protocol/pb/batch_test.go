package pb

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/harness"
	"github.com/synod-dev/synod/service"
)

// TestBatch (issue 28, session 54; batch.go): a client batch of sets
// (the same key twice) and gets reaches the primary n1: its update
// entries leave to each backup as one batch message, each backup
// acknowledges it once (the last entry's index), nothing is answered
// before the acknowledgements, and then every request is answered once,
// in batch order, with its own response. The same batch at n2 (a
// backup) is forwarded as one batch message, and the replies come back
// in one. Before session 54 each entry and each forward was a message of
// its own, and each entry was acknowledged on its own.
func TestBatch(t *testing.T) {
	if !automaton.OrdersKeyRuns(Name) {
		t.Fatal("pb does not declare that it orders a batch's same-key requests (the gateway would send them one by one)")
	}
	c := harness.New(t, harness.Options{Protocol: Name, Nodes: 3})
	c.FireAllNodes()
	c.DeliverAll()
	for round, at := range []automaton.NodeID{"n1", "n2"} {
		var reqs []automaton.Request
		want := map[automaton.RequestID]service.Result{}
		add := func(o service.Op, r service.Result) {
			id := automaton.RequestID{Client: 7, Seq: uint64(100*round + len(reqs) + 1)}
			reqs = append(reqs, automaton.Request{ID: id, Op: o})
			want[id] = r
		}
		set := func(k, v string) service.Op { return service.Op{Kind: "set", Key: k, Args: [][]byte{[]byte(v)}} }
		for i := range 6 {
			k := fmt.Sprintf("%s-k%d", at, i)
			add(set(k, "a"), service.OK())
			add(set(k, "b"+k), service.OK())
			add(service.Op{Kind: "get", Key: k}, service.Bytes([]byte("b"+k)))
		}
		before := len(c.AllResponses())
		outs := c.Step(at, automaton.ClientBatch{Reqs: reqs})
		a := c.Node(at).(*PB)
		sends := map[automaton.NodeID]int{}
		for _, o := range outs {
			if s, ok := o.(automaton.Send); ok {
				sends[s.To]++
				d := a.DescribeMessage(s.Msg)
				wantN := 12 // the sets' entries
				if at == "n2" {
					wantN = len(reqs) // the forwards
				}
				if !strings.HasPrefix(d, fmt.Sprintf("batch of %d:", wantN)) {
					t.Errorf("%s to %s: %s, want a batch of %d", at, s.To, d, wantN)
				}
			}
		}
		if at == "n1" && (sends["n2"] != 1 || sends["n3"] != 1) || at == "n2" && sends["n1"] != 1 {
			t.Fatalf("%s's messages: %v, want one to each peer it sends to", at, sends)
		}
		if got := len(c.AllResponses()) - before; got != 0 {
			t.Fatalf("%d answers before the backups acknowledged", got)
		}
		acks := 0
		c.Observe(func(id automaton.NodeID, o automaton.Output) {
			s, ok := o.(automaton.Send)
			if !ok || s.To != "n1" {
				return
			}
			if d := c.Node(id).(*PB).DescribeMessage(s.Msg); strings.HasPrefix(d, "ack") {
				acks++
			}
		})
		c.DeliverAll()
		c.Observe(nil)
		if acks != 2 {
			t.Errorf("batch at %s: %d acknowledgements of the entries, want one per backup", at, acks)
		}
		got := c.AllResponses()[before:]
		if len(got) != len(reqs) {
			t.Fatalf("batch at %s: %d answers to %d requests", at, len(got), len(reqs))
		}
		for i, r := range got {
			if r.Resp.ID != reqs[i].ID || !r.Resp.Result.Equal(want[r.Resp.ID]) {
				t.Errorf("batch at %s: answer %d: %v %v, want %v %v", at, i, r.Resp.ID, r.Resp.Result, reqs[i].ID, want[reqs[i].ID])
			}
		}
	}
}
