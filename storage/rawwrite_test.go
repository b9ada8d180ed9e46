package storage

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// The default held mode (SYNOD_WAL_HELDSYNC unset or "idle",
// heldsync_linux.go) holds a bulk sync only when no other goroutine runs
// or waits to run:
// while two goroutines spin on GOMAXPROCS 2 no sync is held; with nothing
// else to run, syncs are held. Fails when the idle rule is left out (the
// spinners' syncs held) and when procsIdle never finds the process idle.
func TestHeldSyncOnlyWhenIdle(t *testing.T) {
	if os.Getenv("SYNOD_WAL_IOURING") != "" || os.Getenv("SYNOD_WAL_HELDSYNC") != "" {
		t.Skip("SYNOD_WAL_IOURING or SYNOD_WAL_HELDSYNC is set")
	}
	heldTurnedOn(t)
	heldIdleOnly = true // restored by heldTurnedOn's cleanup
	defer runtime.GOMAXPROCS(runtime.GOMAXPROCS(2))
	wait := heldMaxWait
	defer func() { heldMaxWait = wait }()
	heldMaxWait = time.Hour // no backoff from a sync slowed by a loaded machine
	bulk := openOSFile(t).(bulkSyncer)
	counts := func(n int) (held, plain uint64) {
		t.Helper()
		h0, p0 := heldSyncs.Load(), plainSyncs.Load()
		for range n {
			if err := bulk.DatasyncBulk(); err != nil {
				t.Fatal(err)
			}
		}
		return heldSyncs.Load() - h0, plainSyncs.Load() - p0
	}

	var stop atomic.Bool
	var started sync.WaitGroup
	var done sync.WaitGroup
	for range 2 {
		started.Add(1)
		done.Add(1)
		go func() {
			defer done.Done()
			started.Done()
			for !stop.Load() {
			}
		}()
	}
	started.Wait()
	h, p := counts(20)
	stop.Store(true)
	done.Wait()
	if h != 0 || p != 20 {
		t.Fatalf("while two goroutines spin: %d held, %d fdatasync; want 0 and 20", h, p)
	}
	// Nothing else to run: held. A loaded machine's runtime may have a
	// goroutine runnable at a given instant (a GC mark worker, a spinner
	// not yet gone, another test's goroutine finishing), so some of them,
	// not all: the first held one ends the loop. The bound is time, not a
	// count: where fdatasync is fast (CI's stop 59 run on a clean clone)
	// 500 attempts took under 90 ms, inside one GC cycle's mark phase,
	// and the test failed; so the cycle is finished first (runtime.GC)
	// and each attempt after the first 50 sleeps a millisecond, for up to
	// 10 s, past which the test fails.
	runtime.GC()
	held := uint64(0)
	deadline := time.Now().Add(10 * time.Second)
	for i := 0; held == 0 && time.Now().Before(deadline); i++ {
		if i >= 50 {
			time.Sleep(time.Millisecond)
		}
		runtime.Gosched()
		held, _ = counts(1)
	}
	if held == 0 {
		t.Fatal("no sync held with nothing else to run, in 10 s of attempts")
	}
}

// By default a WAL's bulk frames (>= walBulkFrame) are written by raw
// pwrite(2) (rawwrite_linux.go) and reopen intact, a lone writer's small
// frames by os.File; with SYNOD_WAL_RAWWRITE=0 every frame goes through
// os.File; after a raw write slower than rawWriteMaxWait the file's next
// rawWriteBackoff writes go through os.File, then raw again. Fails with
// the raw write left out, with small frames written raw, with a backoff
// that never ends or never starts.
func TestWALRawWrite(t *testing.T) {
	if os.Getenv("SYNOD_WAL_RAWWRITE") != "" {
		t.Skip("SYNOD_WAL_RAWWRITE is set")
	}
	val := func(i int) []byte { return bytes.Repeat([]byte{byte(i)}, 100+i*40) } // frames of ~150 B to ~2.1 KB
	commit := func(t *testing.T, s Store, i int) {
		t.Helper()
		v := val(i)
		if err := s.Commit([]automaton.Persist{{Key: fmt.Sprint("k", i), Value: v}}); err != nil {
			t.Fatal(err)
		}
	}
	for _, on := range []bool{true, false} {
		t.Run(fmt.Sprint("raw=", on), func(t *testing.T) {
			defer func(old bool) { rawWriteOn = old }(rawWriteOn)
			rawWriteOn = on
			wait := rawWriteMaxWait
			defer func() { rawWriteMaxWait = wait }()
			rawWriteMaxWait = time.Hour // no backoff from a write slowed by a loaded machine (at load 50 some took > 5 ms)
			dir := t.TempDir()
			w, err := OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			s, err := w.Namespace("ns")
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				r0 := rawWrites.Load()
				commit(t, s, i)
				bulk := 100+i*40 >= walBulkFrame // the frame is larger still
				if got := rawWrites.Load() - r0; got != 0 && (!on || 100+i*40 < walBulkFrame-100) {
					t.Fatalf("raw=%v: frame %d (value of %d bytes) written raw", on, i, 100+i*40)
				} else if got == 0 && on && bulk {
					t.Fatalf("raw=%v: frame %d (value of %d bytes) not written raw", on, i, 100+i*40)
				}
			}
			w.Close()
			w, err = OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			s, err = w.Namespace("ns")
			if err != nil {
				t.Fatal(err)
			}
			m, err := s.Load()
			if err != nil {
				t.Fatal(err)
			}
			for i := range 50 {
				if v, ok := m[fmt.Sprint("k", i)]; !ok || !bytes.Equal(v, val(i)) {
					t.Fatalf("k%d after reopen: %d bytes, %v", i, len(v), ok)
				}
			}
		})
	}
	t.Run("slow", func(t *testing.T) {
		defer func(old bool) { rawWriteOn = old }(rawWriteOn)
		rawWriteOn = true
		wait, back := rawWriteMaxWait, rawWriteBackoff
		defer func() { rawWriteMaxWait, rawWriteBackoff = wait, back }()
		rawWriteMaxWait, rawWriteBackoff = -time.Second, 3 // every raw write counts as slow
		f := openOSFile(t)
		frame := make([]byte, walBulkFrame)
		raws := func() uint64 {
			t.Helper()
			r0 := rawWrites.Load()
			if _, err := f.WriteAt(frame, 8); err != nil {
				t.Fatal(err)
			}
			return rawWrites.Load() - r0
		}
		if n := raws(); n != 1 { // a slow raw one
			t.Fatal("a bulk write was not raw")
		}
		for i := range 3 {
			if n := raws(); n != 0 {
				t.Fatalf("write %d after a slow raw one was raw", i+1)
			}
		}
		if n := raws(); n != 1 {
			t.Fatal("the write after the backoff was not raw")
		}
	})
}
