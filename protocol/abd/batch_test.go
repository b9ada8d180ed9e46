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

// A batch's requests on one key form a key run: one query and one store
// phase for all, results as serial execution in batch order gives, and
// the run's last register installed at every replica with one new tag.
func TestKeyRunSerialResults(t *testing.T) {
	c := newStepCluster(t)
	c.do(automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("old")}}})
	script := []struct {
		op   service.Op
		want string
	}{
		{service.Op{Kind: "get", Key: "k"}, `"old"`},
		{service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("a")}}, "OK"},
		{service.Op{Kind: "get", Key: "k"}, `"a"`},
		{service.Op{Kind: "del", Key: "k"}, "(integer) 1"},
		{service.Op{Kind: "exists", Key: "k"}, "(integer) 0"},
		{service.Op{Kind: "get", Key: "k"}, "(nil)"},
		{service.Op{Kind: "del", Key: "k"}, "(integer) 0"},
		{service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("b")}}, "OK"},
		{service.Op{Kind: "exists", Key: "k"}, "(integer) 1"},
		{service.Op{Kind: "get", Key: "k"}, `"b"`},
	}
	var reqs []automaton.Request
	for i, s := range script {
		reqs = append(reqs, automaton.Request{ID: automaton.RequestID{Client: uint64(200 + i), Seq: 1}, Op: s.op})
	}
	got := map[automaton.RequestID]string{}
	queries, stores := 0, 0
	outs := c.nodes["n1"].Step(automaton.ClientBatch{Reqs: reqs})
	for len(outs) > 0 {
		var next []automaton.Output
		for _, o := range outs {
			switch o := o.(type) {
			case automaton.Respond:
				got[o.Resp.ID] = o.Resp.Result.String()
			case automaton.Send:
				switch o.Msg[1] {
				case kindQuery, kindQueryAbove:
					queries++
				case kindStore:
					stores++
				default:
					t.Fatalf("a message of kind %d: the run should need one message per peer per phase", o.Msg[1])
				}
				for _, r := range c.nodes[o.To].Step(automaton.PeerMessage{From: "n1", Msg: o.Msg}) {
					if r, ok := r.(automaton.Send); ok {
						next = append(next, c.nodes["n1"].Step(automaton.PeerMessage{From: o.To, Msg: r.Msg})...)
					}
				}
			}
		}
		outs = next
	}
	for i, s := range script {
		if g := got[reqs[i].ID]; g != s.want {
			t.Errorf("request %d %v: %q, want %q (serial execution)", i, s.op, g, s.want)
		}
	}
	if queries != 2 || stores != 2 {
		t.Errorf("%d queries and %d stores sent, want one of each per peer (2, 2)", queries, stores)
	}
	var tag Tag
	for _, id := range c.ids {
		e := c.nodes[id].(*ABD).entry("k")
		if string(e.Value) != "b" || e.Tomb {
			t.Errorf("%s holds %q (tomb %v), want the run's last write", id, e.Value, e.Tomb)
		}
		if id != "n1" && e.Tag != tag {
			t.Errorf("%s tag %v, n1 %v: one tag for the run", id, e.Tag, tag)
		}
		tag = e.Tag
	}
	if tag.TS != 2 {
		t.Errorf("tag %v: the run's writes should install one tag, ts 2", tag)
	}
}

// A run of reads only writes back the register it read when a majority
// does not hold it yet, and answers every read with it.
func TestKeyRunReadsWriteBack(t *testing.T) {
	c := newStepCluster(t)
	c.drop = "n3"
	c.do(automaton.Request{ID: automaton.RequestID{Client: 9, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}})
	c.drop = "n2" // n1 and n3 answer: n3 never saw the write
	reqs := []automaton.Request{
		{ID: automaton.RequestID{Client: 1, Seq: 1}, Op: service.Op{Kind: "get", Key: "k"}},
		{ID: automaton.RequestID{Client: 2, Seq: 1}, Op: service.Op{Kind: "exists", Key: "k"}},
	}
	c.route("n1", c.nodes["n1"].Step(automaton.ClientBatch{Reqs: reqs}))
	for i := 0; i < len(c.queue); i++ {
		c.route(c.to[i], c.nodes[c.to[i]].Step(c.queue[i]))
	}
	if c.resps != 3 || c.last.String() != "(integer) 1" {
		t.Fatalf("%d answers, last %v", c.resps, c.last)
	}
	if e := c.nodes["n3"].(*ABD).entry("k"); string(e.Value) != "v" {
		t.Errorf("n3 holds %q: the run's reads did not write back", e.Value)
	}
}

