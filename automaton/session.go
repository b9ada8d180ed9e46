package automaton

import "github.com/synod-dev/synod/service"

// Client sessions (protocols whose Capabilities.Sessions is set: paxos,
// fastpaxos, pb).
//
// A protocol that keeps a table of outcomes per client id (exactly-once:
// a retried write gets its first outcome) is told when a client is gone:
// the runtime submits, under the client's id, a request whose operation is
// SessionEnd. It is ordered like a write, so every replica forgets the
// client at the same point; a later request under that id is refused, never
// executed (the Raft thesis §6.3: a request of an expired session is
// answered with an error; Dragonboat's unregistered session). No service
// defines SessionOpKind, so a runtime that validates client operations
// refuses it from ordinary clients; the gateway submits it itself when a
// connection closes.
const SessionOpKind = "synod.session"

// SessionEnd is the operation that ends the requesting client's session.
func SessionEnd() service.Op { return service.Op{Kind: SessionOpKind, Key: "end"} }

// IsSessionEnd reports whether op is SessionEnd.
func IsSessionEnd(op service.Op) bool { return op.Kind == SessionOpKind && op.Key == "end" }
