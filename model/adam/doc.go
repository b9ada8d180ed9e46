// Package adam is the unit-slice model of the Eve/Adam thesis's four execution
// strategies for a replicated service that makes nested requests to another
// service (Wetterau 2015, "Communicating Replicated State Machines",
// chapters 3 and 4): a small discrete-event simulation of one batch, not a
// formula. It is pure computation; the experiments seed003-adam-slices and
// seed003-adam-model print it beside the seed's figures. (The protocol is
// protocol/adam, a different package.)
//
// # The model (§3.2, Fig 3.1)
//
// A batch of N client requests; request i is Local time of local
// computation up to its nested request, then Remote time until the answer is
// back, and is complete when the answer arrives (Fig 3.1 draws no local work
// after the answer; the seed is silent on it, and the model has none). In the
// seed's figures every request is one slice of each (Uniform(n, 1, 1)).
// Time units are the caller's. Every thread that computes has a core of its
// own. Four strategies (one file each):
//
//   - naive (naive.go, §3.2.1, Fig 3.2): one thread, local then remote; 2N.
//   - walls (walls.go, §3.2.2, Fig 3.3; the Batch Manager, §5.1.1): k
//     threads speculate; at every wall (every thread at its nested request
//     or finished) a checkpoint and a verification, then the nested requests
//     leave; one more checkpoint at the end of the batch. 2⌈N/k⌉ slices,
//     ⌈N/k⌉+1 checkpoints: 12 and 7 for 12 requests on 2 threads, the
//     seed's "seven total checkpoints (three of which are not pictured)".
//   - spm (spm.go, §3.2.3, Fig 3.4; §5.1.2): round-robin assignment, one
//     thread at a time in a fixed turn order, send at yield, no checkpoints;
//     N+1 slices with two or more threads.
//   - ppm (ppm.go, §4.1, Fig 4.1; §5.2.1–5.2.2): G groups of k threads,
//     group-major round-robin assignment, one group computes at a time, the
//     yield bit-array cleared only by the control thread; ⌈N/k⌉+1 slices with
//     two or more groups, as many checkpoints as the walls strategy (§4.1).
//
// The model reproduces 24 / 12 (7 checkpoints) / 13 / 7 slices for 12
// requests and the closed forms of closed.go for every N, k and G tried
// (tests); the speedup 2N/(⌈N/k⌉+1) grows with full batches towards 2k and
// never reaches it (§4.2: "converges to the desired 4x").
//
// # Overheads (used for Figs 6.1–6.3)
//
// A checkpoint costs HashFixed + HashPerRequest × (requests whose local
// computation ran since the previous checkpoint): local CPU during which no
// request computes (the Merkle tree re-hashes what they wrote). A
// verification round trip, Verify, follows every checkpoint: nested requests
// leave and results are released only after it, but it is latency, not CPU.
// Throughput is one batch's N over its makespan; batches do not overlap.
//
// # Decisions where the seed is ambiguous, wrong or silent
//
//   - Send at the yield or at the wall (§5.2.1 vs §5.2.3, §5.3). §5.2.1's
//     scenario has a PPM thread "ready to yield" make its nested request
//     while another thread of its group still computes, so before the
//     group's checkpoint; §5.2.3 and §5.3 say every nested request follows a
//     verified checkpoint (output commit). The model does the latter by
//     default and the former with SendAtYield; the seed's figures come out
//     the same either way (all threads of a group yield together when all
//     requests cost the same).
//   - Which group runs next (§5.2.1 says "updates the active group
//     accordingly"): the next index modulo G that has local work left, by
//     analogy with the SPM's "next higher id"; groups with none are skipped.
//     The SPM likewise skips threads with no work left (§5.1.2: "the last
//     thread with work").
//   - Finished threads: a thread with no local work left counts as yielded
//     (keeps its bit set) and, for the walls, as "finished with the entire
//     batch" (§5.1.1).
//   - Clearing rule (§5.2.1): when a group takes the pipeline back, the
//     control thread clears the bits of its threads that have work left
//     (all of them have been swapped off once since they yielded). A thread
//     whose answer is not back yet waits, holding its group's turn, as the
//     SPM's thread does (§5.1.2); each thread runs exactly one request per
//     turn, so the turns do not depend on remote latency.
//   - Whether a group keeps the pipeline during its verification round trip
//     (silent): it keeps it while hashing (CPU) and hands it on before the
//     verification answer, which only delays its nested requests.
//   - The end-of-batch checkpoint covers no request's local computation (all
//     ran before a wall): it costs HashFixed, then Verify.
//   - The Fig 3.4 caption's "two execution threads" for the SPM: two
//     threads exist, one computes at a time; the model uses two.
//   - §5.2.1's hazard is written as the SelfClear variant: a thread clears
//     its own bit when its answer returns. A thread with no work left then
//     keeps its group on the pipeline with nothing to compute and no other
//     group ever runs (the tests show the stall); with SendAtYield it may
//     also run a second request within one turn, so turns depend on remote
//     latency. The Eager variant ignores the turn (§5.2.2): two groups
//     compute at once. Both are caught by the tests' properties.
package adam
