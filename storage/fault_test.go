package storage

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// commitOK commits a batch that must succeed and records it in want.
func commitOK(t *testing.T, s Store, want model, ns string, b ...automaton.Persist) {
	t.Helper()
	if err := s.Commit(b); err != nil {
		t.Fatalf("commit: %v", err)
	}
	want.apply(ns, b)
}

// wantFailure checks that err is the engine's Failure of op with cause.
func wantFailure(t *testing.T, err error, op string, cause error) *Failure {
	t.Helper()
	f, ok := AsFailure(err)
	if !ok {
		t.Fatalf("got %v (%T), want a *Failure", err, err)
	}
	if f.Op != op || !errors.Is(err, cause) || !strings.Contains(err.Error(), WALFile) {
		t.Fatalf("got failure %q (op %q), want op %q caused by %v naming the log", err, f.Op, op, cause)
	}
	return f
}

// A failed fsync fails the WAL for good: the next commit does not retry
// the sync (which might succeed on a kernel that dropped the dirty pages)
// but returns the same failure; Load and Namespace refuse; and a restart
// replays only the frames whose sync succeeded, although the failed frame's
// bytes reached the file (the page cache).
func TestWALFailedFsyncIsSticky(t *testing.T) {
	dir := t.TempDir()
	fs := &FaultFS{}
	w := openWAL(t, dir, WALOptions{FS: fs})
	s := mustNS(t, w, "a")
	want := model{}
	commitOK(t, s, want, "a", put("k1", "v1"), put("k2", "v2"))

	fs.FailSync(syscall.EIO)
	err := s.Commit([]automaton.Persist{put("k3", "lost"), del("k1")})
	wantFailure(t, err, "fdatasync", syscall.EIO)
	if !errors.Is(w.Err(), syscall.EIO) {
		t.Fatalf("Err() = %v after a failed sync", w.Err())
	}

	// The disk "recovers": a retried sync would now succeed, and must not
	// be taken as proof that the frame is on disk.
	fs.FailSync(nil)
	syncs := fs.Syncs()
	err2 := s.Commit([]automaton.Persist{put("k4", "v4")})
	if err2 == nil || err2.Error() != err.Error() {
		t.Fatalf("commit after the failure: %v, want the sticky %v", err2, err)
	}
	if fs.Syncs() != syncs {
		t.Fatalf("the failed engine synced again (%d -> %d syncs)", syncs, fs.Syncs())
	}
	if _, err := s.Load(); err == nil {
		t.Fatal("Load served records of a failed engine (they may include unsynced batches)")
	}
	if _, err := w.Namespace("b"); err == nil {
		t.Fatal("a failed engine opened a namespace")
	}
	w.Close()

	// Restart: only what was synced. The failed frame was written (the
	// real file holds it in the page cache), so this holds only because
	// the failure cut it off.
	w = openWAL(t, dir, WALOptions{})
	defer w.Close()
	want.check(t, w, "a")
	if err := mustNS(t, w, "b").Commit([]automaton.Persist{put("x", "y")}); err != nil {
		t.Fatalf("commit after the restart: %v", err)
	}
}

