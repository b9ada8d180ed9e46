package bench

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"strconv"
)

// Per-process counters read from Linux's /proc, for the per-node cost
// tables of `synod-lab costs` (issue 18: CPU, allocations and syscalls per
// operation on each node, the driver and redis-server).

// ClockTicks is Linux's USER_HZ, the unit of utime and stime in
// /proc/<pid>/stat: 100 on every architecture Go supports on Linux (the
// kernel converts to it whatever its internal HZ; sysconf(_SC_CLK_TCK)).
const ClockTicks = 100

// ProcCPU is a process's user and system CPU from /proc/<pid>/stat, in
// seconds (what the Prometheus process collector exports as
// process_cpu_seconds_total).
func ProcCPU(pid int) (float64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	u, s, err := parseProcStat(b)
	if err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return float64(u+s) / ClockTicks, nil
}

// parseProcStat returns utime and stime (fields 14 and 15, in clock ticks)
// of a /proc/<pid>/stat line. The command name (field 2) is in parentheses
// and may hold spaces and parentheses itself, so fields are counted from
// the last ')'.
func parseProcStat(b []byte) (utime, stime uint64, err error) {
	i := bytes.LastIndexByte(b, ')')
	if i < 0 {
		return 0, 0, fmt.Errorf("no command name in %q", b)
	}
	f := bytes.Fields(b[i+1:])
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, 0, fmt.Errorf("%d fields after the command name, want at least 13", len(f))
	}
	if utime, err = strconv.ParseUint(string(f[11]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("utime: %w", err)
	}
	if stime, err = strconv.ParseUint(string(f[12]), 10, 64); err != nil {
		return 0, 0, fmt.Errorf("stime: %w", err)
	}
	return utime, stime, nil
}

// ProcIO is a process's read and write system call counts from
// /proc/<pid>/io (syscr: read, readv, pread, recvfrom...; syscw: write,
// writev, pwrite, sendto...; fdatasync is in neither).
func ProcIO(pid int) (syscr, syscw uint64, err error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid))
	if err != nil {
		return 0, 0, err
	}
	syscr, syscw, err = parseProcIO(b)
	if err != nil {
		return 0, 0, fmt.Errorf("/proc/%d/io: %w", pid, err)
	}
	return syscr, syscw, nil
}

// parseProcIO reads the syscr and syscw lines of /proc/<pid>/io.
func parseProcIO(b []byte) (syscr, syscw uint64, err error) {
	var seen int
	for _, line := range bytes.Split(b, []byte{'\n'}) {
		k, v, ok := bytes.Cut(line, []byte{':'})
		if !ok {
			continue
		}
		var dst *uint64
		switch string(k) {
		case "syscr":
			dst = &syscr
		case "syscw":
			dst = &syscw
		default:
			continue
		}
		n, err := strconv.ParseUint(string(bytes.TrimSpace(v)), 10, 64)
		if err != nil {
			return 0, 0, fmt.Errorf("%s: %w", k, err)
		}
		*dst = n
		seen++
	}
	if seen != 2 {
		return 0, 0, fmt.Errorf("no syscr and syscw lines in %q", b)
	}
	return syscr, syscw, nil
}

// ReadProc samples a process's CPU and system call counters. Mallocs and
// the Synod counters are left for the caller (they come from the node's
// /metrics, or SelfMallocs for this process).
func ReadProc(pid int) (ProcCounters, error) {
	cpu, err := ProcCPU(pid)
	if err != nil {
		return ProcCounters{}, err
	}
	r, w, err := ProcIO(pid)
	if err != nil {
		return ProcCounters{}, err
	}
	return ProcCounters{CPUSeconds: cpu, Syscr: float64(r), Syscw: float64(w)}, nil
}

// SelfMallocs is this process's cumulative heap allocations (objects), what
// a node exports as go_memstats_mallocs_total.
func SelfMallocs() float64 {
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return float64(ms.Mallocs)
}
