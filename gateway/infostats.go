package gateway

import (
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
)

// INFO's standard sections beside Synod's (issue 34): CPU (the process's
// rusage, as Redis reports it), Memory (the Go heap: used_memory is the
// bytes of live objects, used_memory_rss the memory obtained from the
// system), Replication (role master: a Synod node is no Redis replica, its
// replication is the namespaces' protocols, shown in the Synod section),
// Cluster (cluster_enabled:0: no Redis Cluster protocol) and Commandstats
// (calls, time, rejected and failed calls per command; as in Redis only in
// INFO all, everything or commandstats).

// cmdStats counts each command's calls.
type cmdStats struct {
	m sync.Map // name -> *cmdStat
}

type cmdStat struct {
	calls, usec, rejected, failed atomic.Int64
}

func (cs *cmdStats) of(name string) *cmdStat {
	if v, ok := cs.m.Load(name); ok {
		return v.(*cmdStat)
	}
	v, _ := cs.m.LoadOrStore(name, &cmdStat{})
	return v.(*cmdStat)
}

// called records a call of name that ran for d; failed: it answered an
// error (Redis's failed_calls).
func (cs *cmdStats) called(name string, d time.Duration, failed bool) {
	st := cs.of(name)
	st.calls.Add(1)
	st.usec.Add(d.Microseconds())
	if failed {
		st.failed.Add(1)
	}
}

// resetStats is CONFIG RESETSTAT: this node's command statistics, error
// counts (INFO's view; the node's metrics keep counting) and commands and
// connections received count from now, as a Redis server's do. Each node
// keeps its own, as each Redis server does.
func (s *Server) resetStats() {
	s.cmds.m.Clear()
	s.errs.reset()
	s.statBase.commands.Store(s.totalCommands.Load())
	s.statBase.conns.Store(s.totalConns.Load())
	s.statBase.rejected.Store(s.rejected.Load())
}

// rejected records a call of name refused before it ran (arity, auth).
func (cs *cmdStats) rejected(name string) { cs.of(name).rejected.Add(1) }

func (cs *cmdStats) info() map[string]string {
	out := map[string]string{}
	cs.m.Range(func(k, v any) bool {
		st := v.(*cmdStat)
		calls, usec := st.calls.Load(), st.usec.Load()
		per := 0.0
		if calls > 0 {
			per = float64(usec) / float64(calls)
		}
		out["cmdstat_"+k.(string)] = fmt.Sprintf("calls=%d,usec=%d,usec_per_call=%.2f,rejected_calls=%d,failed_calls=%d",
			calls, usec, per, st.rejected.Load(), st.failed.Load())
		return true
	})
	return out
}

// standardSections are CPU, Memory, Replication and Cluster.
func standardSections() []infoSection {
	var ru, ruc syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	_ = syscall.Getrusage(syscall.RUSAGE_CHILDREN, &ruc)
	sec := func(t syscall.Timeval) string {
		return strconv.FormatFloat(float64(t.Sec)+float64(t.Usec)/1e6, 'f', 6, 64)
	}
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return []infoSection{
		{"CPU", map[string]string{
			"used_cpu_sys":           sec(ru.Stime),
			"used_cpu_user":          sec(ru.Utime),
			"used_cpu_sys_children":  sec(ruc.Stime),
			"used_cpu_user_children": sec(ruc.Utime),
		}},
		{"Memory", map[string]string{
			"used_memory":       strconv.FormatUint(ms.HeapAlloc, 10),
			"used_memory_human": humanBytes(ms.HeapAlloc),
			"used_memory_rss":   strconv.FormatUint(ms.Sys, 10),
			"used_memory_peak":  strconv.FormatUint(ms.HeapSys, 10),
			"maxmemory":         "0",
			"maxmemory_policy":  "noeviction",
			"mem_allocator":     "go-" + runtime.Version(),
		}},
		{"Replication", map[string]string{
			"role":               "master",
			"connected_slaves":   "0",
			"master_repl_offset": "0",
		}},
		{"Cluster", map[string]string{
			"cluster_enabled": "0",
		}},
	}
}

func humanBytes(n uint64) string {
	units := []string{"B", "K", "M", "G", "T"}
	f := float64(n)
	i := 0
	for f >= 1024 && i < len(units)-1 {
		f /= 1024
		i++
	}
	return strconv.FormatFloat(f, 'f', 2, 64) + units[i]
}
