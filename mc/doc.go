// Package mc is Synod's explicit-state model checker (issue 20): it
// explores every interleaving of a small configuration of any registered
// protocol, in the manner of Stateright's checker and DSLabs' search tests,
// running the protocol's own automata (package automaton) unchanged.
//
// # The model
//
// A state (world.go) is the whole system: every node's automaton, durable
// records and timers; the messages in flight; each client's progress and
// the history it saw; and the protocol's invariant checker, whose memory is
// part of the state (it judges what comes next by what it saw). Events are
// a client sending its next request, a message delivered (and, on a
// duplicating network, delivered with a copy left in flight; on a lossy
// one, lost), a timer firing, a node crashing (up to Config.Crashes on a
// path), a crashed node restarting from its records, and a pending Effect
// carried out (effect.go: its executor runs, the node steps EffectDone; a
// crash loses the node's pending effects). The protocol's
// configuration comes from automaton.ModelOf: a declared ModelConfig
// (automaton/model.go) or the generic default (3 nodes, 2 clients, each
// "set x c" then "get x", depth 14).
//
// Decisions where the issue or the runtimes leave a choice:
//
//   - Persist is durable at the end of the step that emitted it (every step
//     ends with an fsync), so no crash loses an acknowledged record. A
//     step's outputs go through package release, the interpreter of the
//     contract every runtime runs (world.go step: numbering, contract
//     checks, which records an Early Send exposes); the records are
//     written to a synchronous disk, so every output leaves as emitted. Bugs of
//     the persist-before-answer order are still caught by the protocols'
//     invariants (unreplicated-broken-answerfirst, pb-broken-replyfirst).
//     The exceptions are a Send marked Early and a positioned answer
//     (automaton.Respond.UpTo), which the runtime may release before the
//     fsync of records they do not wait for: with Config.CrashBeforeFsync
//     (ModelConfig's, or --crash-before-fsync) a node that released such
//     an output and persisted records it does not wait for may crash
//     before the fsync, losing those records (unsynced.go; they stay
//     exposed across steps until an output that waits for them is
//     offered). paxos-broken-answerearly (a leader answering before its
//     own acceptance is durable) is caught in its AnswerEarlyModel in
//     16,835 states (20 events, 10 after the prefix; TestAnswerEarly).
//     paxos-broken-earlyack (an
//     acceptor's Early 2b) needs such a crash and a leader change after
//     it: its model (protocol/paxos.CrashBeforeFsyncModel) scripts the
//     election, the vote and the crash as a prefix and catches it in
//     28,196 states (22 events, 12 after the prefix; 19,927 while the
//     window closed at the node's next step); without the crash
//     and restart in the prefix it took 42,781 states, and with only the
//     vote in the prefix it was not reached within 100,000.
//     TestCrashBeforeFsync shows its acceptor may lose the vote it
//     reported and paxos's may not (paxos cannot run that prefix).
//   - Responses reach clients at once; only peer messages and a fanning-out
//     client's copies travel the network. A client sends only to a node
//     that is up, one request at a time, and never retries.
//   - Timers (Config.Timers) fire, by default, only when no message is in
//     flight ("quiet": a timeout is longer than any message delay); "all"
//     lets them fire at any moment, "none" never. Durations are ignored.
//   - Each node's random source is seeded by (node, boot), so a path
//     replays exactly; the source's position is not part of the
//     fingerprint (reflect.go).
//   - On an unordered network identical messages on one link are one
//     choice (delivering either leads to the same state).
//   - The history check tells package check the model's service
//     (ModelConfig.Service) and is skipped where check has no model of
//     it under the protocol's consistency model (props.go checkOptions):
//     orca under sequential consistency (orca-primary's models are
//     judged by their invariants), the nondeterministic matchmaker, and
//     eventually-serializable protocols (judged by the simulator with the
//     replicas' final orders). orca-primary-broken-earlyunlock is caught
//     in its CopiesModel by readable-copies-agree in 1,063 states (8
//     events); orca-primary exhausts the model (9,571 states).
//
// # Fingerprints and copies
//
// A state is visited once: its 64-bit fingerprint (fingerprint.go) hashes
// every automaton by reflection (unexported fields included, maps order-
// independently, pointers followed), the records, timers, the messages (a
// multiset, or per-link sequences on an ordered network), the clients, the
// history and the checker. Automata are not cloneable, so a successor is
// made either by the generic reflective copier (reflect.go; copy-on-write:
// an event steps one node, so a successor copies one automaton and the
// checker, and the other nodes' automata and cached hashes are shared), or
// by replaying the path from fresh automata (Config.Replay, as DSLabs and
// the simulator's replay do). TestCopyMatchesReplay shows both visit the
// same states; copying is 3.5-7x faster (abd 17,500 vs 2,500 states/s,
// paxos 13,500 vs 3,000, pb 20,100 vs 5,400 at depth 5), so it is the
// default, and every counterexample is replayed from fresh automata before
// it is reported (Trace.Replay). A protocol may implement
// automaton.Snapshotter to copy itself instead.
//
// Speed (issue 20 item 4; figures in mc/FIGURES.md, "Speed"). The
// fingerprint is incremental, as Stateright's is a hash of a state whose
// parts are hashed once: each node's automaton hash is cached and
// recomputed only for the stepped node; the messages in flight hash as a
// multiset sum, each message hashed once when sent and subtracted when
// delivered; the history as a hash chain extended per hop; a node's
// records as a sum kept per Persist; the checker's hash is cached until a
// step (or a crash changes which automata it refers to; a checker that
// encodes itself in parts, automaton.ModelCheckerPartStater as abd's,
// has each node's part cached and re-encodes only the stepped node's and
// the rest). Records are copy-on-write between a state and its
// successors; a state keeps no map of the nodes up (a pooled one is
// filled for each invariant check). During a search GOGC is 400 (Check
// raises it and restores it when the last concurrent search ends; a GOGC
// in the environment wins): a search allocates short-lived copies and
// encodings per transition, and at 100 the collector took about a
// quarter of abd's time; the peak heap (B/state) is higher for it, as
// garbage waits longer. A protocol may opt
// into a fast path (automaton.ModelStater, automaton/modelstate.go): it
// encodes its state canonically (hashed as bytes) and clones itself by
// hand, and its invariant checker may do the same (ModelCheckerStater,
// with automata references encoded as node indexes). abd and paxos do
// (protocol/abd/modelstate.go, protocol/paxos/modelstate.go); Config.
// Reflective turns the fast path off, and TestFastPathMatchesReflective
// shows both paths visit the same states and transitions and find the
// same counterexample for both protocols and their broken variants;
// TestFastPathNodeEncoding checks, node by node, that the fast encoding
// groups automata exactly as the reflective hash does and that a child's
// step leaves its parent unchanged. One difference, by decision, in abd's
// checker only: a reference to a crashed node's last incarnation encodes
// as "not up" in the fast path, where the reflective walk hashes that
// dead automaton's content (the checker only ever compares its
// identity), so with crashes abd's fast path may merge states the
// reflective path keeps apart; paxos's checker encodes the node and its
// whole state, as the reflective walk does, and merges nothing more.
//
// # Search and properties
//
// Breadth-first search expands each level on all workers and merges the
// successors in (parent, event) order, so counts and the counterexample do
// not depend on scheduling, and the counterexample is a shortest one.
// Depth-first search shares a stack between workers (less memory; the
// first counterexample found). Properties (props.go): always — invariants
// after every step, the contract, and the protocol's consistency checker
// (check.ForHistory: Porcupine for linearizable protocols) on every new
// history (verdicts cached per history); sometimes — "a write completes",
// "a read returns a value", each with a shortest witness; eventually
// (bounded) — on every path that ends within the depth with nothing
// enabled, every request was answered (judged only without crashes).
//
// Symmetry reduction (symmetry.go): a protocol declaring
// ModelConfig.SymmetricClients (abd) has clients with equal scripts and
// targets treated as interchangeable: a state's fingerprint is the least
// hash over the renamings of such clients (RequestIDs renamed wherever the
// reflective hash meets them). The declaration promises that messages,
// records and effect payloads carry no client id (they are hashed as
// bytes). ABD, every state within 7 events, 3 clients writing the same
// value: 6,421 states, 1,103 with symmetry (5.8x, 3! = 6 at most); 2
// clients within 8 events: 2,691 and 1,346 (TestSymmetryReduces).
//
// Node symmetry (nodesym.go, automaton/modelsym.go): with ModelConfig.
// SymmetricNodes, a protocol implementing automaton.ModelNodeSymmetry
// names the groups of interchangeable nodes (given which nodes clients
// send to: client targets are renamed along with the nodes), its automata
// and checker encode themselves with node names renamed, and it renames
// node names in its messages and records; the fingerprint is the least
// hash over the renamings of clients and nodes together. ABD (protocol/
// abd/modelsym.go) declares the nodes no client sends to: its tags break
// ties between writers by node name, so two coordinators are not
// interchangeable. ABD, clients at n1, timers none, every state within 9
// events: 3 nodes 8,649 states, 4,343 with node symmetry (1.99x); 4 nodes
// 3,957 and 837 (4.7x; TestNodeSymmetryReduces); both broken variants
// are still found at the same depth. Unreplicated (protocol/unreplicated/
// modelsym.go) declares its forwarders, with no fast path: its node names
// are all automaton.NodeID values, which the reflective walk renames
// (automaton.ModelTypedNodeNames); 4 nodes, clients at any node, every
// state within 8 events: 19,183 states, 3,829 with node symmetry (5.0x, 3!
// at most), both broken variants found alike (TestNodeSymmetryUnreplicated).
// TestNodeSymmetrySound checks the
// canonical fingerprints against states built by replaying renamed
// paths, for both. The reduction needs a renamed encoding (off with Config.Reflective)
// and is off on a bynode network, with crashes before fsync and with
// stateful effects. Interchangeable nodes seed their random sources
// alike (node symmetry declared, reduced or not).
//
// # Per-protocol models
//
// A protocol declares its model in a model.go of its own package
// (automaton.ModelDeclarer), including the network, timer mode and crash
// bound (ModelConfig.Network, Timers, Crashes), which NewConfig applies.
// Declared today: abd (interchangeable clients), pb (pb-broken-nodedup: a
// primary and one backup, one write forwarded by the backup, a
// duplicating network, no timers: exactly-once in 6 events) and pbdurable
// (its SQL database declared a stateful effect executor).
//
// A bug the random seeds miss: pb-broken-nodedup's linearizability
// scenario (the simulator with --faults dup --no-invariants, 4 clients,
// 300 operations) fails on 1 seed of 10 (seed 5; protocol/pb/scenarios.go),
// and the conformance suite's faults seeds miss abd-broken-nowriteback on 3
// of 20; the checker finds both on every run, in 6 and 11 events (the
// first by the invariant exactly-once, which the simulator's seed 1 also
// trips).
//
// # Leader changes
//
// A leader change takes about 20 events (an election, a write, a second
// election), beyond a breadth-first search of the default model. Three
// bounds of mc make it reachable in a model a variant declares:
//
//   - A timer budget (Config.Timers "quiet:N"): at most N timer firings
//     on a path. Heartbeat ticks otherwise fill every level; a leader
//     change needs only the elections and leader-alive timeouts. A state
//     left quiet only because the budget is spent is not judged by the
//     bounded eventually property.
//   - A bynode network (Network.ByNode): while messages are in flight,
//     only those to the highest-numbered node with mail are deliverable.
//     Deliveries to different nodes commute, so most of what this leaves
//     out are reorderings; it is an under-approximation (a directed
//     search, for finding bugs; every counterexample is still replayed),
//     not a reduction that preserves every reachable state. Highest
//     first: the first leader is n1 (Target "first"), so a new leader's
//     messages reach the other followers before the old leader.
//   - A scripted prefix (ModelConfig.Prefix, prefix.go): events, written
//     as a trace prints them, applied from the initial state before the
//     search; its root is the state after them, and Depth counts the
//     events after the prefix. A reduction: the search covers only the
//     runs that start with the prefix (say, one election the bug needs
//     but does not vary). A prefix event that is not enabled is a
//     configuration error naming it. The prefix's events are part of
//     every counterexample and witness (marked "model prefix" when
//     printed; Trace.Prefix counts them), so a saved trace replays them
//     like any other event (--replay-file, the explorer).
//
// paxos-broken-skipphase1values declares protocol/paxos.LeaderChangeModel
// (one write at n1, quiet:4 — n1's election, n2's and n3's leader-alive
// timeouts, one election timeout — bynode, depth 24): caught in 13,257
// states by "one value chosen per instance" after 21 events; paxos itself
// in the same model reaches 14,196 states to that depth without a
// violation (TestLeaderChangeModel). Without bynode the same search takes
// 105,982 states (28 s). pbpaxos-broken-earlyserve is caught by
// "serve-after-takeover" in pbpaxos's read model (protocol/pbpaxos.
// ReadModel: one fanned-out read, one timer firing; TestReadModel).
// fastpaxos-broken-stalevote declares protocol/fastpaxos.CollisionModel
// (two colliding writes, all:2, ordered, bynode) with n2's 5-event
// election as its prefix: caught by "votes respect promises" in 4,997
// states after 15 events (10 after the prefix; 65,272 states without the
// prefix), and fastpaxos in the same model exhausts it (6,957 states, 10
// events after the prefix) without a violation (TestCollisionModel).
//
// # Workloads and whole-space properties
//
// A model's client scripts hold more than single operations (workload.go):
// "txn-begin", reads and writes, "txn-commit"/"txn-abort" (an interactive
// transaction, one history entry judged by the serializability checker);
// "group a+b" (an atomic group, one entry with a result per operation);
// "nested <op>" (a nested request, the Eve/Adam thesis §3); "resend k" (a later copy
// of request k with its id, which must be answered as the first copy
// was); ESDS strict operations (a strict answer must be the operation's
// value in every replica's stable order, workload_esds.go). For a
// nondeterministic service (the matchmaker), replicas that executed the
// same prefix must hold equal state hashes (convergence). Variants caught
// this way: esds-broken-earlystrict, unreplicated-broken-dirtytxn,
// paxos-broken-nestedread, -splitgroup and -localenv (mc/FIGURES.md).
//
// Required progress (ModelConfig.Progress, progress.go): a sometimes
// property a model requires and that no path of the exhausted space
// reaches is a violation, bounded liveness within the model's budgets;
// its trace is the search's root path and it replays by searching again.
// paxos.DeadLeaderModel requires a write to complete after the leader's
// crash: paxos-broken-stickyleader fails it (238 states), paxos answers
// (1,277 states). The eventually property above cannot see this bug: its
// paths end with the timer budget spent and a restart enabled.
//
// Scripted prefixes also bring crash and recovery bugs within CI's budget:
// orca-bcast-broken-norecovery (a sequencer crash), fastpaxos-broken-
// recovery (4 nodes, a collision, Lamport's rule), eve-broken-norecovery
// and eve-broken-ownstate (a verifier leader's crash; a commission fault).
// notYetCaught (ci_test.go) would list what is left, each with its
// reason; it is empty: every broken variant is found.
//
// Client-driven clients (ModelConfig.ClientDriven, clientdriven.go) run
// each operation themselves through the protocol's client coordinator
// (automaton.ClientCoordinator, as sim --client-driven does): a phase's
// request goes to every node under a fresh request id, each delivery is
// an event, the nodes' answers feed the coordination, and the operation
// enters the history once (invoked at its first phase, returned when the
// coordination is done). The coordination is part of the state (copied
// on write, hashed reflectively); symmetry is off. abd.ClientDrivenModel
// (client 1 writes x, client 2 reads it twice) catches
// abd-broken-clientnowriteback, whose reads skip the write-back, in 10
// events (new, then old); abd's own coordinator passes it.

