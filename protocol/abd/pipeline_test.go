package abd

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
)

func pipeCluster(t *testing.T, on bool) *stepCluster {
	return newStepClusterParams(t, map[string]string{"thrifty": "false", "peer_pipeline": fmt.Sprint(on)})
}

func pipeSet(i int) automaton.Request {
	return automaton.Request{ID: automaton.RequestID{Client: uint64(700 + i), Seq: 1},
		Op: service.Op{Kind: "set", Key: fmt.Sprint("k", i), Args: [][]byte{[]byte(fmt.Sprint(i))}}}
}

// outsString is a step's outputs, sends with their bytes.
func outsString(outs []automaton.Output) string {
	var b strings.Builder
	for _, o := range outs {
		switch o := o.(type) {
		case automaton.Send:
			fmt.Fprintf(&b, "send %s %x; ", o.To, o.Msg)
		default:
			fmt.Fprintf(&b, "%T %v; ", o, o)
		}
	}
	return b.String()
}

// messagesTo counts the phase messages in outs' sends to one node (a
// batch message's messages one each).
func messagesTo(t *testing.T, outs []automaton.Output, to automaton.NodeID) (sends, msgs int) {
	for _, o := range outs {
		s, ok := o.(automaton.Send)
		if !ok || s.To != to {
			continue
		}
		sends++
		if len(s.Msg) >= 2 && s.Msg[1] == kindBatch {
			m, err := header.SplitBatch(s.Msg, kindBatch)
			if err != nil {
				t.Fatal(err)
			}
			msgs += len(m)
		} else {
			msgs++
		}
	}
	return sends, msgs
}

// One client's operations, one at a time, send exactly the same bytes
// with peer_pipeline on as off, even when the slower peer's answers to
// the last operation arrive only after the next operation began (the
// peer still owes them): a lone round group never holds.
func TestPeerPipelineLoneClientUnchanged(t *testing.T) {
	var logs [2]string
	for k, on := range []bool{false, true} {
		c := pipeCluster(t, on)
		var log strings.Builder
		step := func(at automaton.NodeID, in automaton.Input) {
			outs := c.nodes[at].Step(in)
			log.WriteString(outsString(outs))
			c.route(at, outs)
		}
		var late []automaton.PeerMessage // n3's answers, delivered one operation late
		for i := range 12 {
			req := pipeSet(i % 3)
			if i%4 == 3 {
				req.Op = service.Op{Kind: "get", Key: req.Op.Key}
			}
			step("n1", automaton.ClientRequest{Req: req})
			for j := 0; j < len(c.queue); j++ {
				if c.queue[j].From == "n3" && c.to[j] == "n1" {
					late = append(late, c.queue[j])
					continue
				}
				step(c.to[j], c.queue[j])
			}
			c.queue, c.to = c.queue[:0], c.to[:0]
			if i > 0 && i%2 == 0 { // n3 catches up every other operation
				for _, m := range late {
					step("n1", m)
				}
				late = late[:0]
			}
		}
		if c.resps != 12 {
			t.Fatalf("peer_pipeline=%v: %d answers, want 12", on, c.resps)
		}
		logs[k] = log.String()
	}
	if logs[0] != logs[1] {
		t.Fatalf("a lone client's steps differ with peer_pipeline:\noff: %s\non:  %s", logs[0], logs[1])
	}
}

