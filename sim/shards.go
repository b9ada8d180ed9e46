package sim

import (
	"fmt"
	"io"
	"math/rand"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
	"github.com/synod-dev/synod/release"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// A sharded cluster in one event queue (issue 33 item 6; docs/SHARDING.md,
// "The sharded simulation").
//
// RunShards simulates Machines machines hosting the replica groups of one
// sharded KV namespace: Shards groups that own the 16,384 hash slots at
// the start (shard.Even) and Spares groups that own none. Group g's
// replica i lives on machine (Replicas·g + i) mod Machines, so with fewer
// machines than replicas groups share machines. Every replica is an
// automaton of the protocol (paxos by default) whose outputs go through
// package release, as in the one-group simulator; the peers of a replica
// are its group's replicas, named by their machines ("m4"), as a live
// node hosts many groups and tags each message with its group.
//
// What a machine shares among the replicas it hosts:
//
//   - one processor (the CPU model of cpu.go, per machine: OpCost per
//     client request, MsgCost per peer message, ApplyCost per service
//     Apply, FwdCost per request forwarded for a plain client), a FIFO
//     queue of inputs in front of it;
//   - one disk: an fsync covers every record any of its replicas has
//     buffered when it starts (group commit across groups, as the live
//     node's shared log does);
//   - its fate: a crash or a power loss takes every replica on it down.
//
// The slot map (shard.Placement) is the placement namespace's record: a
// key of the placement namespace replicated by a group of the protocol
// (PlaceReplicas; 3 by default with the decided plan since session 44),
// whose leader runs the placer and the drivers, fails over and replaces
// the group's own dead members (shards_placegroup.go), or one
// linearizable register (PlaceReplicas -1, and the rotation plan). Slots move by
// the real migration machine (shard.Machine): its actions become the same
// atomic groups node/migrate.go sends (guards of the slot states, sets,
// scans, dumps, restores), in the groups' logs. The runs split (the upper
// half of the largest group's slots into an empty group), merge (every
// slot of the smallest group into another) and move a few slots, in turn;
// drivers die and are replaced from the saved record, and a dead driver's
// requests still in flight still reach the logs (fenced by tokens).
//
// Clients. A cluster client keeps a copy of the slot map; it sends a
// request to a replica of the group its map names (the last one that
// answered, else a random live one), as the atomic group a node makes of
// it (guard slot mode, the operation, slotdirty for a write;
// node/slotmap.go guarded). A refused guard answers as the node would:
// MOVED (the client reloads the map, as after CLUSTER SLOTS, and resends),
// ASK (resend once to the named group in asking mode) or TRYAGAIN (back
// off and resend). Attempts in one group carry one request id, so paxos's
// deduplication makes a retry after a timeout safe, and a refusal proves
// that no attempt was applied (the first outcome of an id is the one
// recorded); a new group gets a new id. A plain client (PlainFrac) sends
// to a random live machine, which forwards the request to the group (a
// FwdCost step on its processor, one more network hop) when it hosts no
// replica of it, and follows redirections for the client.
//
// Checks. After every Apply of every replica (every step): a replica
// whose log has taken a slot away from its group (the slot's state set to
// frozen, handed, gone or importing) must not apply a client's write to
// that slot afterwards; every configuration of the slot map places every
// slot in exactly one group (shard.Check). At the end, the history of
// every client operation is checked for linearizability (check.Linearizable
// partitions it per key). Each failure is returned with its seed; the
// command that replays it is ShardsReplay.
//
// Faults (ShardsConfig.Faults, ShardFaultKinds): crash (a machine,
// restarted after 20ms–1s; and the migration driver dies), pause (a
// machine's process stops for 10–500ms: inputs queue, its disk finishes),
// partition (1 or 2 machines cut off for 50ms–1s), loss, dup and reorder
// (windows: 20% of messages lost, duplicated, or delayed by a further
// DefaultReorderDelay), slow (a window in which one machine's fsync takes
// ×10–×50, or its messages a 5–50ms spike), power (once: every machine
// loses power at once, unsynced records are lost everywhere), dead (a
// machine down for 2.5–4s, long enough for the placer to replace its
// replicas). Crashes, pauses and dead machines together never take more
// than (Replicas-1)/2 of a group's replicas away.
//
// Membership (shards_members.go): the placer carries out Decide's
// replacements, replica moves and leader moves through the groups' own
// reconfiguration (paxos adds and removes, leadership transfers), checked
// by the majority, one-chain and healed invariants.

// ShardsConfig describes one sharded run.
type ShardsConfig struct {
	Protocol string // default "paxos"
	// Shards own the slots at the start (shard.Even); Spares own none.
	Shards, Spares int
	// NewGroups are group names reserved for splits into new groups
	// (session 45): no replicas and no members at the start; a split with
	// no spare creates one on the machines shard.Decide chooses (the least
	// loaded by groups and leaders) and migrates the slots into it
	// (shards_place.go, "Splits into new groups").
	NewGroups int
	// CutByLoad gives Decide the per-slot request rates, so that a split
	// by load cuts where the load halves (off by default: the published
	// seeds' schedules cut at the median slot).
	CutByLoad bool
	// Machines hosting the replicas; 0: Replicas × (Shards+Spares), one
	// machine per replica.
	Machines int
	Replicas int // per group, default 3
	Clients  int
	// TxnClients run bank transactions (transfers and whole-bank reads)
	// over accounts in several groups (shards_txn.go).
	TxnClients int
	Ops        int
	Seed       int64
	Faults     string // none, all, or a comma list of ShardFaultKinds
	// Migrations bounds how many migrations run while the clients run:
	// splits and merges shard.Decide decides (Plan "decide", the
	// default), or splits, merges and moves in turn (Plan "rotation").
	Migrations int
	Plan       string
	// PlaceReplicas > 0: the placement records are a KV namespace
	// replicated by a group of the protocol on that many machines, whose
	// leader's machine runs the placer and the drivers
	// (shards_placegroup.go); -1: world registers; 0: the default,
	// DefaultPlaceReplicas with Plan "decide", registers with "rotation".
	PlaceReplicas int
	// Place are Decide's thresholds (zero: SimPlaceParams).
	Place shard.PlaceParams
	// Hot of the operations go to HotKeys keys (default 1) in hot phases
	// of HotPhase (default 2s), which alternate with quiet ones (uniform
	// keys, clients thinking 5 times longer): the load moves, rises and
	// falls (hotPhase). 0: uniform keys, no phases.
	Hot       float64
	HotKeys   int
	HotPhase  time.Duration
	Keys      int     // default 32
	PlainFrac float64 // fraction of plain (non-cluster) clients
	// Latencies and costs (ParseDist); CPU costs "" are zero, and the CPU
	// model is on when any is set.
	Latency, ClientLatency, Fsync, Think string
	OpCost, MsgCost, ApplyCost, FwdCost  string
	// Warmup: operations completed before this virtual time are not
	// counted in the throughput (the CPU figures start there too).
	Warmup time.Duration
	// MigrateAt: when the first migration may start (default 100ms).
	MigrateAt time.Duration
	MaxTime   time.Duration
	// Broken names a deliberately wrong variant, for the test that shows
	// the checks catch it: "keep-accepting" (the groups' slot guards
	// admit reads and writes to slots they have handed over or lost);
	// "placer-overreach" (the placer's decided slots run one slot past
	// the decision, into the next group's); the membership variants
	// memberVariants (shards_members.go).
	Broken string
	// Incarnations: a created group that owns nothing is retired (shard's
	// decision retire) and its name created again at the next incarnation
	// (shards_inc.go; needs NewGroups, without PlaceReplicas).
	Incarnations bool
	NoCheck      bool
	// NoInvariants skips the step checks (to show the history check
	// alone catches a broken variant).
	NoInvariants bool
	Trace        io.Writer
}

// ShardsStats counts what happened in a sharded run.
type ShardsStats struct {
	Events, Steps, Msgs, Dropped, Fsyncs      int
	Crashes, PowerLosses, Partitions, Windows int
	Pauses, Reorders                          int
	DriverDeaths, Migrations, Flips, Epoch    int
	Splits, Merges                            int // Plan decide: started by Decide's decisions
	// Membership (shards_members.go): machines down for long (the dead
	// fault), replacements and replica moves done, leadership transfers
	// answered, configurations the groups went through, change drivers
	// that died.
	Dead, Replaced, Balanced, LeaderMoves, Confs, ChangeDeaths int
	// The replicated placement namespace (shards_placegroup.go):
	// placement leaders started, of which after a deposed one
	// (failovers), migrations and replacements a new one resumed, and
	// calls answered through the placement log.
	PlaceLeaders, PlaceFailovers, PlaceResumed, PlaceWrites int
	PlaceReplaced                                           int // replacements of #placement's own members (of Replaced)
	MembersRefused                                          int // members writes refused by their version guard (a stale view)
	Created                                                 int // groups created by splits (NewGroups)
	Reused                                                  int // splits into a group a split created, emptied since (a spare: nothing created)
	Retired, Incarnated, StaleBooted                        int // created groups retired; created again at incarnation > 0; old replicas booted after a retirement (shards_inc.go)
	Txns, TxnEarly, TxnRetries                              int // cross-shard transaction attempts, answered before their last step, retries
	TxnEvaluated                                            int // writing ones answered at the decision from their prepares' evaluation
	TxnCoordDeaths, TxnResolved                             int
	Moved, Asked, TryAgain, Forwarded, Retries              int
	Completed, Unknown                                      int
}

func (s ShardsStats) String() string {
	return fmt.Sprintf("events=%d steps=%d msgs=%d dropped=%d fsyncs=%d crashes=%d power=%d partitions=%d pauses=%d windows=%d reorder-windows=%d driver-deaths=%d migrations=%d flips=%d epoch=%d moved=%d ask=%d tryagain=%d forwarded=%d retries=%d completed=%d unknown=%d dead=%d replaced=%d balanced=%d leader-moves=%d confs=%d change-deaths=%d place-leaders=%d place-failovers=%d place-resumed=%d place-writes=%d place-replaced=%d members-refused=%d created=%d reused=%d retired=%d incarnated=%d stale-booted=%d",
		s.Events, s.Steps, s.Msgs, s.Dropped, s.Fsyncs, s.Crashes, s.PowerLosses, s.Partitions, s.Pauses, s.Windows, s.Reorders, s.DriverDeaths, s.Migrations, s.Flips, s.Epoch, s.Moved, s.Asked, s.TryAgain, s.Forwarded, s.Retries, s.Completed, s.Unknown, s.Dead, s.Replaced, s.Balanced, s.LeaderMoves, s.Confs, s.ChangeDeaths, s.PlaceLeaders, s.PlaceFailovers, s.PlaceResumed, s.PlaceWrites, s.PlaceReplaced, s.MembersRefused, s.Created, s.Reused, s.Retired, s.Incarnated, s.StaleBooted)
}

// ShardsResult is the outcome of a sharded run.
type ShardsResult struct {
	Seed      int64
	Stats     ShardsStats
	Invariant string // the first invariant violation, "" if none
	Check     string // the history check's verdict (check.Ok, Illegal, Unknown), "" if skipped
	Detail    string // the checker's explanation when not Ok
	Ops       int    // operations in the history
	// Throughput: operations completed per virtual second after Warmup;
	// Util: each machine's processor busy fraction over the same span.
	Throughput float64
	Util       []float64
	Elapsed    time.Duration // virtual time of the measured span
	Decisions  string        // Plan decide: Decide's decisions by kind, and how many were carried out
	// The bank's history (TxnClients) and its strict-serializability
	// verdict ("" if none or skipped).
	TxnOps              int
	TxnCheck, TxnDetail string
	// Every completed client operation: when it was answered and how
	// long it took; and each migration's start and end (-1: not ended).
	Done     []OpDone
	MigSpans [][2]time.Duration
	StopAt   time.Duration // when the last operation was issued
}

// OpDone is one completed client operation.
type OpDone struct{ At, Latency time.Duration }

// Failed reports whether the run found a violation.
func (r *ShardsResult) Failed() bool {
	return r.Invariant != "" || (r.Check != "" && r.Check != check.Ok) || r.TxnCheck == check.Illegal
}

// DefaultPlaceReplicas is the placement namespace's replica count when
// ShardsConfig.PlaceReplicas is 0 and the plan is "decide" (session 44: the
// replicated placement namespace is the default, as on a live cluster).
const DefaultPlaceReplicas = 3

// ShardsReplay is the command that replays seed of cfg.
func ShardsReplay(cfg ShardsConfig, seed int64) string {
	c := fmt.Sprintf("synod-lab shardsim --seeds %d --shards %d --spares %d --machines %d --clients %d --ops %d --faults %s --migrations %d --plan %s --keys %d",
		seed, cfg.Shards, cfg.Spares, cfg.Machines, cfg.Clients, cfg.Ops, orNone(cfg.Faults), cfg.Migrations, orDefault(cfg.Plan, "decide"), cfg.Keys)
	if cfg.Hot > 0 {
		c += fmt.Sprintf(" --hot %g", cfg.Hot)
		if cfg.HotKeys > 0 {
			c += fmt.Sprintf(" --hot-keys %d", cfg.HotKeys)
		}
		if cfg.HotPhase > 0 {
			c += fmt.Sprintf(" --hot-phase %v", cfg.HotPhase)
		}
	}
	if cfg.Place != (shard.PlaceParams{}) {
		p := cfg.Place
		c += fmt.Sprintf(" --place split_ops=%g,merge_ops=%g,split_keys=%d,merge_keys=%d,merge_delay=%g,cooldown=%g,dead_after=%g", p.SplitOps, p.MergeOps, p.SplitKeys, p.MergeKeys, p.MergeDelay, p.Cooldown, p.DeadAfter)
		if p.BalanceOps > 0 {
			c += fmt.Sprintf(",balance_ops=%g,balance_margin=%g", p.BalanceOps, p.BalanceMargin)
		}
	}
	if cfg.PlaceReplicas != 0 {
		c += fmt.Sprintf(" --place-replicas %d", cfg.PlaceReplicas)
	}
	if cfg.NewGroups > 0 {
		c += fmt.Sprintf(" --new-groups %d", cfg.NewGroups)
	}
	if cfg.CutByLoad {
		c += " --cut-by-load"
	}
	if cfg.Incarnations {
		c += " --incarnations"
	}
	if cfg.TxnClients > 0 {
		c += fmt.Sprintf(" --txn-clients %d", cfg.TxnClients)
	}
	if cfg.Protocol != "" && cfg.Protocol != "paxos" {
		c += " --protocol " + cfg.Protocol
	}
	if cfg.PlainFrac > 0 {
		c += fmt.Sprintf(" --plain %g", cfg.PlainFrac)
	}
	if cfg.NoInvariants {
		c += " --no-invariants"
	}
	for _, f := range []struct{ name, v string }{{"latency", cfg.Latency}, {"think", cfg.Think}, {"op-cost", cfg.OpCost}, {"msg-cost", cfg.MsgCost}, {"apply-cost", cfg.ApplyCost}, {"fwd-cost", cfg.FwdCost}} {
		if f.v != "" {
			c += " --" + f.name + " " + f.v
		}
	}
	if cfg.Broken != "" {
		c += " --broken " + cfg.Broken
	}
	return c
}

func orNone(s string) string {
	if s == "" {
		return "none"
	}
	return s
}

// ShardFaultKinds are the sharded world's fault kinds: the one-group
// simulator's (FaultKinds) and power, parsed by the same ParseFaultKinds.
var ShardFaultKinds = append(append([]string(nil), FaultKinds...), "power", "dead")

// ---- the world ----

type shEvKind uint8

const (
	shPeer shEvKind = iota
	shClientReq
	shForward
	shClientResp
	shTimer
	shFsync
	shCPUDone
	shClientNext
	shClientTimeout
	shClientResend
	shDriverEv
	shDriverTimeout
	shNemesis
	shRestart
	shHeal
	shWindowEnd
	shResume
	shDrainEnd
	shStartMigration
	shPlaceTick
	shPlaceAnswer
	shTxNext
	shTxRetry
	shCallTimeout
	shCallResp
	shResolve
	shChangeEv
	shChangeTimeout
	shChangeResume
	shPlaceCallTimeout
	shPlaceCallAnswer
	shRetireStale // shards_inc.go
)

type shEvent struct {
	at   time.Duration
	seq  uint64
	kind shEvKind

	mach, from, group int
	inc               uint64
	ginc              uint64 // shPeer, shTimer: the sending (setting) replica's group incarnation (shards_inc.go)
	msg               []byte
	timer             automaton.TimerID
	gen               uint64
	client            int
	attempt           int
	req               automaton.Request
	resp              automaton.Response
	upto              []uint64     // shFsync: per replica of the machine
	reps              []*shReplica // shFsync: the replicas upto names
	fwd               int          // the forwarding machine (-1: none)
	cseq              uint64       // a placement call's sequence number
	arrived           bool         // reached its machine and was queued there (busy or paused): no partition check again
}

type shQueue []*shEvent

func (q shQueue) Len() int { return len(q) }
func (q shQueue) Less(i, j int) bool {
	if q[i].at != q[j].at {
		return q[i].at < q[j].at
	}
	return q[i].seq < q[j].seq
}
func (q shQueue) Swap(i, j int) { q[i], q[j] = q[j], q[i] }
func (q *shQueue) Push(x any)   { *q = append(*q, x.(*shEvent)) }
func (q *shQueue) Pop() any {
	old := *q
	e := old[len(old)-1]
	old[len(old)-1] = nil
	*q = old[:len(old)-1]
	return e
}

type shMachine struct {
	idx      int
	id       automaton.NodeID
	up       bool
	inc      uint64
	reps     []*shReplica
	busy     bool
	q        []*shEvent
	running  *shReplica
	outs     []automaton.Output
	busyTime time.Duration
	fsyncing bool
	downAt   time.Duration // when it last went down
	slow     float64       // fsync time ×slow (a slow disk window)
	spike    time.Duration // extra latency of every message from or to it (a spike window)
	side     int           // partition side (0: with the majority)
	// A paused process (the pause fault) runs nothing: the inputs that
	// reach it wait in pausedQ, a step it was running finishes on resume
	// (cpuHeld), and its disk still finishes fsyncs (what they release
	// leaves on resume), as in the one-group simulator.
	paused  bool
	pausedQ []*shEvent
	cpuHeld bool
	// powered: down by the power fault (the majority invariant waits
	// until every such machine is back); deadUntil: down by the dead
	// fault until then.
	powered   bool
	deadUntil time.Duration
}

type shGroup struct {
	idx  int
	name string
	// ids and reps: the replicas the group's machines host (its members,
	// and a joining node's replica; a removed member's replica goes when
	// its removal is done), in the same order.
	ids   []automaton.NodeID
	reps  []*shReplica
	hint  int // the replica that answered last (an index of reps; -1: none)
	broke bool
	// Membership (shards_members.go): boot is the bootstrap configuration
	// (the paxos parameter members of a replica added later); members the
	// members record (the placement namespace's mem/<ns>: the intended
	// members), joining and leaving a replacement under way, former the
	// nodes replaced out of it; chain the configurations the group's
	// replicas have reported, in order (the one-chain invariant).
	boot             []automaton.NodeID
	place            bool               // #placement (shards_placegroup.go), not a data group
	born             bool               // a NewGroups name: created by a split, owning nothing at its birth
	ever             []automaton.NodeID // every node that hosted a replica of it
	members          []automaton.NodeID
	joining, leaving automaton.NodeID
	former           []string
	chain            [][]automaton.NodeID
	incarn           uint64 // its incarnation (shards_inc.go)
}

type shReplica struct {
	w        *shWorld
	g        *shGroup
	m        *shMachine
	a        automaton.Automaton
	rel      *release.Interp
	durable  map[string][]byte
	buf      []bufRec
	timers   map[automaton.TimerID]uint64
	timerGen uint64
	applies  int
	// taken: the slots this replica's log has taken away from its group,
	// with the state that did (the invariant's memory); clientWrite: the
	// group being applied is a client's (its guards' mode says so).
	taken       map[int]string
	clientWrite bool
	// fresh: the broken member-bootstrap variant's bootstrap members;
	// confAt: the index in its group's chain of the configuration it
	// reported last.
	fresh  []automaton.NodeID
	confAt int
	// incarn is the group incarnation the replica belongs to; stale: a
	// replica of an earlier one, on a machine that was down when the
	// group was retired, booted from staleNodes/staleParams until it
	// retires it (shards_inc.go).
	incarn      uint64
	stale       bool
	staleNodes  []automaton.NodeID
	staleParams map[string]string
}

type shWorld struct {
	cfg    ShardsConfig
	proto  automaton.Protocol
	kv     service.Service
	faults map[string]bool // ParseFaultKinds over ShardFaultKinds

	now time.Duration
	seq uint64
	q   shQueue

	machines []*shMachine
	groups   []*shGroup
	place    shard.Placement // the placement namespace's slot map
	placeMap *shard.Map      // place, built

	rngNet, rngDisk, rngClient, rngFault, rngNode, rngCPU, rngDrv *rand.Rand

	lat, clientLat, fsyncLat, think     Dist
	opCost, msgCost, applyCost, fwdCost Dist
	hasOp, hasMsg, hasApply, hasFwd     bool
	cpuOn                               bool
	loss, dup, reorder                  float64 // open windows' probabilities
	reorderDelay                        Dist
	winGen                              [winKinds]uint64 // a window's end closes only its own window

	clients []*shClient
	byID    map[uint64]*shClient
	drv     *shDriver
	placer  *shPlacer
	pg      *shPlaceGroup // the replicated placement namespace (nil: registers)
	chg     *shChange     // the membership change under way (shards_members.go)
	chgGen  uint64
	rngChg  *rand.Rand
	// Cross-shard transactions (shards_txn.go).
	calls    map[uint64]*shCall
	txc      []*shTxClient
	accts    []string
	bank     []history.Op
	seenTx   map[string]time.Duration
	busyTx   map[string]bool
	migSpans [][2]time.Duration
	stopAt   time.Duration
	done     []OpDone
	mig      shMig
	migsLeft int
	migTurn  int

	issued, busyClients int
	stopping, finished  bool
	powerUsed           int

	rec      *history.Recorder
	stats    ShardsStats
	inv, err string

	// Measurement (after Warmup).
	measured  int
	busyAtW   []time.Duration
	warmedUp  bool
	lastReply time.Duration
}
