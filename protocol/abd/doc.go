// Package abd implements multi-writer ABD atomic registers (Attiya, Bar-Noy and
// Dolev, "Sharing memory robustly in message-passing systems", PODC 1990) as
// described in the ABD report (CSE 511 Project 3, section 3.1) and in the published
// multi-writer algorithm, over the register subset of the KV service.
//
// # Roles
//
// Every node runs one automaton per namespace that plays both roles:
//
//   - Replica (the ABD report §3.1.1): keeps, per key, the highest tag it has seen and
//     the value written with it. It answers Query with its (tag, value) and
//     applies Store only when the stored tag is higher than its own, then
//     acknowledges. A replica persists a new (tag, value) before it acknowledges
//     (the Persist output precedes the acknowledgement, and the runtime releases
//     no send before the record is durable).
//   - Coordinator (the seed's "ABD capable client", §3.1.2): runs the two
//     phases for a client request on whichever node the client reached.
//
// A client may instead run both phases itself against every replica, as the
// seed's "ABD capable client" does (§3.1.2; the notes' "mode 1": servers
// never talk to each other): a request with the option abd.phase=query or
// abd.phase=store (with abd.tag) is answered by the replica it reaches from
// its own register, with no message to its peers (direct.go). The Go
// client's ABD mode (client.GRPC.ABD) and the bench target it backs
// (bench.Config.UseABDClient) drive it. One namespace serves both modes at
// once.
//
// Write (set, del): query a majority for the highest tag; choose
// (ts+1, writer); store (tag, value) at a majority; answer.
//
// Read (get, exists): query a majority; take the highest tag; unless a majority
// of the answers already carries that tag, write it back to a majority; answer.
// (A phase is sent to every replica and completes with a majority's
// answers; a query is first sent to a majority only: thrifty, below.)
//
// # How the seed's gaps and errors are resolved
//
//   - Tags are compared lexicographically as (ts, writer). The seed's server
//     compares timestamps only (§3.1.1), which lets two concurrent writers with
//     the same timestamp leave replicas with different values under equal tags;
//     that variant is kept, deliberately broken, as protocol "abd-broken-nowriterid".
//   - The writer id is (node id, operation id), not the client id: one node
//     coordinates many clients at once, and a client may pipeline. The operation
//     id is (incarnation << 32 | counter); the incarnation is persisted and
//     incremented at every Start, so a restarted coordinator never reuses a tag
//     that a minority of replicas may still hold from before the crash.
//   - Reads write back (the seed describes a one-phase read, §3.1.2, which is
//     not linearizable: new/old inversion). The seed's one-phase read is offered
//     per request as the "regular" read mode (automaton.ReadRegular), documented
//     as not linearizable, and kept as the broken variant "abd-broken-nowriteback".
//   - Read modes: "regular" and "local" as above; every linearizable mode
//     (log, quorum, lease) is served by the ordinary two-phase ABD read, which is
//     linearizable without a log or a leader.
//   - Quorums are majorities, (N/2)+1 as in the seed, for both phases; any N >= 1
//     works, and f < N/2 crashed replicas are tolerated.
//   - Writes wait for a majority of acknowledgements, not all (§3.1.2 leaves it
//     open; a majority is the ABD rule and keeps the protocol non-blocking).
//   - Thrifty queries (parameter thrifty, default false; §3.1.2 sends every
//     phase to every replica and is silent on cost): a query phase first
//     asks only the peers a majority needs besides the coordinator's own
//     replica, in ring order after it from an offset that moves by one per
//     round group (a group's operations ask the same peers: one batch
//     message), peers that missed a retransmission last until they are
//     heard from again; the retransmission asks every replica that has not
//     answered. Any two majorities intersect, which is all the argument
//     uses, so the answers are those of an every-replica query; a query
//     phase sends half the messages with three replicas (the client-driven
//     coordinator made the same decision, client/abd.go "Phases to a
//     majority"). Store phases still go to every replica, so that the
//     replicas a later read asks usually hold equal tags and it skips the
//     write-back. The price: a query waits for the one peer it asked, not
//     the faster of two, and that decides the default. Live, 64 closed-loop
//     clients on a shared 2-core machine, the same binary alternated
//     (docs/COSTS.md, branch rt-abd66): peer messages per put fell in
//     all six rounds, but the put p50 rose in all six (2.5-6.4 ms to
//     3.6-13.5 ms) and the rate fell in four (gets: five): the closed
//     loop's rate is bounded by its latency, and the one peer asked is
//     often a process waiting for a core. A peer marked silent in a read-only
//     workload is not asked again until a retransmission asks every
//     replica (it receives no stores to answer). The model checker runs
//     thrifty=false (model.go says why that covers thrifty runs); the
//     simulator runs the default, and thrifty runs with --param
//     thrifty=true.
//   - Values the coordinator holds (issue 28, branch abd51, session 51;
//     the seed's replica returns its entry whole, §3.1.1): a query's
//     first sending is a query-above, naming the coordinator's highest
//     tag for the key (its own register's, which it counts first) and
//     whether the operation writes. A replica answers with its tag and
//     tombstone flag, and leaves its value out when the operation writes
//     (a write's query phase uses only the highest tag and whether it
//     held a value, §3.1.2) or when its tag is not above the named one
//     (equal: one tag names one value, and the coordinator holds it;
//     lower: not the highest). A tag above carries its value. Which
//     answers a phase counts, and what it decides, are the seed's: only
//     bytes the coordinator would drop are not sent (in batches of 16,
//     8 % of the bytes the three automatons allocate per put, 15 % per
//     get: docs/costs/s51-abd51.md). A key run
//     whose first request writes needs no value either (its reads after
//     the write read the run's own). A retransmission is the plain query,
//     answered with the value, which a node of an earlier version also
//     answers: in a cluster upgraded node by node, a coordinator whose
//     majority needs an older node completes one retransmission interval
//     later (an older node drops a query-above as an unknown kind).
//   - Delete, absent from the seed's ABD, is a write of a tagged tombstone.
//     Tombstones are kept (they carry the tag that orders later writes).
//   - PUT/INSERT distinctions of the seed's Lab-2 store are dropped: set writes
//     whether or not the key exists. Conditional writes (SET NX/XX), cas, append
//     and incr need an atomic read-modify-write, which registers do not give; they
//     are refused with an error naming a consensus protocol instead.
//   - DEL's integer reply is 1 when the highest tag seen in the query phase held
//     a value. It is a hint, not part of the linearizable guarantee: a concurrent
//     write may be ordered between that tag and the tombstone.
//   - Lost messages are retransmitted by the coordinator every "retransmit"
//     (default 50ms) to replicas that have not answered; after "op_timeout"
//     (default 5s) without a quorum the request fails with a TRYAGAIN error. For
//     a write that error means the outcome is unknown: the value may still take
//     effect.
//   - Client-driven mode (direct.go): a client-driven writer's tag is
//     (max ts + 1, "client/<client id in hex>", the client's request
//     sequence number); the seed names the client id in the tag (§3.1) and
//     leaves its assignment open. Clients are trusted with their tags: a
//     replica installs any tag higher than its own. A query answers
//     [tag, value]; a store is acknowledged even when it is ignored (the
//     seed's gap, §3.1.1: the client waits for acknowledgements). The
//     client's read writes back unless a majority of its answers already
//     carries the highest tag, as the node's coordinator does. The
//     invariants tag-monotonic, store-held and tag-unique hold for
//     client-driven stores as for any other; majority-holds is checked for
//     operations a node coordinates (a client-driven operation completes at
//     the client, outside the automata).
//   - Retries: a request retried with the same id at the same coordinator joins
//     the operation in flight or gets the remembered answer. ABD keeps no
//     replicated deduplication table, so a write retried at another node could
//     take effect twice; Protocol.IdempotentRetry is false and clients must not
//     resend writes elsewhere.
//   - Atomic groups (Request.Ops) and interactive transactions (Request.Txn)
//     are refused with automaton.ErrNoAtomic / ErrNoInteractive before
//     anything is applied: registers give no multi-key atomicity. ABD
//     applies writes independently at each replica, so it declares no
//     automaton.NondeterminismSupport and is refused nondeterministic
//     services.
//
// # Client batches
//
// ABD declares automaton.BatchStepper: the runtime may hand it the client
// requests that reached the node together as one automaton.ClientBatch
// (the live node: what one pass finds in its inbox; the simulator: what
// arrives within --batch-window). Each request keeps its own answer; a
// batch shares the round trips. At the end of every step the messages to
// one peer leave as one batch message (kind "batch", protocol/proto's
// Header.Coalesce: the messages whole, in emission order, placed where the
// last of them was, so nothing leaves before a record it waited for; ABD
// keeps its Sends aside with their places, proto.Sends, and Header.Place
// builds the same outputs with one boxed Send per batch message), and
// a replica handles a batch message's queries and stores one after the
// other in one step, persisting every store before the one batch of
// acknowledgements that step sends back; the node commits the step's
// records in one write and one fsync. A batch's requests on one key form
// a key run: one operation whose one query and one store phase serve them
// all, with the results of serial execution in batch order and one new
// tag for the run's last register. A coordinator keeps at most "window"
// round groups in flight (default 2): requests arriving meanwhile wait and
// begin together, so that batches form even when the runtime steps each
// request on arrival. With parameter gather (off by default), after a
// group of several requests ends, the requests arriving next wait until
// as many have come back or gather has passed, so that a group's first
// client back does not begin a group of its own (batch.go, "Cohorts").
// With parameter peer_pipeline (off by default), while several round
// groups are in flight a peer that owes an answer to the phase messages
// sent to it gets the next ones with its answer's step or the next
// message to it anyway, so that the cohorts' groups share batch messages
// instead of paying one each per phase (pipeline.go: a held message is a
// delayed one, which the ABD paper's model allows, §3; a lone group never
// holds).
// batch.go gives the rules and the linearizability argument. The seed has one operation per message and per tag (§3.1); a
// run's writes other than its last are never installed, which only the
// run's own later reads could observe.
//
// # Invariants and broken variants
//
// The protocol states four invariants (invariant.go), checked after every
// step in simulation and in the test harness: a replica's tag never
// decreases (across restarts: never below what it restored at its previous
// start), a replica that acknowledged Store(t) holds t or higher, one tag
// names one value, and a completed write or linearizable read's tag is held
// by a majority. The broken variants are registered with
// automaton.RegisterBroken: "abd-broken-nowriterid" trips store-held (a
// replica acknowledges an equal-timestamp store it ignored) and
// "abd-broken-nowriteback" trips majority-holds (a read returns a tag only
// one replica holds), both at the first offending step, long before a
// client reads a wrong value (testdata/ shows both).
// "abd-broken-clientnowriteback" runs the client-driven coordinator
// (coordinator.go) with the seed's one-phase read: the node-side
// invariants cannot see a client's read, so the linearizability checker
// catches it, in the client-driven scenario (scenarios.go: one key, a
// heavy-tailed client latency, seeds pinned).
//
// # Client-driven mode in simulation
//
// The ABD report §3.1.2 gives the client's algorithm but not its retry policy
// (its client waits on a semaphore forever). The coordinator (a pure state
// machine, automaton.ClientCoordinator, shared by `synod-lab sim
// --client-driven` and client.ABD) counts one answer per replica per
// phase; the runtime resends a phase that timed out, with fresh request
// ids, to the replicas that have not answered. Writes retry too: a query
// has no effect and a store of one tag installs one value however often
// it arrives. A write's tag is (max ts + 1, "client/<id>", the client's
// sequence number of the operation).
//
// Persisted records: "inc" (the incarnation) and "k/<key>" (tag, tombstone flag,
// value) per key.
//
// # Parameters
//
//	retransmit     positive duration      50ms   a phase's resend interval to replicas that have not answered
//	op_timeout     positive duration      5s     a request's time limit at its coordinator
//	window         non-negative integer   2      round groups a coordinator has in flight; requests arriving meanwhile wait and start together as the next group (0: no limit)
//	gather         non-negative duration  0s     after a round group of several requests ends, hold the requests that arrive until as many as it answered have come back, or this long (0: off)
//	peer_pipeline  true or false          false  while several round groups are in flight, a peer that has not answered the phase messages sent to it gets the next ones when it answers or with the next message to it (one batch message in flight per peer); false: a step's phase messages leave at once
//	thrifty        true or false          false  a query phase asks a majority first (this replica and peers taken round robin by round group), the others when it retransmits; false: every replica at once, as the seed
//
// Unknown parameters are errors. The table is generated from the
// parser's (protocol/proto.Spec.Doc) and TestParamDoc keeps it so.
package abd
