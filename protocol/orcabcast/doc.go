// Package orcabcast is Orca's multicast runtime system (seed 004, "Replication
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
//   - Every node is a replica: onRequest (a read is served locally by
//     onRead; a write is sent by submit and its client blocks until the
//     update has been handled here, §4.2 "the local writer is woken when its
//     own message has been applied"), receive/drain/handle (the queue of
//     §4.2, handled strictly in order), onAccept/onData (the large-message
//     method), onSnap (state transfer), onTick (retransmission).
//   - The first node is also the sequencer (§4.1): order assigns the next
//     number, persists the update, broadcasts it; onFetch answers gaps from
//     the history; noteDelivered reads state messages and trims the history.
//
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
//     communication). What [21] describes: a resilience degree r (the
//     sequencer waits for r members to acknowledge an update before it is
//     delivered, so that r crashes lose nothing), and on a sequencer crash
//     the survivors run an election, the new sequencer collects the members'
//     histories, takes the highest sequence number any survivor holds, and
//     rebuilds the group. What we chose, for now: the sequencer persists
//     each update (m/<n>) before broadcasting it (the durability rule holds
//     the broadcast until the record is durable), so a crashed sequencer
//     recovers the whole order from its own disk at restart, and no replica
//     ever handled a number the recovered sequencer does not know (the
//     invariant sequencer-ahead). While the sequencer is down writes wait
//     (their clients time out and retry; the deduplication table in the
//     replicated state makes the retry apply once); reads continue locally.
//     Not done yet: electing a new sequencer through consensus among the
//     survivors when the old one stays down (issue 16, item 2); it would
//     take a view number in every message and the [21] recovery above,
//     with r = a majority so that a chosen survivor set always holds every
//     delivered update.
//   - Restart of a replica. A replica keeps nothing on disk: at start it
//     asks the sequencer (fetch from 0), and serves reads only once it has
//     handled every update the sequencer had ordered when it answered. A
//     client that stays on its node therefore never reads a value older than
//     its own acknowledged write (its write was ordered before the crash).
//   - Guarded operations (not in seed 004; Orca's guards come from its
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
// # Parameters
//
// retransmit, large_bytes, state_after, snapshot_every, max_history: see
// DefaultParams (`synod sim --help`).
package orcabcast
