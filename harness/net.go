package harness

import (
	"fmt"
	"math/rand"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// Match selects messages by sender and receiver ("" matches any).
func Match(from, to automaton.NodeID) func(Message) bool {
	return func(m Message) bool { return (from == "" || m.From == from) && (to == "" || m.To == to) }
}

// Queue returns the messages in flight, oldest first.
func (c *Cluster) Queue() []Message { return append([]Message(nil), c.queue...) }

// Pending returns the number of messages in flight.
func (c *Cluster) Pending() int { return len(c.queue) }

// SetLoss installs a persistent loss rule: a message it matches is lost when
// its turn to be delivered comes (nil: no rule).
func (c *Cluster) SetLoss(lose func(Message) bool) { c.loss = lose }

// Isolate makes every message to or from the listed nodes lost on delivery
// (a partition that cuts them off from everyone), until Heal.
func (c *Cluster) Isolate(ids ...automaton.NodeID) {
	cut := map[automaton.NodeID]bool{}
	for _, id := range ids {
		c.known(id)
		cut[id] = true
	}
	c.loss = func(m Message) bool { return cut[m.From] || cut[m.To] }
}

// Heal removes the loss rule.
func (c *Cluster) Heal() { c.loss = nil }

// deliver hands m to its receiver, unless the loss rule or a crash loses it,
// and returns the receiver's outputs.
func (c *Cluster) deliver(m Message) []automaton.Output {
	c.t.Helper()
	switch {
	case c.loss != nil && c.loss(m):
		c.noteMsg(m, "lost")
	case c.nodes[m.To] == nil:
		c.noteMsg(m, fmt.Sprintf("lost (%s is down)", m.To))
	default:
		return c.Step(m.To, automaton.PeerMessage{From: m.From, Msg: m.Msg})
	}
	return nil
}

// Pop removes the oldest message in flight and returns it undelivered: the
// test looks at it and delivers it (DeliverMessage), holds it back for
// later, or forgets it.
func (c *Cluster) Pop() (Message, bool) {
	if len(c.queue) == 0 {
		return Message{}, false
	}
	m := c.queue[0]
	c.queue[0] = Message{}
	c.queue = c.queue[1:]
	return m, true
}

// DeliverMessage delivers m now, out of the queue (a message taken with Pop,
// or forged by the test), and returns the receiver's outputs; the loss rule
// and crashes apply as to any delivery.
func (c *Cluster) DeliverMessage(m Message) []automaton.Output {
	c.t.Helper()
	c.known(m.To)
	return c.deliver(m)
}

// DeliverOne delivers the oldest message in flight and reports whether there
// was one.
func (c *Cluster) DeliverOne() bool {
	c.t.Helper()
	if len(c.queue) == 0 {
		return false
	}
	m := c.queue[0]
	c.queue = c.queue[1:]
	c.deliver(m)
	return true
}

// DeliverAll delivers messages in FIFO order until none is in flight, and
// returns how many it handled.
func (c *Cluster) DeliverAll() int {
	c.t.Helper()
	return c.Deliver(nil, 0)
}

// Deliver delivers, in FIFO order, the messages that match (nil: all),
// including those the deliveries produce, until none matches or limit
// (>0) messages were handled. Messages that do not match keep their place.
func (c *Cluster) Deliver(match func(Message) bool, limit int) int {
	c.t.Helper()
	n := 0
	for limit <= 0 || n < limit {
		i := c.find(match)
		if i < 0 {
			break
		}
		m := c.queue[i]
		c.queue = append(c.queue[:i], c.queue[i+1:]...)
		c.deliver(m)
		n++
		if n > c.opts.MaxSteps {
			c.t.Fatalf("harness: message storm: %d deliveries without quiet", n)
		}
	}
	return n
}

func (c *Cluster) find(match func(Message) bool) int {
	for i, m := range c.queue {
		if match == nil || match(m) {
			return i
		}
	}
	return -1
}

// Drop removes the matching messages in flight (nil: all) and returns how
// many.
func (c *Cluster) Drop(match func(Message) bool) int {
	keep := c.queue[:0]
	n := 0
	for _, m := range c.queue {
		if match == nil || match(m) {
			c.noteMsg(m, "dropped")
			n++
			continue
		}
		keep = append(keep, m)
	}
	for i := len(keep); i < len(c.queue); i++ {
		c.queue[i] = Message{}
	}
	c.queue = keep
	return n
}

// Faults parameterise DeliverRandom.
type Faults struct {
	// Rand chooses; required.
	Rand *rand.Rand
	// Loss, Dup: probability that a message is lost, or delivered twice.
	Loss, Dup float64
	// Reorder: probability that the next delivery is a random message in
	// flight rather than the oldest (1: a random order throughout).
	Reorder float64
}

// DeliverRandom delivers messages until none is in flight, losing,
// duplicating and reordering them as f says. It returns how many it handled.
// A message to a down node is lost without drawing for loss or duplication.
func (c *Cluster) DeliverRandom(f Faults) int {
	c.t.Helper()
	n := 0
	for ; len(c.queue) > 0; n++ {
		if n > c.opts.MaxSteps {
			c.t.Fatalf("harness: message storm: %d deliveries without quiet", n)
		}
		i := 0
		if f.Reorder > 0 && f.Rand.Float64() < f.Reorder {
			i = f.Rand.Intn(len(c.queue))
		}
		m := c.queue[i]
		c.queue = append(c.queue[:i], c.queue[i+1:]...)
		if c.nodes[m.To] == nil { // lost without a draw: a crash decided
			c.deliver(m)
			continue
		}
		if f.Loss > 0 && f.Rand.Float64() < f.Loss {
			c.noteMsg(m, "lost")
			continue
		}
		c.deliver(m)
		if f.Dup > 0 && f.Rand.Float64() < f.Dup {
			c.deliver(m)
		}
	}
	return n
}

// describer returns the automaton that decodes a message from node from:
// the sender's or, when it is down, any up node's; every node of a protocol
// decodes the same messages.
func (c *Cluster) describer(from automaton.NodeID) automaton.Automaton {
	if a := c.nodes[from]; a != nil {
		return a
	}
	for _, id := range c.ids {
		if a := c.nodes[id]; a != nil {
			return a
		}
	}
	return nil
}

// describeMsg describes msg from node from as things stand now.
func (c *Cluster) describeMsg(from automaton.NodeID, msg []byte) string {
	return describeWith(c.describer(from), msg)
}

func describeWith(a automaton.Automaton, msg []byte) string {
	if d, ok := a.(MessageDescriber); ok {
		return d.DescribeMessage(msg)
	}
	return fmt.Sprintf("%d bytes", len(msg))
}

// describeInput describes an input; d decodes a peer message.
func describeInput(d automaton.Automaton, in automaton.Input) string {
	switch in := in.(type) {
	case automaton.Start:
		return fmt.Sprintf("start (%d records)", len(in.Records))
	case automaton.ClientRequest:
		return "request " + describeRequest(in.Req)
	case automaton.PeerMessage:
		return fmt.Sprintf("<- %s %s", in.From, describeWith(d, in.Msg))
	case automaton.TimerFired:
		return fmt.Sprintf("timer %d fired", in.ID)
	case automaton.EffectDone:
		if in.Err != nil {
			return fmt.Sprintf("effect %d failed: %v", in.ID, in.Err)
		}
		return fmt.Sprintf("effect %d done", in.ID)
	}
	return fmt.Sprintf("%T", in)
}

func describeRequest(r automaton.Request) string {
	s := r.ID.String() + " "
	switch {
	case len(r.Ops) > 0:
		s += fmt.Sprintf("atomic%v", r.Ops)
	case r.Txn != nil:
		s += fmt.Sprintf("txn %v %v", r.Txn.Action, r.Txn.Txn)
		if r.Txn.Action == automaton.TxnOp {
			s += " " + r.Op.String()
		}
	default:
		s += r.Op.String()
	}
	if r.Opts.Read != automaton.ReadDefault {
		s += " read=" + r.Opts.Read.String()
	}
	if o := automaton.FormatOptions(r.Opts); o != "" {
		s += " " + o
	}
	return s
}

// describeOutput describes an output; d (the stepping automaton) decodes
// a message.
func describeOutput(d automaton.Automaton, o automaton.Output) string {
	switch o := o.(type) {
	case automaton.Send:
		return fmt.Sprintf("-> %s %s", o.To, describeWith(d, o.Msg))
	case automaton.Respond:
		if o.Resp.Silent {
			return fmt.Sprintf("respond %v silent", o.Resp.ID)
		}
		s := fmt.Sprintf("respond %v %v", o.Resp.ID, o.Resp.Result)
		if len(o.Resp.Results) > 0 {
			s += fmt.Sprintf(" %v", o.Resp.Results)
		}
		return s
	case automaton.Persist:
		if o.Delete {
			return "persist delete " + o.Key
		}
		return fmt.Sprintf("persist %s (%d bytes)", o.Key, len(o.Value))
	case automaton.SetTimer:
		return fmt.Sprintf("set timer %d %v", o.ID, o.After)
	case automaton.CancelTimer:
		return fmt.Sprintf("cancel timer %d", o.ID)
	case automaton.Members:
		return "members " + describeMembers(o.Members)
	case automaton.Effect:
		return fmt.Sprintf("effect %d %s", o.ID, o.Kind)
	case automaton.Unpin:
		return fmt.Sprintf("unpin %d", o.Pos)
	}
	return fmt.Sprintf("%T", o)
}

// describeMembers writes a Members output as "n1 n2 n4(learner)", with the
// addresses of nodes the runtime is told about ("n4(learner p4 c4)").
func describeMembers(ms []automaton.Member) string {
	var b []string
	for _, m := range ms {
		s := string(m.ID)
		var notes []string
		if !m.Voting {
			notes = append(notes, "learner")
		}
		if m.Peer != "" || m.Client != "" {
			notes = append(notes, m.Peer, m.Client)
		}
		if len(notes) > 0 {
			s += "(" + strings.Join(notes, " ") + ")"
		}
		b = append(b, s)
	}
	if len(b) == 0 {
		return "(none)"
	}
	return strings.Join(b, " ")
}
