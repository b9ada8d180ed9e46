// Package adam is Adam (the Eve/Adam thesis chapters 3-5, Wetterau 2015): Eve's
// execute-verify replication (protocol/eve) for a service whose requests
// call another replicated service ("nested requests"), without the output
// commit problem: the callee only ever sees requests from verified states,
// and a request re-issued after a rollback or a restart is byte for byte
// the one sent before, under the same id.
//
// Adam is "a modification of Eve" (§3.2.2): this package is eve's engine
// (eve.NewEngine: batches, the eve.exec Effect, MAC'd Merkle tokens, the
// verifiers' Paxos, commit / commit with state transfer / rollback with a
// rotated primary, durability) with an extension (eve.Ext) that adds the
// requests' steps, the nested calls and the pipeline scheduling. Nothing
// of eve's is copied.
//
//	calls.go      nested ids, calls from verified walls (Applied), answers (Other), the broken variant's early calls (Executed)
//	ppm.go        the Parallel Pipeline Manager and Group Managers: which steps each wall (slot) runs
//	invariant.go  call-after-commit, and eve's engine invariants
//	service/nested.go  the state: the namespace's service state (the sharded KV for kv) plus the suspended requests (Cont), the SET program
//
// # Requests as resumable steps (issue 15 item 4; seed §5.3)
//
// The seed checkpoints thread stacks with Javaflow continuations and
// stores them in the Merkle tree. Go has no continuations: a request is
// written as steps, and between two steps its whole state is data of the
// replicated state (service.Cont: step index, local variables as bytes,
// the answers of its nested calls so far, the call it waits on, its
// environment). It is hashed into the state's root (one leaf per suspended
// request), so a token at a wall covers it as the seed's tree covers the
// stacks; a state transfer carries it (the snapshot); a rollback restores
// it with the committed state, right before its nested call; a restarted
// replica recovers it from its durable committed state.
//
// The workload (service.NestedKV): SET k v runs step 0 (nested.begin):
// read A's old value of k, call the callee with APPEND trail:k "<old>;",
// suspend; then step 1 (nested.resume, with the answer n): store v in k and
// n in trail-len:k, answer OK. The nested request's bytes depend on A's
// speculative state, and A's state on B's answer. Reads (and every other
// KV operation, and SETs with options) are local: one step, no call.
// Requests carry their Env; later steps run in the first step's Env.
//
// That SET program is the default, service.Trail. The program is
// pluggable (issue 31, "Adam as a framework"): a service.NestedProgram
// says which client operations call the callee and what their two steps
// do over the KV state; a user's binary registers one
// (synod.RegisterNestedProgram) and selects it with program=NAME
// (examples/nestedcall). A program's steps lock every key it declares for
// writing (NestedKV.ConflictKeys); the default keeps its finer declaration.
//
// # Any service (issue 31, "any service may issue nested calls")
//
// The state under the program is the namespace's own service: the sharded
// KV for kv, or any data type (a user's too: examples/nestedcall's Demand
// over examples/datatype's Inventory). service.NestedKV.WithService puts
// the type's state under the suspended requests: its operations, Validate,
// IsRead and conflict keys are the namespace's, its snapshot and hash
// (StateHash: its Merkle root, or the SHA-256 of its snapshot) carry and
// cover the requests, a checkpoint is its Clone or a copy by snapshot. New
// refuses, with the reason (service.CheckNestedService), a type that
// declares no conflicts (eve's mixer, which adam's walls run on, needs
// each operation's keys) or a nondeterministic one (a decision: adam
// replays steps on every replica and after rollbacks, and only kv's
// environment handling is exercised here; the seed's services are
// deterministic Java objects, the Eve/Adam thesis §3.1). conflicts=loose
// (a KV declaration broken on purpose) needs a kv namespace.
//
// # One wall is one slot of eve's engine (§3.2.2, §5.2.3)
//
// The seed verifies "before any execution thread makes a nested request as
// well as at the end of the batch". Here every wall is one slot: its batch
// carries the active group's steps up to the wall (resumes of its
// suspended requests with their answers, then each thread's next local
// step); the replicas execute it through eve.exec (its virtual cost is the
// makespan of the steps on `cores` virtual cores, local_cost per local
// step, nothing for a resume, plus hash_cost per written object), send
// tokens, the verifiers decide, and only after the commit does each
// execution replica send the calls of the requests its committed state
// holds suspended (Applied). So "the wall is verified" is the slot's
// commit, and the end-of-batch verification is the commit of the last
// wall of the batch, the one whose resumes finish its requests.
//
// Output commit to clients (§1.3): a suspended step's result is
// service.NestedPending, which the engine neither answers nor records
// (eve.Ext.Deferred); a request is answered when the slot that ran its
// last step is committed and applied (eve's reply-after-commit). Decision:
// that slot's verification covers the request, so its client is answered
// then rather than when every other request of its batch is done (the
// seed's "end of the batch" exposes the batch's results at once; answering
// each request at the verified wall that finished it exposes nothing
// unverified, and is earlier).
//
// # Nested ids (§5.3, §3.1; the seed does not say how they are made)
//
// Client id: the first 8 bytes of SHA-256("adam-nested", A's namespace,
// the A client's id), top bit set; sequence number: the A request's. Every
// replica, every re-issue after a rollback, a restart or a change of
// primary computes the same id from the suspended request. A client has one
// request outstanding (Synod clients are closed-loop), so one nested client
// id has at most one call outstanding, inside the callee's deduplication
// window (64 for paxos, 1 for pbpaxos: protocol/pbpaxos/nested.go). Each execution replica sends its own copy of each
// call (the callee answers every copy alike and executes once: its
// NestedCallee promise); only the primary's answer matters: it goes into
// the next batch, so every replica resumes with the same answer (the seed
// leaves open how the caller votes on answers; the batch settles it). A
// namespace whose callee the cluster lacks (or whose callee does not
// serve nested requests) is refused at configuration time
// (automaton.Caller, config.Cluster.Validate); a call the runtime still
// cannot carry, or one the callee answers with an error, fails its
// request: the SET answers the error and stores nothing, never OK with
// the call dropped.
//
// # Strategies (§3.2, §4.1, §5.1.2, §5.2)
//
// All four are configurations of one scheduler (ppm.go), G groups of k
// threads:
//
//	naive   G=1, k=1, one core (§3.2.1): one request at a time, local step, call, wait
//	walls   G=1, k=threads (§3.2.2, Eve modified): every thread runs to the wall, verify, all calls out, wait for all answers
//	spm     G=threads, k=1, one core (§3.2.3, §5.1.2): round robin, yield to the next thread (mod n), one computes at a time
//	ppm     G=groups, k=threads (§4.1, §5.2): group-major round robin, one group computes while the others' calls are out
//
// Decisions where the seed's strategies cannot be followed literally:
//
//   - naive and spm verify every wall too (the seed's need none: sequential
//     execution is deterministic). Here the verifiers' commit is also how
//     replicas learn the batch is settled (the primary may fail, or a
//     replica have a commission fault), and the output-commit rule
//     ("no nested request leaves A before A's replicas have verified") is
//     kept for every strategy. They still differ from walls/ppm as the
//     seed's do: one core, one step at a time.
//   - The threads are the primary's plan, not goroutines (§5.2.2's PGM
//     and execution threads): the PPM assigns a batch's requests at its
//     start, group-major round-robin (§5.2.1); the active group's PGM puts
//     its threads' steps up to the wall into one slot; each thread then
//     yields (its bit in the yield bit-array); the last one wakes the PPM,
//     which makes the next group active. Only the PPM clears yield bits,
//     and only for a group swapped off the pipeline at least once (§5.2.1's
//     rule against the idle machine). In this model a group's threads reach
//     the wall in one slot, so the race that rule avoids cannot arise; the
//     bits are kept as the seed's bookkeeping.
//   - A group whose answers have not all arrived keeps the pipeline and
//     waits (the seed's threads "ensure that it is their corresponding
//     group's turn ... before proceeding" and then wait for their call);
//     the group does not skip its turn.
//   - A group keeps the pipeline during its wall's verification round (the
//     seed does not say; eve's engine has one slot in flight).
//   - A new batch starts when every thread of the previous one finished.
//     A new primary (after a rollback or a primary failure) plans afresh:
//     the suspended requests of the committed state resume on the threads
//     their tag names; the requests the old primary had assigned but not
//     begun come back from their origins' retransmissions.
//
// # Rollback (§5.3)
//
// A slot's rollback is a rollback to the last wall: the committed state is
// the state right before the active group's nested calls (or the batch
// start, for a batch's first wall), with its suspended requests. The
// engine re-executes the slot sequentially in batch order with a rotated
// primary and no second verification (Eve's, §2.2.3; "switches all threads
// into a sequential deterministic mode"); only then do its calls leave, so
// a call is never sent twice with different bytes. State transfer to a
// divergent minority is eve's; service.NestedState is not a sharded state,
// so a transfer is a whole snapshot, suspended requests included (not
// eve's shard diff: a known cost for large states).
//
// # Live execution (issue 15 item 6, "live on this machine's cores")
//
// Live, eve's executor does each step's cost as CPU work (Engine.Cost: local_cost for
// a local step) on real cores: service.NestedKV declares its conflicts
// (the program's Keys for its steps, the inner service's for the rest), so
// a slot's mixer batches run their steps' work on `cores` goroutines and
// apply one at a time under a lock (service.NestedState, with its
// suspended requests, is not safe for concurrent Apply; eve's runLive).
// The steps' modelled work is what runs in parallel; on this 2-core
// machine shared by both namespaces' nodes the gain is small, and
// pipelining (a group's local steps overlap the other groups' nested
// calls) does the rest. Decision: the simulator's cores (virtual, `cores`) carry the
// multi-core figures (experiment seed003-adam-fig61/62/63);
// seed003-adam-live runs the real thing on loopback (an adam namespace
// calling a paxos namespace of the same cluster, node/call.go) and says
// why it stops.
//
// # Golden scripts
//
// testdata/one_batch_with_wall and testdata/rollback_mid_request are
// harness interaction scripts (harness.RunDataDriven; the nested calls are
// pending effects a script answers with complete-calls); regenerate them
// with `go test -run TestScripts ./protocol/adam -rewrite` and read the
// diff.
//
// # Section numbers
//
// The brief names §5.1.3-§5.1.6 for the PPM, yield bits, verification and
// rollback; the seed's own numbering is §5.2.1 (PPM, yield bit-array),
// §5.2.2 (PGM), §5.2.3 (verification stage), §5.3 (rollback). This package
// cites the seed's.
//
// # Invariants (invariant.go)
//
//   - call-after-commit: a nested request leaves a replica only when that
//     replica's committed (verified) state holds the request suspended at
//     that very call (same id, same bytes).
//   - eve's engine's four: reply-after-commit, commit-quorum, one decision
//     per slot, committed state matches its token.
//
// With a co-simulated callee the simulator also checks that every copy of
// one nested id has the same bytes and gets the same answer.
//
// # Broken variant
//
//   - adam-broken-callfirst: a replica sends the calls of its own
//     speculative run as soon as it reaches the wall. Caught by
//     call-after-commit at the first call, and with invariants off by the
//     simulator's same-bytes check when replicas diverge (conflicts=loose:
//     a resume and a begin of one key run in different orders, and the
//     begin reads a different old value).
//
// # Parameters
//
//	callee      string                         remote                 the namespace the program's nested requests call: a namespace of this cluster that serves nested requests (paxos, pbpaxos), or CLUSTER/NAMESPACE, a namespace of another Synod cluster listed under the cluster file's remotes
//	program     string                         trail                  the requests that call the callee (service.NestedProgram, registered by name): trail, the seed's microbenchmark (SET k v appends to trail:k at the callee), or a user's
//	strategy    one of naive, walls, spm, ppm  ppm                    naive: one thread, one core; walls: one group of `threads` threads (Eve modified, §3.2.2); spm: `threads` single-thread groups on one core (§3.2.3, §5.1.2); ppm: `groups` groups of `threads` threads (§4.1, §5.2)
//	groups      integer in [1, 64]             3                      G, thread groups taking turns on the pipeline (ppm)
//	threads     integer in [1, 256]            8                      k, threads per group (ppm, walls), or the SPM's lightweight threads (spm)
//	cores       integer in [1, 1024]           8                      virtual cores per replica in simulation (naive and spm run on one)
//	local_cost  non-negative duration          1ms                    virtual time of one request's local step
//	hash_cost   non-negative duration          0s                     simulated Merkle cost per hashed (written) object
//	merkle      one of real, fake              real                   fake: hashing and versioning cost nothing (seed Fig 6.3's zero-cost tree)
//	batch       positive integer               48                     max client requests per batch (assigned to the threads at its start)
//	verifiers   non-negative integer           0                      as eve's: 0 co-located, k > 0 the last k nodes verify only
//	r           integer >= -1                  -1                     as eve's: commission failures tolerated, a commit needs r+1 matching tokens (-1: (E-1)/2)
//	timeout     positive duration              100ms                  as eve's: retransmissions, the verifiers' wait for tokens, suspicion of a silent leader
//	mac_key     string                         synod-eve-cluster-key  as eve's: the cluster's token key
//	conflicts   one of service, loose          service                loose: nestedkv-loose's incomplete declaration (a SET's second step declared a read of its key), to make replicas diverge
//	commission  comma-separated list           ""                     as eve's: nodes whose executions are corrupted
//	observe     string                         ""                     as eve's: the name of an eve.Recorder collecting the nodes' counters
//
// # Node symmetry (model checking)
//
// Not declared, for eve's reasons (adam is eve's engine with nested
// calls): ballots (round, node) order leaders by node position. A nested
// call's client id is derived from the caller's namespace and request,
// not from a node, so this is the only obstacle; adam also has no fast
// path (automaton.ModelStater).
package adam
