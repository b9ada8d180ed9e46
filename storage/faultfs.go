package storage

import (
	"fmt"
	"os"
	"sync"
	"syscall"
	"time"
)

// FaultFS is an FS over the operating system's files that can be told to
// fail or slow down the WAL's operations: for tests of storage faults (this
// package's and the node's). The files are real; only the outcome of the
// operations FaultFS is told to spoil changes. Its methods are safe for
// concurrent use.
type FaultFS struct {
	mu        sync.Mutex
	syncErr   error
	writeErr  error
	syncDelay time.Duration
	syncs     int
	failed    int
}

// FailSync makes every later Sync and Datasync return err after doing
// nothing (nil: succeed again). This is what a kernel does after a failed
// writeback: the data written since the last good sync may be gone, and
// the next sync may well succeed ("fsyncgate").
func (fs *FaultFS) FailSync(err error) {
	fs.mu.Lock()
	fs.syncErr = err
	fs.mu.Unlock()
}

// FailWrite makes every later Write, WriteAt and Allocate fail with err
// (nil: succeed again). A write that fails writes half of its bytes first,
// as a short write on a filling disk does.
func (fs *FaultFS) FailWrite(err error) {
	fs.mu.Lock()
	fs.writeErr = err
	fs.mu.Unlock()
}

// SlowSync makes every later sync take d longer.
func (fs *FaultFS) SlowSync(d time.Duration) {
	fs.mu.Lock()
	fs.syncDelay = d
	fs.mu.Unlock()
}

// Syncs is the number of syncs that succeeded; Failed the number of
// operations FaultFS failed.
func (fs *FaultFS) Syncs() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.syncs
}

// Failed is the number of operations FaultFS made fail.
func (fs *FaultFS) Failed() int {
	fs.mu.Lock()
	defer fs.mu.Unlock()
	return fs.failed
}

// OpenFile implements FS.
func (fs *FaultFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := OSFS{}.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	return &faultFile{File: f, fs: fs}, nil
}

type faultFile struct {
	File
	fs *FaultFS
}

func (f *faultFile) writeFault() error {
	f.fs.mu.Lock()
	defer f.fs.mu.Unlock()
	if f.fs.writeErr != nil {
		f.fs.failed++
	}
	return f.fs.writeErr
}

func (f *faultFile) WriteAt(p []byte, off int64) (int, error) {
	if err := f.writeFault(); err != nil {
		n, _ := f.File.WriteAt(p[:len(p)/2], off)
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.WriteAt(p, off)
}

func (f *faultFile) Write(p []byte) (int, error) {
	if err := f.writeFault(); err != nil {
		n, _ := f.File.Write(p[:len(p)/2])
		return n, &os.PathError{Op: "write", Path: f.Name(), Err: err}
	}
	return f.File.Write(p)
}

func (f *faultFile) Allocate(off, n int64) error {
	if err := f.writeFault(); err != nil {
		return &os.PathError{Op: "fallocate", Path: f.Name(), Err: err}
	}
	return f.File.Allocate(off, n)
}

func (f *faultFile) sync(op string, real func() error) error {
	f.fs.mu.Lock()
	d, err := f.fs.syncDelay, f.fs.syncErr
	if err != nil {
		f.fs.failed++
	}
	f.fs.mu.Unlock()
	time.Sleep(d)
	if err != nil {
		return &os.PathError{Op: op, Path: f.Name(), Err: err}
	}
	if err := real(); err != nil {
		return err
	}
	f.fs.mu.Lock()
	f.fs.syncs++
	f.fs.mu.Unlock()
	return nil
}

func (f *faultFile) Datasync() error { return f.sync("fdatasync", f.File.Datasync) }
func (f *faultFile) Sync() error     { return f.sync("fsync", f.File.Sync) }

// MountTmpfs mounts a tmpfs of size bytes on dir (which must exist): a
// real small file system for full-disk tests. It needs root (CAP_SYS_ADMIN);
// the error says so otherwise. unmount detaches it (lazily, so that files a
// test left open do not keep it busy).
func MountTmpfs(dir string, size int64) (unmount func() error, err error) {
	if err := syscall.Mount("tmpfs", dir, "tmpfs", 0, fmt.Sprintf("size=%d,mode=0755", size)); err != nil {
		return nil, fmt.Errorf("mount a %d-byte tmpfs on %s (needs root): %w", size, dir, err)
	}
	return func() error { return syscall.Unmount(dir, syscall.MNT_DETACH) }, nil
}
