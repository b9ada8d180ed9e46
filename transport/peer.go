package transport

import "github.com/synod-dev/synod/automaton"

// Sender sends one automaton message for namespace ns to peer to. Every peer
// transport implements it: *Transport (framed TCP, this package) and the two
// gRPC senders of package transport/grpcpeer. The node runtime picks one per
// namespace (config.Namespace.Transport).
//
// The contract is *Transport.Send's: Send never blocks the caller (a full
// per-peer queue drops the message, counts the drop and returns an error),
// msg is copied, and delivery is best effort: messages may be lost, and are
// delivered in order per peer while a connection stays up. The automata
// tolerate loss, duplication and reordering (package automaton).
type Sender interface {
	Send(to automaton.NodeID, ns string, msg []byte) error
}

var _ Sender = (*Transport)(nil)

// QueuedSender is a Sender that can also leave a message to its writer
// goroutine instead of writing it on the caller's goroutine
// (Transport.SendQueued).
type QueuedSender interface {
	Sender
	SendQueued(to automaton.NodeID, ns string, msg []byte) error
}

var _ QueuedSender = (*Transport)(nil)

// FrameSender is a Sender that also takes many messages to one peer at
// once, already encoded as frames (Transport.SendFrames): the node's loop
// sends what one turn released to each peer with it.
type FrameSender interface {
	Sender
	SendFrames(to automaton.NodeID, frames []byte, n int) error
}

var _ FrameSender = (*Transport)(nil)

// OwnedFrameSender is a FrameSender that can also take the caller's frames
// buffer over instead of copying it, handing back a spare buffer for the
// next ones (Transport.SendFramesOwned).
type OwnedFrameSender interface {
	FrameSender
	SendFramesOwned(to automaton.NodeID, frames []byte, n int) (spare []byte, err error)
}

var _ OwnedFrameSender = (*Transport)(nil)
