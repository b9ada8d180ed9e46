package sim

import (
	"fmt"
	"io"
	"math"
	"sort"
	"time"
)

// Throughput as shards grow, in the CPU model (issue 33's target; the
// decision and the figures are in docs/SHARDING.md, "Throughput as shards
// grow, in the simulator"). Every point is a sharded run with no faults
// and no migrations: Shards groups on Machines machines (0: three per
// shard), clientsPerShard closed-loop clients per shard that think for no
// time, opsPerShard operations per shard. Costs left empty take the
// defaults below, calibrated on the live profile of shard-scale (a leader
// spent about 41 µs and a follower about 12 µs of CPU per write).

// Scale defaults.
const (
	ScaleOpCost    = "constant:20us"
	ScaleMsgCost   = "constant:10us"
	ScaleApplyCost = "constant:2us"
	ScaleFwdCost   = "constant:15us"
	ScaleLatency   = "uniform:100us:300us"
	ScaleKeys      = 4096
	ScaleWarmup    = time.Second
)

// ScalePoint is one shard count's figures over the seeds.
type ScalePoint struct {
	Shards, Machines, Clients int
	Throughput                []float64 // ops/s per seed
	UtilMean, UtilMax         []float64 // per seed: mean and busiest machine's CPU
	MsgsPerOp, FwdPerOp       []float64
}

// scaleDefaults fills the CPU model's costs, latency, no think time, the
// key count and the warm-up where base leaves them unset (ShardScale and
// MigrationLoad).
func scaleDefaults(base ShardsConfig) ShardsConfig {
	def := func(p *string, v string) {
		if *p == "" {
			*p = v
		}
	}
	def(&base.OpCost, ScaleOpCost)
	def(&base.MsgCost, ScaleMsgCost)
	def(&base.ApplyCost, ScaleApplyCost)
	def(&base.FwdCost, ScaleFwdCost)
	def(&base.Latency, ScaleLatency)
	def(&base.Think, "constant:0s")
	if base.Keys < ScaleKeys {
		base.Keys = ScaleKeys
	}
	base.Warmup = ScaleWarmup
	return base
}

// ShardScale runs the points and prints a table to out.
func ShardScale(base ShardsConfig, points []int, seeds []int64, clientsPerShard, opsPerShard int, out io.Writer) error {
	base = scaleDefaults(base)
	base.Faults, base.Migrations, base.Spares, base.NoCheck = "none", 0, 0, true
	base.PlaceReplicas = -1 // the placement records as registers: the figures measure the data groups
	fmt.Fprintf(out, "sharded throughput in the CPU model (virtual time: the host's load does not change it)\n")
	fmt.Fprintf(out, "costs: op %s, msg %s, apply %s, forward %s; latency %s, fsync %s; one processor and one disk per machine\n",
		base.OpCost, base.MsgCost, base.ApplyCost, base.FwdCost, base.Latency, orDefault(base.Fsync, DefaultFsync))
	fmt.Fprintf(out, "clients: %d per shard, closed loop, no think time, %.0f%% plain (forwarded by a machine without the group); %d ops per shard; seeds %v\n\n",
		clientsPerShard, 100*base.PlainFrac, opsPerShard, seeds)
	fmt.Fprintf(out, "%6s %8s %7s | %10s %9s %19s | %7s %10s | %8s %8s | %7s %7s\n",
		"shards", "machines", "clients", "ops/s", "±sd", "min-max", "speedup", "efficiency", "cpu-mean", "cpu-max", "msgs/op", "fwd/op")
	var first float64
	for _, n := range points {
		cfg := base
		cfg.Shards = n
		cfg.Clients = clientsPerShard * n
		cfg.Ops = opsPerShard * n
		p := ScalePoint{Shards: n, Clients: cfg.Clients}
		t0 := time.Now()
		for _, s := range seeds {
			cfg.Seed = s
			r, err := RunShards(cfg)
			if err != nil {
				return err
			}
			p.Machines = len(r.Util)
			if r.Throughput == 0 {
				return fmt.Errorf("shards %d seed %d: nothing measured (raise --ops-per-shard)", n, s)
			}
			p.Throughput = append(p.Throughput, r.Throughput)
			mean, mx := 0.0, 0.0
			for _, u := range r.Util {
				mean += u / float64(len(r.Util))
				mx = math.Max(mx, u)
			}
			p.UtilMean = append(p.UtilMean, mean)
			p.UtilMax = append(p.UtilMax, mx)
			p.MsgsPerOp = append(p.MsgsPerOp, float64(r.Stats.Msgs)/float64(r.Stats.Completed))
			p.FwdPerOp = append(p.FwdPerOp, float64(r.Stats.Forwarded)/float64(r.Stats.Completed))
		}
		m, sd := meanSD(p.Throughput)
		lo, hi := minMax(p.Throughput)
		if first == 0 {
			first = m / float64(n)
		}
		speed := m / first
		fmt.Fprintf(out, "%6d %8d %7d | %10.0f %9.0f %9.0f-%-9.0f | %7.2f %10.2f | %7.0f%% %7.0f%% | %7.2f %7.2f   (%.1fs)\n",
			n, p.Machines, p.Clients, m, sd, lo, hi, speed, speed/float64(n), 100*avg(p.UtilMean), 100*avg(p.UtilMax), avg(p.MsgsPerOp), avg(p.FwdPerOp), time.Since(t0).Seconds())
	}
	fmt.Fprintf(out, "\nspeedup: mean ops/s over the first point's per shard; efficiency: speedup / shards. cpu: processor busy time over the measured span, mean over machines and the busiest one, averaged over seeds.\n")
	return nil
}

