package storage

import (
	"os"
	"runtime"
	"testing"
	"time"
)

// heldTurnedOff turns held syncs off for the test (SYNOD_WAL_HELDSYNC=0).
func heldTurnedOff(t *testing.T) { heldTurned(t, false) }

// heldTurnedOn turns held syncs on for the test (SYNOD_WAL_HELDSYNC=1).
func heldTurnedOn(t *testing.T) { heldTurned(t, true) }

func heldTurned(t *testing.T, on bool) {
	t.Helper()
	old, oldIdle := heldOn, heldIdleOnly
	heldOn, heldIdleOnly = on, false
	t.Cleanup(func() { heldOn, heldIdleOnly = old, oldIdle })
}

// With SYNOD_WAL_HELDSYNC=1 a bulk sync is held (heldsync_linux.go) with
// GOMAXPROCS 2 or more, never with GOMAXPROCS 1 nor with =0, and a plain
// Datasync (a lone writer's frame) never is; after a held sync slower than
// heldMaxWait the file's next heldBackoff bulk syncs are ordinary ones,
// and then held again. Fails with held syncs taken at GOMAXPROCS 1 (a
// process stopped for every flush), with a slow held sync not backed off,
// or with a backoff that never ends.
func TestHeldSync(t *testing.T) {
	if os.Getenv("SYNOD_WAL_IOURING") != "" || os.Getenv("SYNOD_WAL_HELDSYNC") != "" {
		t.Skip("SYNOD_WAL_IOURING or SYNOD_WAL_HELDSYNC is set")
	}
	heldTurnedOn(t)
	procs := runtime.GOMAXPROCS(2)
	defer runtime.GOMAXPROCS(procs)
	wait, back := heldMaxWait, heldBackoff
	defer func() { heldMaxWait, heldBackoff = wait, back }()
	heldMaxWait = time.Hour // no backoff from a sync slowed by a loaded machine, but in "slow"
	f := openOSFile(t)
	bulk := f.(bulkSyncer)
	// counts runs fn and returns the held and plain syncs it made.
	counts := func(fn func() error) (held, plain uint64) {
		t.Helper()
		h0, p0 := heldSyncs.Load(), plainSyncs.Load()
		if err := fn(); err != nil {
			t.Fatal(err)
		}
		return heldSyncs.Load() - h0, plainSyncs.Load() - p0
	}
	if h, p := counts(bulk.DatasyncBulk); h != 1 || p != 0 {
		t.Fatalf("DatasyncBulk at GOMAXPROCS 2: %d held, %d fdatasync; want 1 and 0", h, p)
	}
	if h, p := counts(f.Datasync); h != 0 || p != 1 {
		t.Fatalf("Datasync: %d held, %d fdatasync; want 0 and 1", h, p)
	}
	runtime.GOMAXPROCS(1)
	if h, p := counts(bulk.DatasyncBulk); h != 0 || p != 1 {
		t.Fatalf("DatasyncBulk at GOMAXPROCS 1: %d held, %d fdatasync; want 0 and 1", h, p)
	}
	runtime.GOMAXPROCS(2)
	t.Run("off", func(t *testing.T) {
		heldTurnedOff(t)
		if h, p := counts(bulk.DatasyncBulk); h != 0 || p != 1 {
			t.Fatalf("DatasyncBulk with SYNOD_WAL_HELDSYNC=0: %d held, %d fdatasync; want 0 and 1", h, p)
		}
	})
	t.Run("slow", func(t *testing.T) {
		heldMaxWait, heldBackoff = -time.Second, 3 // every held sync counts as slow
		defer func() { heldMaxWait = time.Hour }()
		if h, p := counts(bulk.DatasyncBulk); h != 1 || p != 0 {
			t.Fatalf("first DatasyncBulk: %d held, %d fdatasync; want 1 and 0", h, p)
		}
		for i := range 3 {
			if h, p := counts(bulk.DatasyncBulk); h != 0 || p != 1 {
				t.Fatalf("DatasyncBulk %d after a slow held one: %d held, %d fdatasync; want 0 and 1", i+1, h, p)
			}
		}
		if h, p := counts(bulk.DatasyncBulk); h != 1 || p != 0 {
			t.Fatalf("DatasyncBulk after the backoff: %d held, %d fdatasync; want 1 and 0", h, p)
		}
	})
}
