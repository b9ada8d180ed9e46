// Package seed002pb reproduces the experiments of the Grid Services thesis, chapter III
// (primary-backup on grid middleware, Tables III.1–III.4), and shows the
// failure model primary-backup rests on (issue 10, item 4).
//
// Experiments:
//
//   - seed002-pb-partition: the simulator runs pb, paxos and pbpaxos under
//     crash-stop faults and under partitions and pauses, and counts the
//     histories that are not linearizable. Primary-backup is safe only with
//     a perfect failure detector (chapter III.A); chapter VI's PB-Paxos was
//     built because real networks do not give one.
//
// # Decisions where the seed is silent or its setting does not carry over
//
//   - The seed's three state-transfer mechanisms (GT3 notification push,
//     a service method call, a raw socket) map to Synod's three peer
//     transports of a namespace: a gRPC server-streamed push (notification),
//     a gRPC unary call per update (call), and the framed TCP peer stream
//     (socket), the default.
//   - The seed's "state size" is the size of the state update the primary
//     ships per request; here the value a SET writes (the kv service's delta
//     is the written value plus the key and the duplicate-table entry).
//   - The seed ran one primary and one backup on two machines; our live cells
//     run two nodes on one machine over loopback, so absolute times are
//     those of loopback, not of a 2006 LAN: compare shapes and ratios.
package seed002pb

import "github.com/synod-dev/synod/experiment"

func init() {
	experiment.Register(NewPartition())
	experiment.Register(NewRTT())
	experiment.Register(NewFailover())
}

// Metric names.
const (
	mRuns       = "runs"
	mViolations = "violations"
	mHistory    = "history_violations"
	mInvariant  = "invariant_violations"
	mUndecided  = "undecided"
	mOps        = "ops"
)

// Metrics of the round-trip experiment (rtt.go).
const (
	mSTMedian    = "st_median_ms" // state-transfer round trip (Table III.1)
	mSTMean      = "st_mean_ms"
	mSTSD        = "st_sd_ms"
	mRTTMedian   = "rtt_median_ms" // client round trip (Table III.2)
	mRTTMean     = "rtt_mean_ms"
	mRTTSD       = "rtt_sd_ms"
	mRatioMedian = "ratio_median" // Table III.3: over the unreplicated baseline
	mRatioMean   = "ratio_mean"
	// Timed inside the node the client reached: for pb the primary,
	// request arrival to response release (execution, the state update to
	// the backup and its acknowledgement: Table III.1 at a live primary).
	mNodeMean = "node_mean_ms"
	mNodeSD   = "node_sd_ms"
	// The rest of the client's round trip (client library, RESP, loopback).
	mOutsideMean = "outside_mean_ms"
)
