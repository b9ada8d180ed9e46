//go:build unix

package client

import (
	"errors"
	"io"
	"net"
	"syscall"
)

var errUnexpectedData = errors.New("client: unexpected data on an idle connection")

// connCheck reports whether an idle connection is still usable: a
// non-blocking read must find nothing to read (EAGAIN). End of stream or
// unsolicited data mean the connection must not be reused.
func connCheck(nc net.Conn) error {
	sc, ok := nc.(syscall.Conn)
	if !ok {
		return nil
	}
	raw, err := sc.SyscallConn()
	if err != nil {
		return err
	}
	var checkErr error
	err = raw.Read(func(fd uintptr) bool {
		var buf [1]byte
		n, err := syscall.Read(int(fd), buf[:])
		switch {
		case n == 0 && err == nil:
			checkErr = io.EOF
		case n > 0:
			checkErr = errUnexpectedData
		case err == syscall.EAGAIN || err == syscall.EWOULDBLOCK:
			checkErr = nil
		default:
			checkErr = err
		}
		return true
	})
	if err != nil {
		return err
	}
	return checkErr
}
