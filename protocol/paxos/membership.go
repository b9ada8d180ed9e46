package paxos

import (
	"fmt"
	"sort"
	"strings"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/wire"
)

// member is one node of a configuration. Num is its ballot number: bootstrap
// members are numbered 1..N in bootstrap order, and every node added later
// gets the configuration's next number when its add executes, so two nodes
// never share a number (and never a ballot).
type member struct {
	ID           automaton.NodeID
	Num          uint32
	Peer, Client string
}

// conf is a configuration: the members whose majorities are the quorums of
// the instances it governs. It is part of the replicated state (and of
// snapshots); a conf value is never modified once built.
type conf struct {
	members []member // sorted by Num
	nextNum uint32
	epoch   uint64 // instance whose execution made it (0: bootstrap)
}

func bootstrapConf(ids []automaton.NodeID) *conf {
	c := &conf{nextNum: uint32(len(ids)) + 1}
	for i, id := range ids {
		c.members = append(c.members, member{ID: id, Num: uint32(i + 1)})
	}
	return c
}

func (c *conf) has(id automaton.NodeID) bool { return c.get(id) != nil }

func (c *conf) get(id automaton.NodeID) *member {
	for i := range c.members {
		if c.members[i].ID == id {
			return &c.members[i]
		}
	}
	return nil
}

func (c *conf) majority() int { return automaton.Majority(len(c.members)) }

func (c *conf) ids() []string {
	out := make([]string, len(c.members))
	for i, m := range c.members {
		out[i] = string(m.ID)
	}
	return out
}

func (c *conf) String() string { return strings.Join(c.ids(), " ") }

// change is a parsed membership operation.
type change struct {
	add          bool
	id           automaton.NodeID
	peer, client string
}

func (ch change) String() string {
	if ch.add {
		return fmt.Sprintf("add %s (peer %s, client %s)", ch.id, ch.peer, ch.client)
	}
	return "remove " + string(ch.id)
}

// parseChange checks a membership operation's syntax.
func parseChange(op service.Op) (change, error) {
	var ch change
	switch op.Key {
	case "add":
		if len(op.Args) != 3 {
			return ch, fmt.Errorf("member add needs id, peer address and client address")
		}
		ch = change{add: true, id: automaton.NodeID(op.Args[0]), peer: string(op.Args[1]), client: string(op.Args[2])}
		if ch.peer == "" || ch.client == "" || len(ch.peer) > 255 || len(ch.client) > 255 {
			return ch, fmt.Errorf("member add %s: peer and client addresses must be 1-255 bytes", ch.id)
		}
	case "remove":
		if len(op.Args) != 1 {
			return ch, fmt.Errorf("member remove needs exactly one id")
		}
		ch = change{id: automaton.NodeID(op.Args[0])}
	default:
		return ch, fmt.Errorf("unknown member action %q (want add or remove)", op.Key)
	}
	if ch.id == "" || len(ch.id) > 63 || strings.ContainsAny(string(ch.id), " ,\t\n") {
		return ch, fmt.Errorf("member %s: bad node id %q", op.Key, ch.id)
	}
	return ch, nil
}

// apply returns the configuration after ch, executed at instance i, or an
// error when ch does not apply to c (the configuration then stays).
func (c *conf) apply(ch change, i uint64) (*conf, error) {
	n := &conf{nextNum: c.nextNum, epoch: i}
	if ch.add {
		if c.has(ch.id) {
			return nil, fmt.Errorf("%s is already a member (members: %s)", ch.id, c)
		}
		if len(c.members) >= maxNodes {
			return nil, fmt.Errorf("configuration has %d members already (limit %d)", len(c.members), maxNodes)
		}
		n.members = append(append(n.members, c.members...), member{ID: ch.id, Num: c.nextNum, Peer: ch.peer, Client: ch.client})
		n.nextNum++
		return n, nil
	}
	if !c.has(ch.id) {
		return nil, fmt.Errorf("%s is not a member (members: %s)", ch.id, c)
	}
	if len(c.members) == 1 {
		return nil, fmt.Errorf("cannot remove %s, the last member", ch.id)
	}
	for _, m := range c.members {
		if m.ID != ch.id {
			n.members = append(n.members, m)
		}
	}
	return n, nil
}

