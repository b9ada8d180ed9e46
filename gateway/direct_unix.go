//go:build unix

package gateway

import "syscall"

// directWrites: the platform has non-blocking write(2) on a raw socket.
const directWrites = true

// directWriter is a connection's direct write: the function handed to
// RawConn.Write is made once per connection, so a write allocates nothing.
type directWriter struct {
	raw syscall.RawConn
	p   []byte
	n   int
	fn  func(fd uintptr) bool
}

func newDirectWriter(raw syscall.RawConn) *directWriter {
	d := &directWriter{raw: raw}
	d.fn = d.write
	return d
}

// write is write(2) on the non-blocking descriptor, retried after EINTR
// and after a partial write, until the socket takes no more.
func (d *directWriter) write(fd uintptr) bool {
	for d.n < len(d.p) {
		m, err := sockWrite(fd, d.p[d.n:]) // raw write(2) unless SYNOD_GATEWAY_RAWIO=0: rawio_linux.go
		if m > 0 {
			d.n += m
		}
		if err == syscall.EINTR {
			continue
		}
		if err != nil || m <= 0 {
			break
		}
	}
	return true // done: never wait for the socket here
}

// writeNow writes what of p the socket takes without waiting and returns
// how many bytes it wrote. It never parks: a full send buffer (EAGAIN), a
// failure, or a closed socket end it, and the caller hands the rest to the
// writer goroutine, which waits for the socket or meets the failure itself.
// One caller at a time (outBuf.direct).
func (d *directWriter) writeNow(p []byte) int {
	d.p, d.n = p, 0
	d.raw.Write(d.fn)
	n := d.n
	d.p = nil
	return n
}