// With window groups in flight, requests that arrive one by one wait and
// then begin together as one group: one batch message per peer for all
// of them, and on one key a key run.
func TestWindowQueuesIntoOneGroup(t *testing.T) {
	c := newStepCluster(t)
	n1 := c.nodes["n1"]
	var held []automaton.Output
	req := func(i int, key string) automaton.Request {
		return automaton.Request{ID: automaton.RequestID{Client: uint64(300 + i), Seq: 1}, Op: service.Op{Kind: "set", Key: key, Args: [][]byte{[]byte(fmt.Sprint(i))}}}
	}
	// Two groups in flight (window 2): their queries are held.
	held = append(held, n1.Step(automaton.ClientRequest{Req: req(0, "a")})...)
	held = append(held, n1.Step(automaton.ClientRequest{Req: req(1, "b")})...)
	for i := 2; i < 8; i++ {
		for _, o := range n1.Step(automaton.ClientRequest{Req: req(i, fmt.Sprint("k", i%3))}) {
			if _, ok := o.(automaton.Send); ok {
				t.Fatalf("request %d sent a message with two groups in flight", i)
			}
		}
	}
	if a := n1.(*ABD); len(a.queue) != 6 || len(a.groupLeft) != 2 {
		t.Fatalf("queue %d, groups %d; want 6 waiting behind 2", len(a.queue), len(a.groupLeft))
	}
	// A retry of a waiting request (its client's timeout) is neither
	// answered nor queued again: it is answered when the first begins
	// and completes (the request table's queued stage).
	for _, o := range n1.Step(automaton.ClientRequest{Req: req(4, "k1")}) {
		if _, ok := o.(automaton.Respond); ok {
			t.Fatalf("a retry of a waiting request was answered: %v", o)
		}
	}
	if a := n1.(*ABD); len(a.queue) != 6 {
		t.Fatalf("queue %d after a retry of a waiting request, want 6", len(a.queue))
	}
	// Finish the first group: deliver its query to n2 and the answer back.
	var next []automaton.Output
	for _, o := range held[:len(held)/2] {
		if s, ok := o.(automaton.Send); ok && s.To == "n2" {
			for _, r := range c.nodes["n2"].Step(automaton.PeerMessage{From: "n1", Msg: s.Msg}) {
				if r, ok := r.(automaton.Send); ok {
					next = append(next, n1.Step(automaton.PeerMessage{From: "n2", Msg: r.Msg})...)
				}
			}
		}
	}
	// The store phase of request 0, then its acks: the group ends and the
	// six waiting requests begin as one group.
	var began []automaton.Output
	for _, o := range next {
		if s, ok := o.(automaton.Send); ok && s.To == "n2" {
			for _, r := range c.nodes["n2"].Step(automaton.PeerMessage{From: "n1", Msg: s.Msg}) {
				if r, ok := r.(automaton.Send); ok {
					began = append(began, n1.Step(automaton.PeerMessage{From: "n2", Msg: r.Msg})...)
				}
			}
		}
	}
	sends := 0
	for _, o := range began {
		if s, ok := o.(automaton.Send); ok {
			sends++
			parts, err := header.SplitBatch(s.Msg, kindBatch)
			// 6 requests on 3 keys: 3 operations (key runs of 2).
			if err != nil || len(parts) != 3 {
				t.Fatalf("to %s: %d queries, %v; want one batch of 3 (key runs)", s.To, len(parts), err)
			}
		}
	}
	if sends != 2 {
		t.Fatalf("the waiting requests sent %d messages, want one batch per peer", sends)
	}
}

