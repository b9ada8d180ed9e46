// Package orcabcast is Orca's multicast runtime system (the Orca paper, "Replication
// Techniques for Speeding up Parallel Applications on Distributed Systems",
// Bal, Kaashoek, Tanenbaum, Jansen; §4): every node holds a copy of every
// shared data-object (full replication), reads are applied to the local
// copy with no message, and writes are broadcast as updates (object,
// operation, parameters) through a sequencer-based, totally ordered,
// reliable broadcast and applied by every replica in that order (the
// update-only distributed protocol of §4.2). Protocol name: orca-bcast.
//
// # Roles and actions
//
//   - Every node is a replica: OnRequest (a read is served locally by
//     onRead; a write is sent by submit and its client blocks until the
//     update has been handled here, §4.2 "the local writer is woken when its
//     own message has been applied"), receive/drain/handle (the queue of
//     §4.2, handled strictly in order), onAccept/onData (the large-message
//     method), onSnap (state transfer), onTick (retransmission).
//   - The owner of the current ballot (at first the first node) is also
//     the sequencer (§4.1): order assigns the next number, persists the
//     update, broadcasts it; members persist and acknowledge it (onAck);
//     advanceCommit lets it be delivered once r+1 nodes hold it; onFetch
//     answers gaps from the history; noteDelivered reads state messages
//     and trims the history.
//   - Election (election.go): a member waiting on a silent sequencer
//     (elect_after retransmit intervals plus a random part) runs suspect
//     (Paxos phase 1a with a ballot it owns, ballot b owned by node
//     b mod N), onPrepare promises and reports the updates it holds,
//     recoverOrder and becomeSequencer rebuild the order from a quorum of
//     promises; current/adopt/onNack move every node to the newest ballot.

// # Decisions where the seed is silent or ambiguous
//
//   - Small and large messages (§4.1). An update whose operation is larger
//     than large_bytes is broadcast by its sender; the sequencer, which
//     receives it like everyone else, broadcasts a small accept with the
//     number (Kaashoek's later "BB" method; the seed names neither). A
//     replica that gets an accept without the data fetches the update from
//     the sequencer.
//   - State messages (§4.1: "one state message after a processor has
//     received a certain number of messages", piggybacked when the node
//     multicasts itself). The seed does not say what they are for; we use
//     them as the note's interpretation suggests: each carries the node's
//     applied count, the sequencer trims its history to the minimum over the
//     members, and also to max_history when a member reports nothing (a
//     crashed node); a node behind the history gets a snapshot (onSnap).
//   - Sequencer crash. §4.1 defers "buffer management of messages, group
//     management, and crashes of the sequencer or regular nodes" to its
//     reference [21] (Kaashoek, Tanenbaum et al., Amoeba's group
//     communication). What [21] would have said: a resilience degree r
//     (the sequencer waits for r members to acknowledge an update before
//     it is delivered, so that r crashes lose nothing), and on a sequencer
//     crash the survivors run an election (its own, not a consensus
//     protocol; as the seed's notes summarise it), the new sequencer
//     collects the survivors' histories, takes the highest number any
//     survivor holds, and rebuilds the group without the crashed members
//     (a group reset). What we chose (issue 16 item 2): [21]'s r, with
//     default r = N/2 so that r+1 is a majority (param resilience), and
//     instead of [21]'s election and group reset, Synod's consensus: the
//     election is Paxos phase 1 over ballots (a candidate with a higher
//     ballot collects promises from N-r nodes, at least a majority, so
//     that the quorum meets every r+1 nodes that held a delivered update;
//     each promise carries the updates the member holds above the
//     candidate's applied count, with the ballot that numbered them, or a
//     snapshot when its history is trimmed below that count). Recovery:
//     for each number the update of the highest ballot any promise holds
//     keeps that number, up to the first number nobody in the quorum
//     holds; that number was not delivered anywhere (delivery needs r+1
//     holders, and is in order, so nothing after it was delivered either)
//     and numbering continues there; held updates above it are
//     overwritten by the new ballot (their writers retry, the
//     deduplication table applies them once). The recovered updates are
//     proposed again in the new ballot and delivered once r+1 hold them;
//     a member applies an update only when the commit point it learnt is
//     of the update's ballot. Members are never removed (no group reset):
//     the old sequencer, on restart, is a member; its ballot names itself,
//     so it asks everybody, and a nack carrying the newer ballot makes it
//     adopt it (it stands for election itself only if nobody answers).
//     Differences from [21] that follow: every node persists the updates
//     it holds and its promised ballot (the durability rule holds the
//     acknowledgement or promise until the record is durable), so a
//     restarted node still counts as a holder; a write waits for r+1
//     holders, one more round trip than §4.1's single broadcast; and the
//     first node boots as sequencer of ballot 0 without phase 1 only when
//     it has no records at all (nothing can have been held before it).
//   - Restart of a replica. A replica recovers its ballot, snapshot and
//     held updates from disk (nothing above the snapshot is applied until
//     the sequencer's commit point covers it), asks the sequencer (fetch),
//     and serves reads only once it has handled every update the sequencer
//     had ordered when it answered. A
//     client that stays on its node therefore never reads a value older than
//     its own acknowledged write (its write was ordered before the crash).
//   - Guarded operations (not in the Orca paper; Orca's guards come from its
//     references [10, 12]; service.GuardedState). A guarded read waits at
//     its node until the local copy makes its guard true. A guarded write is
//     ordered like any update; a replica that handles it while its guard is
//     false puts it on a blocked list, and after every update it handles it
//     retries the blocked list in order: every replica decides the same at
//     the same point of the global order, and the writer is answered when
//     its update finally runs. No client polls.
//   - Duplicates. A client's retry carries the same request id; the
//     replicated deduplication table (last update and result per client)
//     makes it apply once, so IdempotentRetry is true.
//   - Consistency. The seed promises serializability of operations and that
//     "all processors observe changes to shared objects in the same order",
//     explicitly not a temporal order (§4.2). With the writer blocking until
//     its update is applied locally this is sequential consistency for
//     clients that stay on their node, which is what the protocol declares
//     and the simulator checks (one order for all keys together:
//     check.Sequential), besides the invariant global-write-order.
//
// # Broken variant
//
// orca-bcast-broken-fifo replaces the sequencer by per-sender FIFO
// broadcast: a sender applies its update at once and sends it with its own
// number; receivers deliver each sender's updates in order, interleaving
// senders as messages arrive. The invariant global-write-order catches it at
// the first concurrent writes, and with invariants off the
// sequential-consistency checker does (the variant does not report its
// state, so the simulator's convergence check stays out of the way).
//
// orca-bcast-broken-norecovery skips the new sequencer's recovery: it
// numbers from its own applied count. A number already delivered elsewhere
// goes to another update; the invariants sequencer-ahead and
// global-write-order catch it under sequencer crashes (election_test.go and
// its scenario).
//
// # Parameters
//
// retransmit, large_bytes, state_after, snapshot_every, max_history,
// resilience, elect_after: see
// DefaultParams (`synod-lab sim --help`).
//
// # Node symmetry (model checking)
//
// Not declared. The first node boots as sequencer of ballot 0 and a
// ballot b is owned by node b mod N, so the node
// positions decide who sequences after each election: no two nodes are
// interchangeable.
package orcabcast
