package storage

import (
	"errors"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"golang.org/x/sys/unix"
)

// refuseRing makes io_uring_setup fail with errno for the rest of the test
// (as a seccomp profile or io_uring_disabled=2 would) and probes anew.
func refuseRing(t testing.TB, errno syscall.Errno) {
	t.Helper()
	setup := uringSetup
	uringSetup = func(uint32, *uringParams) (int, error) { return -1, errno }
	ringProbe = &ringProbeState{}
	t.Cleanup(func() {
		uringSetup = setup
		ringProbe = &ringProbeState{}
	})
}

// ringTurnedOn makes every sync use the ring for the rest of the test, as
// SYNOD_WAL_IOURING=1 does.
func ringTurnedOn(t testing.TB) { withRingMode(t, ringAll) }

func withRingMode(t testing.TB, mode int) {
	t.Helper()
	m := ringMode
	ringMode = mode
	t.Cleanup(func() { ringMode = m })
}

func TestRingModeOf(t *testing.T) {
	for v, want := range map[string]int{"": ringOff, "0": ringOff, "1": ringAll, "bulk": ringBulk, "yes": ringOff} {
		if got := ringModeOf(v); got != want {
			t.Errorf("SYNOD_WAL_IOURING=%q: mode %d, want %d", v, got, want)
		}
	}
}

// Off by default: Datasync and DatasyncBulk are fdatasync unless
// SYNOD_WAL_IOURING says otherwise.
func TestRingOffByDefault(t *testing.T) {
	if os.Getenv("SYNOD_WAL_IOURING") != "" {
		t.Skip("SYNOD_WAL_IOURING is set")
	}
	heldTurnedOff(t) // TestHeldSync covers the held path
	f := openOSFile(t)
	r0, p0 := ringSyncs.Load(), plainSyncs.Load()
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	if err := f.(bulkSyncer).DatasyncBulk(); err != nil {
		t.Fatal(err)
	}
	if r, p := ringSyncs.Load()-r0, plainSyncs.Load()-p0; r != 0 || p != 2 {
		t.Fatalf("Datasync and DatasyncBulk by default: %d through the ring, %d fdatasync; want 0 and 2", r, p)
	}
}

