//go:build linux && race

package gateway

import (
	"runtime"
	"syscall"
	"unsafe"
)

// Under the race detector a raw read or write (rawio_linux.go) makes the
// happens-before edge syscall.Read and syscall.Write make through
// syscall's private ioSync (a write releases it, a read acquires it: what
// one side wrote before a socket write is seen by the side that read it),
// which the race detector's tests of the gateway rely on (session 52:
// without it go test -race -short ./gateway reported 8 races in
// TestMultiMSetNXRaces, TestOrderUnsubscribePublish and
// TestOrderBlockedThenWrite, e.g. a test goroutine setting a hook after
// reading a reply that the server's hook then reads). ioSync cannot
// be named from here (the linker refuses the linkname), so the edge is
// made by a zero-length syscall.Read after the read and a zero-length
// syscall.Write before the write, which do nothing at the socket (count
// 0); the bytes the kernel wrote or read are annotated as syscall's are.

func raceAfterRead(fd uintptr, p []byte, n int) {
	syscall.Read(int(fd), nil)
	if n > 0 {
		runtime.RaceWriteRange(unsafe.Pointer(&p[0]), n)
	}
}

func raceBeforeWrite(fd uintptr, p []byte) {
	runtime.RaceReadRange(unsafe.Pointer(&p[0]), len(p))
	syscall.Write(int(fd), nil)
}
