package storage

import (
	"errors"
	"fmt"
	"os"
	"runtime/metrics"
	"sync"
	"sync/atomic"
	"syscall"
)

// File is the WAL's handle on one of its files: the seam through which
// tests inject storage faults (FaultFS). Production uses the operating
// system's files (OSFS).
type File interface {
	WriteAt(p []byte, off int64) (int, error)
	Write(p []byte) (int, error)
	// Datasync is fdatasync (EINTR retried); Sync is fsync.
	Datasync() error
	Sync() error
	Truncate(size int64) error
	// Allocate reserves [off, off+n) (fallocate). It returns an error that
	// wraps syscall.EOPNOTSUPP where the file system cannot.
	Allocate(off, n int64) error
	Close() error
	Name() string
}

// FS opens the WAL's files. WALOptions.FS nil means OSFS.
type FS interface {
	OpenFile(name string, flag int, perm os.FileMode) (File, error)
}

// OSFS is the operating system's file system.
type OSFS struct{}

// OpenFile implements FS with os.OpenFile.
func (OSFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := os.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &osFile{File: f}, nil
}

// osFile is an *os.File whose Datasync may go through an io_uring
// (uring_linux.go): DatasyncBulk with SYNOD_WAL_IOURING=bulk or 1, Datasync
// with SYNOD_WAL_IOURING=1, neither by default nor where the kernel refuses
// the process a ring. With =1 the ring is made at the first sync and closed
// with the file. With =bulk it is lazy (lazySync): made only once
// ringOpenAfter bulk syncs came in a row, closed again after
// ringCloseAfter plain ones in a row, so a lone writer, or a node whose
// only large frame was its namespace's opening, has no ring and no io-wq
// worker threads.
type osFile struct {
	*os.File
	ringOnce sync.Once
	// mu guards ring, bulkRun, plainRun and noRing in bulk mode, held over
	// the sync, so that no sync runs on a ring being closed.
	mu       sync.Mutex
	ring     *ring // nil: fdatasync
	bulkRun  int   // bulk mode: DatasyncBulk calls in a row (at most ringOpenAfter)
	plainRun int   // bulk mode, ring open: Datasync calls in a row
	noRing   bool  // bulk mode: making a ring failed; not tried again
	// heldSkip: bulk syncs left that take the ordinary fdatasync after a
	// slow held one (heldsync_linux.go).
	heldSkip atomic.Int64
	// rawSkip: frame writes left that take os.File's pwrite after a slow
	// raw one (rawwrite_linux.go).
	rawSkip atomic.Int64
	// idleSample: procsIdle's runtime/metrics samples (heldsync_linux.go).
	idleSample [2]metrics.Sample
}

// The lazy ring's hysteresis (SYNOD_WAL_IOURING=bulk; branch pxs47,
// session 47). pxs46 found a lone unreplicated writer slower with =bulk
// although its 184-byte frames all took fdatasync: only its namespace's
// opening frame (102 KB) had used the ring, which then kept two idle io-wq
// threads for good. So the ring waits for a run of large frames (a loaded
// node's group commits: redis-benchmark -c 50 -P 16 makes 99 % of the
// leader's frames bulk ones), and a run of small frames (the load ended)
// closes it, which ends its io-wq workers. A lone frame of the other size
// inside a run (1 % of a loaded leader's frames are small) only restarts
// the count.
const (
	ringOpenAfter  = 8
	ringCloseAfter = 8
)

// bulkSyncer is a File with a second Datasync for the frames of a loaded
// node's group commits (the WAL calls it for frames of at least
// walBulkFrame bytes): same guarantee, a path that costs less CPU per sync
// but may add latency to one (osFile: the io_uring's held wait).
type bulkSyncer interface {
	DatasyncBulk() error
}

func (f *osFile) Datasync() error {
	if ringMode == ringBulk {
		return f.lazySync(false)
	}
	return f.datasync(ringMode == ringAll)
}