func openOSFile(t *testing.T) File {
	t.Helper()
	f, err := OSFS{}.OpenFile(filepath.Join(t.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt([]byte("frame"), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// Datasync goes through the ring where the kernel allows one, and each call
// is one completion reaped.
func TestRingDatasync(t *testing.T) {
	ringTurnedOn(t)
	if ok, err := RingStatus(); !ok {
		t.Skipf("io_uring unavailable here (%v): TestRingRefusedFallsBack covers this machine's path", err)
	}
	f := openOSFile(t)
	r0, p0 := ringSyncs.Load(), plainSyncs.Load()
	for i := 0; i < 3; i++ {
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
	}
	if r, p := ringSyncs.Load()-r0, plainSyncs.Load()-p0; r != 3 || p != 0 {
		t.Fatalf("3 Datasyncs: %d through the ring, %d fdatasync; want 3 and 0", r, p)
	}
	of := f.(*osFile)
	if h, tl := *of.ring.cqHead, *of.ring.cqTail; h != tl {
		t.Fatalf("completion queue head %d tail %d after Datasync: a completion left unreaped", h, tl)
	}
}

// The fsync's own result is Datasync's: an error that only the completion
// carries (the submission itself succeeds) is returned. A ring that returned
// once its entry was submitted, or ignored the completion's result, fails
// this test.
func TestRingDatasyncError(t *testing.T) {
	if ok, err := RingStatus(); !ok {
		t.Skipf("io_uring unavailable here (%v)", err)
	}
	r, err := newRing()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	submitted, err := r.datasync(-1)
	if !submitted || !errors.Is(err, syscall.EBADF) {
		t.Fatalf("datasync(-1) = %v, %v; want submitted, EBADF from the completion", submitted, err)
	}
	f := openOSFile(t)
	if submitted, err := r.datasync(int(f.(*osFile).Fd())); !submitted || err != nil {
		t.Fatalf("datasync after an error = %v, %v; want submitted, nil", submitted, err)
	}
}

// Where io_uring_setup is refused (EPERM: seccomp or io_uring_disabled;
// ENOSYS: no io_uring), Datasync is fdatasync, RingStatus says why, and a
// WAL commits and reopens as before.
func TestRingRefusedFallsBack(t *testing.T) {
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.ENOSYS} {
		t.Run(errno.Error(), func(t *testing.T) {
			ringTurnedOn(t)
			refuseRing(t, errno)
			if ok, err := RingStatus(); ok || !errors.Is(err, errno) {
				t.Fatalf("RingStatus = %v, %v; want false, %v", ok, err, errno)
			}
			f := openOSFile(t)
			r0, p0 := ringSyncs.Load(), plainSyncs.Load()
			if err := f.Datasync(); err != nil {
				t.Fatal(err)
			}
			if r, p := ringSyncs.Load()-r0, plainSyncs.Load()-p0; r != 0 || p != 1 {
				t.Fatalf("Datasync with io_uring refused: %d through the ring, %d fdatasync; want 0 and 1", r, p)
			}
			dir := t.TempDir()
			w, err := OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			s, err := w.Namespace("ns")
			if err != nil {
				t.Fatal(err)
			}
			p1 := plainSyncs.Load()
			if err := s.Commit([]automaton.Persist{{Key: "k", Value: []byte("v")}}); err != nil {
				t.Fatal(err)
			}
			if plainSyncs.Load() == p1 {
				t.Fatal("a WAL commit with io_uring refused called no fdatasync")
			}
			w.Close()
			w, err = OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			s, _ = w.Namespace("ns")
			if m, err := s.Load(); err != nil || string(m["k"]) != "v" {
				t.Fatalf("reopened: %v, %v; want k=v", m, err)
			}
		})
	}
}

// A ring whose submission fails (here: its descriptor closed under it)
// is given up, and Datasync falls back to fdatasync for that call and the
// next ones.
func TestRingSubmitFailureFallsBack(t *testing.T) {
	ringTurnedOn(t)
	if ok, err := RingStatus(); !ok {
		t.Skipf("io_uring unavailable here (%v)", err)
	}
	f := openOSFile(t)
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	of := f.(*osFile)
	unix.Close(of.ring.fd)
	of.ring.fd = -1
	r0, p0 := ringSyncs.Load(), plainSyncs.Load()
	for i := 0; i < 2; i++ {
		if err := f.Datasync(); err != nil {
			t.Fatal(err)
		}
	}
	if r, p := ringSyncs.Load()-r0, plainSyncs.Load()-p0; r != 0 || p != 2 {
		t.Fatalf("after a failed submission: %d through the ring, %d fdatasync; want 0 and 2", r, p)
	}
}

// BenchmarkDatasyncPath compares fdatasync with the ring's fsync (held
// wait, the default) and with the ring waited for through the netpoller
// (ringPoller), on a 4 KiB write each, with the process idle and with
// GOMAXPROCS goroutines kept runnable (a busy node: a scheduler with
// runnable goroutines polls the network late, up to sysmon's 10 ms). Wall
// time per sync (p50, p99) and, idle, the process's CPU per sync:
//
//	go test ./storage -run '^$' -bench DatasyncPath -benchtime 2000x
func BenchmarkDatasyncPath(b *testing.B) {
	for _, path := range []string{"fdatasync", "ring", "ring-poller"} {
		for _, busy := range []bool{false, true} {
			name := path + "/idle"
			if busy {
				name = path + "/busy"
			}
			b.Run(name, func(b *testing.B) {
				ringTurnedOn(b)
				if path == "fdatasync" {
					refuseRing(b, syscall.EPERM)
				} else if ok, err := RingStatus(); !ok {
					b.Skipf("io_uring unavailable: %v", err)
				}
				if path == "ring-poller" {
					ringPoller = true
					defer func() { ringPoller = false }()
				}
				f, err := OSFS{}.OpenFile(filepath.Join(b.TempDir(), "f"), os.O_RDWR|os.O_CREATE, 0o644)
				if err != nil {
					b.Fatal(err)
				}
				defer f.Close()
				stop := make(chan struct{})
				var wg sync.WaitGroup
				if busy {
					for i := 0; i < runtime.GOMAXPROCS(0); i++ {
						wg.Add(1)
						go func() {
							defer wg.Done()
							for {
								select {
								case <-stop:
									return
								default:
								}
								for j := 0; j < 2000; j++ { // ~µs of work, then yield
									_ = j * j
								}
								runtime.Gosched()
							}
						}()
					}
				}
				buf := make([]byte, 4096)
				lat := make([]time.Duration, 0, b.N)
				var ru0, ru1 syscall.Rusage
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru0)
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if _, err := f.WriteAt(buf, int64(i%256)*4096); err != nil {
						b.Fatal(err)
					}
					t0 := time.Now()
					if err := f.Datasync(); err != nil {
						b.Fatal(err)
					}
					lat = append(lat, time.Since(t0))
				}
				b.StopTimer()
				syscall.Getrusage(syscall.RUSAGE_SELF, &ru1)
				close(stop)
				wg.Wait()
				slices.Sort(lat)
				us := func(q float64) float64 { return float64(lat[int(q*float64(len(lat)-1))].Nanoseconds()) / 1e3 }
				b.ReportMetric(us(0.5), "p50-us")
				b.ReportMetric(us(0.99), "p99-us")
				if !busy {
					cpu := time.Duration(syscall.TimevalToNsec(ru1.Utime) + syscall.TimevalToNsec(ru1.Stime) - syscall.TimevalToNsec(ru0.Utime) - syscall.TimevalToNsec(ru0.Stime))
					b.ReportMetric(float64(cpu.Nanoseconds())/1e3/float64(b.N), "cpu-us/sync")
				}
				b.ReportMetric(0, "ns/op")
			})
		}
	}
}

// The held wait (a timed io_uring_enter made without telling the
// scheduler) ends when Go preempts its goroutine: a stop-the-world's signal
// cuts it short with EINTR, after which datasync waits the ordinary way. A
// wait that ignored signals would hold up every stop-the-world of the node
// for as long as a slow disk takes; here it would wait out its 20 s and
// return ETIME.
func TestRingHeldWaitYieldsToStopTheWorld(t *testing.T) {
	if ok, err := RingStatus(); !ok {
		t.Skipf("io_uring unavailable here (%v)", err)
	}
	if runtime.GOMAXPROCS(0) < 2 {
		t.Skip("needs a second P to stop the world while the first is held")
	}
	r, err := newRing()
	if err != nil {
		t.Fatal(err)
	}
	defer r.close()
	started := make(chan struct{})
	done := make(chan syscall.Errno, 1)
	go func() {
		close(started)
		_, e := r.enterHeld(0, 20*time.Second) // nothing in flight: only a signal or the timeout ends it
		done <- e
	}()
	<-started
	for {
		select {
		case e := <-done:
			if e != syscall.EINTR {
				t.Fatalf("held wait ended with %v; want EINTR from the stop-the-world's preemption", e)
			}
			return
		default:
			runtime.GC()
		}
	}
}

// The WAL syncs a frame of at least walBulkFrame bytes (a loaded node's
// group commit) through DatasyncBulk and a smaller one (a lone writer's)
// through Datasync: with SYNOD_WAL_IOURING=bulk the first takes the ring,
// the second fdatasync; with the ring off both take fdatasync, the first a
// held one with SYNOD_WAL_HELDSYNC=1 (heldsync_linux.go); with the ring
// refused both take fdatasync; in every case the records commit and come
// back on reopening.
// A WAL that ignored the frame's size (every sync one way) fails this test.
func TestWALBulkFrameSync(t *testing.T) {
	ringUp, _ := RingStatus()
	for _, c := range []struct {
		name       string
		mode       int
		refuse     bool
		bigThrough string // "ring", "held" or "fdatasync"
	}{
		{"bulk", ringBulk, false, "ring"},
		{"off", ringOff, false, "fdatasync"},
		{"off, held on", ringOff, false, "held"}, // heldsync_linux.go
		{"refused", ringBulk, true, "fdatasync"},
	} {
		t.Run(c.name, func(t *testing.T) {
			if c.bigThrough == "ring" && !ringUp {
				t.Skip("io_uring unavailable here: the refused case covers this machine's path")
			}
			withRingMode(t, c.mode)
			if c.refuse {
				refuseRing(t, syscall.EPERM)
			}
			if c.name == "off, held on" {
				heldTurnedOn(t)
			} else {
				heldTurnedOff(t)
			}
			defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2)) // held syncs need 2 Ps
			dir := t.TempDir()
			w, err := OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			s, err := w.Namespace("ns")
			if err != nil {
				t.Fatal(err)
			}
			syncs := func(batch []automaton.Persist) (ring, plain uint64) {
				t.Helper()
				r0, p0, h0 := ringSyncs.Load(), plainSyncs.Load(), heldSyncs.Load()
				if err := s.Commit(batch); err != nil {
					t.Fatal(err)
				}
				return ringSyncs.Load() - r0, plainSyncs.Load() - p0 + heldSyncs.Load() - h0
			}
			held := func() uint64 { return heldSyncs.Load() }
			val := make([]byte, 100)
			small := []automaton.Persist{{Key: "lone", Value: val}}
			var big []automaton.Persist
			for i := 0; len(big)*len(val) < 2*walBulkFrame; i++ {
				big = append(big, automaton.Persist{Key: "k" + string(rune('a'+i%26)) + string(rune('a'+i/26)), Value: val})
			}
			if r, p := syncs(small); r != 0 || p != 1 {
				t.Fatalf("a one-record frame: %d syncs through the ring, %d fdatasync; want 0 and 1", r, p)
			}
			if c.name == "bulk" {
				// The lazy ring (TestRingLazy): the first bulk frames of a
				// run take fdatasync.
				for i := 1; i < ringOpenAfter; i++ {
					if r, p := syncs(big); r != 0 || p != 1 {
						t.Fatalf("bulk frame %d of a run: %d syncs through the ring, %d fdatasync; want 0 and 1", i, r, p)
					}
				}
			}
			h0 := held()
			r, p := syncs(big)
			if want := map[string][2]uint64{"ring": {1, 0}, "fdatasync": {0, 1}, "held": {0, 1}}[c.bigThrough]; r != want[0] || p != want[1] {
				t.Fatalf("a frame of %d records: %d syncs through the ring, %d fdatasync; want %d and %d", len(big), r, p, want[0], want[1])
			}
			if h, want := held()-h0, map[bool]uint64{true: 1}[c.bigThrough == "held"]; h != want {
				t.Fatalf("a frame of %d records: %d held fdatasyncs, want %d", len(big), h, want)
			}
			w.Close()
			w, err = OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			s, _ = w.Namespace("ns")
			m, err := s.Load()
			if err != nil || len(m) != len(big)+1 { // the bulk frames rewrite the same keys
				t.Fatalf("reopened: %d records, %v; want %d", len(m), err, len(big)+1)
			}
		})
	}
}

