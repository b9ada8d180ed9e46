// Package pbdurable is primary-backup whose service state objects each
// have a durability attribute (seed 002, chapter IV, "Durability – a
// Service Attribute"), chosen by a mapping (package durability) without
// changing the service: replicated objects ship their update buffer to
// the backups (chapter III's state updates), database objects become one
// durability.sql Effect per request (startA/commitA as BEGIN/COMMIT),
// reconstructible objects are kept nowhere.
//
// # Per request (IV.C.2, Fig. IV.2)
//
// The primary runs the request through the proxies (startA ... commitA
// on every object: durability.Set). The database statements go out as
// ONE effect; effects are issued one at a time, in execution order, so
// transactions commit in the order the primary executed them. The
// replicated buffer goes to every member as an update with the next
// index; a backup acknowledges, then applies (IV.C.2). The answer waits
// for both, and answers leave in execution order, so a read answers
// after every write it saw is durable.
//
// # Recovery (IV.C.2 recover, issue 11 item 5)
//
// A backup that misses its primary's heartbeats takes over (rank r after
// 3r-2 check periods, as protocol/pb). Before it serves it issues the
// recover effect: the database objects' init statements (idempotent) and
// recovery queries, whose rows Restore replays; replicated objects switch
// role (their state is here); reconstructible objects come back empty
// (documented loss: the ExpectViolation scenario shows a Counter mapped
// reconstructible losing its value at a fail-over). The members ranked
// after it stay members and receive the replicated objects' state; a node
// that restarts (its memory is gone: the record pbd/booted) asks every
// node to join and the primary brings it in as a new backup.
//
// # Decisions where the seed is silent or does not fit
//
//   - Services. Synod's counter service (read, add n) runs on the seed's
//     Counter (durability/examples/counter) with its mappings pb, db and
//     reconstructible (parameter mapping). Any other deterministic service
//     (kv, string) is one state object, State, with one update method
//     Put(state): the state after the request, so the database mapping
//     stores the service's snapshot and recovers it by one query, and the
//     replicated mapping ships it. Only the primary executes (with the
//     request's Env, carried by forwards), so a nondeterministic service's
//     choice reaches backups and database as state.
//   - The Matchmaker (matchmaker.go, seed IV.D.2). Synod's matchmaker keeps
//     machines and job queue in one opaque state, so they cannot be
//     declared separately (machines replicated, queue reconstructible)
//     without splitting service.MatchmakerState; they are State, and the
//     seed's billing records are a second object, Billing (one record per
//     allocation), so that mapping pbdb puts State in the backups and
//     Billing in the database. The harness scripts run it; the runtime and
//     simulator still refuse it (automaton.CheckService): declaring
//     NondeterminismSupport adds the conformance suite's standard
//     "nondeterministic service" scenario (300 operations, 6 seeds), whose
//     seed 4 is undecided (64 outcomes unknown after fail-overs: writes are
//     not retried) and which takes 30 s.
//   - The first primary of a fresh cluster writes its empty objects through
//     the proxies (init, then SetValue(0) / Put(empty)), so that a database
//     left by an earlier cluster is overwritten, not recovered.
//   - Writes are not retried across a fail-over: there is no replicated
//     deduplication table (a database object's write may commit while the
//     backups never saw the request), so IdempotentRetry is false and a
//     forwarder answers TRYAGAIN (outcome unknown) when its primary
//     changes or does not answer within op_timeout. Duplicated forwards
//     within one primary incarnation are answered from a cache.
//   - All-or-nothing across mechanisms under a crash of the primary: the
//     database commit and the backups' acknowledgement are independent,
//     so a request touching a replicated and a database object whose
//     primary crashes in between is seen half by the new primary (not
//     answered to the client). The seed does not say how to make the two
//     atomic (it would take a two-phase commit); not done.
//   - The database must be shared by every node (durability_dsn: one
//     SQLite file on one machine, or PostgreSQL); the executor's default
//     (a file in each node's data directory) would make a new primary
//     recover from its own, empty, file.
//
// # Failure model
//
// As protocol/pb: safe under crash, dup, reorder and slow (SafeFaults);
// a partition or a long pause makes two primaries.
//
// # Invariants (invariant.go)
//
// one-primary, reply-after-durable (caught: pbdurable-broken-replybeforedb
// answers before its database transaction committed), backup-prefix.
package pbdurable
