package pbpaxos

import "github.com/synod-dev/synod/automaton"

// Nested requests (automaton/call.go; the Eve/Adam thesis §3, Adam: the remote service
// "just has to treat Adam replicas as clients that might make repeated
// requests with the same sequence numbers" and answers repeats "from a
// cache"). Every replica of a calling namespace sends its own copy of each
// call, with the same id; pbpaxos must answer every copy alike and execute
// it once.
//
// A request marked Request.Nested is served as a write whatever it does:
// it never takes the local/regular read path nor the X-Paxos read path
// (reads.go), it is queued at the leader, executed once and agreed on in an
// instance as a command of kind cmdOp, so its outcome enters the duplicate
// table (machine.remember) at every replica and survives a leader change, a
// crash and a restart like any write's. A copy arriving later, at any
// replica, is answered from the table (dedup). The mark travels with a
// forwarded request (msg.go, reqNested).
//
// Decision (the seeds are silent): the duplicate table keeps one outcome
// per client id, the latest (machine.go), so the deduplication window is 1
// (nestedWindow): a copy of a request older than its client's latest is
// answered "older than its client's latest", not from the cache. That is
// enough for Adam: a nested client id is derived from one caller client,
// which has one request outstanding (protocol/adam/doc.go, "Nested ids"),
// and only the caller primary's answer is used; a lagging non-primary
// replica's late copy gets the error, which the caller ignores. A caller
// that keeps several calls of one client id outstanding needs paxos
// (window 64).

// nestedWindow is the number of outcomes per client id the duplicate table
// answers from (automaton.NestedCallee).
const nestedWindow = 1

// read reports whether req is served as a read: a read-only request that
// is not nested (a nested read is ordered and cached like a write).
func (a *PBPaxos) read(req automaton.Request) bool {
	return !req.Nested && automaton.IsReadRequest(a.cfg.Service, req)
}