// With SYNOD_WAL_IOURING=bulk the ring is lazy: made after ringOpenAfter
// bulk syncs in a row (a lone large frame, such as a namespace's opening,
// makes none; the run's last sync takes it), closed after ringCloseAfter plain syncs in a row (a lone
// small frame inside a run of bulk ones does not close it). A ring made at
// the first bulk sync (session 46's) fails the first check; one never closed
// fails the last two.
func TestRingLazy(t *testing.T) {
	if ok, err := RingStatus(); !ok {
		t.Skipf("io_uring unavailable here (%v): TestWALBulkFrameSync's refused case covers this machine's path", err)
	}
	withRingMode(t, ringBulk)
	f := openOSFile(t)
	of := f.(*osFile)
	sync := func(bulk bool, n int) (ring, plain uint64) {
		t.Helper()
		r0, p0 := ringSyncs.Load(), plainSyncs.Load()
		for range n {
			var err error
			if bulk {
				err = of.DatasyncBulk()
			} else {
				err = of.Datasync()
			}
			if err != nil {
				t.Fatal(err)
			}
		}
		return ringSyncs.Load() - r0, plainSyncs.Load() - p0
	}
	want := func(what string, r, p, wr, wp uint64, open bool) {
		t.Helper()
		if r != wr || p != wp || (of.ring != nil) != open {
			t.Fatalf("%s: %d through the ring, %d fdatasync, ring open %v; want %d, %d, %v", what, r, p, of.ring != nil, wr, wp, open)
		}
	}
	r, p := sync(true, 1)
	want("a lone bulk sync", r, p, 0, 1, false)
	r, p = sync(false, 1)
	want("then a plain one", r, p, 0, 1, false)
	r, p = sync(true, ringOpenAfter-1)
	want("a run of bulk syncs one short", r, p, 0, ringOpenAfter-1, false)
	o0 := ringOpens.Load()
	r, p = sync(true, 1)
	want("the run's last (made the ring and took it)", r, p, 1, 0, true)
	if o := ringOpens.Load() - o0; o != 1 {
		t.Fatalf("%d rings opened; want 1", o)
	}
	r, p = sync(true, 3)
	want("bulk syncs with the ring open", r, p, 3, 0, true)
	r, p = sync(false, ringCloseAfter-1)
	want("plain syncs one short of closing", r, p, 0, ringCloseAfter-1, true)
	r, p = sync(true, 1)
	want("a bulk sync restarting the count", r, p, 1, 0, true)
	c0 := ringCloses.Load()
	r, p = sync(false, ringCloseAfter)
	want("a run of plain syncs", r, p, 0, ringCloseAfter, false)
	if c := ringCloses.Load() - c0; c != 1 {
		t.Fatalf("%d rings closed; want 1", c)
	}
	r, p = sync(true, ringOpenAfter)
	want("a new run of bulk syncs", r, p, 1, ringOpenAfter-1, true)
}
