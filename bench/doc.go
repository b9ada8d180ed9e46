// Package bench is Synod's benchmark driver: YCSB-style load against Synod or
// any other server reached through a Target adapter: the Redis protocol
// (RedisTarget) ships here, etcd v3 and ZooKeeper in package bench/peers (kept
// apart so that the server binary links neither client library).
//
// # Shape of a run
//
// Run dials one Target per simulated client (clients are spread round-robin over
// the configured addresses), optionally preloads every key once with SET, and
// then drives operations for a duration or an operation count:
//
//   - Closed loop (the default): each client issues its next operation as soon as
//     the previous one returns. Throughput is whatever the server sustains at that
//     concurrency.
//   - Open loop (Config.Rate > 0): one scheduler draws arrivals at Rate
//     operations per second in total (Poisson by default; Config.Arrivals
//     "uniform" draws gaps uniformly from [0, 2/Rate], as the ABD report ran) and
//     queues them; idle clients take them.
//     Latency is measured from each operation's scheduled arrival time, not from
//     when a client got round to sending it, so a stalled server is charged for
//     the whole backlog it causes (no coordinated omission). The queue holds about
//     one second of arrivals; arrivals that find it full are dropped and counted,
//     and operations that start more than LateThreshold after their arrival are
//     counted as late.
//
// Keys are fixed-width strings (prefix + zero-padded index, "key:000042") chosen
// uniformly, from a Zipf distribution (math/rand.Zipf with v = 1, so key index 0 is
// the hottest), or from a hotspot (a fraction H of the keys receives a fraction P
// of the operations). Values are printable ASCII and unique per write: each starts
// with a tag naming the client and its write sequence number, so recorded
// histories can be checked for linearizability.
//
// # Measurements
//
// Latencies go into HDR histograms (1 µs to 60 s, 3 significant digits), one each
// for reads, writes and all operations; only operations that received a
// non-error reply are recorded there. Error replies and connection failures are
// counted as errors. A per-second completion series is kept for throughput over
// time. Counters are sharded by client so that clients rarely contend.
//
// The driver cannot know how durable the target is (fsync per write? in-memory?),
// so the caller states it in Config.DurabilityLabel and the report prints it
// beside the numbers.
//
// # Histories
//
// With Config.HistoryPath set, every operation (including the preload) is recorded
// with history.Recorder, times in nanoseconds since the run began. A reply is
// recorded as history.OK; an error reply to a read as Failed (a read has no
// effect); an error reply or connection failure on a write as Unknown. After an
// Unknown outcome the client drops its connection, dials again and continues
// under a fresh process number: the unfinished operation conceptually never
// returns, so the old process must issue nothing further for the history to stay
// well formed. A connection failure on a read is recorded as Failed and also
// leads to a reconnect.
//
// # Redis-protocol target
//
// NewRedisTarget speaks RESP2 over net.Conn with a deliberately small encoder and
// reply parser (package resp is the server side; this one only needs the replies
// GET and SET produce). When a namespace or read mode is configured, it sends
// "SYNOD NS <name>" and "SYNOD READ <mode>" once per connection; those commands
// exist only on Synod.
package bench
