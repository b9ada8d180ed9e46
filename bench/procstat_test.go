package bench

import (
	"os"
	"strings"
	"syscall"
	"testing"
)

// burn spends CPU in this process: 100M multiply-adds, several clock ticks
// on any machine (bounded by iterations, never by time).
func burn() uint64 {
	var x uint64 = 1
	for i := 0; i < 100_000_000; i++ {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

func TestProcCPUMatchesGetrusage(t *testing.T) {
	pid := os.Getpid()
	before, err := ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	sink := burn()
	after, err := ProcCPU(pid)
	if err != nil {
		t.Fatal(err)
	}
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	rusage := float64(ru.Utime.Sec+ru.Stime.Sec) + float64(ru.Utime.Usec+ru.Stime.Usec)/1e6
	if after <= before {
		t.Fatalf("CPU did not advance over 100M multiply-adds: %v then %v (sink %d)", before, after, sink)
	}
	// /proc counts in 10 ms ticks, getrusage in microseconds: the two
	// agree within a few ticks (a unit or field mistake is off by far more).
	if d := rusage - after; d < -0.05 || d > 0.05 {
		t.Errorf("/proc/self/stat says %.3fs of CPU, getrusage %.3fs", after, rusage)
	}
}

func TestParseProcStatCommandWithSpacesAndParens(t *testing.T) {
	line := "4242 (we ird) (name)) S 1 2 3 0 -1 4194304 98 0 0 0 1234 567 0 0 20 0 1 0 3558359 3133440 382\n"
	u, s, err := parseProcStat([]byte(line))
	if err != nil {
		t.Fatal(err)
	}
	if u != 1234 || s != 567 {
		t.Errorf("utime, stime = %d, %d; want 1234, 567", u, s)
	}
	for _, bad := range []string{"4242 no parens S 1", "4242 (x) S 1 2 3", "4242 (x) S 1 2 3 0 -1 4 98 0 0 0 u 567 0"} {
		if _, _, err := parseProcStat([]byte(bad)); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestProcIOCountsReads(t *testing.T) {
	f, err := os.Open("/dev/zero")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	pid := os.Getpid()
	r0, w0, err := ProcIO(pid)
	if err != nil {
		t.Fatal(err)
	}
	const n = 1000
	buf := make([]byte, 8)
	for i := 0; i < n; i++ {
		if _, err := syscall.Read(int(f.Fd()), buf); err != nil {
			t.Fatal(err)
		}
	}
	r1, w1, err := ProcIO(pid)
	if err != nil {
		t.Fatal(err)
	}
	// Other goroutines of the test binary may add a few reads, never
	// remove any; reading /proc/self/io itself is one or two.
	if r1-r0 < n || r1-r0 > n+50 {
		t.Errorf("syscr advanced by %d over %d reads", r1-r0, n)
	}
	if w1 < w0 {
		t.Errorf("syscw went back: %d then %d", w0, w1)
	}
}

func TestParseProcIO(t *testing.T) {
	text := "rchar: 6976\nwchar: 0\nsyscr: 10\nsyscw: 3\nread_bytes: 0\nwrite_bytes: 0\ncancelled_write_bytes: 0\n"
	r, w, err := parseProcIO([]byte(text))
	if err != nil || r != 10 || w != 3 {
		t.Errorf("parseProcIO = %d, %d, %v; want 10, 3, nil", r, w, err)
	}
	if _, _, err := parseProcIO([]byte(strings.Replace(text, "syscw: 3\n", "", 1))); err == nil {
		t.Error("missing syscw accepted")
	}
	if _, _, err := parseProcIO([]byte(strings.Replace(text, "syscr: 10", "syscr: x", 1))); err == nil {
		t.Error("bad syscr accepted")
	}
}

var allocSink []*[64]byte // escapes: every new below is a heap allocation

func TestReadProcAndSelfMallocs(t *testing.T) {
	p, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if p.Syscr == 0 {
		t.Errorf("no read syscalls counted for the test process: %+v", p)
	}
	m0 := SelfMallocs()
	for i := 0; i < 1000; i++ {
		allocSink = append(allocSink, new([64]byte))
	}
	if d := SelfMallocs() - m0; d < 1000 {
		t.Errorf("1000 heap allocations counted as %v", d)
	}
	allocSink = nil
	if _, err := ReadProc(1 << 30); err == nil {
		t.Error("a PID that cannot exist was read")
	}
}
