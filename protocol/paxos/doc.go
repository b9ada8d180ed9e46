// Package paxos implements Multi-Paxos state machine replication over any
// service.Service (KV, Counter, ...), as a pure automaton: Classic Paxos of
// the Grid Services thesis chapter V (prepare/promise, accept/accepted, majority quorums), run
// as a sequence of instances with one stable leader, the batched leader
// recovery of chapter VI.A.2, and the log of <request> values of chapter VI.
//
// # Roles and ballots
//
// Every node is acceptor, learner and potential leader. A ballot is
// (round, node), node being the index in the configuration plus one; ballots
// compare by round, then node, so two nodes never share one. An acceptor keeps
// one promised ballot for all instances (Multi-Paxos) and, per instance, the
// ballot and value it accepted.
//
// # Values: <request> batches, not <request, state>
//
// The Grid Services thesis chooses <request, state-after-request> per instance so that
// nondeterministic services stay consistent, and therefore allows only one
// outstanding proposal (a gap would break the state chain). Synod instead
// makes execution deterministic (see Nondeterministic services: the
// environment is part of the command), so an instance chooses a batch of
// client commands (param "batch") and every replica executes the chosen
// batches strictly in instance order. That removes the
// one-outstanding restriction: phase 2 is pipelined over a window of
// instances (param "window"), and gaps are harmless because execution waits
// for the chosen prefix. The empty batch is the no-op.
//
// # Atomic groups and transactions
//
// A request whose Ops hold several operations (MULTI/EXEC, automaton/txn.go)
// is one command: it goes into one instance, inside one batch, never split
// across a batch boundary or instances, and every replica executes it with
// automaton.ApplyGroup when it executes that instance, so nothing
// interleaves. It is answered Response{Result: OK, Results: one per
// operation}. Exactly-once covers groups: the deduplication table records a
// writing group's results like a single write's result. A group whose
// operations all read takes the read path of a single read (quorum or lease
// ReadIndex, log, local); the others go through the log. A group holding a
// membership change or an invalid operation is refused whole. Interactive
// transactions (T-Paxos, the Grid Services thesis VI.A.4) are not done (issue 13): a
// request with Txn is answered automaton.ErrNoInteractive before anything is
// applied or logged.
//
// "paxos-broken-splitgroup" orders a group's operations as separate
// commands, the k-th operations of all groups of a batch after every
// (k-1)-th and the batch's single commands after the first operations
// (A1 B1 s A2 B2), so other clients' operations run between two of a
// group's: groups half-apply, which the serializability checker catches
// (TestSplitGroupHalfApplies shows it in this package). It needs groups
// sharing a batch with other commands, that is load: the simulator catches
// it in 10 of 10 seeds with --groups 0.5 --param window=1 and 8 clients,
// in none with the default window of 8 (batches of one command).
//
// # Nondeterministic services (service/env.go)
//
// The Grid Services thesis and issue 9 leave the protocol to choose what replicas agree on:
// the resulting state, or the environment one replica chose. Paxos
// replicates the environment ("Multi-Paxos with a leader-chosen
// environment"; the Eve/Adam thesis's Eve has one replica choose likewise): each
// command of a nondeterministic service carries an Env in the log value,
// and every replica executes it with service.ApplyEnv (ApplyGroup for a
// group, Env.For(i) for its i-th operation). The Env is the one the request
// carried when it reached the leader, that is the one the node the client
// contacted observed at arrival (Request.Env, filled by the runtime):
// forwarding keeps it, and the leader does not replace it. Only one copy of
// a request enters the log (a retry is deduplicated), so exactly one Env is
// chosen per command, and it is chosen with the command by phase 2; which
// replica observed it does not matter to safety. For a deterministic
// service the Env is neither forwarded nor logged (the log and the messages
// are byte for byte as before). Reads served without the log (local,
// quorum, lease) use the serving request's own Env; they change no state.
//
// # Invariants (invariant.go)
//
// The simulator checks after every step (automaton.InvariantStater), each
// check looking only at the stepped replica and what changed since its
// last check:
//
//   - one value chosen per instance: the value digest of every instance in
//     a replica's chosen prefix equals the one the first replica that knew
//     it chosen had;
//   - promises never decrease: within an incarnation, and across restarts
//     against the highest ballot a leader or candidate holds this node's
//     Promise, Accepted or HeartbeatAck for (those left only once the
//     promise was durable; a promise lost unsynced in a crash was never
//     observed, so it is not held against the node; a node joining with an
//     empty disk under a reused id starts afresh);
//   - executed prefixes agree: a digest chain over executed instances,
//     compared per instance with the first replica's (a replica that
//     installed a snapshot continues from the chain at the snapshot);
//   - one leader per ballot.
//
// paxos-broken-skipphase1values trips the first before a client sees the
// lost write (TestSkipPhase1ValuesTripsChosenInvariant).
//
// # Wire and record formats across versions
//
// Additions keep the previous encoding whenever they are unused: a batch
// with no group and no Env is version 1 (groups, Envs and split parts make
// it version 3; 2 marks a membership change value), a Forward carries a
// trailer (flags, Env, operations) only when it has a group or an Env, a
// ForwardReply a trailer only for a group's results, and a snapshot whose
// dedup table holds no group results is version 1 (else version 2). A
// replica of the previous release so keeps working with this one until
// groups or nondeterministic services are used.
//
// # Leader election (stable leader, no disruption)
//
// A follower that has not heard a live leader for election_timeout starts
// phase 1 after a further random delay (election_timeout plus up to
// election_timeout << min(failures,3): randomised, backing off after failed
// attempts; Config.Rand only). While it hears the leader only the "alive"
// timer runs (re-armed by each Accept and Heartbeat); the election timer is
// armed when "alive" fires, for the random part only (election.go,
// armElectionRest), so phase 1 still starts election_timeout plus the
// random part after the leader's last message: one timer per message
// instead of two (session 49). Leader stability (the "Ω meets Paxos" property
// the Grid Services thesis VI.A.5 relies on) is a pre-vote / check-quorum rule:
//
//   - A follower that received an Accept or Heartbeat with a ballot at least
//     its promise within the last election_timeout (timer "alive") refuses to
//     promise a higher ballot to any other node, unless that leader's removal
//     has executed here (leader hand-off, see Membership changes). It also
//     refuses while it is a candidate or leader itself. A restarted node with
//     durable records
//     refuses for one election_timeout after Start (it may have acknowledged a
//     lease before the crash).
//   - A leader that has not seen a majority acknowledge a heartbeat for an
//     election_timeout steps down (check quorum).
//   - A leader rejected by an acceptor holding a higher ballot (a node that ran
//     for election while cut off and came back) runs phase 1 again above it:
//     its own followers promise again at once, so the returning node does not
//     depose it; a deposed leader doing the same is refused by the real
//     leader's followers and steps down.
//
// # Phase 1 (one message for all instances)
//
// A candidate sends one Prepare(ballot, f) where f is the first instance it
// does not know chosen. An acceptor answers with its chosen prefix C and every
// instance > max(C, f-1) it accepted (ballot, value, chosen flag). With a
// majority, for every instance above the highest reported prefix Cmax the
// leader proposes the value known chosen, else the value with the highest
// accepted ballot, else a no-op (gap filling), all in one Accept message.
// Instances up to Cmax are chosen already; the leader fetches them by
// catch-up instead of proposing. The broken variant
// "paxos-broken-skipphase1values" ignores the reported values (it fills
// everything with no-ops) and loses acknowledged writes; the simulator
// catches it.
//
// # Phase 2, commit and execution
//
// The leader proposes what is queued (up to "batch" commands per instance,
// up to "window" instances not yet chosen): requests that arrive while the
// window is full wait and go out together in the next instance, so the
// instance size grows with the load. It broadcasts the Accept first and then
// persists its own acceptance in the same step, counting its own vote at
// once; an instance is chosen when a majority of its configuration accepted
// it. Commit notices (the leader's chosen prefix and ballot) ride on every
// Accept and Heartbeat (every "heartbeat"); a follower marks chosen every
// instance up to it that it accepted under that ballot and fetches the rest.
// Instances execute in order; a client is answered after its command
// executed. Unacknowledged Accepts are retransmitted every heartbeat. The
// heartbeat tick may fire up to a quarter of a heartbeat late
// (automaton.SetTimer.Slack, armTick): a runtime with many groups fires
// their ticks together and sends their heartbeats in one frame per peer
// (node/coalesce.go). Not in the seed, which has one group per node; lease
// and election timers carry no slack.
//
// Why the leader may send before its own fsync and count its vote at once.
// The automaton contract releases a Send or Respond only after every Persist
// emitted before it, in the same step or any earlier one, is durable (both
// runtimes: the live loop releases outputs in order after their commits,
// the simulator holds outputs behind unsynced records and loses both on a
// crash), except an Early Send (automaton.Send.Early), which waits only for
// what the last output before it that is not Early waits for. The leader's
// Accept is Early (issue 18; Raft's leader likewise writes its log in
// parallel with replication, Ongaro's thesis §10.2.1), so a put costs the
// leader's fsync in parallel with one round trip and a follower's fsync
// instead of the two in a row: before, the Accept waited for the records of
// the previous steps (the last put's "c" record, committed lazily with the
// leader's acceptance), then the follower's fsync followed.
//
// The argument (Paxos Made Simple §2.2-2.3, the Grid Services thesis V: a value is chosen
// when a majority of acceptors accepted it; phase 2a only asks acceptors to
// accept, and a proposer never proposes two values under one ballot):
//
//   - The Accept's values rest on nothing at the leader: phase 2a may
//     carry any value phase 1 allows, whatever the leader's own acceptor
//     does; if the leader crashes before its acceptance is durable, the
//     followers that accepted hold the value, and it is chosen only if a
//     majority durably accepted it, which a later phase 1 finds as usual.
//   - Its ballot rests on the leader's promise record, made durable before
//     any Prepare left (those wait), and a configuration grows from one
//     member only by an Accept that is not Early, so the ballot is never
//     reused after a crash: a restarted leader takes one above its durable
//     promise and cannot propose a second value under the first.
//   - Its commit notice rests on the leader's own votes; it names only
//     instances whose choice an earlier waiting output covers: every
//     choice is followed in its step by an answer or, failing that, a
//     heartbeat (checkChosen), and the notice stops below any instance
//     whose record the Accept's own step persisted after its last waiting
//     output (earlyAccept; with one member the leader chooses in the step
//     that proposes). It is not Early when the configuration has one member
//     or the step persisted a promise after its last waiting output.
//   - Everything else that depends on the leader's own vote, that is on the
//     instance being chosen when the leader's acceptance is part of the
//     majority (its marking chosen, execution, answers to clients and
//     forwarding followers, commit notices in Heartbeats and retransmitted
//     Accepts, catch-up answers, snapshots, promises reporting the instance
//     as chosen), waits for the records before it, so it leaves the node
//     only once the acceptance is durable. If the leader crashes first, the
//     record and all those outputs are lost together: the vote was never
//     observed (the invariant checker treats such knowledge as tentative,
//     automaton.CrashObserver).
//
// An acceptor's Accepted must never be Early: it reports a vote, and a
// leader counting a vote that a crash then erases may take a value as
// chosen that a later majority, without that vote, replaces.
// "paxos-broken-earlyack" does exactly that and the simulator catches it
// under crashes with slow fsyncs (broken_early.go, TestBrokenEarlyAckCaught:
// `synod-lab sim --protocol paxos-broken-earlyack --nodes 3 --clients 4 --ops
// 300 --faults crash --fsync uniform:5ms:40ms --seeds 6`).
//
// The seeds are silent on durability timing; these are our decisions, as is
// the heartbeat after a choice that no answer follows (a no-op, an expiry),
// which costs one heartbeat round where there was none.
//
// # Durability
//
// Records: "p" (promised ballot), "a/<instance>" (accepted ballot, chosen
// flag, value), "c" (chosen prefix: every slot record up to it holds the
// chosen value), "s" (snapshot). Promises and followers' accepted values
// are persisted in the step that sends the Promise or Accepted, before it;
// the runtime releases the send only once the record is durable (automaton
// contract). The leader's own acceptances: see phase 2.
//
// Answers go out before the "c" record of the step that executes them: an
// answer needs only that its instance and every one before it are chosen,
// which holds once a majority durably accepted them (each follower's
// Accepted left after its record was durable; the leader's own vote as
// above). "c" is a hint for recovery: a replica that loses it (crash before
// its fsync) restarts with a shorter known prefix and learns the rest from
// commit notices, phase 1 or catch-up, exactly as for instances it never
// heard of. It is still written in order after the slot records it
// covers, so a durable "c" never names an instance whose record is not.
// So a put costs the leader's fsync in parallel with one round trip plus a
// follower's fsync, instead of three fsyncs in a row.
//
// Start restores the snapshot, reloads the log and re-executes the chosen
// prefix; the executed state itself is never persisted separately.
//
// # Positioned answers (issue 28)
//
// Every slot record "a/<i>" is persisted positioned at i
// (automaton.Persist.Pos), and the answer to a command that the execution
// of instance i completed is positioned at i (automaton.Respond.UpTo = i):
// the runtime (package release, the one interpreter) releases it once this
// node's records up to the last slot record of an instance <= i are
// durable, not every record emitted before it. What it no longer waits for
// is what was emitted after that record: the leader's acceptances of later
// instances (proposed while i's round ran, under load in the steps between
// i's proposal and its choice), "c" and snapshot records, promises.
//
// The seed is silent here (the Grid Services thesis, ch. V and VI.A.2,
// defines chosen as accepted by a majority and executes the log in order;
// its prototype wrote nothing to stable storage, and ch. VI does not
// discuss it), so this is our decision. Why it is safe. The answer states
// the result of executing instances 1..i in order, and that result is
// fixed once each of them is chosen: a value accepted by a majority under
// one ballot is the only value any later ballot can choose (Paxos Made
// Simple §2.2, the thesis ch. V). So the answer may leave once each of
// 1..i is chosen by acceptances that survive any crash:
//
//   - a follower's acceptance counts only through its Accepted, which
//     leaves after its record is durable (never Early; paxos-broken-earlyack);
//   - the leader's own acceptance of j <= i counted at once (its Accept is
//     Early): its record a/<j> is positioned at j <= i, so the answer waits
//     for it (and, records being durable in emission order, for everything
//     emitted before it: the promise of the leader's ballot, earlier
//     slots);
//   - instances the leader learned chosen from others (commit notices,
//     catch-up, phase 1 reports) rest on those others' durable records;
//     their slot records here are positioned too, which costs nothing in
//     the common case and keeps the rule one line;
//   - nothing the answer states depends on a record emitted after the last
//     of those: acceptances of instances above i do not change 1..i; "c"
//     is a hint (Durability, above); a snapshot and the deletions behind it
//     are derived from the executed state; a promise to a higher ballot does
//     not unchoose a chosen value.
//
// The Early Accept's argument is untouched: for an Early Send emitted
// after it, a positioned answer counts as an output that waits for every
// record before it (package release), so checkChosen's "a choice is
// followed by an answer or a heartbeat" still covers the commit notices
// that later Early Accepts carry. Other answers (reads, errors, the
// leader's ForwardReply to a follower) keep the full rule, except an
// answer a follower relays from its leader's ForwardReply: it waits for
// none of the follower's records (automaton.Respond.Relayed). The leader
// sent the ForwardReply under the full rule, once the instance was chosen
// by acceptances that survive any crash (its own, waited for, and a
// follower's, sent after its record was durable), so the answer rests on
// nothing the follower persisted; its own acceptance of the instance, if
// still syncing, is not what made it chosen when the leader heard the other
// follower first (session 49: one client's put through a follower waited
// for that sync). "paxos-broken-relayall" marks every answer relayed, the
// leader's too, and the simulator catches the lost write
// (TestBrokenRelayAllCaught). This is what etcd-io/raft's asynchronous storage writes
// gain for a leader's answer (the leader's append acknowledges itself after
// its fsync, and entries apply once a quorum's appends are durable, not
// once the leader's later appends are), without turning the runtime's
// fsync into an input of the automaton.
//
// "paxos-broken-answerearly" persists the leader's own acceptances without
// a position, so its answers leave before the leader's vote is durable;
// the simulator catches the lost write (broken_answer.go,
// TestBrokenAnswerEarlyCaught: `synod-lab sim --protocol
// paxos-broken-answerearly --nodes 3 --clients 8 --ops 500 --faults crash
// --fsync uniform:20ms:80ms --seeds 90`), and so does the model checker
// (AnswerEarlyModel), whose crashes before an fsync follow the positioned
// rule across steps (mc/unsynced.go).
//
// # The leader's own acceptance against the followers' (sessions 50-51)
//
// Two questions of one client's put that the seed leaves open (the Grid
// Services thesis, ch. V, counts a value chosen once t+1 acceptors accepted
// it and times a learner's learning, not stable storage; its prototype
// wrote nothing to disk). Our decisions, with the figures of
// docs/costs/s50-lat50.md:
//
//   - The Accepts leave before the leader's own acceptance is written. The
//     step that proposes emits the Persist of a/<i> and then the Early
//     Accepts; the runtime writes the Accepts at the end of the pass and
//     starts the commit after that (for one client's put on the
//     connection's goroutine, node/sched.go inlinePassCommit). A follower's acceptance is the later
//     one in most puts (in process, the leader's commit ended after the
//     first follower's Accepted was stepped in 267 of 1,000; live 22-34 %),
//     so writing the record first would lengthen the common case by the
//     WAL write to shorten the rarer one.
//   - The leader answers on whichever quorum of durable acceptances comes
//     first (session 51): its own vote with one follower's, or two
//     followers' while its own record is still being written. The seed
//     decides it: a value is chosen once t+1 of the 2t+1 acceptors accepted
//     it (ch. V.A, Table V.1: Classic Paxos's quorum is t+1), and the proof
//     of PB-Paxos (ch. VI.B, Protocol 1: "the leader responds to the client
//     process if and only if the proposal has been accepted by the majority
//     of the replicas"; Theorem 1, steps 1-4) needs only that more than half
//     of the replicas sent phase 2b messages, so that the next primary's
//     phase-1b majority meets one of them; nothing in it needs the leader
//     among them. Durability is ours (the seed's prototype wrote nothing):
//     a follower's Accepted leaves after its record is durable (never
//     Early; paxos-broken-earlyack), so two followers' Accepteds are t+1
//     durable acceptances under one ballot, and the ballot rests on the
//     leader's promise, durable before any Prepare left. The answer at i
//     also states instances 1..i-1, so it still waits for the leader's
//     records positioned below i. How: the choice counts the leader's vote
//     at once, so the answer is emitted, positioned at i, in the step of
//     the first follower's Accepted; the leader keeps each instance whose
//     choice counted its vote (keepOwnChosen, at most 2 x window) and, on
//     the Accepted that makes the other acceptors' acceptances a majority,
//     emits automaton.Unpin{Pos: i}: the interpreter (package release,
//     "Unpinned positions") then lets the answers at i wait only for the
//     positioned records up to i-1, so the answer leaves at once if the
//     leader's own commit is still running, and nothing changes if it
//     ended first (no second copy of the answer, no kept answers). An
//     instance chosen without the leader's vote (the leader no member of
//     its configuration) is unpinned before its answers. On this machine
//     it changes little: in process the second follower's Accepted of a
//     one-client put reached the leader before its own commit ended in
//     17-26 of 1,000 puts, and 2-4 of 1,000 were answered that way (session
//     50's 118 of 1,000 counted the previous put's late Accepted; figures:
//     docs/costs/s51-lat51.md); it is for a leader whose disk is slower than
//     its followers'. "paxos-broken-unpinone" unpins on one follower's
//     acceptance and the leader's unsynced vote (not a quorum of durable
//     acceptances) and is caught, by the simulator and the model checker
//     (broken_unpin.go).
//   - Through a follower, the seed's message flow (ch. V: proposer ->
//     leader -> acceptors -> learners; "a learner accepts a value when it
//     receives a message from a quorum of acceptors") would let the entry
//     learn the choice from the other follower's Accepted and its own
//     acceptance, one hop fewer than the leader's ForwardReply. Not built:
//     the Accept would have to name the entries to send Accepteds to (a
//     wire change), and the entry's answer would count its own vote the way
//     the leader's does (positioned at i).
//   - A follower's Forward is a relayed Send (session 51; "Clients,
//     forwarding, exactly-once"): it rests on none of the follower's
//     records (it carries the client's request), and as a Send that is not
//     Early it waited for all of them: one client's next put through a
//     follower waited for the follower's sync of the previous put's
//     acceptance, which the relayed answer no longer waits for. In process
//     the Forward now leaves 11-14 µs after the entry's step instead of
//     40-51 µs, and the answering follower's commit did not get longer
//     (figures: docs/costs/s51-lat51.md).
//
// # Catch-up, snapshots, compaction
//
// A replica that learns it is behind asks a peer for the chosen range
// (CatchupReq: at most 512 instances / 1 MiB per answer, repeated until
// level). When the range was truncated, the peer sends a snapshot of its
// state machine instead (service Snapshot plus the dedup table). Once
// "snapshot_every" commands executed since the last snapshot (counted in
// commands, not instances: a snapshot costs the whole state, so it is
// amortised over the work done, whatever the batch sizes), or once the
// values of the instances executed since then reach "snapshot_bytes" (and
// at least 4 x the last snapshot's size, so that snapshots cost at most a
// quarter of the log's bytes; a pipelined client's batch is one command,
// and 20000 of them made a 40-50 MB log for one key: execute.go,
// snapshotBytesFactor), a replica persists a snapshot and deletes the log
// behind the previous one (memory and records): the log holds at most
// about 2 x snapshot_every commands or 2 x that many bytes, the disk one
// snapshot.
//
// # Reads (automaton.Options.Read)
//
//   - default: the mode the namespace parameter "read" names, quorum unless
//     set (etcd's default is the same ReadIndex read). Before 2026-11 the
//     default was log; quorum reads need no disk write and no instance, and
//     measured 1.5x the log read's throughput at 256 clients
//     (scripts/bench-paxos, READMODE=log vs quorum).
//   - log: the read is a command in the log (linearizable, one phase 2).
//   - quorum: the leader notes read index = the highest instance it has
//     proposed, waits until it has executed it and until a majority
//     acknowledged a heartbeat round sent after the read arrived, then
//     answers from its state (ReadIndex; the Grid Services thesis's X-Paxos confirms).
//     Confirmation rounds (reads.go, sendReadRound; our decision, the
//     seeds are silent on batching reads): the reads of one step (a
//     client batch, a forwarded read) share one round, sent at the end of
//     the step, so after every one of them arrived; a step whose reads
//     find a round in flight sends its own, up to readRounds (2) in
//     flight, instead of waiting for the one in flight and then a new one
//     (a read used to wait one and a half rounds on average under load);
//     beyond that a read waits for the round the next acknowledgement
//     sends. A read is answered only on a round sent after it arrived,
//     whatever the number in flight.
//     With read_round=majority a confirmation round goes only to the
//     followers that make a majority with the leader (readTargets; our
//     decision: the Grid Services thesis VI.A.3 needs confirms from a
//     majority including the leader, not from every replica): those that
//     acknowledged the latest rounds, so of 3 nodes one follower, the other
//     hearing only the tick's rounds. This halves the messages of a round
//     of 3 (4 -> 2) and a follower's wake-ups for reads. Every other
//     heartbeat (each tick, a new leader's, a change's) and every round
//     while a membership change is in flight or learners catch up goes to
//     every peer. A target that stops answering delays the reads waiting on
//     its round until the next tick's round (at most one heartbeat
//     interval), which the other followers acknowledge and so become the
//     targets. Safety does not depend on who is asked: a read still needs a
//     majority's acknowledgements of a round sent after it arrived. The
//     default stays all (every round to every peer): live, at 16 clients on
//     the shared machine, majority cut peer messages per get by 30-50 % but
//     not CPU per get measurably, and it moves the simulator's pinned seeds
//     (docs/COSTS.md, pxget47).
//   - lease: as quorum, but a valid lease replaces the round. The lease rule:
//     each heartbeat round r sets a timer of lease = election_timeout /
//     (1+lease_drift) - lease_margin when it is sent; once a majority
//     acknowledged r, the leader holds the lease until that timer fires.
//     Followers that acknowledged r promise no other node for
//     election_timeout after receiving it (which is after it was sent), also
//     across a restart. This is safe while clocks run at rates within a
//     factor (1+lease_drift) of each other and timers do not fire early; a
//     process pause longer than lease_margin between the check and the
//     answer is not covered (defaults: drift 0.1, margin = heartbeat). Without
//     a valid lease the read falls back to a quorum round. Which rounds set
//     a lease timer (timesLease; our decision, pxget48, session 48): every
//     round when read=lease; otherwise every round but the confirmation
//     rounds quorum reads send, whose timers were one wake-up of the
//     leader's loop per round for a lease no quorum read uses (at 16
//     clients a round per 2-4 gets). An explicit lease read then holds the
//     lease of the latest acknowledged tick round: a majority that
//     acknowledged a later round acknowledged it after the tick round was
//     sent, so the lease measured from the earlier send is shorter, never
//     longer, than the followers' promise.
//   - local: the contacted replica answers from its state (may be stale).
//   - regular: served as local (documented, not refused).
//
// # Clients, forwarding, exactly-once
//
// A follower forwards requests to the leader it last heard and answers its
// client when the leader's ForwardReply arrives, or when it executes the
// command itself, whichever is first; it forwards again every four heartbeats
// and after a leader change (a pass over the waiting requests only on a
// leader change or a tick; otherwise only the newly routed ones). The
// deduplication table (client id -> results of its last 64 writes by
// sequence number, with the sequence numbers kept sorted so that recording
// and evicting a result are O(1) for in-order writes) is part of the replicated state and
// of snapshots, so a write retried with the same RequestID at any node after
// a fail-over returns the first result (IdempotentRetry is true). A write
// older than the client's window is refused with an error; the table keeps at
// most "dedup_clients" clients, evicting the least recently active tenth
// (by instance) when full, deterministically on every replica. Requests not
// done within "op_timeout" are answered TRYAGAIN (outcome unknown).
//
// A Forward is a relayed Send (automaton.Send.Relayed): it carries the
// client's request (and, for a service that reads it, the forwarder's
// arrival time, observed, not persisted) and rests on no record of the
// forwarder, so it leaves at once instead of after the forwarder's earlier
// records are durable. A crash that loses those records loses nothing the
// Forward stated; the leader proposes the request as it would a retry's,
// and deduplication keeps it exactly-once. Until session 51 one client's
// next put through a follower waited for that follower's fsync of the
// previous put's acceptance, which the relayed answer (below, "Positioned
// answers") no longer waited for: in process a median 40-51 µs between
// the entry's step of the request and its Forward, 11-14 µs since.
//
// # Client sessions (machine.go; session 50)
//
// The table keeps only what a retry can still ask for, and forgets a
// client that is gone, both through the log, as the Raft thesis §6.3
// ("Implementing linearizable semantics": a client's session, its
// requests' serial numbers, the results it has not yet acknowledged, and
// the expiry of a session agreed through the log, never by a replica's own
// clock) and Dragonboat's session manager (internal/rsm: RespondedTo,
// unregistered sessions) do:
//
//   - A request carries the client's lowest unanswered sequence number
//     (automaton.Request.Unanswered; Dragonboat's RespondedTo + 1): in the
//     forward (flag 8 of the trailer, as Seq minus it) and beside its
//     command in the log (flag 16 of a version 3 command). Executing it,
//     every replica drops that client's outcomes below it and raises the
//     row's floor to it (proto.Session.ForgetBelow). A -P 16 client's row
//     so holds its 16 requests in flight, not the last 64 (dedupWindow); a
//     request that does not tell (0: a client of the previous release, a
//     nested request, whose copies come from other caller replicas) keeps
//     the window of 64.
//   - A client's session ends by a command: the runtime submits
//     automaton.SessionEnd under the client's id when its connection
//     closes; ordered like a write, it removes the row at the same
//     instance on every replica and leaves a tombstone (client id and
//     instance: two varints, at most 15 bytes in a snapshot), at most
//     "dedup_clients" of them, the earliest forgotten first.
//   - What a retry of a forgotten id gets (our decision): an error, and
//     the command is not executed, never a second execution. Dragonboat
//     ignores a proposal below RespondedTo ("the client is expected to
//     time out") and rejects one of an unregistered session; the Raft
//     thesis answers a request of an expired session with an error. Here a
//     write below the floor is answered "its outcome is forgotten and it
//     was not executed", a write of an ended session "its client's session
//     ended; it was not executed". Only a copy nobody waits for can hit
//     either (the client had its answer, or is gone), so no client sees
//     them but one that reuses an ended id. A tombstone evicted past the
//     bound, like a row evicted from a full table, lets a copy delayed past
//     100,000 later session ends run again: the documented limit.
//   - A snapshot holds the rows (floors and outcomes) as before and, after
//     the configuration, the tombstones; without tombstones it is byte for
//     byte as before. "paxos-broken-dropearly" takes the bound as
//     inclusive and is caught by the simulator (broken_dropearly.go).
//   - Who tells the table (session 51): the RESP gateway stamps its own
//     client ids (one request in flight per id) and, when a connection
//     closes, ends only the ids that sent a request which may write (an
//     id that only read has no row: a read-only connection's close costs
//     no write); a gRPC client picks its own ids and tells both itself
//     (api/synod.proto Request.unanswered and end_session; the Go client
//     does: client/sessions.go), a client that tells nothing keeping the
//     window of 64; in a sharded namespace a session end goes to every
//     group (node/shardsession.go), since the client's rows are in every
//     group it wrote to.
//
// # Parameters
//
//	heartbeat         positive duration          50ms     leader heartbeat and retransmission interval
//	election_timeout  positive duration          500ms    silence before an election; at least 3 heartbeats
//	op_timeout        positive duration          5s       a request's time limit at a node
//	window            positive integer           8        instances in phase 2 at once
//	batch             positive integer           256      commands per instance (at most)
//	snapshot_every    positive integer           20000    executed commands between snapshots
//	snapshot_bytes    positive integer           8388608  executed instances' bytes between snapshots (at least 4 x the last snapshot's size)
//	lease_drift       number in [0, 1)           0.1      clock rate bound for leases
//	lease_margin      non-negative duration      50ms     subtracted from the lease (absent: the heartbeat)
//	dedup_clients     positive integer           100000   rows of the deduplication table
//	expiry_period     positive duration          100ms    leader proposes removing expired keys (expiry.go)
//	read              one of quorum, log, lease  quorum   what the default linearizable read is
//	read_round        one of all, majority       all      who a read's confirmation round goes to
//	members           comma-separated list       -        bootstrap configuration, in numbering order (absent: Config.Nodes)
//	observe           string                     -        the name of a Recorder (NewRecorder, observe.go) told each instance learned (experiments; absent: none)
//
// Unknown parameters are errors. The table is generated from the parser's
// (paxos.go, params; protocol/proto.Spec.Doc) and TestParamDoc keeps it so.
//
// Parameters at 256 clients. The Grid Services thesis is silent on how many instances to
// keep in phase 2 and how large an instance's batch is; window 8 and batch
// 256 were kept after a sweep of window 4-32 and batch 64-512 at 256
// clients, fsync on (docs/COSTS.md, "Multi-Paxos parameters at 256
// clients"): no setting was faster beyond the run-to-run noise, because
// puts there are bound by CPU on the shared cores, not by the window. A
// larger window only spreads the same outstanding commands over more,
// smaller instances (the records per fdatasync grow with it, puts/s does
// not), and 256 clients over 8 instances never fill a batch of 256.
//
// Session 58 swept window 1, 2, 4 and 8 again (docs/costs/s58-misc58.md;
// fsync on, 3 nodes, a machine at load 7-14 on 2 cores) and kept 8:
//
//   - redis-benchmark -c 50 -P 16 SET (`scripts/bench-ab paxos fsync 8
//     150000 16` with +window=1, 2, 4, 8, then 6 rounds in the reverse
//     order): allocations per SET fall with the window (medians 5.50 at 8,
//     5.06 at 4, 4.80 at 2, 4.66 at 1; lower in 14 of 14 rounds for each),
//     and so do peer messages per SET (0.06-0.07 at 8, 0.01-0.02 at 1):
//     fewer, larger instances. Node CPU per SET was lower than 8's in 11 (1),
//     9 (2) and 9 (4) of 14 rounds, medians 13.30/14.07/14.66 against 14.30
//     µs; SET/s had no direction (higher than 8's in 6, 7 and 8 of 14).
//     The ratio to Redis (`PIPES=16 PARAMS=window=N
//     scripts/bench-redis-benchmark paxos fsync 200000`, 4 rounds each) moved
//     with redis-server's own cell (54k-238k SET/s) and says nothing here.
//   - 256 closed-loop clients, one connection each (`synod-lab compare
//     --systems synod --clients 1,256 --conns "" --pipeline "" --duration 5s
//     --param window=N`, 4 rounds, order rotated): puts/s medians 6.7k (1),
//     8.7k (2), 7.9k (4), 9.8k (8); window 1 fewer puts than 8 in 4 of 4
//     rounds and a higher p50 in 4 of 4, window 2 and 4 higher in 2 and 0 of 4.
//     A window of 1 or 2 leaves 256 clients' commands waiting for an
//     instance slot behind one fsync round.
//   - One client: put p50 0.79 (1), 0.88 (2), 0.81 (4), 0.79 (8) ms
//     medians, no direction (one command is outstanding: the window is
//     never full).
//
// A smaller window saves allocations and messages under pipelining but
// costs puts at 256 clients, so the default stays 8.
//
// # Membership changes (membership.go, reconfig.go)
//
// The configuration (members with their ballot numbers and addresses) is
// part of the replicated state: it starts as the bootstrap configuration
// (Config.Nodes, or the parameter "members" when the runtime lists nodes
// added since), changes only by executing a change command from the log,
// and is in every snapshot. A change is a request whose operation has the
// reserved kind automaton.MemberOpKind (add id peer client, or remove id),
// submitted by the runtime's admin path (the gateway's SYNOD MEMBER); the
// service validation in node.Do refuses that kind to ordinary clients.
//
// The rule (Lamport's SMR with alpha, alpha = 1 around changes): the
// configuration of instance i is the one after executing instances < i. A
// change is alone in its instance k; the leader proposes nothing after k
// until k has executed, so it always knows the configuration of what it
// proposes; commands before k pipeline as usual. So k itself is decided by
// a majority of the old configuration, and k+1 onwards by majorities of the
// new one. Only single-node changes exist, so old and new majorities always
// intersect. Phase 1 follows the rule too: a candidate first fetches every
// instance it lacks that some promiser knows chosen, then walks the values
// it would propose in instance order; every change met makes the
// configuration of the instances after it, and the candidate needs promises
// from a majority of each configuration met (it sends Prepare to members it
// learns of that way). While a change is in flight, heartbeat rounds (lease,
// quorum reads, check quorum) need majorities of both configurations.
//
// Adds: the leader first makes the new node a learner (heartbeats, catch-up
// by ranges or snapshot; it counts in no quorum) and proposes the add once
// the learner has acknowledged one of its heartbeats and its acknowledged
// chosen prefix is within one window of its own (the paper is silent on
// when a joining node is ready; without the acknowledgement, a learner
// that never answered was added whenever the log was shorter than a
// window, making a configuration whose new member may be down);
// the new node is numbered at execution (next unused number). A node
// outside the configuration (joining, or removed) answers every client
// request with TRYAGAIN "not a member", never stands for election, and
// members refuse it promises. Removes: a removed leader steps down when its
// removal executes and answers its waiting requests TRYAGAIN; the remove
// request itself is answered OK. A leader answers a removal of another
// node only once a majority of the new configuration (itself included)
// acknowledged a chosen prefix reaching it (settle.go, session 47): else a
// crash of the leader just after the answer left the survivors, a
// majority of the new configuration, in the old one with no quorum.
//
// Leader hand-off (like Raft's TimeoutNow). A leader whose removal executes
// sends every remaining member a TakeOver (its ballot and chosen prefix, a
// commit notice like a heartbeat's) that names one of them: the member that
// acknowledged the highest instance (Accepted instances, heartbeat-ack
// chosen prefixes; ties to the lowest number, deterministically). The named
// member, if it has executed the removal on receipt (the TakeOver's commit
// notice lets it, when it accepted the removal), starts phase 1 at once
// with a ballot above every one it has seen. The others grant it promises at once
// by one more promise rule: a follower does not protect a live leader that
// is outside the configuration it has executed (its removal executed
// there). That is safe for leases and for stability: commit notices leave a
// leader only after it executed the prefix they name, so the removed leader
// had retired (stepped down, its waiting requests answered) before any follower could
// execute its removal; and a node whose add a follower has not executed
// does not count as removed. A follower that refuses a Prepare whose first
// instance is beyond its chosen prefix fetches the missing chosen instances
// from the candidate (catch-up), so a retransmitted Prepare finds it past
// the removal even when the TakeOver was lost. A candidate does not give up
// for a late Accept or Heartbeat of a removed leader. A TakeOver below the
// receiver's promise is stale and ignored. Everything else in phase 1 is
// unchanged (promises persisted before they are sent, majorities of every
// configuration met). When the hand-off fails (the named member is down,
// messages lost), the members elect after election_timeout as before.
//
// Leadership transfer (transfer.go; Raft's leadership transfer extension,
// Ongaro's thesis §3.10). A request automaton.LeaderTransfer(id), the
// reserved membership kind with the action "transfer", is forwarded to the
// leader like a change and never logged. The leader refuses a target that
// is not a voting member (ERR), and one that did not acknowledge one of
// its last two heartbeat rounds or while a change is in flight (TRYAGAIN);
// otherwise it answers OK, steps down (no lease reads, no proposals; its
// waiting requests go to the target) and sends every member a TimeoutNow
// with its ballot and chosen prefix, OK for the target. A member whose
// live leader is the sender, at a promise not above that ballot, stops
// protecting it; the target starts phase 1 at once. Phase 1 recovers what
// the target's log lacks, so unlike Raft the target is not brought up to
// date first. A follower does not bounce a forwarded request straight back
// to the node that forwarded it (both naming the other leader, as a
// transfer's old leader and its target briefly do): the tick's pass
// forwards it once the hint changes. paxos-broken-transfer's target leads
// under the old ballot without phase 1 (TestTransferSim).
//
// A removed node that was cut off when its removal was chosen may not learn
// it (members stop talking to it); it cannot gather promises and only
// answers TRYAGAIN. The runtime learns peer addresses from the
// automaton.Members output (the configuration, learners and nodes named by
// adds not yet executed) and drops removed nodes.
//
// # Nested requests
//
// Paxos serves nested requests (Capabilities.NestedWindow, automaton/call.go;
// the Eve/Adam thesis §3: the remote service treats the caller's replicas "as clients
// that might make repeated requests with the same sequence numbers" and
// answers repeats "from a cache"). A request marked Request.Nested is
// ordered through the log even when it only reads (never the local, lease
// or quorum read paths) and its outcome is recorded in the deduplication
// table like a write's, so every copy of its id, from any caller replica at
// any node, gets the first outcome and the request executes once, within
// the table's window of 64 outcomes per client id (dedupWindow). The seed
// is silent on what the callee caches; caching reads too is our decision:
// two caller replicas reading different values would diverge. The mark
// travels in the forward message (flag 4 of the trailer) and in the log
// (flag 8 of a version 3 command); a request without it is encoded as
// before. "paxos-broken-nestedread" ignores the mark and is caught by the
// simulator's nested-answer check (--nested, sim/doc.go).
//
// # Files
//
// paxos.go: registration, capabilities, parameters, types, the constructor
// and the Step dispatch; recovery.go: Start; election.go: election timer,
// stable-leader rules, heartbeats, stepping down; phase1.go: Prepare,
// Promise and checkPhase1's named steps; phase2.go: proposing, Accept,
// Accepted, choice, commit notices; execute.go: execution and snapshots;
// catchup.go: ranges and snapshot transfer; reads.go: ReadIndex, lease and
// local reads; clients.go: requests, forwarding, answers; machine.go: the
// replicated state machine and dedup table; nested.go: nested requests; msg.go: messages, log values,
// records; membership.go, reconfig.go: configurations and changes;
// invariant.go: the invariants; leader.go: the leader hint.
//
// # Not done
//
// Changes of more than one node at once (joint consensus), and leader
// transfer on request (only a removed leader hands off).
//
// Broken variants are registered apart (automaton.RegisterBroken), each
// with a one-line description of what it breaks and what catches it.
//
// "paxos-broken-stickyleader" (followers never give up on the first leader
// they heard) is kept to show that the simulator's liveness
// mode catches a protocol that is safe but stops making progress.
//
// "paxos-broken-bootquorum" counts phase 2 majorities in the bootstrap
// configuration instead of the instance's (as if the membership were the
// static node list). It behaves like paxos until the membership changes;
// after two adds to n1..n3, n1+n2 decide instances that a leader elected by
// n3, n4, n5 (a majority of the new configuration) never sees, and
// acknowledged writes are lost. The simulator catches it with
// --membership add@1s,add@2s (sim/membership_test.go).
//
// # Node symmetry (model checking)
//
// Not declared. A ballot is (round, node): two candidates of one round
// are ordered by their positions in the configuration, so renaming two
// nodes that may both campaign changes which of them wins, and a renamed
// state does not have the renamed future (the argument protocol/abd's
// modelsym.go makes for ABD's tags). Followers whose election timers
// never fire would be interchangeable, but which timers fire is the
// search's choice, not the model's declaration, and the fast path
// (modelstate.go) has no renamed encoding (automaton.ModelNodeRenamer).
package paxos
