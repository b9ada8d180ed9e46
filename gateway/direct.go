package gateway

import (
	"errors"
	"syscall"
)

// DirectWriter is a connection's direct write (directWriter) for other
// packages' servers: gateway/grpcserver's own HTTP/2 transport writes a
// unary call's reply with it from the goroutine that completes the call,
// which must not wait for the client.
type DirectWriter = directWriter

// NewDirectWriter returns raw's direct writer, or nil where the platform
// has none (directWrites).
func NewDirectWriter(raw syscall.RawConn) *DirectWriter { return newDirectWriter(raw) }

// WriteNow writes what of p the socket takes without waiting and returns
// how many bytes it wrote (writeNow). One caller at a time.
func (d *DirectWriter) WriteNow(p []byte) int { return d.writeNow(p) }

// SyscallConn gives a counted gRPC connection's socket (syscall.Conn), so
// that its server may write to it directly (DirectWriter).
func (c *limitConn) SyscallConn() (syscall.RawConn, error) {
	sc, ok := c.Conn.(syscall.Conn)
	if !ok {
		return nil, errors.New("not a socket")
	}
	return sc.SyscallConn()
}
