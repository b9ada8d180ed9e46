package abd

import (
	"fmt"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

// A ClientBatch's phases share the rounds: one message to each peer per
// phase (a batch message holding every operation's query or store), one
// answer from each peer, and every request answered as if it had been
// stepped alone: what a serial run of the same requests returns.
func TestClientBatchSharesRounds(t *testing.T) {
	c := newStepCluster(t)
	c.do(automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "set", Key: "k0", Args: [][]byte{[]byte("old")}}})
	var reqs []automaton.Request
	want := map[automaton.RequestID]string{}
	for i := range 40 {
		id := automaton.RequestID{Client: uint64(100 + i), Seq: 1}
		key := fmt.Sprintf("k%d", i%20)
		if i < 20 {
			reqs = append(reqs, automaton.Request{ID: id, Op: service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte("v" + key)}}})
			want[id] = "OK"
		} else {
			reqs = append(reqs, automaton.Request{ID: id, Op: service.Op{Kind: "get", Key: fmt.Sprintf("k%d", 20+i)}})
			want[id] = "(nil)"
		}
	}
	got := map[automaton.RequestID]string{}
	outs := c.nodes["n1"].Step(automaton.ClientBatch{Reqs: reqs})
	sends := 0
	for _, o := range outs {
		if s, ok := o.(automaton.Send); ok {
			sends++
			if s.Msg[1] != kindBatch {
				t.Fatalf("to %s: message kind %d, want a batch", s.To, s.Msg[1])
			}
			msgs, err := header.SplitBatch(s.Msg, kindBatch)
			if err != nil || len(msgs) != 40 {
				t.Fatalf("batch to %s: %d messages, %v; want 40 queries", s.To, len(msgs), err)
			}
		}
	}
	if sends != 2 {
		t.Fatalf("query phase: %d sends, want one per peer (2)", sends)
	}
	rounds := 0
	for len(outs) > 0 {
		rounds++
		var next []automaton.Output
		for _, o := range outs {
			switch o := o.(type) {
			case automaton.Respond:
				got[o.Resp.ID] = o.Resp.Result.String()
			case automaton.Send:
				replies := c.nodes[o.To].Step(automaton.PeerMessage{From: "n1", Msg: o.Msg})
				n := 0
				for _, r := range replies {
					if r, ok := r.(automaton.Send); ok {
						n++
						next = append(next, c.nodes["n1"].Step(automaton.PeerMessage{From: o.To, Msg: r.Msg})...)
					}
				}
				if n != 1 {
					t.Fatalf("%s answered a batch with %d messages, want one", o.To, n)
				}
			}
		}
		outs = next
	}
	for id, w := range want {
		if got[id] != w {
			t.Errorf("request %v: %q, want %q", id, got[id], w)
		}
	}
	// Two phases, and the second round's answers come back in the
	// same pass as the second peer's: at most three passes of messages.
	if rounds > 3 {
		t.Errorf("%d rounds of messages for two phases", rounds)
	}
	// Every replica holds the writes (a majority at least, here all).
	for i := range 20 {
		key := fmt.Sprintf("k%d", i)
		held := 0
		for _, id := range c.ids {
			if e := c.nodes[id].(*ABD).entry(key); string(e.Value) == "v"+key {
				held++
			}
		}
		if held < 2 {
			t.Errorf("key %s held by %d replicas", key, held)
		}
	}
}

// A replica's stores of one batch message are persisted before its one
// acknowledgement, and the acknowledgement carries every store's ack.
func TestBatchStoresPersistBeforeAck(t *testing.T) {
	c := newStepCluster(t)
	var msgs []automaton.Output
	for i := range 5 {
		m := message{Kind: kindStore, Op: uint64(i + 1), Key: fmt.Sprintf("k%d", i), Tag: Tag{TS: 1, Node: "n1", Seq: uint64(i + 1)}, Value: []byte("x")}
		msgs = append(msgs, automaton.Send{To: "n2", Msg: m.marshal()})
	}
	b := header.Coalesce(msgs, kindBatch)
	if len(b) != 1 {
		t.Fatalf("coalesced into %d outputs", len(b))
	}
	outs := c.nodes["n2"].Step(automaton.PeerMessage{From: "n1", Msg: b[0].(automaton.Send).Msg})
	persists := 0
	for i, o := range outs {
		switch o := o.(type) {
		case automaton.Persist:
			persists++
		case automaton.Send:
			if persists != 5 || i != len(outs)-1 {
				t.Fatalf("ack at output %d after %d persists; want after all 5", i, persists)
			}
			acks, err := header.SplitBatch(o.Msg, kindBatch)
			if err != nil || len(acks) != 5 {
				t.Fatalf("ack batch: %d, %v", len(acks), err)
			}
		}
	}
}
