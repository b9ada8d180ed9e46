// Package conformance is the suite every registered protocol passes and
// every registered broken variant fails, with no test code of its own.
//
// For each protocol in the registry (automaton.Names) the suite simulates
// the standard scenarios below, then the protocol's own
// (automaton.ScenarioDeclarer), each over a few seeds with faults, and
// judges each run with the checker of the protocol's declared consistency
// model and its declared invariants (checked after every step):
//
//   - "faults": 3 nodes, 4 clients, 300 operations, every fault kind, 20 seeds;
//   - "groups": the same with 30% of operations sent as atomic groups, when
//     the protocol declares atomic groups (judged for strict
//     serializability);
//   - "nondeterministic service": the matchmaker, when the protocol keeps
//     replicas identical under nondeterminism (judged by the matchmaker's
//     nondeterministic model and the simulator's convergence check);
//   - "membership": a node added and the first node removed mid-run, when
//     the protocol changes its membership;
//   - "power loss": the whole cluster crashes at once, losing every
//     node's unsynced records (sim --power-loss), then restarts; every
//     acknowledged write must be read back (the history check) and every
//     operation from a bound after the restart must complete (liveness
//     mode). A protocol that does not promise it (automaton.PowerLoss
//     missing from its FaultAssumer kinds) must fail it instead, the
//     printed evidence, until it does.
//
// A protocol whose service calls another namespace (automaton.CalleeNeeder:
// adam) runs its standard scenarios beside the callee it names.
//
// A protocol safe only under a narrower failure model
// (automaton.FaultAssumer: primary-backup assumes a perfect failure
// detector) gets only the fault kinds it declares in the standard
// scenarios; its ExpectViolation scenarios run it outside that model and
// must fail on at least one seed, the evidence that the assumption is
// needed.
//
// A run whose history check times out (undecided) fails the suite: it
// proves nothing.
//
// For each broken variant (automaton.BrokenNames) it runs the variant's own
// scenarios (or "faults" over more seeds) and requires at least one failing
// seed. A protocol that states invariants must have had them checked.
//
// The suite also pins the trace digests of a few runs (testdata/digests.txt),
// so that an unintended change of any protocol's or the simulator's
// behaviour fails a test; `go test ./conformance -run Digests -update`
// rewrites them after an intended change.
//
// Everything runs in CI in seconds per protocol. The command
// `synod-lab sim --protocol P ...` with the printed flags replays any failure.
package conformance
