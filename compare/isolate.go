package compare

import (
	"context"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// procControls returns the Pause, Resume and PIDs of a system whose
// processes ps the group started: SIGSTOP and SIGCONT go only to the ones
// not yet reaped (their PIDs cannot have been reused).
func procControls(ps []*proc) (pause, resume func() error, pids func() []int) {
	signal := func(sig syscall.Signal) error {
		var errs []error
		for _, p := range ps {
			if p.running() {
				if err := p.cmd.Process.Signal(sig); err != nil && !errors.Is(err, os.ErrProcessDone) {
					errs = append(errs, fmt.Errorf("%s (pid %d): %w", p.name, p.PID(), err))
				}
			}
		}
		return errors.Join(errs...)
	}
	pause = func() error { return signal(syscall.SIGSTOP) }
	resume = func() error { return signal(syscall.SIGCONT) }
	pids = func() []int {
		var out []int
		for _, p := range ps {
			if p.running() {
				out = append(out, p.PID())
			}
		}
		return out
	}
	return pause, resume, pids
}

// userHZ is the unit of utime and stime in /proc/PID/stat (USER_HZ, 100
// on every Linux architecture Go supports; it is part of the kernel's ABI).
const userHZ = 100

// cpuTicks returns the CPU time (user + system, every thread, in USER_HZ
// ticks) that the processes pids have used so far. A process that is gone
// counts nothing.
func cpuTicks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
		if err != nil {
			continue
		}
		if t, err := parseStatCPU(string(b)); err == nil {
			sum += t
		}
	}
	return sum
}

// parseStatCPU returns utime + stime from a /proc/PID/stat line. The
// command name (field 2) is in parentheses and may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat string) (int64, error) {
	i := strings.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("no command name in %q", stat)
	}
	f := strings.Fields(stat[i+1:])
	// f[0] is field 3 (state); utime and stime are fields 14 and 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short stat line %q", stat)
	}
	u, err1 := strconv.ParseInt(f[11], 10, 64)
	s, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, err
	}
	return u + s, nil
}

// cpuOver measures the cores inst's processes use during window (CPU
// seconds per second); nil when the instance names no processes or ctx
// ended first.
func cpuOver(ctx context.Context, inst *Instance, window time.Duration) *float64 {
	if inst.PIDs == nil || window <= 0 {
		return nil
	}
	pids := inst.PIDs()
	if len(pids) == 0 {
		return nil
	}
	t0, c0 := time.Now(), cpuTicks(pids)
	select {
	case <-ctx.Done():
		return nil
	case <-time.After(window):
	}
	c1 := cpuTicks(pids)
	cores := float64(c1-c0) / userHZ / time.Since(t0).Seconds()
	return &cores
}

// pauseOthers freezes every instance but keep (Isolation: the cells of
// one system run with the others paused) and waits until each of their
// processes is stopped (SIGSTOP takes effect when the process next runs).
func pauseOthers(insts []*Instance, keep *Instance) error {
	var errs []error
	for _, in := range insts {
		if in != keep && in.Pause != nil {
			errs = append(errs, in.Pause())
		}
	}
	for _, in := range insts {
		if in != keep && in.Pause != nil && in.PIDs != nil {
			errs = append(errs, waitStopped(in.PIDs(), 10*time.Second))
		}
	}
	return errors.Join(errs...)
}

// waitStopped waits until every process of pids is stopped (state T in
// /proc/PID/stat) or gone.
func waitStopped(pids []int, timeout time.Duration) error {
	deadline := time.Now().Add(timeout)
	for _, pid := range pids {
		for {
			st, err := procState(pid)
			if err != nil || st == 'T' || st == 't' || st == 'Z' || st == 'X' {
				break
			}
			if time.Now().After(deadline) {
				return fmt.Errorf("pid %d not stopped %v after SIGSTOP (state %c)", pid, timeout, st)
			}
			time.Sleep(time.Millisecond)
		}
	}
	return nil
}

// procState returns the state letter of /proc/PID/stat (R, S, D, T...).
func procState(pid int) (byte, error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, err
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 || i+2 >= len(s) {
		return 0, fmt.Errorf("pid %d: no state in %q", pid, s)
	}
	return s[i+2], nil
}

// resumeTurn lets inst run again and waits until it answers a read on every
// member: a system frozen for minutes may need a moment (a follower whose
// socket timeout ran out during the pause rejoins its leader).
func resumeTurn(ctx context.Context, inst *Instance, o Options) error {
	if inst.Resume == nil {
		return nil
	}
	if err := inst.Resume(); err != nil {
		return err
	}
	return waitReady(ctx, "resumed system", o.ReadyTimeout, nil, func(ctx context.Context) error {
		return probe(ctx, inst.NewTarget, inst.Addrs)
	})
}

// resumeAll lets every paused instance run again (before stopping them: a
// stopped process does not act on SIGTERM until continued).
func resumeAll(insts []*Instance) {
	for _, in := range insts {
		if in.Resume != nil {
			in.Resume()
		}
	}
}
