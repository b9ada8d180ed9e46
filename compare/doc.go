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
// and each client configuration of the system (Configs). Systems take turns
// cell by cell.
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
// PipelineDepth commands deep per connection, as a client library pipelines
// concurrent callers; Synod also through its gRPC client, Conns of them
// shared by every client, requests multiplexed, and gRPC clients pipelining
// PipelineDepth callers each on their Pipeline streams. With one client a
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
