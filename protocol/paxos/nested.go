package paxos

import "github.com/synod-dev/synod/automaton"

// Nested requests (automaton/call.go; the Eve/Adam thesis §3, Adam): another
// namespace's replicas call this one, each sending the same request with
// the same id, and must all get the same answer, the request executed once.
// Paxos already answers a repeated write from its deduplication table
// (machine.go); a nested request is treated as a write whatever it does: it
// never takes the local, lease or quorum read paths (isRead), it goes
// through the log, and its outcome is recorded in the table (cmd.nested,
// machine.apply), so a copy arriving later, at any replica, is answered
// from the table and never re-executed (package doc, "Nested requests").

// BrokenNestedRead is the name of the broken variant whose nested reads are
// not cached.
const BrokenNestedRead = "paxos-broken-nestedread"

func init() {
	automaton.RegisterBroken("paxos", protocol{nestedRead: true, Capabilities: capabilities(BrokenNestedRead,
		"a nested read (the Eve/Adam thesis §3) takes the read path instead of the log and is not cached, so a copy of it sent later by another caller replica gets a fresh, different answer; the simulator's nested-answer check catches it (--nested)")})
}

// nested reports whether req is ordered and cached as a nested request.
// paxos-broken-nestedread ignores the mark: a nested read takes the read
// path and every copy of it is answered by a fresh read.
func (a *Paxos) nested(req automaton.Request) bool {
	return req.Nested && !a.proto.nestedRead
}
