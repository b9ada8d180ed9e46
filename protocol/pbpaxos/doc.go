// Package pbpaxos implements primary-backup Paxos (the Grid Services thesis chapter VI:
// "Replicating Nondeterministic Services on Grid Environments"), with its
// two optimisations, X-Paxos reads (VI.A.3) and T-Paxos transactions
// (VI.A.4), as a pure automaton.
//
// # Roles (VI.A.1)
//
// Every node is acceptor, learner and potential leader. Clients send each
// request to every replica (automaton.FanoutProtocol); only the leader
// replies, the others answer Silent after playing their part (a confirm
// for a read or a transaction step). The leader executes a request before
// it proposes it: the value chosen for instance i is <requests, the
// leader's state change after executing them> (VI.A.2), so replicas of a
// nondeterministic service (the Matchmaker) stay identical: they install
// the leader's state instead of executing. Proposal numbers are (ballot,
// instance), ordered lexicographically (pn). Acceptors keep every request
// of the proposals they accepted and, per instance not yet applied, its
// update; the applied state is the only state kept (machine), and a
// learner applies the chosen state.
//
// Files follow the seed's sections: election.go (the "underlying leader
// election service" and leader stability, VI.A.5), takeover.go (new
// leader, VI.A.2's worked example and VI.B Protocol 1), phase2.go (the
// basic protocol and learning), reads.go (X-Paxos), txn.go (T-Paxos),
// clients.go (fan-out, forwarding), machine.go (the replicated state and
// duplicate table), catchup.go (catch-up and recovery), nested.go (serving
// nested requests as a callee, the Eve/Adam thesis §3), invariant.go.
//
// # State size (VI.A.2, "reducing state-transfer size"; param state)
//
// The seed allows three contents for an instance; the param chooses:
//
//   - delta (default): the service's changes since the previous instance
//     (service.DeltaState) plus the requests with their results (for the
//     duplicate table). A service without deltas gets full. Per instance,
//     when that update outweighs the instance's commands, the commands
//     alone are shipped and replayed, as with replay (replay.go: a
//     decision the seed leaves open; a delta holds each changed key's
//     whole value, so a push onto a long list shipped the list).
//   - full: the whole replicated state (service snapshot and duplicate
//     table) in every instance: the seed's literal <req, state>.
//   - replay: the requests with the environment the leader observed
//     (service.Env); every replica executes them (the seed's "request and
//     some additional information"; for a deterministic service, plain
//     state machine replication).
//
// Whatever the mode, a takeover's batched Accept carries one whole state
// (its last entry), phase 1 replies carry whole states, and catch-up sends
// the whole applied state: the seed's "latest state". A learner that
// learns a whole state chosen installs it at once, over instances whose
// requests it never had (recorded as gaps: the worked example's "knows
// requests 1-87 and 90").
//
// # Basic protocol and pipelining (VI.A.2; params pipeline, batch)
//
// The leader executes queued requests on its tentative state (the applied
// state plus what it proposed) and proposes them, batch requests per
// instance. With pipeline=1 (the seed's, "faithful") it proposes instance
// i only once i-1 is applied: one outstanding proposal. pipeline=N keeps
// up to N outstanding; their updates are chained (each delta is against
// the previous instance of the same leader), and an acceptor accepts a
// chained update only on top of the previous instance accepted under the
// same ballot, or of its applied state. So if instance i is chosen under
// ballot b, a majority holds i-1 under b too, i-1 was chosen with b's
// value, and the chain is consistent: the gap the seed forbids cannot
// form. The leader answers after a majority accepted and it applied.
//
// # Takeover (VI.A.2 worked example; VI.B Protocol 1)
//
// A candidate sends one Prepare naming the gaps (instances it applied
// without their requests) and everything after its applied instance. A
// promise is OK (knowing none of them), or carries, per gap it holds, the
// request and its proposal number, and, past the candidate's instance, the
// requests with their proposal numbers and the state of the latest
// proposal it knows (its applied state, or the one it accepted beyond it,
// materialised from its chain). With a majority, the candidate takes the
// state with the highest proposal number (b*, j*), and for every gap and
// every instance up to j* the request accepted with the highest ballot
// (unknown when nobody holds it: the state covers it). Instances beyond j*
// are dropped: they were reported only under ballots below b*, and were
// never chosen (had one been, b*'s leader would have found it in its own
// phase 1 and proposed it again under b*, so the b* proposal with the
// highest instance would be beyond it). Nothing known beyond its own
// instance, the candidate proposes a no-op with its own state. One Accept
// carries every entry, the state on the last; the new leader executes and
// answers nothing new until that batch is chosen and applied (invariant
// serve-after-takeover; the broken variant pbpaxos-broken-earlyserve
// serves right after phase 1).
//
// # Durability and recovery
//
// Acceptors persist their promise and each accepted entry (requests and
// update) before answering; the applied prefix ("c") and, every
// snapshot_every applied instances, the replicated state ("snap") with its
// proposal number. A restart restores the snapshot and applies the
// recorded entries up to the prefix again. Entries a whole state jumped
// over that belong to another ballot are deleted (they were not chosen).
// The seed does not discuss stable storage for chapter VI; Paxos needs it
// for crash-recovery. Durable records keep each entry's update until a
// snapshot covers it; in memory, an applied entry keeps only its requests.
//
// # Exactly-once
//
// The duplicate table is part of the replicated state: per client, its
// latest write's sequence number and results, filled from the requests of
// each applied instance (their results travel with them). A retried write
// is answered from it by any later leader; one in flight is joined.
//
// # X-Paxos reads (VI.A.3; param read, request read modes)
//
// A fanned-out read reaches every replica; each follower sends a confirm
// to the owner of the highest ballot it accepted a proposal of; the leader
// executes the read on its applied state at once and answers once a
// majority, itself included, confirmed under its ballot. The seed leaves
// routing open for a read that reached one node: that node relays the read
// to every replica (it plays the client's fan-out) and confirms it; the
// leader answers it to that node. A read that reached the leader alone
// (its own client, or forwarded) is relayed by the leader. read=log (or
// the request's read mode "log") orders reads through the log instead, for
// comparison; local and regular read the contacted node's applied state.
// Quorum and lease read modes are served by X-Paxos. The broken variant
// pbpaxos-broken-noconfirm answers without confirms.
//
// # T-Paxos (VI.A.4, VI.A.5)
//
// Begin, operations and abort are executed and answered by the leader at
// once; the commit is one proposal of the basic protocol (its command
// carries the transaction's writes with their Envs; the update is the
// leader's state after redoing them), answered when chosen; a commit with
// no writes goes through the log too, so that what the transaction read is
// chosen when it commits. A transaction lives at the leader that began it:
// a leader change aborts it (a later step answers ErrNoSuchTxn, a commit
// ErrTxnAborted). Two decisions the seed leaves open:
//
//   - Every answer given without the log (begin, operation, abort, a
//     commit's abort) waits for the same majority of confirms as an
//     X-Paxos read, sent while the step executes. With clients that fan
//     out, a deposed leader that still believes it leads would otherwise
//     answer a transaction's steps while the real leader runs it with
//     other answers (the simulator found this). The cost is the read's:
//     max(E, m) instead of E.
//   - Concurrency control is the service's (service/lock.go): each
//     operation names its locks (per account for the bank service, per key
//     for KV); the leader holds them, strict two-phase, no-wait (a
//     conflicting transaction operation aborts its own transaction; a
//     single write aborts the transactions holding what it needs). Locks
//     are released when the commit executes at the leader (its proposal):
//     every later proposal is chained after it. A transaction runs in a
//     workspace, the tentative state with its own writes redone, so others
//     never see uncommitted writes; the seed's caveat (T1 commits after
//     reading T2's uncommitted write) cannot arise.
//
// # Invariants (invariant.go)
//
// One value chosen per instance; promises never decrease; one leader per
// ballot; serve-after-takeover; reads-confirmed; one outstanding proposal
// with pipeline=1. The simulator also compares the service states of
// replicas at equal applied instances (automaton.StateReporter).
//
// # Broken variants
//
// pbpaxos-broken-noconfirm answers X-Paxos reads without confirms (caught
// by reads-confirmed, and with invariants off by linearizability after
// pauses). pbpaxos-broken-earlyserve serves before its accept phase
// completes (caught by serve-after-takeover). pbpaxos-broken-replayorder's
// backups execute a replayed instance's commands in an order they draw
// (caught by the simulator's state comparison, replay.go).
//
// # Parameters
//
//	heartbeat         positive duration           50ms    leader heartbeat and retransmission interval
//	election_timeout  positive duration           500ms   silence before an election; at least 3 heartbeats
//	op_timeout        positive duration           5s      a request's time limit at a node
//	state             one of delta, full, replay  delta   what an instance carries besides its requests (package doc)
//	pipeline          positive integer            1       proposals outstanding at once; 1 is the seed's
//	batch             positive integer            1       requests per instance (at most)
//	read              one of xpaxos, log          xpaxos  what a linearizable read is
//	snapshot_every    positive integer            1000    applied instances between snapshots
//	expiry_period     positive duration           100ms   leader proposes removing expired keys (expiry.go)
//
// Unknown parameters are errors; TestParamDoc keeps the table the parser's.
//
// # Node symmetry (model checking)
//
// Not declared. Ballots are proto.Ballot (round, node): a takeover
// under equal rounds is decided by node position, so nodes that may run
// for primary are not interchangeable; the others are only while their
// timers do not fire, which the search chooses. pbpaxos also has no fast
// path (automaton.ModelStater), which mc's node symmetry needs.
package pbpaxos
