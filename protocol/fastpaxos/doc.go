// Package fastpaxos implements multi-instance Fast Paxos state machine
// replication, the protocol the Grid Services thesis chapter V measures against Classic
// Paxos, with Lamport's "Fast Paxos" (Distributed Computing 19(2), 2006;
// MSR-TR-2005-112) as the reference for what the seed leaves implicit.
// Reading notes: shared/seeds/notes/002-grid-paxos.md, sections 1.5, 1.6
// and 2.3.
//
// # Roles (seed V.A)
//
// "Clients are proposers and servers are acceptors and learners"; one
// acceptor is also the leader (Lamport's coordinator). Every node of the
// configuration is an acceptor and a learner, so a 4-node cluster is the
// seed's 3t+1 with t = 1 (V.C ran exactly that). The leader is elected as
// in protocol/paxos: a node that heard no leader for election_timeout (plus
// a random part) runs phase 1 with a round above every round it has seen.
//
// # Ballots
//
// A ballot is proto.Ballot{Round, Node}. Node is 2k for the fast round of
// the node numbered k (its configuration index plus one) and 2k+1 for that
// node's classic recovery round. Ballots order by round then node, so the
// recovery round of a fast round is the very next ballot: no other
// coordinator owns a round between them, which is what lets a fast round's
// phase 2b messages stand for phase 1b messages of the recovery round
// (Lamport's coordinated recovery, section 3.4). An acceptor keeps one
// node-wide promise (Multi-Paxos: phase 1 covers every instance from the
// leader's first unlearned one) and, per instance, a round promised for
// that instance alone (set by a recovery) and its vote.
//
// # Quorums, and their validation
//
// Table V.1 gives 3t+1 acceptors and quorums of 2t+1. Lamport's
// requirement, which New checks (params classic_quorum, fast_quorum; an
// error names the violated inequality), is that any two classic quorums
// intersect (2q > n) and that any classic quorum and any two fast quorums
// have an acceptor in common (q + 2f > 2n); the second implies that two
// fast quorums intersect. Defaults derived from n: f = ceil((2n+1)/3), the
// seed's 2t+1 when n = 3t+1, and q the smallest majority with q + 2f > 2n.
// n = 3: q = 2, f = 3 (the conformance suite's standard 3-node runs: the
// fast path needs every acceptor); n = 4: 3 and 3 (the seed's t = 1);
// n = 5: 3 and 4; n = 7: 5 and 5. Phase 1 and recovery need a classic
// quorum; a learner needs quorum(b) votes in round b: f in a fast round,
// q in a recovery round.
//
// # The fast path (seed V.A, V.C; Lamport 3.1)
//
// After phase 1 the leader opens its fast round with "any" from the first
// instance no acceptor of its phase 1 quorum voted in (no value can have
// been chosen from there), and repeats "any" as its heartbeat (with the
// instance it has learned up to, for catch-up). An acceptor that gets a
// proposal in a fast round votes for it at "the command number that the
// acceptor believes to be the next unused one" (seed VI.D): after its own
// latest vote, after the instances it knows chosen and at or after the
// leader's "any" start, skipping instances promised to a recovery. The
// vote is persisted, then sent to every learner. Each acceptor votes for a
// request once per round; a duplicate of a request whose vote is still open
// gets no second vote.
//
// # Clients as proposers (automaton.FanoutProtocol)
//
// ClientFanout is true: a client marks the request Request.Fanout and sends
// it to every node. Each node's acceptor votes for it; each node that
// received it answers it once it has executed it, in instance order (the
// seed: "every learner sends a reply to the client process after learning
// the chosen value; the client accepts the first reply"). A node that gives
// up on it (op_timeout) answers Silent, so that another node's answer
// counts. A request that is not Fanout (a RESP client reaches one node)
// makes that node the proposer: it sends Propose to every other acceptor,
// votes itself, and answers the client when it has executed the request
// (TRYAGAIN after op_timeout: the outcome is unknown).
//
// # Collisions and coordinated recovery (seed V.A, V.C; Lamport 3.3-3.4)
//
// A collision is a fast round in which acceptors voted for different
// requests at one instance. The leader detects it when it holds fast votes
// of its round at an instance from a classic quorum that do not all agree,
// and recovers at once: those votes are the phase 1b messages of its
// recovery round; it picks a value by Lamport's rule (quorums.pick) and
// proposes it in the recovery round (phase 2a, Accept), which learners
// learn on a classic quorum. The rule, for the reports of a quorum Q: with
// k the highest round voted in, no vote at all gives the no-op; a classic k
// gives its value; a fast k gives the value v voted in k by at least
// f - (n - |Q|) members of Q, the only value that might have been chosen in
// k, and otherwise (Lamport: any value) the value voted in k by most
// members (ties: the lowest-numbered acceptor's), so a voted request is not
// replaced by a no-op. The seed's worked example (V.C; notes 1.5.5), n = 4,
// f = q = 3, Q = replicas {2, 3, 4}: instance 1 votes a, a, d -> a
// (2 >= 3 - 1); instance 2 b, d, b -> b; instance 3 d, c, c -> c;
// instance 4 c, b, a -> no value reaches 2, one of the voted; v_d is chosen
// nowhere (TestPickSeedExample, testdata/collision.txt).
//
// An instance that stays undecided for two ticks (votes lost, a crashed
// acceptor, a fast quorum that cannot form, acceptors that skipped it) is
// recovered the same way, the leader completing the fast votes it holds
// with explicit phase 1b answers (Recover/Recovered) until it has a classic
// quorum. After a recovery the leader moves the "any" start past the
// highest instance any acceptor voted in, so acceptors that drifted apart
// (one got a request the others lost) vote at the same instances again;
// without this one shifted acceptor would make every later instance collide
// with n = 3.
//
// # "Might not be chosen" (seed V.C)
//
// The seed's leader keeps, per request, the number of acceptors that
// accepted it, and tells the client that a request accepted by all servers
// but not learned "might not be chosen", so that it resends without a
// timeout. Here the leader counts the acceptors that voted for the request
// in its fast round; when all n have, and every instance it was voted at is
// decided for another value, the leader sends NotChosen to every node.
// Since a fanned-out client reached every node, the nodes holding the
// request resend it for the client: each acceptor votes for it again at its
// next instance (the proposer of a non-fanout request also sends Propose
// again). The seed's caveat holds: with lost messages the count may never
// reach n, so a proposer also resends a request not executed after retry
// (the client timeout the seed wanted to avoid, kept as the fallback). A
// request resent this way may end up chosen in two instances; execution is
// exactly-once because the deduplication table is part of the replicated
// state (machine.go): the second execution answers the first result.
//
// # Durability and crash-recovery
//
// Records: "p" the node-wide promise, "a/<instance>" an instance's round
// and vote, "l/<instance>" a value this learner knows chosen. Every promise
// and vote is persisted before the message that reveals it (a vote to the
// learners, a promise to a candidate); the runtime holds those sends until
// the record is durable. A restarted node reloads its promise and votes
// (and so never votes twice in one round at one instance: its next fast
// instance follows its latest vote), re-executes the chosen values it
// recorded from instance 1, gets its fast round back from the leader's next
// "any", and fetches missed chosen values from the leader (CatchupReq,
// Catchup). There are no snapshots: the log and the records grow with the
// number of instances (enough for the chapter's experiments; protocol/paxos
// shows snapshots and compaction).
//
// # Reads, services, what is not offered
//
// Every read goes through the log like a write (any read mode is served so:
// linearizable). Reads are not recorded in the deduplication table; one
// chosen twice runs twice, harmlessly. Nondeterministic services are
// refused at New: every acceptor would vote with the environment it
// observed, so no two votes would match. Atomic groups, interactive
// transactions and membership changes are not offered (refused before
// anything is voted). IdempotentRetry is true within a client's window of
// 64 writes, as in protocol/paxos.
//
// # Client sessions (machine.go; session 51)
//
// As protocol/paxos's table ("Client sessions"; the Raft thesis §6.3),
// and for the same reason: before, a client's row kept its last 64
// outcomes for good, and Fast Paxos never evicts a row, so every client id
// ever seen stayed in every replica's memory. Now a request carries its
// client's lowest unanswered seq (automaton.Request.Unanswered, flagged in
// the value's read-mode byte and sent as Seq minus it: a request without
// it is encoded as before, and old records decode unchanged); executing
// it, every replica drops that client's outcomes below it. A client's
// session ends by automaton.SessionEnd (the runtime's, when a RESP
// connection closes, or a gRPC client's end_session), chosen and executed
// like a write: the row goes, a tombstone (client id, instance) stays. A
// write below the floor or of an ended session is refused and not
// executed, never a second execution; a proposer answers such a request at
// once from its table (the acceptors never vote again for a request chosen
// before). Rows are still never evicted and tombstones neither: the table
// grows with the clients still connected and one tombstone per closed
// client, instead of a row of up to 64 outcomes per client ever seen.
//
// # Statistics
//
// (*FastPaxos).Stats returns per-node counters for experiments:
// FastLearned (instances learned from a fast quorum), ClassicLearned (from a
// classic quorum of a recovery round), CaughtUp, and at the leader
// Collisions (coordinated recoveries started by disagreeing votes),
// Recovered (instances proposed in a recovery round for any reason),
// NotChosen (notices sent); Resent counts requests a node proposed again.
// The collision rate of a run is the leader's Collisions over the
// instances learned. The parameter observe names a Recorder (observe.go)
// that receives every node's Stats after each step and, through its
// OnEvent, each vote cast (Voted) and each instance learned from a quorum
// (Learned), with the value's request and whether the round was fast:
// experiment seed002-fast-vs-classic-sim judges collisions in the seed's
// sense from the votes (no request reaching a fast quorum) and stamps
// learning with the simulator's virtual time (the automaton has no clock).
// Observation only: nothing the protocol does depends on it.
//
// # Parameters
//
//	heartbeat         positive duration  20ms   tick: the leader's any/heartbeat, retransmissions, stuck-instance checks
//	election_timeout  positive duration  300ms  silence before a node runs phase 1; at least 3 heartbeats
//	retry             positive duration  200ms  a proposer resends a request not yet executed after this
//	op_timeout        positive duration  5s     a request's time limit at a node (fanned out: then a Silent answer)
//	classic_quorum    positive integer   -      classic quorum size (absent: derived from n; validated with fast_quorum)
//	fast_quorum       positive integer   -      fast quorum size (absent: ceil((2n+1)/3), the seed's 2t+1 for n=3t+1)
//	observe           string             ""     the name of a Recorder (NewRecorder) that collects counters and events (experiments)
//
// # Invariants and broken variants
//
// invariant.go: at most one value chosen per instance (judged from every
// vote ever shown, by the quorum rule); learned values are chosen and
// learners agree; votes respect promises; executed prefixes agree. A
// crash takes a replica's unsynced votes and learning with it (nothing it
// revealed depended on them: the runtime holds sends and answers until the
// records before them are durable), so at a restart the checker withdraws
// the votes the replica's records do not hold, and its backing of learned
// values and executed prefixes (seed 98 of `synod-lab sim --nodes 5 --faults
// all` showed a crashed leader that had counted its own unsynced vote).
// Separately, found by reading: a new candidacy takes a round above every
// round in the node's records; a restarted leader that reused its old round
// could propose a second value in that round's recovery round.
// fastpaxos-broken-stalevote lets an acceptor vote for a phase 2a below
// the promise it gave a newer leader (a deposed leader's accept arriving
// late): with 5 nodes under crashes and partitions "votes respect
// promises" reports it within a few seeds. fastpaxos-broken-skipgap lets a
// learner execute past an instance it has not learned (a lost vote),
// skipping it for good: "executed prefixes agree" reports it at the first
// such gap.
// fastpaxos-broken-classiclearn learns on a classic quorum in a fast round:
// with 3 nodes (q = 2, f = 3) a learner learns a value two acceptors voted
// for, which "learned values are chosen" reports at once.
// fastpaxos-broken-recovery ignores Lamport's rule in recovery (it proposes
// the highest-numbered reporter's vote): with 4 nodes and lost messages it
// overrides a value chosen on the fast path, which "at most one value
// chosen per instance" reports; with 3 nodes it cannot (a fast value there
// has every acceptor's vote, so every report agrees).
//
// # Node symmetry (model checking)
//
// Not declared. A ballot's node part names the round's owner (2k for
// node k's fast round, 2k+1 for its classic recovery round) and ballots
// order by round then node, so which coordinator's recovery wins depends
// on node positions: renamed states do not have renamed futures. fastpaxos
// also has no fast path (automaton.ModelStater), which mc's node symmetry
// needs.
package fastpaxos
