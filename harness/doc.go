// Package harness drives a cluster of protocol automata by hand, for tests.
//
// One Cluster holds N automata of one registered protocol (broken variants
// included: automaton.LookupAny) over a simulated network that does nothing
// on its own. A test steps nodes with inputs, and moves the world forward
// one decision at a time:
//
//   - Messages wait in one FIFO queue until the test delivers them: the
//     head (DeliverOne), everything until quiet (DeliverAll), only those
//     matching a filter (Deliver), in a seeded random order with loss and
//     duplication (DeliverRandom), or drops them (Drop). A persistent loss
//     rule (Isolate, SetLoss, Heal) models partitions and targeted message
//     loss. Messages to a node that is down are lost on delivery. A test
//     that decides message by message takes the oldest with Pop and hands
//     it over (or holds it back, or forgets it) with DeliverMessage, which
//     returns the receiver's outputs.
//   - Timers are recorded per node and fire only when the test fires them
//     (FireTimer, FireAll, FireAllNodes); there is no clock.
//   - Each node's outputs go through package release, the interpreter of
//     the automaton contract every runtime runs (numbering, the durability
//     rule, Early sends, contract checks: a violation fails the test). The
//     harness's disk is synchronous: a Persist is durable once written, so
//     every output leaves as it is emitted. Crash forgets the automaton
//     and its timers, Restart (or Boot) hands the node its records back as
//     automaton.Start.Records.
//   - Client requests are submitted at a node (Request, Submit) and every
//     response is collected (Response, Responses; LastResponse keeps an
//     atomic group's Results).
//   - A membership-aware automaton's latest automaton.Members output is kept
//     per node (Members) and shown in the trace.
//   - When the protocol states invariants (automaton.InvariantStater), the
//     checker runs after every step; the first violation fails the test
//     (testing.TB.Fatalf) naming the node and the step, unless
//     Options.OnViolation takes it. CheckInvariants runs the checker between
//     steps, for tests that tamper with an automaton's state.
//   - Every input and output is written to a trace as text lines (Trace),
//     rendered when read so that long random runs do not pay for lines
//     nobody reads. A protocol makes the trace readable by implementing
//     MessageDescriber on its automaton (conventionally in a file
//     harness_hooks.go); Dumper (or fmt.Stringer) gives its state for
//     `state`.
//
// The datadriven layer (RunDataDriven) reads interaction scripts in the
// style of etcd-io/raft's rafttest/interaction_env: each protocol keeps
// golden files under its testdata/, and `go test -rewrite` regenerates them.
// The commands are listed in datadriven.go; effects (an executor's work,
// a nested call) stay pending until a script completes them, through their
// executor or with a given answer (complete-effect, complete-effects,
// complete-calls, quiesce hold=KIND), and `effects` lists them, a nested
// call with its id and bytes.
//
// Decisions the harness makes for every protocol:
//
//   - Node ids are n1..nN in configuration order; AddNode extends the
//     configuration for automata booted later (spares, joins) without
//     touching running ones.
//   - Each boot of each node gets its own deterministic random source
//     (derived from Options.Seed, the node's index and its boot count)
//     unless Options.RandFor says otherwise, so a script replays exactly.
//   - Firing a timer removes it first: an automaton that wants it again sets
//     it again (the contract's SetTimer semantics).
//   - Invariant checking stops after the first violation (as the simulator
//     does): later states derive from a wrong one.
//   - DeliverRandom loses a message to a down node without drawing for loss
//     or duplication: a crash decided its fate, and the draws of later
//     deliveries do not shift with it.
package harness
