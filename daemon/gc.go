package daemon

import (
	"os"
	"runtime/debug"
	"strconv"
	"strings"
)

// The garbage collector's settings of a node process (README "Garbage
// collection"). Go's defaults (GOGC=100, no memory limit) collect each time
// the heap doubles over what the last collection left live; a node's live
// heap is small (registers, caches, buffers) and its garbage is per
// request, so under load it collected every 1,400-2,900 ABD operations and
// spent 8-18 % of an ABD node's CPU, up to half of an ESDS node's with
// fsync, in the collector (docs/costs/s52-abd.md: the nodes' gctrace lines
// at GOGC 100, 200 and 400). NodeGCPercent collects a fifth as often;
// MemoryLimit bounds what that lets the heap grow to: near the limit the
// runtime collects as often as it needs to stay under it (a soft limit: a
// live heap above it is kept, at the cost of more collections).
const NodeGCPercent = 400

// MemoryLimit is a node's default soft memory limit: a quarter of the
// machine's memory (/proc/meminfo MemTotal), so three nodes sharing a
// machine stay under it, and a node's live heap must pass an eighth of
// the machine's memory before the limit makes it collect more often than
// GOGC=100 would; 0 (no limit) where MemTotal cannot be read.
func MemoryLimit() int64 {
	b, err := os.ReadFile("/proc/meminfo")
	if err != nil {
		return 0
	}
	for _, line := range strings.Split(string(b), "\n") {
		f := strings.Fields(line)
		if len(f) == 3 && f[0] == "MemTotal:" && f[2] == "kB" {
			kb, err := strconv.ParseInt(f[1], 10, 64)
			if err != nil || kb <= 0 {
				return 0
			}
			return kb * 1024 / 4
		}
	}
	return 0
}

// TuneGC sets the node process's GOGC to percent and its soft memory limit
// to limit bytes, each unless its environment variable (GOGC, GOMEMLIMIT)
// is set, which wins as it does for any Go program; percent or limit 0
// leaves Go's default. It returns the settings in effect.
func TuneGC(percent int, limit int64) (gcPercent int, memLimit int64) {
	if percent > 0 && os.Getenv("GOGC") == "" {
		debug.SetGCPercent(percent)
	}
	if limit > 0 && os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(limit)
	}
	gcPercent = debug.SetGCPercent(-1)
	debug.SetGCPercent(gcPercent)
	return gcPercent, debug.SetMemoryLimit(-1)
}
