package daemon

import (
	"math"
	"runtime/debug"
	"testing"
)

func TestTuneGC(t *testing.T) {
	defer debug.SetGCPercent(debug.SetGCPercent(-1))
	defer debug.SetMemoryLimit(debug.SetMemoryLimit(-1))

	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	if p, l := TuneGC(400, 1<<30); p != 400 || l != 1<<30 {
		t.Fatalf("TuneGC(400, 1 GiB) = %d, %d; want 400, %d", p, l, 1<<30)
	}

	// The environment wins: what it set is left alone.
	t.Setenv("GOGC", "150")
	t.Setenv("GOMEMLIMIT", "64MiB")
	debug.SetGCPercent(150)
	debug.SetMemoryLimit(64 << 20)
	if p, l := TuneGC(400, 1<<30); p != 150 || l != 64<<20 {
		t.Fatalf("with GOGC and GOMEMLIMIT set: TuneGC = %d, %d; want 150, %d", p, l, 64<<20)
	}

	// 0 leaves Go's setting.
	t.Setenv("GOGC", "")
	t.Setenv("GOMEMLIMIT", "")
	debug.SetGCPercent(100)
	debug.SetMemoryLimit(math.MaxInt64)
	if p, l := TuneGC(0, 0); p != 100 || l != math.MaxInt64 {
		t.Fatalf("TuneGC(0, 0) = %d, %d; want Go's 100, no limit", p, l)
	}
}

func TestMemoryLimitIsAQuarterOfTheMachine(t *testing.T) {
	l := MemoryLimit()
	if l == 0 {
		t.Skip("no /proc/meminfo MemTotal here")
	}
	if l < 16<<20 || l > 1<<50 {
		t.Fatalf("MemoryLimit() = %d bytes: not a quarter of a machine's memory", l)
	}
}
