// Package unreplicated is the baseline every replication protocol is
// measured against: one server holds the only copy of the service state, and
// every other node forwards to it. It is also the worked example of
// docs/ADDING_A_PROTOCOL.md, so it declares every capability a protocol can
// declare and keeps each handler short.
//
// The Grid Services thesis (chapter II, "the primary-backup approach", and chapter VII's
// experiments) measures the cost of replication as the difference between a
// replicated service and the same service run on one machine. This package
// is that one machine, reached through the same runtimes, gateway and
// clients as the replicated protocols, so that a comparison changes one
// thing only: the protocol.
//
// # Roles
//
//   - Server: the first node of Config.Nodes. It applies every operation
//     (service.ApplyEnv with the Request's Env, so nondeterministic services
//     such as the Matchmaker work: there is only one copy, so there is
//     nothing to diverge from), persists the effect of every write before
//     answering, and restores its state from its records at Start.
//   - Forwarder: every other node. It holds no state; it forwards each client
//     request to the server and relays the answer back.
//
// # Decisions (the seeds are silent on these)
//
// Durability. A write's answer may only leave once the write survives a
// crash of the server. The server persists, per write, a record "w/<index>"
// holding the request's operations and Env (index counts writes from 1),
// and emits it before the answer; the runtime's durability rule
// (automaton/automaton.go) then holds the answer until the record is
// durable. Every snapshot_every writes (default 1000) it persists the whole
// state as "snap" (the index it covers and service.State.Snapshot) and
// deletes the write records it covers, so that recovery replays at most
// snapshot_every records and the disk holds one snapshot plus at most that
// many records. Full snapshots per write were rejected: their cost grows
// with the state, which would make the baseline slower than the protocols it
// is the baseline of. Recovery (OnStart) restores "snap", then replays the
// write records with higher indexes in order, through service.ApplyEnv with
// each record's Env, so the same state comes back for a nondeterministic
// service too. It stops at the first missing index and deletes the records
// after it, and deletes records the snapshot covers.
//
// The scheme relies on one property the contract implies but does not
// state: records become durable in the order they were emitted (the
// simulator's fsync covers a prefix of its buffer; the node commits each
// batch atomically and in order, storage.Engine.Commit). Then a durable
// deletion implies a durable snapshot emitted before it, and a durable record
// implies every earlier one, so the first gap in the indexes is after the
// last write whose answer can have left.
//
// Reads are not persisted. A read that follows a write in a later step is
// held by the runtime until that write's record is durable (the durability
// rule covers Sends and Responds of later steps too), so no client reads a
// write that a crash could still lose.
//
// Nested requests (the Eve/Adam thesis §3, Adam; nested.go): the server is a
// callee. A nested request, read or write, is applied as a write whose
// record also carries its id and outcome; the snapshot carries the table of
// latest outcomes per client id; a copy is answered from the table. So the
// promise (one execution, every copy answered alike) survives crashes of
// the server with fsync.
//
// Read modes. Every mode is served by the server's read: the server is the
// only copy, so a local or regular read would be this same read, and it is
// linearizable.
//
// Atomic groups (Request.Ops) are applied in one step by
// automaton.ApplyGroup, logged as one write record, and answered with one
// result per operation: Transactions() declares Atomic.
//
// Interactive transactions (txn.go; the Grid Services thesis VI.A.4 gives T-Paxos's shape,
// each operation answered before the commit, and is silent on concurrency
// control) are optimistic, first committer wins. TxnBegin records the
// server's applied count (the writes committed so far) and opens a
// workspace: a Clone of the state when the state has Clone() service.State,
// else a snapshot restored into a fresh state. TxnOp applies the operation
// to the workspace with the request's Env and answers at once. TxnCommit
// succeeds only if no write committed since the begin; the workspace then
// equals the current state with the transaction's writes applied in order,
// so it becomes the state, and the writes are persisted as ONE write record
// (each with its Env) before the answer, so recovery replays all or none.
// Otherwise the commit answers automaton.ErrTxnAborted. The rule is the
// same for read-only transactions (a read-only commit persists nothing),
// so every committed transaction is equivalent to running alone at its
// commit point: serializable, and strictly so, since that point lies
// within the commit's request. TxnAbort discards the workspace. A step of
// a transaction the server does not hold answers automaton.ErrNoSuchTxn:
// open transactions live in memory only, so a crash of the server aborts
// them all, and at most 1024 are open at once (beginning another aborts
// the oldest). Forwarders forward transaction steps like other requests, in
// a message kind of their own (txn-forward) so every other message keeps
// its bytes; a forwarded commit is a write (never retransmitted).
//
// Forwarding. A forwarder sends a Forward message (its incarnation nonce, a
// sequence number, the request) to the server and keeps the request in a
// table until the Reply comes. There is no deduplication table that
// survives a crash (IdempotentRetry is false), so a write is forwarded once
// and never retransmitted: a retransmission whose first copy was applied
// would apply it twice. A read is retransmitted every "retransmit" (default
// 50ms), which is harmless. After "op_timeout" (default 1s) without a
// reply the forwarder answers TRYAGAIN; for a write that means the outcome
// is unknown. The network may also duplicate a Forward: the server remembers
// the replies to the last 4096 forwarded writes in memory and answers a
// duplicate with the remembered reply instead of applying it again. That
// memory is lost in a crash; a duplicate that outlives the server's crash
// (neither the simulator, which loses messages in flight to a crashed node,
// nor TCP produces one) would be applied again. The nonce is drawn from
// Config.Rand at every Start, so a restarted forwarder's sequence numbers
// never match its earlier life's.
//
// Membership changes are not offered; a node's records are read only when it
// is the server (a node that was the server under an earlier configuration
// keeps its records untouched).
//
// # Invariants (invariant.go)
//
// Only the server applies operations; the server's applied count never
// decreases within an incarnation, and a restart restores at least what the
// previous start restored; a write's answer is emitted after the Persist of
// its record (what the durability rule needs to make the write survive).
//
// # Broken variant
//
// "unreplicated-broken-answerfirst" emits a write's answer before its
// record. The runtime may then release the answer while the record is still
// unsynced, and a crash loses an acknowledged write. The invariant
// persist-before-answer catches it at its first write; with invariants off
// (--no-invariants), the linearizability checker catches it under crash
// faults with a slow disk, on the seeds its scenarios pin.
//
// "unreplicated-broken-dirtytxn" runs a transaction's operations on the
// shared state (no workspace): other clients see its writes before the
// commit, a commit always succeeds and an abort rolls nothing back. The
// serializability checker catches it (sim --txns), on the seeds its
// scenario pins.
//
// # Parameters
//
//	snapshot_every  positive integer   1000  writes between the server's snapshots
//	retransmit      positive duration  50ms  a forwarder's resend interval
//	op_timeout      positive duration  1s    a request's time limit at the node the client reached
//
// Unknown parameters are errors. The table is generated from the
// parser's (protocol/proto.Spec.Doc) and TestParamDoc keeps it so.
//
// # Node symmetry (model checking)
//
// Declared for the forwarders (modelsym.go): the server is the first node
// and every other node only forwards to it, so n2..nN are interchangeable
// (with client targets renamed along). Unreplicated has no fast path
// (automaton.ModelStater); its state names nodes only in automaton.NodeID
// values and its messages and records name none, so mc's reflective walk
// renames them (automaton.ModelTypedNodeNames). With 4 nodes and clients
// at any node the search of every state within 8 events visits 3,829
// states instead of 19,183 (mc TestNodeSymmetryUnreplicated, which also
// finds both broken variants alike; TestNodeSymmetrySound checks renamed
// runs).
package unreplicated
