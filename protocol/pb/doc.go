// Package pb is primary-backup replication as the Grid Services thesis, chapter III
// ("Primary-backup on Grid Middlewares", Figs. III.1-III.3) builds it: an
// ordered list of replicas, the first the primary and the second the senior
// backup; the primary executes each request, ships the change of state to
// every backup, and replies once all of them acknowledged it.
//
// # Roles (one automaton per node plays them all)
//
//   - Primary (Fig. III.2). EXECUTE: the duplicate check
//     (check_previous_requests), then the request runs on the primary's
//     state with the Env the runtime observed on its arrival (only the
//     primary executes, so nondeterministic services such as the
//     Matchmaker are safe: SupportsNondeterminism), then extract_state,
//     then notify_change_with_ack: an update to every backup, and the
//     answer waits until every member acknowledged it. HEARTBEAT_GENERATOR
//     every rate_sending.
//   - Backup (Fig. III.3). STATE_HANDLER injects each update, in index
//     order, and acknowledges at once; HB_HANDLER notes the heartbeat;
//     FAILURE_DETECTOR runs every rate_checking.
//   - Joining backup: a restarted node, or one the primary dropped,
//     rejoins by state transfer (below).
//   - Forwarder: every node but the primary forwards client requests to the
//     primary it knows and relays the answers.
//
// # The state change (III.A problem 1, III.B extract_state/inject_state)
//
// An update is one write: its index (the count of writes so far), the
// request id, the outcome, and the change: the service's delta since the
// version before the write (service.DeltaState: KV, Counter, String),
// or, for a service without deltas (the Matchmaker), the whole resulting
// state (the seed: "in the extreme it could be a full application
// checkpoint"). An atomic group runs at the primary in one step and ships
// as one update (Transactions: Atomic). Interactive transactions are not
// offered. A no-op write still ships an update: its outcome goes into the
// duplicate table, which is part of the replicated state.
//
// The duplicate table (the seed's [gap], notes 1.3.3) maps a client to the
// outcomes of its last 64 writes, each with its entry's index; it is
// updated by every replica from the update's outcome and carried by state
// transfers, so a request resubmitted to a new primary after a fail-over
// gets "the result computed by the old primary" (III.A) without running
// again, once every member holds the entry. IdempotentRetry is therefore
// true. Reads are not recorded; a read at the primary answers after every
// member holds every entry the read saw, so a fail-over never takes back
// what a client read. Read modes local and regular are answered from the
// contacted node's state, possibly stale; the others are the primary's read.
//
// # Failure detection (III.A problem 2, Fig. III.3)
//
// Without a clock, FAILURE_DETECTOR counts checks: a backup that heard
// nothing from its primary (heartbeat, update, view) during a whole check
// period counts a miss. The seed's senior backup takes over after one
// miss; the seed has the others re-initialise "after the second missing
// heartbeat". We generalise to rank r (the position in the member list;
// 1 is the senior) taking over after 3r-2 consecutive misses: rank 2 after
// 4, not 2. Decision, because the seed's "second" assumes the senior's
// fail-over notification arrives within one period: the senior may take
// over up to two periods after its last heartbeat, and its announcement
// needs up to one more delay D, while rank 2's last heartbeat may have
// come up to D before the senior's; 3 periods per rank leave room when
// D < rate_checking. A backup resets its count on any notification from
// its primary and on a new view.
//
// The primary detects failed backups the same way (III.A: "the detection
// of backup failures"): a backup that acknowledged nothing for two
// consecutive periods is dropped from the member list, which unblocks
// the answers waiting for it. A member backup acknowledges each update
// and, once per check period, what it applied (its proof of life when
// there are no writes: until pb-stall, session 44, this doc said backups
// acknowledged heartbeats, but they did not, and the primary of an idle
// namespace dropped both backups every two periods; they rejoined by
// state transfer and each write meanwhile waited for a join). Backups
// whose acknowledgement lags what was sent a period ago get the missing
// updates again from the primary's log (which keeps what some member or
// joiner may still need), so a lost update costs a period.
//
// # Switching to a new primary (III.A problem 3)
//
// Views are proto.Ballots (round, primary's position + 1): a backup that
// takes over uses the next round, so views are totally ordered and name
// their primary. switch_to_primary: the new primary has applied every
// update it acknowledged (it applies as it acknowledges; the seed's queued
// variant would have to drain its queue first); it drops the members
// ranked before it (failed), keeps the others in order (so the next is the
// new senior), and announces the view to every node (a newview message:
// notify_change(FAILURE)) and, before it serves, collects every other
// node's state (below, "Take-overs from a live primary"). The seed's
// senior-backup trick (backups bound
// to the senior in advance, so that the take-over is immediate and
// re-binding happens off-line) has nothing to save here: binding is one
// message. A backup stays a member of the new view when the state it
// promised is a prefix of the state the new primary installed (the same
// state view, no more entries); it acknowledges, and the new primary
// resends what it lacks from its log. Any other node (one whose state is
// behind the installed one in another view, or that holds updates the
// old primary sent only to it) cannot roll back: it rejoins by state
// transfer. A primary that hears of a later view (a newview, a heartbeat,
// or a stale notice that any node sends in answer to a message from an
// older view) steps down, forwards its clients' requests to the new
// primary, and, if the new primary still collects, keeps its state to
// report it; otherwise it rejoins.
//
// # Take-overs from a live primary (takeover.go)
//
// switch_to_primary (III.A problem 3, Fig. III.3) assumes a perfect
// failure detector. A slow disk breaks it with every node alive: the
// runtime releases a step's sends only after the records emitted before
// them are durable, so a primary whose fsyncs stall holds its heartbeats
// back; the senior backup takes over with the state it has, and the old
// primary, hearing no acknowledgement either, drops both backups after
// two periods and answers alone. The new primary's state, which every
// node then installs, lacks those answers. Before this, `synod-lab sim
// --protocol pb --nodes 3 --clients 8 --ops 300 --faults crash,slow
// --fsync uniform:1ms:30ms --power-loss 500ms,1s,1.5s,2s --seeds 1-20`
// failed 7 of 20 seeds (seeds 15 and 39 not linearizable), and the 1,000
// operation run with dup and reorder 9 of 20. The seed being silent, two
// rules close it (decision; protocol/pbdurable's for its replicated
// objects):
//
//   - A write is answered (and a read released) only once at least one
//     member backup holds its entry: the primary's committed count does
//     not move while it has no member backup, so a primary that dropped
//     its backups answers nothing until a joiner becomes a member. Every
//     acknowledged write is then durable at two nodes.
//   - A new primary serves only once every node but its suspected
//     predecessor (the primary of the view it left) has adopted its view
//     and sent a promise. While it collects, its heartbeats are newview
//     messages; a node that receives one adopts the view (persisted
//     before its promise leaves), stops acknowledging the old view (its
//     updates get a stale notice), keeps its state without applying
//     anything, and promises: its state view (the view of the primary
//     whose stream the state follows, persisted with the view record),
//     its applied count and its image; a node without a state promises
//     none. The new primary installs the latest state reported (state
//     view, then applied count) when it is later than its own, keeps as
//     members the nodes whose promised state is a prefix of it, and
//     announces them with a heartbeat: the collection is over, the
//     members acknowledge, the others rejoin. A write the old primary
//     answered was acknowledged by a member backup before that backup
//     adopted the new view, so its promise holds it.
//
// A backup's acknowledgement names the transfer it joined by (0 for a
// member that did not join by transfer), and the primary counts only
// those naming the member's own: a duplicated acknowledgement sent
// before the node was dropped and rejoined from an older image would
// otherwise count entries it no longer holds (the take-over rules drop
// and rejoin more nodes: `synod-lab sim --protocol pb --faults
// crash,dup,reorder,slow --seeds 45` broke reply-after-acks with them
// before this check).
//
// The costs, decided here: a take-over waits for every node but the
// suspect, so with one more node down the namespace waits until it comes
// back (availability, not safety); every promise carries a whole image
// (one per node and check period while the collection lasts). A
// restarted cluster whose latest primary was still collecting (its state
// view is older than its view) cannot elect it (below): once every
// configured node reported, the node with the latest state takes over.
// pb-broken-takeover keeps the seed's rules.
//
// # Joining (III.A: integration of a new backup, "outside the scope")
//
// A joining node asks the primary it learns of (heartbeats go to every
// configured node) for the state. The primary encodes an image at its
// current count i (applied count, digest chain, duplicate table, service
// snapshot) and sends it in chunks of chunk_bytes, at most 4 unacknowledged,
// so a large state takes many small messages that interleave with the
// primary's other work rather than one message that stalls the link. The
// order of updates against the image: from the moment the image is taken,
// every update after i also goes to the joiner, which holds them (keyed by
// index) while the image arrives and acknowledges those it holds in order
// (so the primary resends what it lost). Once the image is complete the
// joiner installs it (count i) and applies the held updates i+1, i+2, ...
// in order: every update is applied exactly once, on the state it was made
// from. It then asks to become a member (an acknowledgement naming the
// transfer); the primary adds it at the end of the member list once it
// holds every committed entry, so that a later take-over by it loses
// nothing. A joiner that is silent for a period asks again; a new primary
// starts a new transfer, and a second join while no chunk moved sends the
// same transfer again from its start, under the same nonce (decision,
// pb-stall, session 44: a new nonce there stalled a namespace for good:
// the joiner installed the first transfer when its late chunk arrived and
// asked to be a member under the first nonce, which the primary no longer
// counted, while it ignored the second transfer, being a joiner no more;
// with no other member backup the primary answered nothing). A joiner
// that installed the state and is not made a member within 4 check
// periods (the primary dropped its transfer, or counts another) rejoins.
// Encoding
// the image is one O(state) step at the primary; a range-by-range image
// (service.RangeState) would avoid even that and is not done.
//
// # Durability (issue 29: durable means durable)
//
// The seed keeps the state in memory ("the replicated state survives as
// long as one member of the view does"); Synod promises more with
// `durability: fsync`: no acknowledged write is lost when every node
// crashes at once. Each node persists (durable.go) its view record (the
// ballot, previous view, base, epoch, member list, and whether its
// records hold a state of that view), and its state: an image of the
// machine (applied count, digest chain, duplicate table, service
// snapshot) plus one record per entry applied since, replaced by a new
// image every 256 entries. The runtime releases a step's sends and
// answers only after its records are durable, so an entry is durable at
// the primary before it answers and at a backup before it
// acknowledges, and a view or member list is durable before any message
// announces it. A joiner persists the installed image before it asks to
// become a member.
//
// A node that restarts with a view record is recovering: it tells every
// node its durable view (a report) and waits. If a live primary exists,
// its heartbeat answers, and the node rejoins it by state transfer as
// before (its durable state may hold entries the primary never kept, so
// it is not reused). If the whole cluster restarted, nobody is primary,
// and the seed is silent (its failure model is crash-stop, III.A; IV.B.1
// assumes "all in-memory state" is lost and recovery comes from the
// database or a live replica). Decision: once every configured node has
// reported (a restarted node asks; a backup or a joiner answers with its
// own view and state; a live primary answers with its heartbeat, which
// ends the recovery), the node with the latest state takes over: the
// latest state view (the view of the primary whose stream the state
// follows, takeover.go), then the most entries, then the first in
// configuration order. It holds every acknowledged write: a write was
// answered only once a member backup held it, and every later take-over
// installed the latest state of every node but one (below, "Take-overs
// from a live primary"), so the latest state reported by every node
// holds it. An earlier rule (the primary of the latest view once its own
// durable member list reported) is unsafe once members can be dropped
// while they live: a primary that dropped every backup, crashed and
// restarted elected itself alone under a view later than the one that
// had taken over from it (`synod-lab sim --protocol pb --faults
// crash,dup,reorder,slow --fsync uniform:1ms:30ms --seeds 97` was not
// linearizable with that rule and the take-over rules);
// pb-broken-takeover keeps it. The
// chosen node takes over under a round later than every reported one
// with only itself as member, keeps every entry it holds (those never
// answered take effect, as any unanswered request may), and the others
// rejoin by state transfer; it answers writes once one of them is a
// member again. A restarted cluster therefore needs every node back; with
// one lost for good it stays unavailable rather than lose writes. Only
// the chosen node acts, so two restarted nodes never both take over.
//
// Checkpoints of long-running requests (III.A) are not done: a request
// runs to completion in one step of the primary, so there is nothing to
// checkpoint; a request resubmitted after a fail-over before its update
// reached the new primary runs again from the start.
//
// # Failure model (why pb is safe only with a perfect failure detector)
//
// Safety rests on one assumption (II.A: primary-backup "requires that the
// environment is synchronous enough to support the use of heartbeats"):
// a backup suspects its primary only after the primary crashed, and the
// primary drops a backup only after it crashed. In the simulator that
// holds for crash (crash-recovery: a restarted node rejoins), dup (updates
// are applied by index, acknowledgements are cumulative, forwards and
// joins are idempotent), reorder (up to 20 ms extra) and slow (latency
// spikes up to 50 ms per end, slow disks), since the defaults keep every delay well inside a check
// period: rate_sending 20 ms, rate_checking 250 ms, against the
// simulator's worst message delay of about 125 ms (5 ms latency, 20 ms
// reordering, two 50 ms spikes). SafeFaults returns exactly these. The
// others break it:
//
//   - partition: the backups on the other side of the primary stop
//     hearing it and the senior takes over, while the primary drops them
//     and (before the take-over rules) served alone: two primaries, both
//     answering (split brain). The
//     simulator showed it on every seed before the take-over rules
//     (committed states diverged). They do not close it: `--nodes 3
//     --clients 4 --ops 300 --faults partition` still fails 8 of seeds
//     1-40, not linearizable, with the state checks off too (the
//     ExpectViolation scenarios, seeds 3-4); how is not investigated.
//   - pause: a primary paused past a check period is taken for dead. In
//     the simulator a paused primary's queued inputs still bring it the
//     new view before its own detector drops its backups, and its reads
//     wait for acknowledgements that never come, so 20 seeds showed no
//     violation; but nothing in the model bounds the pause, and a primary
//     that resumes after its detector has dropped the backups answers
//     alone.
//   - a slow disk: a primary's sends wait behind its own fsyncs, so fsyncs
//     slower than a check period hold its heartbeats back and a backup
//     takes over while it lives. The take-over rules (above, "Take-overs
//     from a live primary") make that safe: `synod-lab sim --protocol pb
//     --nodes 3 --clients 8 --ops 300 --faults crash,slow --fsync
//     uniform:1ms:30ms --power-loss 500ms,1s,1.5s,2s --seeds 1-100`
//     fails 0 of 100 seeds (7 of 20 before), and the 1,000-operation run
//     with dup and reorder 0 of 20 (9 of 20 before).
//   - loss: a run of lost heartbeats as long as a check period looks like
//     a crash. At the simulator's worst loss window (30%) the chance is
//     about 0.3^12 per period and 100 seeds of crash,loss passed, but the
//     guarantee would then rest on luck, not on the model.
//
// That contrast is what chapter VI's PB-Paxos answers.
//
// # Clients, and the seed's Globus notifications in Synod
//
// The seed maps the three problems onto OGSI notifications. In Synod:
//
//   - STATE_UPDATE (push, with acknowledgement) is the update and ack peer
//     messages over the node transport (one TCP connection per peer; the
//     simulator's links);
//   - HEARTBEAT (pull) is the heartbeat message, sent to every configured
//     node rather than to registered sinks, and acknowledged;
//   - FAILURE (the fail-over notification to clients) is the newview
//     message between nodes, and for clients the runtime's leader push:
//     Leader (automaton.LeaderReporter) returns the primary this node
//     knows, and the runtime pushes its changes to subscribed clients over
//     gRPC (WatchLeader) and RESP; the Go client's fail-over stub (Fig.
//     III.1) resubmits its outstanding requests to the new primary at once.
//     A client that reached any other node (redis-cli) is served through
//     that node, which forwards to the primary and, on a new view,
//     forwards again (the stub's FAILURE_HANDLER, run on its behalf).
//   - The Handle Resolution Service the seed bypasses has no counterpart.
//
// # Client sessions (machine.go; session 52)
//
// As protocol/paxos's and protocol/fastpaxos's tables ("Client
// sessions"; the Raft thesis §6.3): a request carries its client's lowest
// unanswered seq (automaton.Request.Unanswered); the primary puts it in
// the write's entry, and every replica, applying the entry, drops that
// client's outcomes below it (before: the last 64 per client id, until
// the least recently active tenth was evicted past 100,000 rows). A
// client's session ends by automaton.SessionEnd (the gateway's, when a
// RESP connection closes; a gRPC client's end_session): the primary makes
// it an entry that changes no state, and every replica applying it
// removes the client's row and keeps a tombstone (client id, entry
// index). A write below its client's floor or of an ended session is
// refused, never executed. The tombstones are bounded as the rows are
// (beyond 100,000 the oldest tenth goes: a late copy of an evicted
// client's write runs again, the documented limit of an evicted row).
// Encoding: the bound and the session end travel after an entry's
// outcome (its record, the update message) and the bound after a
// forwarded request, only when set, and the tombstones after the state
// image's snapshot, only when there are any: without them every encoding
// is byte for byte as before, so old records decode unchanged. A node of
// an earlier build refuses an update or forward carrying them (trailing
// bytes), which needs a gateway of this build to send.
//
// # Invariants (invariant.go)
//
// One primary per view; a node's view never goes back; a backup in the
// view of an up primary holds a prefix of the primary's updates (equal
// digest chains), unless the primary still collects promises or the
// backup waits for its member list; the primary answers only once every up backup of its
// view applied the entry the answer covers; no request is answered from
// two different entries.
//
// # Broken variants
//
// "pb-broken-replyfirst" answers a write as soon as the primary executed
// it: reply-after-acks catches it at the first write, and with invariants
// off the linearizability checker catches lost writes under crash,loss.
// "pb-broken-nodedup" runs every request it receives: exactly-once catches
// it under duplicated messages, and so does linearizability with
// invariants off. "pb-broken-takeover" is the seed's take-over (no
// promises, answers without a backup): linearizability catches it on
// seeds 15 and 39 of the slow-disk scenario (TestTakeOverSlowDisk, and a
// conformance scenario); mc's model, whose failure detector is perfect,
// cannot.
//
// # Message versions (msg.go)
//
// Messages carry version 3 since session 54: the batch message (batch.go:
// a client batch's entries to a backup, or a forwarder's forwards, in
// one), which a version 2 node would drop as an unknown kind. Version 2
// (session 44): the take-over rules
// (takeover.go, session 43) added the promise, the report's state view
// and acknowledgements that always name the transfer the member joined
// by, which a version 1 node would drop or misread without a word (a new
// primary ignores a version 1 member's acknowledgements, whose nonce is
// 0). As every protocol here does for a format change, the version byte
// moved, and each version refuses the other's messages
// (proto.ErrBadVersion; TestMessageVersion): a mixed cluster does not
// form, and an upgrade restarts every node. Records keep version 1 (their
// formats did not change; a view record without the state view, from
// before 1975ce1, still opens), so a node restarts on the earlier
// version's data directory.
//
// # Parameters
//
//	rate_sending   positive duration  20ms   the primary's heartbeat interval (Fig. III.2)
//	rate_checking  positive duration  250ms  the failure detector's check period (Fig. III.3); at least 2 rate_sending
//	op_timeout     positive duration  5s     a forwarded request's time limit at the node the client reached
//	chunk_bytes    positive integer   65536  bytes of state per state-transfer message to a joining backup
//
// Unknown parameters are errors. The table is generated from the parser's
// (protocol/proto.Spec.Doc) and TestParamDoc keeps it so.
//
// # Node symmetry (model checking)
//
// Not declared. The replicas form an ordered list (the first the
// primary, the second the senior backup, which takes over) and a backup
// that takes over names itself in the view (round, position + 1): node
// positions decide who succeeds whom, so no two nodes are
// interchangeable. In pb's declared model (a primary and one backup)
// there is no pair to rename anyway.
package pb