func encodeConf(e *wire.Encoder, c *conf) {
	e.Uvarint(uint64(c.nextNum))
	e.Uvarint(c.epoch)
	e.Uvarint(uint64(len(c.members)))
	for _, m := range c.members {
		e.String(string(m.ID))
		e.Uvarint(uint64(m.Num))
		e.String(m.Peer)
		e.String(m.Client)
	}
}

func decodeConf(d *wire.Decoder) *conf {
	c := &conf{}
	nn := d.Uvarint()
	c.epoch = d.Uvarint()
	k := d.Count(maxNodes, 4)
	for i := 0; i < k && d.Err() == nil; i++ {
		m := member{ID: automaton.NodeID(d.String())}
		num := d.Uvarint()
		m.Peer, m.Client = d.String(), d.String()
		if num == 0 || num >= nn || nn > 1<<31 {
			d.Fail(fmt.Errorf("paxos: configuration member number %d out of range", num))
		}
		m.Num = uint32(num)
		c.members = append(c.members, m)
	}
	if d.Err() == nil && k == 0 {
		d.Fail(fmt.Errorf("paxos: empty configuration"))
	}
	c.nextNum = uint32(nn)
	sort.Slice(c.members, func(i, j int) bool { return c.members[i].Num < c.members[j].Num })
	return c
}

// A log value holding a membership change is marked by its first byte, so
// that acceptors can notice one without decoding batches of commands:
// changeVersion, client id, sequence, operation. A change is always alone in
// its instance.
const changeVersion = 2

func encodeChange(c cmd) []byte {
	e := wire.Encoder{B: make([]byte, 0, 64)}
	e.Byte(changeVersion)
	e.Uvarint(c.ID.Client)
	e.Uvarint(c.ID.Seq)
	service.EncodeOp(&e, c.Op)
	return e.B
}

func isChangeValue(v []byte) bool { return len(v) > 0 && v[0] == changeVersion }

// valueChange returns the change held by log value v, if any.
func valueChange(v []byte) (change, bool) {
	if !isChangeValue(v) {
		return change{}, false
	}
	cmds, err := decodeBatch(v)
	if err != nil || len(cmds) != 1 {
		return change{}, false
	}
	ch, err := parseChange(cmds[0].Op)
	return ch, err == nil
}

// parseMembers parses the "members" parameter: the bootstrap configuration,
// comma-separated node ids in numbering order.
func parseMembers(v string) ([]automaton.NodeID, error) {
	var out []automaton.NodeID
	seen := map[string]bool{}
	for _, s := range strings.Split(v, ",") {
		s = strings.TrimSpace(s)
		if s == "" || len(s) > 63 || seen[s] {
			return nil, fmt.Errorf("paxos: parameter members: %q is not a comma list of distinct node ids", v)
		}
		seen[s] = true
		out = append(out, automaton.NodeID(s))
	}
	if len(out) > maxNodes {
		return nil, fmt.Errorf("paxos: parameter members: %d nodes (limit %d)", len(out), maxNodes)
	}
	return out, nil
}

// nodeSet is a set of local node handles (see Paxos.handle).
type nodeSet []uint64

func (s *nodeSet) add(h int) bool {
	w := h / 64
	for len(*s) <= w {
		*s = append(*s, 0)
	}
	if (*s)[w]&(1<<uint(h%64)) != 0 {
		return false
	}
	(*s)[w] |= 1 << uint(h%64)
	return true
}

func (s nodeSet) has(h int) bool {
	w := h / 64
	return w < len(s) && s[w]&(1<<uint(h%64)) != 0
}