// gatherStep steps in at n1 and delivers every message until none is
// left (as stepCluster.do); it reports whether n1's own step sent a
// message and whether it armed the gather timer.
func gatherStep(c *stepCluster, in automaton.Input) (sent, armed bool) {
	outs := c.nodes["n1"].Step(in)
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Send:
			sent = true
		case automaton.SetTimer:
			armed = armed || o.ID == gatherTimer
		}
	}
	c.route("n1", outs)
	for i := 0; i < len(c.queue); i++ {
		c.route(c.to[i], c.nodes[c.to[i]].Step(c.queue[i]))
	}
	c.queue, c.to = c.queue[:0], c.to[:0]
	return sent, armed
}

// With parameter gather, after a round group of several requests ends,
// the requests that arrive wait until as many have come back as the group
// answered (its clients, in a closed loop), and begin as one group: the
// first client back does not begin a group of its own that would keep
// its clients apart from the others' (docs/COSTS.md, abd49: two cohorts of
// clients keep their split while each finds room in the window). The
// gather timer ends a wait that is not completed; later waits then expect
// no more than came. A lone client is never held. Without gather (the
// default) the first request back begins at once.
func TestGatherWaitsForTheGroupsClients(t *testing.T) {
	set := func(i int) automaton.Request {
		return automaton.Request{ID: automaton.RequestID{Client: uint64(500 + i), Seq: uint64(i)}, Op: service.Op{Kind: "set", Key: fmt.Sprint("k", i%4), Args: [][]byte{[]byte(fmt.Sprint(i))}}}
	}
	batch := func(from, n int) automaton.ClientBatch {
		var b automaton.ClientBatch
		for i := from; i < from+n; i++ {
			b.Reqs = append(b.Reqs, set(i))
		}
		return b
	}
	for _, gather := range []bool{false, true} {
		p := map[string]string{"thrifty": "false"}
		if gather {
			p["gather"] = "1ms"
		}
		c := newStepClusterParams(t, p)
		a := c.nodes["n1"].(*ABD)
		// A lone client: never held.
		for i := range 3 {
			if sent, armed := gatherStep(c, automaton.ClientRequest{Req: set(i)}); !sent || armed {
				t.Fatalf("gather=%v: lone request %d: sent %v, gather timer %v; want sent at once", gather, i, sent, armed)
			}
		}
		// A group of four ends; its clients come back one by one.
		gatherStep(c, batch(10, 4))
		for i := 20; i < 23; i++ {
			sent, armed := gatherStep(c, automaton.ClientRequest{Req: set(i)})
			if !gather {
				if !sent {
					t.Fatalf("gather off: request %d back after a group of 4 was held", i)
				}
				continue
			}
			if sent || armed != (i == 20) {
				t.Fatalf("gather: request %d of 4 back: sent %v, timer armed %v; want held (the timer armed by the first)", i, sent, armed)
			}
		}
		if !gather {
			if g := a.RoundGroups().OnArrival; g.Groups != 3+1+3 {
				t.Errorf("gather off: %+v groups on arrival, want 7", g)
			}
			continue
		}
		if sent, _ := gatherStep(c, automaton.ClientRequest{Req: set(23)}); !sent {
			t.Fatal("gather: the fourth request back did not begin the group")
		}
		if g := a.RoundGroups().OnArrival; g.Groups != 5 || g.Requests != 3+4+4 {
			t.Fatalf("gather: groups on arrival %+v, want 5 with 11 requests (the four back as one)", g)
		}
		// Of the next four, one comes back: the timer begins it alone, and
		// the next wait expects one at most (none is held).
		if sent, armed := gatherStep(c, automaton.ClientRequest{Req: set(30)}); sent || !armed {
			t.Fatalf("gather: first back of 4: sent %v, armed %v; want held", sent, armed)
		}
		if sent, _ := gatherStep(c, automaton.TimerFired{ID: gatherTimer}); !sent {
			t.Fatal("gather: the timer did not begin the one request back")
		}
		gatherStep(c, batch(40, 4))
		if sent, armed := gatherStep(c, automaton.ClientRequest{Req: set(50)}); !sent || armed {
			t.Fatalf("gather after a timer: sent %v, armed %v; want begun at once (one came back last time)", sent, armed)
		}
		if c.resps != 3+4+4+1+4+1 {
			t.Errorf("gather: %d answers, want 17", c.resps)
		}
	}
}