// # Stateright's actor semantics (issue 32 item 6)
//
// CheckActors (actor.go) is a second search, for side-by-side runs with
// Stateright: it checks a protocol in the world of Stateright's
// ActorModel with its register clients, where every message travels the
// network (client requests and answers too), a delivery the recipient
// ignores is no action and leaves the envelope in flight, and the
// history is Stateright's LinearizabilityTester (actor_hist.go: per
// client, each operation with the count of every other client's
// completed operations at its invocation; it agrees with Porcupine on
// 3,000 random histories, TestActorHistoryMatchesPorcupine). There are no
// timers, crashes, losses or records in it: the general search above
// stays the checker of Synod's protocols; this one makes the comparison
// exact. Stateright's own examples written as Synod protocols
// (mc/stateright/srpaxos, srregister) reach exactly the unique states
// Stateright counts: 16,668 (Paxos, 2 clients) and 544 (the register, 2
// servers) as its own tests assert, and 1,194,428 for `paxos check 3`
// (mc/FIGURES.md). Its speed comes from what the general search does
// not do per transition: the recipient is copied into a spare automaton
// (ModelCopier) and stepped, and the successor's fingerprint computed
// from the cached hashes of the other servers, the network's multiset sum
// and the history's hash before any successor is built, so a delivery
// that is ignored or leads to a visited state allocates nothing; inputs
// are boxed once per envelope; visited states are bare 64-bit
// fingerprints in a sharded open-addressing set (fpset.go, about 14
// bytes a state).
//
// # Figures
//
// `synod-lab mc --protocol all --max-states 20000` (2 cores; states,
// deepest level, time, states/s, result) is recorded in mc/FIGURES.md,
// with each broken variant found and the length of its shortest
// counterexample. CI (ci_test.go) checks every protocol up to 3,000 states
// and requires every broken variant not listed in notYetCaught to be found
// (about 60 s on the shared 2-core machine under load). The Stateright
// comparison (mc/stateright/run.sh: both tools, one run, one table) is in
// mc/FIGURES.md.
package mc
