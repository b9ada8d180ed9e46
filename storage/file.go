package storage

import (
	"errors"
	"fmt"
	"os"
	"sync"
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
// the process a ring. The ring is made at the first sync that may use it and
// closed with the file.
type osFile struct {
	*os.File
	ringOnce sync.Once
	ring     *ring // nil: fdatasync
}

// bulkSyncer is a File with a second Datasync for the frames of a loaded
// node's group commits (the WAL calls it for frames of at least
// walBulkFrame bytes): same guarantee, a path that costs less CPU per sync
// but may add latency to one (osFile: the io_uring's held wait).
type bulkSyncer interface {
	DatasyncBulk() error
}

func (f *osFile) Datasync() error { return f.datasync(ringMode == ringAll) }

// DatasyncBulk implements bulkSyncer.
func (f *osFile) DatasyncBulk() error { return f.datasync(ringMode != ringOff) }

func (f *osFile) datasync(useRing bool) error {
	if useRing {
		f.ringOnce.Do(func() {
			if ok, _ := RingStatus(); ok {
				f.ring, _ = newRing()
			}
		})
	}
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
	if f.ring != nil {
		f.ring.close()
	}
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