func orDefault(s, d string) string {
	if s == "" {
		return d
	}
	return s
}

func avg(x []float64) float64 { m, _ := meanSD(x); return m }

func meanSD(x []float64) (float64, float64) {
	if len(x) == 0 {
		return 0, 0
	}
	m := 0.0
	for _, v := range x {
		m += v
	}
	m /= float64(len(x))
	if len(x) < 2 {
		return m, 0
	}
	ss := 0.0
	for _, v := range x {
		ss += (v - m) * (v - m)
	}
	return m, math.Sqrt(ss / float64(len(x)-1))
}

func minMax(x []float64) (float64, float64) {
	lo, hi := math.Inf(1), math.Inf(-1)
	for _, v := range x {
		lo, hi = math.Min(lo, v), math.Max(hi, v)
	}
	return lo, hi
}

func orDuration(d, def time.Duration) time.Duration {
	if d == 0 {
		return def
	}
	return d
}

// MigrationLoad measures throughput and latency before, during and after
// one split under a steady closed-loop load, in the CPU model (issue 33's
// target "migration of a shard under a steady load: its duration, the
// load's p99 during it"; docs/SHARDING.md). Each seed runs Shards groups
// and one spare on their own machines, clients closed-loop clients, and
// splits the upper half of the first group's slots into the spare at
// at (after the warm-up); the table prints each window's ops/s, p50 and
// p99 and the migration's virtual duration.
func MigrationLoad(base ShardsConfig, seeds []int64, clients, ops int, at time.Duration, out io.Writer) error {
	base = scaleDefaults(base)
	base.Faults, base.Migrations, base.Spares, base.NoCheck, base.Plan = "none", 1, 1, true, "rotation"
	base.Clients, base.Ops, base.MigrateAt = clients, ops, at
	fmt.Fprintf(out, "one split under load in the CPU model (virtual time: the host's load does not change it)\n")
	fmt.Fprintf(out, "costs: op %s, msg %s, apply %s, forward %s; latency %s, fsync %s; %d shards + 1 spare, one machine per replica\n",
		base.OpCost, base.MsgCost, base.ApplyCost, base.FwdCost, base.Latency, orDefault(base.Fsync, DefaultFsync), base.Shards)
	fmt.Fprintf(out, "clients: %d closed loop, no think time, %.0f%% plain; %d ops over %d keys; the split starts at %v; seeds %v\n\n",
		clients, 100*base.PlainFrac, ops, base.Keys, at, seeds)
	fmt.Fprintf(out, "%5s %10s | %9s %8s %8s | %9s %8s %8s | %9s %8s %8s | %s\n", "seed", "migration",
		"before/s", "p50", "p99", "during/s", "p50", "p99", "after/s", "p50", "p99", "during/before")
	for _, s := range seeds {
		cfg := base
		cfg.Seed = s
		r, err := RunShards(cfg)
		if err != nil {
			return err
		}
		if len(r.MigSpans) == 0 || r.MigSpans[0][1] < 0 {
			return fmt.Errorf("seed %d: the split did not end (raise --ops)", s)
		}
		start, end := r.MigSpans[0][0], r.MigSpans[0][1]
		last := r.StopAt // the load is steady until the last operation is issued
		if last <= end {
			return fmt.Errorf("seed %d: the load ended before the split did (raise --ops)", s)
		}
		win := func(lo, hi time.Duration) (float64, time.Duration, time.Duration) {
			var lats []time.Duration
			for _, d := range r.Done {
				if d.At >= lo && d.At < hi {
					lats = append(lats, d.Latency)
				}
			}
			if len(lats) == 0 || hi <= lo {
				return 0, 0, 0
			}
			sortDurations(lats)
			return float64(len(lats)) / (hi - lo).Seconds(), lats[len(lats)/2], lats[len(lats)*99/100]
		}
		b, b50, b99 := win(cfg.Warmup, start)
		d, d50, d99 := win(start, end)
		a, a50, a99 := win(end, last)
		fmt.Fprintf(out, "%5d %10v | %9.0f %8v %8v | %9.0f %8v %8v | %9.0f %8v %8v | %.2f\n", s, (end - start).Round(time.Millisecond),
			b, b50.Round(time.Microsecond), b99.Round(time.Microsecond), d, d50.Round(time.Microsecond), d99.Round(time.Microsecond),
			a, a50.Round(time.Microsecond), a99.Round(time.Microsecond), d/b)
	}
	fmt.Fprintf(out, "\nbefore: from the warm-up (%v) to the split's start; during: until its record is done; after: until the last operation is issued (then the clients run out). p50/p99: client latency of the operations answered in the window.\n", base.Warmup)
	return nil
}

func sortDurations(x []time.Duration) { sort.Slice(x, func(i, j int) bool { return x[i] < x[j] }) }
