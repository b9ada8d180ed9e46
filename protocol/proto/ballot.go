package proto

import (
	"fmt"

	"github.com/synod-dev/synod/wire"
)

// Ballot numbers proposals (Paxos's ballots, the Grid Services thesis chapter V) and views
// (the blocking protocol's, the ABD report §4.4): a round, then the proposing
// node, compared lexicographically, so that two proposers never pick the
// same ballot. What Node holds is the protocol's choice (Paxos: the node's
// number, from 1, so the zero Ballot is below every real one; blocking: the
// node's index, with rounds from 1). The zero Ballot means "none".
type Ballot struct {
	Round uint64
	Node  uint32
}

// Less reports whether b orders before c.
func (b Ballot) Less(c Ballot) bool {
	if b.Round != c.Round {
		return b.Round < c.Round
	}
	return b.Node < c.Node
}

// IsZero reports whether b is the zero Ballot.
func (b Ballot) IsZero() bool { return b == Ballot{} }

// Next is node's ballot in the round after b's: above b and above every
// ballot of b's round.
func (b Ballot) Next(node uint32) Ballot { return Ballot{Round: b.Round + 1, Node: node} }

func (b Ballot) String() string { return fmt.Sprintf("(%d,%d)", b.Round, b.Node) }

// Dotted spells b as "round.node", the blocking protocol's view names.
func (b Ballot) Dotted() string { return fmt.Sprintf("%d.%d", b.Round, b.Node) }

// Encode appends b: the round and the node as unsigned varints.
func (b Ballot) Encode(e *wire.Encoder) {
	e.Uvarint(b.Round)
	e.Uvarint(uint64(b.Node))
}

// DecodeBallot reads a ballot Encode wrote; a node above maxNode fails the
// decoder.
func DecodeBallot(d *wire.Decoder, maxNode uint32) Ballot {
	r := d.Uvarint()
	n := d.Uvarint()
	if n > uint64(maxNode) {
		d.Fail(fmt.Errorf("ballot node %d out of range (at most %d)", n, maxNode))
		return Ballot{}
	}
	return Ballot{Round: r, Node: uint32(n)}
}