// Two round groups in flight: with peer_pipeline the second group's
// queries wait while the peers owe answers to the first, and leave in the
// batch message that carries the first group's stores; without it they
// leave at once. Both requests are answered either way, and the peers
// receive fewer batch messages.
func TestPeerPipelineSharesMessages(t *testing.T) {
	for _, on := range []bool{false, true} {
		c := pipeCluster(t, on)
		n1 := c.nodes["n1"]
		outsA := n1.Step(automaton.ClientRequest{Req: pipeSet(1)})
		if s, _ := messagesTo(t, outsA, "n2"); s != 1 {
			t.Fatalf("peer_pipeline=%v: the first group sent %d messages to n2, want 1 (a lone group never waits)", on, s)
		}
		outsB := n1.Step(automaton.ClientRequest{Req: pipeSet(2)})
		s2, _ := messagesTo(t, outsB, "n2")
		s3, _ := messagesTo(t, outsB, "n3")
		if on && s2+s3 != 0 {
			t.Fatalf("peer_pipeline: the second group's queries left at once (%d, %d) while the peers owe the first's answers", s2, s3)
		}
		if !on && (s2 != 1 || s3 != 1) {
			t.Fatalf("peer_pipeline off: the second group sent %d, %d messages, want 1 and 1", s2, s3)
		}
		// n2 answers the first group's query.
		var fromN2 []automaton.Output
		for _, o := range outsA {
			if s, ok := o.(automaton.Send); ok && s.To == "n2" {
				fromN2 = c.nodes["n2"].Step(automaton.PeerMessage{From: "n1", Msg: s.Msg})
			}
		}
		var outs []automaton.Output
		for _, o := range fromN2 {
			if s, ok := o.(automaton.Send); ok && s.To == "n1" {
				outs = n1.Step(automaton.PeerMessage{From: "n2", Msg: s.Msg})
			}
		}
		sends, msgs := messagesTo(t, outs, "n2")
		if want := map[bool]int{false: 1, true: 2}[on]; sends != 1 || msgs != want {
			t.Fatalf("peer_pipeline=%v: n2's answer made n1 send %d batch messages of %d messages to n2, want 1 of %d (the first group's store%s)",
				on, sends, msgs, want, map[bool]string{true: " and the second's query"}[on])
		}
		// n3 still owes its answer: what n1 sends it waits (on) for it.
		if s3, _ := messagesTo(t, outs, "n3"); s3 != map[bool]int{false: 1, true: 0}[on] {
			t.Fatalf("peer_pipeline=%v: %d messages to n3, which owes an answer", on, s3)
		}
		c.route("n1", outsA)
		c.route("n1", outsB)
		c.route("n1", outs)
		c.queue = c.queue[1:] // n1's query to n2, delivered above
		c.to = c.to[1:]
		for i := 0; i < len(c.queue); i++ {
			c.route(c.to[i], c.nodes[c.to[i]].Step(c.queue[i]))
		}
		if c.resps != 2 {
			t.Fatalf("peer_pipeline=%v: %d answers, want 2", on, c.resps)
		}
		if a := abdOf(c, "n1"); a.peerPipe && a.nHeld != 0 {
			t.Fatalf("%d messages still held after every answer came", a.nHeld)
		}
	}
}

// Held messages leave when a retransmission timer fires: a peer that
// never answers (down) holds nothing for longer than one retransmission
// interval.
func TestPeerPipelineTimerFlushes(t *testing.T) {
	c := pipeCluster(t, true)
	n1 := c.nodes["n1"]
	n1.Step(automaton.ClientRequest{Req: pipeSet(1)}) // n2 and n3 never answer
	if s := sendsOf(n1.Step(automaton.ClientRequest{Req: pipeSet(2)})); len(s) != 0 {
		t.Fatalf("the second group's queries left at once: %v", s)
	}
	a := abdOf(c, "n1")
	var id uint64
	for oid, o := range a.ops {
		if o.req.ID == pipeSet(1).ID {
			id = oid
		}
	}
	outs := n1.Step(automaton.TimerFired{ID: automaton.TimerID(id)})
	for _, to := range []automaton.NodeID{"n2", "n3"} {
		// The held query of the second group and the first's resent query.
		if _, m := messagesTo(t, outs, to); m != 2 {
			t.Fatalf("the retransmission sent %d messages to %s, want 2 (the held query too)", m, to)
		}
	}
	if a.nHeld != 0 {
		t.Fatalf("%d messages still held after a timer", a.nHeld)
	}
}
