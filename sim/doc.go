// Package sim is Synod's deterministic simulator, in the spirit of
// FoundationDB's simulation testing and TigerBeetle's VOPR: a whole cluster
// and its clients run in one goroutine, in virtual time, from one seed. The
// same seed and Config give the same run, byte for byte (on the same binary
// and platform); the trace digest (Result.Digest) proves it.
//
// # The world
//
// An event queue, a heap ordered by (virtual time, sequence number), drives
// everything. All randomness comes from the seed: a master math/rand source
// derives independent streams for automata (each incarnation's Config.Rand),
// the network, the disks, the clients and the fault injector, so changing the
// fault schedule does not change the workload's random choices. No Go map is
// iterated where the order could matter.
//
// Nodes run automata of one registered protocol (automaton.Lookup), one
// namespace ("default", service kv). Inputs follow the automaton contract:
// Start{Records} first, then ClientRequest, PeerMessage and TimerFired. Each
// node's outputs go through package release, the interpreter of the contract
// the live node runs too (sim/node.go carryOut; the simulator only does the
// I/O it decides). A send to self, to an unknown node, a negative timer, an
// empty record key or an unknown output is a contract violation and fails the
// run with an error.
//
// Disk: each node has a durable map and an unsynced buffer. Persist outputs go
// to the buffer; an fsync (Config.Fsync latency) starts when records are
// buffered and none is running, and covers everything buffered when it starts
// (group commit). A Send, Respond or Effect emitted after a Persist, in the
// same step or any later step while that Persist is unsynced, is held by the
// interpreter and released in order when the covering fsync completes (an
// Early Send waits only for what the last output before it that is not Early
// waits for).
//
// Crash: the automaton, unsynced writes, held outputs, pending timers, queued
// inputs and every message in flight to the node are lost (events carry the
// incarnation they were sent to; a crash bumps it). Messages already sent by the
// node still arrive. Restart creates a new automaton and starts it with a copy
// of the durable map. Pause: inputs to the node queue up, in order, and timers
// are delayed, until it resumes; its disk finishes the fsync in progress.
//
// Network, per directed link: latency from a distribution (constant, uniform,
// normal, pareto; see ParseDist; Config.LinkLatency overrides single links), loss and duplication probabilities, extra
// delay for a fraction of messages (reordering beyond what latency variance
// gives), partitions (node groups; messages across groups are dropped when
// sent and when they arrive) that heal.
//
// CPU time (cpu.go, off by default): Config.OpCost, ApplyCost and MsgCost
// give steps a processing time on their node's processor, during which
// inputs queue; Config.CPUs lets nodes share processors.
//
// # Clients
//
// Config.Clients closed-loop clients share Config.Ops operations. Each draws a
// kind from Config.Mix (get, set, del, exists) and a key from a small key set
// (few keys force contention); written values are unique ("c3-17"). Client ids
// are random 64-bit numbers from the seed; requests carry RequestID{Client,
// Seq}. A client sends to a random live node over a connection with its own
// small latency that is reliable while the node is up. On a timeout, an error
// reply, or the node's crash, the request is resent with the same RequestID
// to another node if the protocol's IdempotentRetry is true, or if it is a
// read; a write of a protocol without idempotent retries is recorded as of
// unknown outcome and the client moves on (ABD has no replicated dedup table:
// re-running a write at a second coordinator could apply it twice). Late
// replies to a given-up request are ignored. Every operation is recorded with
// history.Recorder in virtual nanoseconds.
//
// For protocols whose clients send each request to every replica
// (automaton.FanoutProtocol: Fast Paxos, PB-Paxos), a client sends it to
// every live node marked Request.Fanout, skips Silent answers and takes the
// first real one; a node's crash is then no reason to retry, only the
// timeout is. Config.NoFanout (--no-fanout) sends to one node instead, as a
// client that reaches one node (redis-cli) does.
//
// # Faults
//
// Config.Faults "all", "none" or a list (crash, partition, loss, dup, pause,
// slow, reorder). A nemesis acts every 20–200ms of virtual time with one random
// enabled fault: a crash (restart after 20ms–1s) or pause (10–500ms), never
// taking more than (N-1)/2 nodes away at once; a partition cutting off 1 to
// (N-1)/2 nodes for 50ms–1s; windows of loss, duplication or reordering; a
// latency spike on one node's links or a slow fsync (x10–x50). So a majority is
// mostly available and runs make progress. When the last operation has been
// issued (or Config.MaxTime passes) every fault is healed — crashed nodes
// restart, paused ones resume, partitions heal, windows close — and open
// operations get Config.DrainTime to finish; the rest are recorded as unknown.
//
// # Checking and replay
//
// Run checks the history with check.Linearizable (IgnoreDelCount for register
// protocols: automaton.RegisterProtocol), or with check.Sequential when the
// protocol's automaton.ConsistencyOf is Sequential; for those, clients stick
// to one node each (Config.StickyClients), since sequential consistency is
// promised per server session. Result.Digest is a SHA-256 over
// every delivered input and every output (virtual time, node, kind, bytes),
// fault events and client outcomes; replaying a seed gives the same digest.
// The command "synod-lab sim" runs many seeds in parallel and prints the command
// that replays each failing seed (the seed runner is RunSeeds; the CLI's
// flags are Flags, which ParseArgs also serves to the conformance suite).
//
// The checker is chosen by the protocol's declared consistency model
// (check.For); a history holding atomic groups (Config.Groups) or
// interactive transactions (Config.Txns, txn.go) is judged for strict
// serializability (check.ForHistory). Protocols that state invariants
// (automaton.InvariantStater) have them checked after every step
// (invariant.go); the first violation ends the run as Result.Invariant.
// Requests carry an Env drawn from a stream of their own (virtual time and
// randomness) for nondeterministic services.
//
// # Nondeterministic services and convergence
//
// Config.Service "gridmatchmaker" is chapter IV's Matchmaker
// (durability/examples/matchmaker: the first suitable machine, so
// deterministic); its workload is gridmatchmaker.go and package check judges
// it with its generic model for deterministic services (the service itself
// as the specification, the namespace one object).
//
// Config.Service "matchmaker" (the Grid Services thesis's Matchmaker, service/matchmaker.go)
// is nondeterministic: a submit picks one of the suitable machines at
// random. Protocols that would let replicas diverge on it are refused
// (automaton.CheckService). Its histories cannot be judged by package
// check's deterministic models, so the simulator judges them for
// linearizability against a nondeterministic specification, a submit
// accepting any machine that is free and fits at its point of the order
// (matchmaker.go, which also describes the workload). And whatever the
// service, when the protocol's automata report their state
// (automaton.StateReporter), replicas at the same applied count must hold
// equal states, during the run and at its end (converge.go); the first
// divergence ends the run as Result.Divergence. A replica that applies a
// command with its own environment instead of the agreed one
// (paxos-broken-localenv) is caught there, usually before any client reads
// the difference.
//
// # Nested requests
//
// A namespace may call another (automaton/call.go; the Eve/Adam thesis §1.3 and §3,
// Adam). With Config.Callee (--callee-protocol P --callee-nodes N
// --callee-faults F --callee-service S --callee-param k=v --callee-delay
// DIST --callee-namespace NS) a second simulator runs the callee namespace
// beside the main one: its own nodes, network, faults, invariants,
// convergence check and checker, and no clients. One merged loop handles
// the earlier of the two queues' heads (ties: main first), so every hop
// between the namespaces, which has positive latency, is causal. A main
// node's released Effect of kind automaton.CallKind is carried by the
// callee as a client would: attempts at random live callee nodes, the
// client latency, RequestTimeout, retries with the same id to other nodes,
// no attempt limit while the calling incarnation lives. The answer returns
// as EffectDone{Result: automaton.Response} after the client latency plus
// CalleeDelay (remote computation done at the callee in parallel; the
// seed's remote time slice), and is lost if the caller's incarnation ended.
// A call to a namespace not simulated, or to a protocol that is not
// automaton.ServesNested, gets EffectDone.Err. When one callee node answers
// an id that several calls have outstanding at it, each gets the answer. An
// error answer that means "not now" (automaton.RetryableAnswer: TRYAGAIN,
// a timeout, MOVED, ...) is a failed attempt, retried; any other error is
// the call's answer and goes back to the caller, as in the live node
// (node/call.go). The callee's history holds one
// operation per nested id (invoked at the first copy sent, completed at the
// first answer, unknown if none) and is checked by the callee's checker;
// Result.Callee is its outcome, and a violation there is one of the run.
// When the main workload ends the callee's faults heal and it drains.
// Two output-commit checks, protocol-agnostic, end the run as
// Result.Invariant: (a) every copy of one nested id, from any caller
// replica and any re-issue, carries the same operation, group and options;
// (b) every answer to one nested id equals the first (else the callee
// executed it twice or answered a copy afresh). --nested applies check (b)
// to a protocol alone, as a callee: clients mark their requests nested and
// send each answered one again, later, to a random node.
//
// # Sharded clusters
//
// RunShards (shards.go; `synod-lab shardsim`) is a second world in the
// same style for issue 33: several replica groups of one sharded KV
// namespace on machines that share a processor, a disk and their fate,
// a slot map, clients that route by slot and follow MOVED, ASK and
// TRYAGAIN, and slot migrations by the real shard.Machine, under crashes,
// power loss, partitions, loss, duplication and slow fsync; ShardScale
// measures its throughput as shards grow in the CPU model.
//
// Conformance scenario: `synod-lab sim --protocol paxos-broken-nestedread
// --nodes 3 --clients 4 --ops 300 --faults none --keys 2 --nested --seeds
// 1-2` fails both seeds by check (b) (a copy of a nested read answered by a
// fresh read); paxos passes them, and passes as the callee of a replicated
// caller under faults in both namespaces (callee_test.go).
package sim
