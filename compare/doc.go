// Package compare measures Synod beside etcd and ZooKeeper in one run on one
// machine: `synod-lab compare`.
//
// It starts a 3-member etcd (Debian's etcd-server), a 3-server ZooKeeper
// ensemble (Debian's zookeeper 3.8 jar, run with java directly) and a 3-node
// Synod cluster (package cluster), all on 127.0.0.1 with free ports, all with
// fsync on, data and logs in one directory. A peer that is not installed is
// skipped with the exact install command printed; the others still run.
//
// # Workload
//
// Keys are exactly KeySize bytes (16 by default: a fixed prefix and the
// driver's zero-padded index, "synod-com:000042"), values ValueSize bytes
// (100), Keys keys (10,000), chosen uniformly. Every system is first preloaded
// with every key. Then each cell runs the closed-loop driver (package bench)
// for Duration: puts only, or linearizable gets only, for each client count
// and each client configuration of the system (Configs). Systems take turns:
// for each client count and op, every configuration of one system, then the
// next system (a turn), the other systems paused meanwhile (Isolation).
//
// # Fair comparisons (issue 18)
//
// A client is one caller with one operation outstanding; a connection is
// what clients talk through (bench.ConnSpec). Every system is swept over
// the configurations its own clients would use, the number of clients (so
// the load offered) staying the same: one connection per client; etcd and
// ZooKeeper also with Conns shared connections (1 and 16 by default: etcd's
// benchmark separates --conns from --clients, and one connection per client
// is etcd's slowest configuration); Synod and Redis over RESP also pipelining
// each of PipelineDepths (16 and 64 by default) commands deep per connection,
// as a client library pipelines concurrent callers; Synod also through its
// gRPC client, Conns of them shared by every client, requests multiplexed,
// and gRPC clients pipelining each of PipelineDepths callers on their
// Pipeline streams. Depth 64 is in the default sweep because it is where
// Synod's Multi-Paxos puts at 256 clients are best (session 41's quiet run:
// 55.3k/s at depth 64, 41.2k/s at depth 16, against etcd's best 16-18k/s);
// a depth that opens as many connections as a smaller one is left out, so
// it adds cells only from 32 clients up. With one client a
// system with a leader (Synod's leader-based protocols) also runs "via
// follower": the client connected to a member that does not lead, which
// forwards its requests (Instance.Follower; issue 28's one-client put
// through a follower). The report prints the sweep,
// then each system's best configuration (BestCells: highest throughput) and
// the ratios best against best, naming the configurations. Redis (RedisSystem,
// one server: "redis" without persistence, "redis-aof" with appendfsync
// always) is the bound ABD and ESDS are held against; Synod runs with
// durability fsync or memory (SynodSystem's durability, the command's
// --durability), and every figure carries its durability.
//
//   - Synod: RESP SET, and GET with SYNOD READ linearizable (the protocol's
//     linearizable read).
//   - etcd: v3 Put, and Range with the default (linearizable) consistency.
//   - ZooKeeper: setData (create on first write), and sync + getData, the
//     strongest read ZooKeeper offers (see peers.NewZooKeeperTarget for why
//     it is not strictly linearizable).
//
// # Isolation
//
// All systems are started (and preloaded) before the first cell, but during
// one system's turn every other system is paused: SIGSTOP to each of its
// processes (Synod's nodes through cluster.Pause, which signals only the
// verified PIDs of its pid files; the peers through their process group,
// which signals only children it has not reaped), and SIGCONT when its own
// turn comes, after which Run waits until every member answers a read
// again. Session 41's quiet run showed why: redis-server with appendfsync
// always did 42-48k puts/s per-client beside an ESDS cluster and 85.5k/s
// beside an ABD cluster minutes earlier. Measured in session 42 (2 cores,
// load about 17-20): a 3-node ESDS cluster with fsync keeps working for
// several seconds after a 5 s burst of 64-client puts (0.24, 0.76, 0.49
// cores and up to 14 MB/s of disk writes in the three 2 s windows after
// it, gossip and collection catching up), then settles to about 0.02
// cores; Redis's first cell after ESDS's turn ran inside that tail.
//
// Pausing rather than stopping and restarting: a restart of every other
// system at every turn costs ZooKeeper's JVM start (seconds) and, for the
// systems that keep nothing on disk (Redis without persistence, Synod in
// memory mode), a new preload at each turn; and it would measure freshly
// started processes (cold caches, JIT) in each turn's first cell. A paused
// process keeps its data, sockets and caches and uses no CPU. The cost of
// pausing is that a system resumed after minutes sees its timers run out at
// once (a ZooKeeper follower's socket timeout, an election timer); Run waits
// for every member to answer before the turn's first cell, and each cell's
// unmeasured warm-up runs before its figures are taken. The backlog a
// system leaves behind it (ESDS's gossip and collection) is frozen with it
// and resumes in its own next turn, so it is charged to the system that
// caused it. --isolate=false keeps every system running throughout (the
// behaviour before session 42), to measure the disturbance itself.
//
// Each system's CPU while it serves no client is printed beside the tables:
// the cores its processes used (utime + stime from /proc/PID/stat) over
// IdleWindow once after the preload (alone, after a settle of the same
// length), and over IdleWindow right after each of its turns, before it is
// paused: the background work it would otherwise have done beside the next
// system's cells.
//
// # Figures
//
// Each cell reports throughput (successful operations per second), p50 and p99
// latency (ms), the error count and the connections opened; and, per op and
// client count, the ratios Synod/peer of throughput, p50 and p99, best
// configuration against best. Only ratios from the same run are
// meaningful; absolute figures depend on the machine.
//
// # Processes
//
// etcd and java processes are children of the synod command, each in its own
// process group; they are stopped by PID (SIGTERM, then SIGKILL after a grace
// period) at the end, on error and on Ctrl-C, and the kernel kills them should
// the synod command itself die (see procGroup). Synod's nodes are stopped with
// cluster.Down, which signals the PIDs it recorded after verifying them.
// Paused systems are resumed (SIGCONT) before they are stopped: a stopped
// process acts on SIGTERM only once continued; SIGKILL, and the kernel's
// kill when the synod command dies, reach it stopped or not.
//
// # Choices
//
//   - ZooKeeper's per-IP connection limit (60) is lifted: every benchmark
//     client connects from 127.0.0.1. Its AdminServer (port 8080) is off. The
//     JVM heap is capped at 1 GiB per server.
//   - etcd runs with its defaults apart from addresses and logging: fsync on,
//     no compaction (the runs are short).
//   - A cell whose clients cannot connect is reported as FAILED in the table
//     and the run continues; a system that cannot start fails the run.
package compare