// A full disk (ENOSPC) at preallocation or at the write fails the WAL the
// same way, with a failure that says the disk is full; nothing committed
// before is lost, the half-written frame is cut off, and once space is back
// a restart (not the failed engine) commits again.
func TestWALNoSpace(t *testing.T) {
	for _, tc := range []struct {
		name  string
		chunk int64
		op    string
	}{
		{"fallocate", 4096, "fallocate"},
		{"write", -1, "write"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			fs := &FaultFS{}
			w := openWAL(t, dir, WALOptions{FS: fs, Chunk: tc.chunk})
			a, b := mustNS(t, w, "a"), mustNS(t, w, "b")
			want := model{}
			commitOK(t, a, want, "a", put("k", "v1"))
			commitOK(t, b, want, "b", put("k", "w1"))

			fs.FailWrite(syscall.ENOSPC)
			big := make([]byte, 8192) // past the preallocated chunk
			err := a.Commit([]automaton.Persist{put("k", "lost"), put("big", string(big))})
			if f := wantFailure(t, err, tc.op, syscall.ENOSPC); !f.NoSpace() {
				t.Fatalf("%v: NoSpace() = false", f)
			}
			if err := b.Commit([]automaton.Persist{put("k", "refused")}); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("the other namespace committed on a failed engine: %v", err)
			}
			fs.FailWrite(nil) // space is back: the engine stays failed
			if err := b.Commit([]automaton.Persist{put("k", "refused")}); !errors.Is(err, syscall.ENOSPC) {
				t.Fatalf("the failed engine recovered by itself: %v", err)
			}
			w.Close()

			w = openWAL(t, dir, WALOptions{FS: fs, Chunk: tc.chunk})
			defer w.Close()
			want.check(t, w, "a", "b")
			a = mustNS(t, w, "a")
			commitOK(t, a, want, "a", put("k", "v2"))
			w.Close()
			w = openWAL(t, dir, WALOptions{})
			want.check(t, w, "a", "b")
		})
	}
}

// A slow fsync only delays: concurrent commits all succeed (sharing syncs),
// the engine does not fail, and every batch is there after a restart.
func TestWALSlowFsyncOnlyDelays(t *testing.T) {
	dir := t.TempDir()
	fs := &FaultFS{}
	fs.SlowSync(5 * time.Millisecond)
	w := openWAL(t, dir, WALOptions{FS: fs})
	want := model{}
	var mu sync.Mutex
	var wg sync.WaitGroup
	for i := 0; i < 4; i++ {
		ns := fmt.Sprintf("ns%d", i)
		s := mustNS(t, w, ns)
		wg.Add(1)
		go func() {
			defer wg.Done()
			for j := 0; j < 10; j++ {
				b := []automaton.Persist{put(fmt.Sprint(j), ns)}
				if err := s.Commit(b); err != nil {
					t.Errorf("%s: %v", ns, err)
					return
				}
				mu.Lock()
				want.apply(ns, b)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	if w.Err() != nil || fs.Failed() != 0 {
		t.Fatalf("slow syncs failed the engine: %v", w.Err())
	}
	w.Close()
	w = openWAL(t, dir, WALOptions{})
	defer w.Close()
	want.check(t, w, "ns0", "ns1", "ns2", "ns3")
}

// A real full disk: the WAL on a 1 MiB tmpfs, committing until the file
// system is full. The failure names ENOSPC, and after a restart every
// batch that was acknowledged is there and none that failed.
func TestWALRealFullDisk(t *testing.T) {
	if os.Geteuid() != 0 {
		t.Skip("needs root to mount a small tmpfs as the full disk")
	}
	dir := t.TempDir()
	unmount, err := MountTmpfs(dir, 1<<20)
	if err != nil {
		t.Skipf("cannot make a small file system here: %v", err)
	}
	defer unmount()
	data := filepath.Join(dir, "n1")
	w := openWAL(t, data, WALOptions{Chunk: 64 << 10})
	s := mustNS(t, w, "a")
	want := model{}
	val := strings.Repeat("x", 10<<10)
	var failed error
	for i := 0; i < 1000 && failed == nil; i++ {
		b := []automaton.Persist{put(fmt.Sprint(i), val)}
		if failed = s.Commit(b); failed == nil {
			want.apply("a", b)
		}
	}
	if failed == nil {
		t.Fatal("10 MB went into a 1 MiB file system")
	}
	if f, ok := AsFailure(failed); !ok || !f.NoSpace() {
		t.Fatalf("failure %v is not a full disk", failed)
	}
	if len(want["a"]) < 10 {
		t.Fatalf("only %d batches fitted", len(want["a"]))
	}
	w.Close()
	w = openWAL(t, data, WALOptions{})
	defer w.Close()
	want.check(t, w, "a")
}