// DatasyncBulk implements bulkSyncer.
func (f *osFile) DatasyncBulk() error {
	switch ringMode {
	case ringBulk:
		return f.lazySync(true)
	case ringAll:
		return f.datasync(true)
	}
	if held, err := f.heldDatasync(); held { // heldsync_linux.go
		return err
	}
	return f.datasync(false)
}

func (f *osFile) datasync(useRing bool) error {
	if useRing {
		f.ringOnce.Do(func() {
			if ok, _ := RingStatus(); ok {
				f.ring, _ = newRing()
			}
		})
	}
	return f.syncOn(useRing)
}

// lazySync is bulk mode's sync (bulk: DatasyncBulk): it opens the ring
// after ringOpenAfter bulk syncs in a row and closes it after
// ringCloseAfter plain ones in a row (above); a bulk sync takes the ring
// while it is open, every other sync fdatasync.
func (f *osFile) lazySync(bulk bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if bulk {
		f.plainRun = 0
		f.bulkRun = min(f.bulkRun+1, ringOpenAfter)
		if f.ring == nil && f.bulkRun == ringOpenAfter && !f.noRing {
			if ok, _ := RingStatus(); ok {
				f.ring, _ = newRing()
			}
			f.noRing = f.ring == nil
			if f.ring != nil {
				ringOpens.Add(1)
			}
		}
	} else {
		f.bulkRun = 0
		if f.ring != nil {
			if f.plainRun++; f.plainRun >= ringCloseAfter {
				f.ring.close()
				f.ring, f.plainRun = nil, 0
				ringCloses.Add(1)
			}
		}
	}
	return f.syncOn(bulk)
}

// syncOn syncs through the ring when useRing and the file has a working
// one, else with fdatasync.
func (f *osFile) syncOn(useRing bool) error {
	if useRing && f.ring != nil {
		if done, err := f.ring.datasync(int(f.Fd())); done {
			ringSyncs.Add(1)
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
	plainSyncs.Add(1)
	return f.fdatasync()
}

// Close closes the file and its ring (no Datasync is in progress: the
// WAL closes its file only with no writer).
func (f *osFile) Close() error {
	f.mu.Lock()
	if f.ring != nil {
		f.ring.close()
		f.ring = nil
	}
	f.mu.Unlock()
	return f.File.Close()
}

func (f *osFile) fdatasync() error {
	for {
		err := syscall.Fdatasync(int(f.Fd()))
		if err != syscall.EINTR {
			if err != nil {
				return &os.PathError{Op: "fdatasync", Path: f.Name(), Err: err}
			}
			return nil
		}
	}
}

func (f *osFile) Allocate(off, n int64) error {
	if err := syscall.Fallocate(int(f.Fd()), 0, off, n); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return nil
}

// Failure is the sticky error of an engine whose write or sync failed: the
// operation ("write", "fdatasync", "fallocate", "compaction"...), the file,
// and the operating system's error. Every Commit, Load and Namespace after
// it returns it (see "Storage faults" in the package doc).
type Failure struct {
	Op   string
	Path string
	Err  error
}

func (f *Failure) Error() string { return fmt.Sprintf("%s %s: %v", f.Op, f.Path, f.Err) }
func (f *Failure) Unwrap() error { return f.Err }

// NoSpace reports whether the failure is a full disk (ENOSPC or EDQUOT).
func (f *Failure) NoSpace() bool {
	return errors.Is(f.Err, syscall.ENOSPC) || errors.Is(f.Err, syscall.EDQUOT)
}

// AsFailure returns the Failure in err's chain, if any.
func AsFailure(err error) (*Failure, bool) {
	var f *Failure
	ok := errors.As(err, &f)
	return f, ok
}

// failure builds the Failure of op on path from err, unwrapping the
// os.PathError the file layer adds so that the path is not repeated.
func failure(op, path string, err error) *Failure {
	if f, ok := AsFailure(err); ok {
		return f
	}
	var pe *os.PathError
	if errors.As(err, &pe) {
		op, path, err = pe.Op, pe.Path, pe.Err
	}
	return &Failure{Op: op, Path: path, Err: err}
}
