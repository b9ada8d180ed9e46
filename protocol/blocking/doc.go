// Package blocking implements the ABD report's blocking protocol (CSE 511 Project 3,
// §3.2, §3.3, §4.4): servers fully connected, writes under a distributed
// Lamport mutex, applied locally and sent to every server, reads served
// locally. It adds the failure handling the seed only proposes (§4.4: a lease
// on the lock, revocation, recovery) and resolves the seed's gaps as below.
// Protocol "blocking"; params lock=global|per-key, heartbeat (20ms),
// fail_timeout (300ms), lease (500ms), op_timeout (5s). Services: kv
// (get, set, del, exists).
//
// # Write path (seed §3.2.1, §3.2.2)
//
// A write waits in a local queue for the lock. Lock: Lamport's mutual
// exclusion. Each node keeps a Lamport clock; a request is timestamped and
// broadcast; requests are ordered by (timestamp, node index); every node
// replies at once (Lamport's rule: the seed's deferred REPLY_LOCK, "reply
// only after my own request is answered", deadlocks when two nodes request
// together, and is dropped); a node enters when its request heads its queue
// and it has a message timestamped later than the request from every other
// member; release is broadcast. The four lock messages are one state message
// (view, clock, outstanding requests) sent on every change and on every
// heartbeat, so a lost message is repaired by the next one; receivers keep
// each sender's newest state (clocks increase), which gives Lamport's FIFO
// assumption over a lossy, reordering network.
//
// The holder applies the write locally as pending (persisted), sends it to
// every member (retransmitted every heartbeat), and when every member has
// acknowledged (replicas persist before acknowledging) commits it locally,
// answers the client, sends commit messages (retransmitted until
// acknowledged) and releases. Write tags are (view, sequence number of the
// lock within the view). A replica applies a write only if it is the next in
// sequence for its lock in the replica's active view; the next write, or the
// lock passing, also commits the previous one.
//
// Pending vs visible (a deliberate deviation): the seed makes a write visible
// at the holder before broadcasting it. Here a write is visible (to local
// reads) only once committed, that is after every member stored it. This is
// what lets a view change roll forward every write anyone could have read.
//
// Reads are served from the local committed store, without messages, when
// the node is active in a view, hears from a majority, and no live peer
// reports a newer view (an excluded node must rejoin before it serves
// again). Otherwise reads wait (up to op_timeout, then TRYAGAIN).
//
// # Views: failures, the lease, revocation, membership, recovery (§4.4)
//
// "Every server" means every member of the current view. A view is numbered
// by a ballot (round, proposer) and installed Paxos-style: the proposer
// (the lowest-numbered node it hears; others step in after 2×fail_timeout)
// sends prepare; a node promises a higher ballot (persisted) and from then on
// acknowledges no write of an older view and leaves the old lock; its promise
// carries its state. With promises from a majority (and from every node heard
// recently, or after two more heartbeats) the promisers become the members
// and the start state is merged: among the promisers whose installed view is
// highest, per key the entry with the highest tag, pending writes included.
// Members stage it (persisted) and acknowledge; when all have, the view is
// activated (start state becomes the store; the lock restarts empty).
//
// A view change starts when a member is silent for fail_timeout (heartbeats:
// crash, pause, partition), when a lock request heads the queue for longer
// than the lease (a crashed or stalled holder, or a member that does not
// acknowledge: the lock is revoked), when a member restarts, or when a node
// outside the view wants to join.
//
// Why no two holders commit, and what happens to a half-done write: writes
// carry their view; a node that promised a newer view refuses them, so a
// revoked holder can never collect every acknowledgement (fencing by view,
// not by clocks: the lease only triggers revocation, safety never depends on
// time). A write that reached some servers but not all is rolled forward if
// any promiser with the newest installed view holds it, and otherwise rolled
// back; rollback is invisible because a write becomes visible only after
// every member of its view stored it, and any majority of promisers includes
// one of them. The revoked holder learns the outcome from the start state:
// its tag there → OK (answered when the view activates); an older tag → the
// write never took effect and is retried under the new view's lock (the
// seed's "finish serving the requests once they acquire the lock again");
// a newer tag → TRYAGAIN, outcome unknown.
//
// Recovery: a restarted node serves nothing and takes no part in locking; it
// offers its persisted state in the next view change (which its heartbeats
// trigger) and serves again once a view including it is activated: it
// fetches the current state from its peers through the install. Persisted:
// "promised", "view" (ballot, members, active), "k/<key>" committed entries,
// "p/<lock>" pending writes, "staged" start state. In memory durability a
// restart forgets its promises, so the safety argument above needs fsync.
//
// Availability: a majority of nodes must be up and connected for a view to
// form; writes block while any member is unresponsive until it is excluded
// (fail_timeout plus a view change: a few heartbeats). That is the blocking
// nature the seed measures.
//
// # Consistency
//
// Consistency() is automaton.Sequential. Reads are local, so the protocol is
// not linearizable: a read at a lagging node returns a value older than one
// already returned elsewhere (the test TestLinearizableRejectsSequentialAccepts
// shows a simulated history Porcupine rejects). With lock=global every node
// makes writes visible in one order (the lock order), so a client that stays
// with one server sees a growing prefix of one sequence: sequential
// consistency. A client that switches servers may read an older prefix at
// the new one (the guarantee then holds per server session only). Write
// replies are exactly-once per node, not across nodes (IdempotentRetry is
// false: no replicated deduplication table).
//
// lock=per-key (the seed's proposal: one Lamport queue per key) lets writes
// to different keys proceed concurrently, and then two nodes may make two
// writes to different keys visible in opposite orders (the IRIW pattern):
// each key's history is sequentially consistent, the whole is not, because
// sequential consistency is not local. The simulator checks "blocking" with
// check.Sequential whatever the lock mode, so per-key runs may be reported
// as violations; the tests check them key by key.
//
// DEL's reply is 1 when the holder's committed store held the key when it
// took the lock: a hint, as for ABD (register semantics).
//
// Atomic groups (Request.Ops) and interactive transactions (Request.Txn)
// are refused with automaton.ErrNoAtomic / ErrNoInteractive before anything
// is applied (the seed writes one register at a time). Replicas apply writes
// independently, so the protocol declares no automaton.NondeterminismSupport
// and is refused nondeterministic services.
//
// # Invariants
//
// Checked after every step in simulation and in the test harness
// (invariant.go): a node's view and promise never decrease (across
// restarts: never below what it restored at its previous start) and the
// view never exceeds the promise; at most one node participating in a view
// holds a given lock of it; one tag (view, sequence) names one committed
// value.
//
// # Broken variant
//
// "blocking-broken-noack" (automaton.RegisterBroken) answers and releases
// the lock as soon as the write is sent, and replicas apply writes as they
// arrive, in any order (the seed's SERVER_WRITE without waiting). Replicas
// do not learn the write's sequence number, so the next holder reuses it:
// the tag-unique invariant trips at the first such commit
// (testdata/broken_noack.txt), and the sequential checker sees the
// diverged replicas later.
//
// # Parameters
//
//	lock          one of global, per-key  global  one Lamport lock for all writes, or one per key
//	heartbeat     positive duration       20ms    state message interval; the other times are counted in heartbeats
//	fail_timeout  positive duration       300ms   silence before a member is suspected; at least 2 heartbeats
//	lease         positive duration       500ms   how long a lock holder may keep the lock; at least 2 heartbeats
//	op_timeout    positive duration       5s      a request's time limit; at least 2 heartbeats
//
// Unknown parameters are errors. The table is generated from the
// parser's (protocol/proto.Spec.Doc) and TestParamDoc keeps it so.
//
// # Node symmetry (model checking)
//
// Not declared. The lowest-numbered node a node hears from proposes,
// and views are ballots (round, node) compared lexicographically: node
// positions decide who leads, so no two nodes are interchangeable.
package blocking
