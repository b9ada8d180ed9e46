// Package pbdurable is primary-backup whose service state objects each
// have a durability attribute (the Grid Services thesis, chapter IV, "Durability – a
// Service Attribute"), chosen by a mapping (package durability) without
// changing the service: replicated objects ship their update buffer to
// the backups (chapter III's state updates), database objects become one
// durability.sql Effect per request (startA/commitA as BEGIN/COMMIT),
// reconstructible objects are kept nowhere.
//
// # Usage: the seed's Matchmaker on a live cluster
//
// The service gridmatchmaker (durability/examples/matchmaker, seed
// IV.D.2: MachineQueue and AccountSet) with one of its mappings (pb,
// pbdb, db, reconstructible: the queue kept nowhere and the accounts in
// the database, original: both kept nowhere, the seed's original service
// when run on one node; the yaml files next to it). With database
// objects every node must use the same database (durability_dsn), or a
// new primary recovers from an empty one:
//
//	namespaces:
//	  - name: mm
//	    protocol: pbdurable
//	    service: gridmatchmaker
//	    params: {mapping: db, durability_dsn: /tmp/synod-mm.db}
//	    # PostgreSQL: {mapping: db, durability_driver: pgx,
//	    #   durability_dsn: "postgres://user@127.0.0.1:5433/synod"}
//	    # pbdb: the queue replicated, the accounts in the database
//	    # ("Take-overs from a live primary" for its take-overs):
//	    #   {mapping: pbdb, durability_dsn: ...}
//
// A client sends (RESP, on the namespace: SYNOD NS mm):
//
//	SYNOD OP advertise <machine> <cpu> <memory>   MachineAdvertise: +OK
//	SYNOD OP submit <client> <cpu> <memory>       JobSubmit: the machine (bulk string), or nil if none fits
//	SYNOD OP balance <client>                     the client's balance (integer; read)
//	SYNOD OP available                            machines in the queue (integer; read)
//
// Other parameters: rate_sending (20ms), rate_checking (250ms),
// suspect_checks (3: "Failure detection"), op_timeout
// (2s), durability_sync (true), unsafe_takeover (ignored since session
// 45: mapping pbdb is no longer refused; "Take-overs from a live
// primary"). Counter: service counter, mappings pb, db,
// reconstructible (durability/examples/counter). Other deterministic
// services (kv, string): one object State, mappings pb, db, pbdb (State
// replicated, Replies in the database), reconstructible. Every service
// also has the protocol's object Replies (replies.go). A client may retry
// a write with the same request id after a fail-over: it executes at most
// once.
//
// # Per request (IV.C.2, Fig. IV.2)
//
// The primary runs the request through the proxies (startA ... commitA
// on every object: durability.Set). The database statements go out as
// ONE effect; effects are issued one at a time, in execution order, so
// transactions commit in the order the primary executed them. The
// replicated buffer goes to every member as an update with the next
// index; a backup acknowledges it (IV.C.2) and holds it prepared until
// the primary's commit index reaches it (next section). A request's
// transaction runs once every member acknowledged its buffer. The answer
// waits for both, and answers leave in execution order, so a read
// answers after every write it saw is durable.
//
// # All-or-nothing across mechanisms (IV.C; commit.go)
//
// The seed asks that an atomic action's changes reach every state object
// or none (IV.C, the action-control methods; IV.B.3) but gives each
// mechanism its own commit (commitA ships the buffer, or COMMITs) and
// says nothing of a primary that crashes between the two, where a new
// primary would see half a request: the machine taken from the
// replicated queue but no bill in the database, or the reverse. Decision:
// a presumed-abort two-phase commit whose log is the database. The
// backups are the participants (prepare: hold the buffer, acknowledge),
// the request's own transaction is the decision (it also sets
// pbd_commit.idx to the request's index), and a new primary's recovery
// queries read it: prepared buffers up to that index are applied, later
// ones with a transaction are discarded (with everything after them),
// buffers of requests without a transaction need no decision (under
// two mechanisms every buffer has one since session 45: "Take-overs from
// a live primary"). The cost
// is one round trip more before the transaction (PB+DB latency: backups'
// acknowledgement, then the database, in sequence instead of in
// parallel). Only mappings with both replicated and database objects
// record the decision. Consequences:
//
//   - A state transfer (a joining node, or the members after a fail-over)
//     carries no undecided request: it waits until none is in the queue,
//     and new requests wait until every member has the state.
//   - A transaction the database refuses is run again one checking period
//     later (the request's changes are in the primary's objects and
//     prepared at the backups; answering TRYAGAIN would leave the two
//     mechanisms apart). A refusal that persists stalls the primary.
//   - A crashed (or deposed) primary's transaction still in flight at the
//     database when the new primary recovers is fenced (next section).
//
// # Fencing (issue 29)
//
// The database keeps the latest view it has seen, in table pbd_view
// (one row: the round, then the primary's position). Every transaction
// of a primary begins with UPDATE pbd_view SET v = mine WHERE v <= mine,
// which the store requires to change a row (durability.Stmt.Fence): when
// the database has seen a later view, the transaction is rolled back
// (durability.ErrFenced) and the deposed primary's write never lands; it
// retries one period later and meanwhile learns the later view from its
// heartbeats. A new primary's recovery transaction carries the same
// statement before its recovery queries, so those queries see every
// transaction the old primary committed and none commits after them. A
// fresh cluster's first primary claims the table (v = its view,
// unconditionally): a fresh cluster owns the database it is given.
//
// # Recovery (IV.C.2 recover, issue 11 item 5)
//
// A backup that misses its primary's heartbeats takes over (rank r after
// suspect_checks + 3(r-1) silent check periods: next section). Before it
// serves it issues the
// recover effect: the database objects' init statements (idempotent) and
// recovery queries, whose rows Restore replays; replicated objects switch
// role (their state is here, with the prepared buffers the commit index
// read by the same effect decides); reconstructible objects come back
// empty (documented loss: the ExpectViolation scenario shows a Counter
// mapped reconstructible losing its value at a fail-over). The members
// ranked after it stay members and receive the replicated objects' state
// once the recovery is done.
//
// # Failure detection (the Grid Services thesis III.B, Figs. III.2-III.3; session 45)
//
// The seed's FAILURE_DETECTOR (Fig. III.3) runs every rate_checking and
// suspects the primary when the last notification is older than
// rate_checking: a silence of one to two check periods (250-500 ms)
// makes the senior backup take over. The seed assumes the cluster is
// synchronous enough for heartbeats (II.A; III.A assumes a perfect
// failure detector) and leaves the timeout to the deployment. On a
// loaded machine it is not: at load 20-40 (the CI's compat suite) a
// starved process sends or handles its heartbeats late by more than a
// period, and an idle pbdurable namespace changed primary every few
// seconds, failing commands with "the primary stepped down". Decision:
// a backup suspects only after suspect_checks (default 3) consecutive
// check periods in which it heard nothing from the primary (any message
// of its view: heartbeat, update, state), counted from the last one it
// heard (a message resets the count); the backup of rank r waits
// suspect_checks + 3(r-1) periods (3 more per rank, protocol/pb's
// spacing); a node restarted as a backup of its durable view waits 3r
// at least, and two when it was the view's primary (promoteAfter: in a
// whole-cluster restart no primary lives, and waiting longer only keeps
// the service down). So a silence shorter than suspect_checks x
// rate_checking (750 ms by default) never causes a take-over, and a
// crashed primary is taken over after 750 ms-1 s instead of 250-500 ms.
// Safety does not rest on the detector (take-overs from a live primary,
// next section; fencing, above): the bound only trades fail-over time
// for fewer false suspicions, which the seed's assumptions allow (a
// longer timeout is a stronger synchrony assumption made weaker, never
// a weaker one). suspect_checks=1 is the seed's detector.
// TestSuspectBound pins the count; in the simulator, pauses (10-500 ms)
// and slow windows with the default fsync cause no take-over in seeds
// 1-10 under mappings pb and db (16 and 13 changes of primary with
// suspect_checks=1: TestPausesTakeNoOver), and crashes are still taken
// over (TestCrashTakenOver). On a live 3-node cluster (mapping pbdb,
// fsync, load 15-27; pbd46, session 46, docs/CHAOS.md) kill -9 of the
// primary under 8 writers left the namespace without an acknowledged
// write for 1.03-1.16 s with suspect_checks=1 (change logged after
// 251-285 ms) and 1.73-1.76 s with 3 (871-992 ms); neither setting
// changed primary in 2 minutes idle and 2 minutes under writes.
//
// The primary drops a member silent for three check periods (III.A,
// "the detection of backup failures"), as before. A backup acknowledges
// every heartbeat, so an idle backup is never dropped (protocol/pb's
// first stall, which pbdurable never had: TestIdleBackupsKeptPBD); a
// backup whose acknowledgements came late by three periods is. Such a
// backup stays a synced backup of the view and acknowledges every
// heartbeat, which the primary used to ignore from a non-member, and
// nothing made it a member again: under mapping pb a primary whose two
// backups were dropped answered no write for good (heldByBackup), under
// pbdb and db it went on alone with backups that fall behind. The
// primary now takes an acknowledgement of its view from a node that is
// not a member as a join: the node gets the state and is a member again
// (TestDroppedBackupsStall, TestJoinDroppedStallPBD). Repeated joins
// need nothing (pb's second stall): pbdurable has no transfer nonce, a
// repeated join marks the member as needing the state and the state is
// sent again at every check until acknowledged (TestJoinRepeatedStallPBD).
//
// # Take-overs from a live primary (issue 28; takeover.go)
//
// The seed's switch_to_primary (III.A problem 3) rests on a perfect
// failure detector. Under a slow disk it is not one: the runtime releases
// a step's sends only after the records emitted before them are durable,
// so a primary whose fsyncs stall stops sending heartbeats, a backup
// takes over with the state it has, and the primary, which hears no
// acknowledgement either, drops its backups after two periods and answers
// alone (its answers leave when its fsync returns). The old primary's
// last answers were then in no state a later primary installed: under
// mapping pb, repeated kill -9 of every node under load read a key back
// older than an acknowledged write, and the simulator shows it with slow
// disks (TestTakeOverSlowDisk: seed 16 of its scenario was not
// linearizable; replay command in the test). Decision (the seed is
// silent; it is what Synod's durable-means-durable rule asks), for the
// mappings whose objects are replicated and none in the database (pb;
// pbdb's variant of the rules follows the list):
//
//   - A request with an update buffer is answered, and its transaction
//     issued, only once at least one synced backup of the view
//     acknowledged its buffer (heldByBackup). A primary left without a
//     synced backup waits until one joins (a restarted node joins within
//     a heartbeat); a single-node namespace needs none.
//   - A new primary (a take-over, or the restarted service's election)
//     serves only once every node but its suspected predecessor, the
//     primary of the view it left, has adopted its view and sent a
//     promise: the view of the replicated state it holds in memory, its
//     index, the image and the held buffers. Adopting the view is durable
//     and stops the node acknowledging the old view, so from then on the
//     old primary answers nothing more. The new primary installs the
//     latest state reported (by its view, then its index) when it is
//     later than its own, before its recovery decides the held buffers.
//     Every write the old primary answered was acknowledged by a backup
//     that promised, so it is in the installed state.
//   - A node that waits for a state no primary sends (its new primary
//     stopped before it was ready) answers a restarted node's reports and
//     joins its election, as if it had restarted too.
//
// The cost is availability, not latency: a take-over waits for every
// other node, so with one node down and the primary killed the service
// waits for the restart of one of them; the answers of a namespace whose
// backups are all down wait too. A backup keeps
// its state in memory only (below), so a backup that acknowledged a write
// and restarted before promising reports less: writes survive any crash
// of one node or of all, not every combination of two crashes among
// three nodes with the service running. The model checker does not reach
// the case (its failure detector is perfect);
// pbdurable-broken-takeover (no promises, no backup rule: earlier
// versions) is caught by the linearizability checker in the simulated
// slow-disk scenario (conformance, TestTakeOverSlowDisk). With the rules,
// the simulator's crash,partition,pause faults (mapping pb, seeds 1-20,
// 300 operations) fail no seed (5 of 20 before); SafeFaults is not
// widened on that alone.
//
// Under mapping pbdb (replicated objects and the database; session 45)
// the database's commit index is the decision (commit.go), and the rules
// are these instead. Session 44 had kept the seed's take-over there and
// refused pbdb with fsync on several nodes: in the slow-disk scenario
// (`synod-lab sim --protocol pbdurable --nodes 3 --clients 8 --ops 300
// --faults crash,slow --fsync uniform:1ms:30ms --power-loss
// 500ms,1s,1.5s,2s --param mapping=pbdb --seeds 1-40`) a backup the live
// primary had dropped took over with an older state and recovered a
// commit index beyond it (all-or-nothing broken on seeds 25, 29, 30, 34
// at b4f148f; 3, 8, 30 with session 45's failure detector;
// pbdurable-broken-takeover, which keeps that take-over, still breaks
// seed 3: TestPBDBTakeOverKeepsAllOrNothing).
//
//   - Every update has a transaction, one that touches only replicated
//     objects too (the decision alone: pbd_commit := its index), so the
//     commit index covers every answered write. A write is answered once
//     its transaction committed and every member acknowledged it; it
//     needs no synced backup holding it (heldByBackup): a primary whose
//     members were all dropped must commit, or its queue never drains for
//     the state a returning member needs.
//   - A new primary collects promises as under mapping pb, and installs
//     the latest state reported. When that state stops before the commit
//     index its recovery read (every backup that held the last committed
//     updates restarted, or was dropped before them), it also waits for
//     the suspect's promise: the old primary persisted every buffer
//     before shipping it, so it has them, alive (it adopts the new view
//     from a heartbeat) or restarted (it loads them and answers the new
//     primary's heartbeat). The recovery then decides the held buffers
//     against the commit index as after any fail-over (presumed abort).
//   - A primary that steps down reports its durable state, kept in
//     memory: the image it last persisted (only decided changes: written
//     when no transaction was undecided) and the buffers it executed
//     since, held as prepared; never its objects, which hold executed
//     requests whose transactions may never commit (the new primary's
//     fence refuses them).
//
// The cost: a transaction per request that touches only replicated
// objects (the Matchmaker's advertise), and the availability of mapping
// pb's promises (a take-over waits for every node but the suspect, and
// for the suspect when it alone holds the committed updates). With these
// rules the slow-disk scenario under pbdb breaks no invariant on seeds
// 1-100 (all-or-nothing included), and no history checked is
// illegal; TestPBDBTakeOverKeepsAllOrNothing replays 3, 8 and 30. pbdb
// is no longer refused; unsafe_takeover is accepted and ignored.
//
// Deciding every history (pbd46, session 46). The check is already
// partitioned by key (package check: linearizability is local), so what
// leaves a check undecided is the length of one key's history: 300
// operations on the default 5 keys, half of them of unknown outcome (the
// scenario's crashes, slow disks and four power losses in 2 s), each a
// write Porcupine may place anywhere after its call. With the default 5
// keys, 84 of 100 seeds were decided linearizable and 16 undecided at
// --check-timeout 2m (22 undecided at 10 s). The same scenario with 20
// keys (the same schedule, 15 operations per key: `synod-lab sim
// --protocol pbdurable --nodes 3 --clients 8 --ops 300 --keys 20 --faults
// crash,slow --fsync uniform:1ms:30ms --power-loss 500ms,1s,1.5s,2s
// --param mapping=pbdb --seeds 1-100 --check-timeout 2m`) decides every
// seed: 100 linearizable, 0 undecided, 0 invariant violations, in 26 s
// of wall time. The contention that matters for the take-over rules is
// between a key's writes across a take-over, which 15 operations per key
// and four power losses still give; all-or-nothing is an invariant,
// checked after every step whatever the keys.
//
// # Restarts, and the whole service lost (issue 29; the Grid Services thesis IV.C.1)
//
// Every node persists its view (record pbd/view) before anything resting
// on it is sent. A node that restarts under a mapping with no replicated
// object (db, reconstructible) lost nothing the database does not hold:
// it comes back as a synced backup of its durable view, and its failure
// detector makes it take over when no primary answers, after 3r silent
// periods (at least suspect_checks + 3(r-1)), the old primary of the view,
// rank 0, first, after two ("Failure detection"). So when every node is
// killed at once, the first to
// take over restores every database object from the database ("if no
// backup exists, a new instance is created and proxies restore state
// before serving", IV.C.1), fenced, and the others bind to it.
//
// Under a mapping with replicated objects (pb, pbdb) the seed's answer,
// a live backup, is gone when every node is, so the primary keeps them
// durable itself: an image of the replicated objects (and Replies) when
// it becomes ready, before it answers anything in its view (records
// pbd/snap, and pbd/statev naming that view), then the update buffer of
// every request it executes, before the buffer is shipped (pbd/u/<index>);
// a new image replaces the buffers every 256 requests when no request's
// transaction is undecided. Backups persist only their view. A node that
// restarts with a view record loads its durable state, tells every node
// its view and the view of its state (a report), and waits: a live
// primary's heartbeat makes it join as before; if every node reports
// instead (the whole service restarted), the node whose durable state is
// of the latest view takes over under a round above every reported view,
// holding its buffers as prepared, so that its recovery decides them
// against the database's commit index (commit.go) exactly as after a
// fail-over; the others join it. Decision (the seed is silent; its
// failure model, IV.B.1, loses every in-memory state at a crash and
// recovers from a live replica or the database): it holds every
// acknowledged write, since the primary of that view wrote its image
// when it became ready, which covered every write answered in earlier
// views (a new primary holds them: it was a synced member, or got the
// state, and its recovery decided the prepared ones), and the buffer of
// every request it executed since; the primary of a later view without
// a durable state never became ready, so it answered nothing. Waiting
// for every node is what makes "latest" known; a node lost for good
// with the rest leaves the service waiting rather than losing writes.
//
// A fresh cluster (no node has any record) pointed at a database an
// earlier cluster left recovers it: its first primary runs the init
// statements (idempotent) and the recovery queries, never a DELETE.
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
//   - The Matchmaker (seed IV.D.2) is the seed's, not Synod's
//     nondeterministic "matchmaker" (chapter III): service gridmatchmaker
//     runs durability/examples/matchmaker's Service, unchanged, on its
//     generated proxies. The seed's JobSubmit returns an error when no
//     machine fits; ours answers nil (no state changes, nothing shipped or
//     written). The seed's "original" configuration is the service without
//     proxies (its experiment runs it in process); mapping reconstructible
//     keeps the queue nowhere (rebuilt by the next advertisements, as the
//     seed describes MachineQueue) and the accounts in the database. It is
//     deterministic (the first suitable machine), so any protocol may
//     replicate it. The simulator cannot generate its operations or check
//     its histories yet (its workload and a linearizability model belong
//     to sim/ and check/); TestGridMatchmakerMappings and the script
//     testdata/matchmaker_pbdb.txt cover the four mappings and a
//     fail-over.
//   - The first primary of a fresh cluster recovers the database objects
//     from the database (above); earlier versions emptied every table,
//     losing what an earlier cluster had acknowledged (issue 29).
//   - Retries (IdempotentRetry). The seed does not deduplicate. Replies
//     (replies.go) is a state object of every service, written by every
//     write through the proxies: each client's last answered write (its
//     sequence number and answer). It is therefore as durable as the
//     write and all-or-nothing with it, and a new primary answers a
//     retried write from it instead of executing it again (a request
//     older than the client's last write gets an error). Its mechanism:
//     named by the generic mappings (pbdb puts it in the database, so
//     that kv under pbdb is a simulated service whose writes touch both
//     mechanisms); beside the seed's Counter and Matchmaker, whose
//     mapping files do not name it, replicated if any object is (no
//     database transaction for a request that had none), else database,
//     else reconstructible (then retries after a fail-over are not
//     deduplicated, like the rest of the state). One entry per client:
//     clients issue one write at a time. Entries are never removed (one
//     row per client id ever seen, carried by every state transfer):
//     expiring them would need the clients' sessions, which the protocol
//     does not see. A forwarder still answers
//     TRYAGAIN when its primary changes or does not answer within
//     op_timeout; the client's retry is what is now safe.
//   - The database must be shared by every node (durability_dsn: one
//     SQLite file on one machine, or PostgreSQL); the executor's default
//     (a file in each node's data directory) would make a new primary
//     recover from its own, empty, file. A cluster file with several
//     nodes, a mapping with database objects and no durability_dsn is
//     refused at start with that reason (CheckDeployment); `synod cluster
//     up` gives such a namespace one shared file,
//     DIR/data/durability-<namespace>.db.
//
// # Failure model
//
// As protocol/pb: safe under crash, dup, reorder and slow (SafeFaults),
// and under mappings pb, pbdb and db also when a slow disk makes a
// backup take over from a live primary (above); a partition or a pause
// longer than suspect_checks periods makes two primaries.
//
// # Message versions
//
// Messages carry version 5 since session 54 (the batch message,
// batch.go: a version 4 node would drop a batch of update buffers or
// forwards as an unknown kind). Version 4 (the promise, session 43) made
// a version 3 node a silent non-participant: it drops promises as an
// unknown kind and never sends one, so its new primary would wait for
// ever. Each version refuses the other's messages (proto.ErrBadVersion). The
// records that are message encodings (the state image, the update
// buffers) keep version 3 framing (recordHeader), and the view records
// version 1: their formats did not change, so a node restarts on the
// earlier version's data directory.
//
// # Client batches and group commit (batch.go)
//
// The runtime hands the node the client requests of one pass as a
// ClientBatch; the primary executes them in order and commits the
// statements of up to 256 requests in one database transaction (one
// fsync), answering each once that transaction committed and its buffer
// is held where the mapping requires, as for a request alone. A batch's
// messages to one peer leave as one batch message.
//
// # Invariants (invariant.go)
//
// one-primary, reply-after-durable (caught: pbdurable-broken-replybeforedb
// answers before its database transaction committed), backup-prefix,
// all-or-nothing (a new primary's replicated objects hold every update up
// to the database's commit index and no update whose transaction did not
// commit; caught: pbdurable-broken-noprepare, whose backups apply a
// buffer on arrival: `synod-lab sim --protocol pbdurable-broken-noprepare
// --nodes 3 --clients 4 --ops 300 --faults crash,dup,reorder,slow --param
// mapping=pbdb --seeds 1-2`; TestAllOrNothing;
// testdata/matchmaker_commit_crash.txt).
//
// # Node symmetry (model checking)
//
// Not declared, for pb's reasons: the first node is the primary at
// boot and views (round, node) order takeovers by node position; its
// declared model has a primary and one backup.
package pbdurable
