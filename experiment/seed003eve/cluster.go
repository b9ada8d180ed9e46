package seed003eve

import (
	"context"
	"fmt"
	"os/exec"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/automaton/cpuwork"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	"github.com/synod-dev/synod/protocol/eve"
)

// Live cluster cells of seed003-eve-speedup (issue 30 item 4: "the Eve
// speedup on a live cluster with cores set from the cluster file and real
// CPU work"). Three synod node processes on loopback serve an eve
// namespace, durability memory; the cluster file sets cores, exec_cost and
// work_per_ms (this process's cpuwork calibration, so every node does the
// same CPU work per request). Layouts:
//
//   - exec1: verifiers=2, so one node executes and two verify; that
//     node's execution is the only CPU-heavy work, and cores=2 can use
//     both of the machine's CPUs.
//   - colocated: every node executes every batch (verifiers=0): three
//     executions of each request share the machine's two CPUs.
//
// The nodes are pinned to 1 or 2 CPUs (taskset -a -p on every thread of
// each node process after it started), so cores=2 on one CPU shows what a
// wall-clock busy loop hid: no speedup. Closed-loop clients (64, batches of
// 64) send SETs for the cell's duration. The machine has 2 CPUs, so the
// speedup of cores=C over cores=1 is bounded by min(C, CPUs) = 2, and a
// cell's throughput by CPUs / (E · exec_cost) for E executing replicas
// (printed beside it: bound, and the share of it reached).

const (
	clusterDuration, clusterQuick = 4 * time.Second, 2 * time.Second
	mBound                        = "bound"
	mUtil                         = "util_pct"
	mCPUms                        = "cpu_ms_per_req"
)

func (e *Eve) clusterCell(ctx context.Context, env *experiment.Env, c experiment.Cell, out experiment.Outcome) (experiment.Outcome, error) {
	cost, _ := time.ParseDuration(c.Get("cost"))
	cpus, _ := strconv.Atoi(c.Get("cpus"))
	verifiers, execs := "2", 1
	if c.Get("layout") == "colocated" {
		verifiers, execs = "0", 3
	}
	rate := cpuwork.Calibrate()
	tick := max(100*time.Millisecond, 3*time.Duration(e.Batch)*cost)
	cl, err := env.Up("eve-"+strings.NewReplacer("=", "", ",", "-").Replace(c.Key), cluster.UpOptions{
		Nodes: 3, Protocol: eve.Name, Service: "kv", Durability: "memory",
		Params: map[string]string{"cores": c.Get("cores"), "exec_cost": cost.String(), "work_per_ms": strconv.Itoa(int(rate)),
			"verifiers": verifiers, "batch_max": strconv.Itoa(e.Batch), "timeout": tick.String()},
	})
	if err != nil {
		return out, err
	}
	defer env.Down(cl)
	list := "0"
	for i := 1; i < cpus; i++ {
		list += "," + strconv.Itoa(i)
	}
	var pids []int
	for _, n := range cl.Nodes {
		if b, err := exec.CommandContext(ctx, "taskset", "-a", "-p", "-c", list, strconv.Itoa(n.PID)).CombinedOutput(); err != nil {
			return out, fmt.Errorf("taskset %s on %s: %v: %s", list, n.ID, err, b)
		}
		pids = append(pids, n.PID)
	}
	load := bench.DefaultConfig()
	load.Addrs = nil
	for _, n := range cl.Nodes {
		load.Addrs = append(load.Addrs, n.Client)
	}
	load.Clients = e.Clients
	load.ReadRatio = 0
	load.Keys = 100000
	load.Duration = env.CellDuration(clusterDuration, clusterQuick)
	load.OpTimeout = 30 * time.Second
	load.DurabilityLabel = "memory"
	cpu0 := procCPU(pids)
	rep, err := bench.Run(ctx, load, nil)
	if err != nil {
		return out, err
	}
	if rep.All.Count == 0 {
		return out, fmt.Errorf("no SET answered: %v", rep.ErrorSamples)
	}
	used := procCPU(pids) - cpu0
	out.Metrics[mTput] = rep.All.Throughput
	bound := float64(cpus) / (float64(execs) * cost.Seconds())
	out.Metrics[mBound] = bound
	out.Metrics[mUtil] = 100 * rep.All.Throughput / bound
	if rep.All.Count > 0 && used > 0 {
		out.Metrics[mCPUms] = float64(used) / float64(time.Millisecond) / float64(rep.All.Count)
	}
	out.Labels["mode"] = fmt.Sprintf("cluster: %d executing, nodes on %d CPU(s)", execs, cpus)
	if rep.All.Errors > 0 {
		out.Labels["errors"] = fmt.Sprintf("%d errors, e.g. %v", rep.All.Errors, rep.ErrorSamples)
	}
	return out, nil
}

// procCPU is the CPU time the processes used so far (bench.ProcCPU; 0 for
// one that cannot be read).
func procCPU(pids []int) time.Duration {
	var sum float64
	for _, p := range pids {
		if v, err := bench.ProcCPU(p); err == nil {
			sum += v
		}
	}
	return time.Duration(sum * float64(time.Second))
}
