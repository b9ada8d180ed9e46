// Package nemesis runs real synod node processes, each in a network
// namespace of its own, and injects faults between them while clients
// record a history (issue 19 item 2). `synod-lab chaos` and livetest's
// TestChaos use it; docs/CHAOS.md is the user's guide.
//
// # The harness (netns.go)
//
// A bridge scb<pid> in the root namespace holds 10.213.S.254/24 (S chosen
// free) and one address 10.213.S.1ij per ordered link i->j. Node i lives in
// namespace synodchaos-<pid>-n<i> at 10.213.S.i, joined to the bridge by the
// veth pair scv<pid>n<i>. At most MaxNodes (9) nodes. Every name carries the
// creating process's pid: Sweep, run at the start of every harness, removes
// namespaces (and SIGKILLs what runs in them), links, tmpfs mounts and
// directories whose creator is dead. Run removes everything it made on
// return, also when its context is cancelled (the command cancels it on
// SIGINT and SIGTERM); nodes also get Pdeathsig SIGKILL, so a kill -9 of the
// harness leaves namespaces and mounts for the next sweep, not running nodes.
//
// Nodes run `synod node` through `ip netns exec` (which execs the node, so
// the pid signalled is the node's). Clients run in the root namespace and
// reach every node's client port directly; faults never cut clients off.
//
// # How faults are made (this kernel has no netem)
//
// The kernel here has no sch_netem and no tc actions (probed: netem, prio,
// sfq, fq, fq_codel and cake are unknown qdiscs; u32, flower and matchall
// filters and the gact action are missing); nftables works once installed
// but is not on a fresh machine. So:
//
//   - Message faults are made in user space by one relay per ordered link
//     (relay.go), in the harness process. Each node reads its own cluster
//     file, in which every other node's peer address is the relay of that
//     link; the relay dials the real peer. Since the transport uses one
//     connection per direction (the acceptor never sends after the
//     handshake), link i->j carries exactly i's messages to j. The relay
//     passes the handshake and proof unchanged, then reads whole frames,
//     so loss, duplication and reordering act on protocol messages, never
//     on bytes: a dropped frame is a lost Send, a duplicated frame a
//     duplicated Send (the automaton contract allows both). Delay and
//     jitter keep frame order (TCP's); reorder holds each frame on its own.
//     reset closes every relayed connection: both ends see a reset stream.
//     Peers authenticate through the relay (it forwards the proof); TLS
//     between peers cannot be relayed frame by frame and is not used.
//   - Partitions are made in the kernel: a blackhole route in node i's
//     namespace for the address of link i->j. The kernel discards i's
//     packets on that connection, acknowledgements included, so i->j dies
//     while j->i (another connection, another address) lives: a true
//     one-way cut at the message level. Majority/minority and bridge cut
//     both directions between the sides.
//   - Pauses are SIGSTOP/SIGCONT; kill is SIGKILL and a restart from the
//     same data directory; a full disk fills the node's tmpfs (each node's
//     data directory is a tmpfs of Options.DiskSize) and frees it at the
//     end. A tmpfs survives kill -9 (it models a process crash, not a
//     power loss: fsync's durability against power loss is not tested).
//   - A slow or failing fsync is not injected (issue 19 item 3's storage
//     faults need hooks in storage/, which this package does not own).
//
// One fault is active at a time, drawn from Options.Seed in shuffled
// rounds of the chosen kinds; kill and pause hit one node and partitions
// leave a majority connected, so a majority protocol keeps serving. The
// schedule, the targets and the relays' random choices come from the
// seed; the timing of real processes does not, so a seed replays the same
// faults, not the same history.
//
// # Judging a run (run.go, load.go)
//
// Clients issue GETs and SETs of unique values on Options.Keys keys; a
// write whose reply is an error or a timeout is unknown (it may have been
// applied) and the client continues as a fresh process. Clients of a
// protocol that needs sticky clients (sequential ones) use one node each;
// others fail over between all. After the run every fault is healed,
// every node restarted or continued, and load goes on a second without
// faults. Then every key is read through every node, retrying for up to
// 10 s, and must hold a write no acknowledged write follows in real time
// (lostWrite): nil where a write was acknowledged, a value an acknowledged
// write overwrote, or a value nobody wrote counts as a lost write. The
// whole history, final reads included, goes to check.ForHistory for the
// protocol's model (linearizable or sequential); an undecided check is
// reported, not counted as a violation. Protocols of other models (ESDS)
// have no history checker, and their writes are not ordered in real time
// (ESDS orders non-strict writes by labels, the ESDS thesis §3: a write
// acknowledged before another began may be ordered after it), so their
// final reads are judged by unwritten instead: a value some client wrote,
// nil only where no write was acknowledged, and every node on the same
// value (convergence) by the deadline.
package nemesis
