//go:build unix && !linux

package gateway

import (
	"sync/atomic"
	"syscall"
)

// No raw client socket I/O here (rawio_linux.go): syscall.Read and Write.
const rawIO = false

var rawReads, rawWrites atomic.Uint64

func sockRead(fd uintptr, p []byte) (int, error)  { return syscall.Read(int(fd), p) }
func sockWrite(fd uintptr, p []byte) (int, error) { return syscall.Write(int(fd), p) }
