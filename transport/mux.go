package transport

import (
	"bytes"
	"io"
	"log/slog"
	"net"
	"sync"
	"time"
)

// H2Preface opens every HTTP/2 connection (RFC 9113 section 3.4); a gRPC
// client sends it first, before reading anything.
const H2Preface = "PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"

// sniffLen bytes tell the two protocols apart: "SYND" (Magic) opens a TCP
// transport handshake, "PRI " the HTTP/2 preface.
const sniffLen = 4

// SplitListener shares one peer address between the framed TCP transport and
// a gRPC server (package transport/grpcpeer). Both clients speak first, so
// the first four bytes of a connection decide: "PRI " (HTTP/2's client
// preface) goes to h2, everything else, including a connection that sends
// fewer than four bytes within timeout, to tcp, whose handshake then reports
// it exactly as it would without the split. The bytes read are replayed to
// whichever side takes the connection.
//
// Closing both returned listeners closes ln. Each Accept returns an error
// wrapping net.ErrClosed once its listener is closed; connections routed to
// a closed side are closed.
func SplitListener(ln net.Listener, timeout time.Duration, log *slog.Logger) (tcp, h2 net.Listener) {
	if timeout <= 0 {
		timeout = 5 * time.Second
	}
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &split{ln: ln, timeout: timeout, log: log}
	s.tcp = &subListener{s: s, ch: make(chan net.Conn, 16), done: make(chan struct{})}
	s.h2 = &subListener{s: s, ch: make(chan net.Conn, 16), done: make(chan struct{})}
	go s.accept()
	return s.tcp, s.h2
}

type split struct {
	ln      net.Listener
	timeout time.Duration
	log     *slog.Logger
	tcp, h2 *subListener

	mu     sync.Mutex
	closed int // sub-listeners closed
}

func (s *split) accept() {
	for {
		c, err := s.ln.Accept()
		if err != nil {
			if ne, ok := err.(net.Error); ok && ne.Timeout() {
				continue
			}
			s.mu.Lock()
			done := s.closed == 2
			s.mu.Unlock()
			if !done {
				s.log.Error("accept on peer port failed", "err", err)
				select {
				case <-time.After(100 * time.Millisecond):
					continue
				case <-s.tcp.done:
				}
			}
			// The listener is closed (or the TCP side, whose accept loop
			// owned error handling before the split, has gone).
			return
		}
		go s.route(c)
	}
}

func (s *split) route(c net.Conn) {
	var buf [sniffLen]byte
	c.SetReadDeadline(time.Now().Add(s.timeout))
	n, _ := io.ReadFull(c, buf[:])
	c.SetReadDeadline(time.Time{})
	pc := &prefixConn{Conn: c, prefix: append([]byte(nil), buf[:n]...)}
	to := s.tcp
	if n == sniffLen && bytes.Equal(buf[:], []byte(H2Preface[:sniffLen])) {
		to = s.h2
	}
	select {
	case to.ch <- pc:
	case <-to.done:
		c.Close()
	}
}

type subListener struct {
	s    *split
	ch   chan net.Conn
	once sync.Once
	done chan struct{}
}

func (l *subListener) Accept() (net.Conn, error) {
	select {
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	default:
	}
	select {
	case c := <-l.ch:
		return c, nil
	case <-l.done:
		return nil, &net.OpError{Op: "accept", Net: "tcp", Addr: l.Addr(), Err: net.ErrClosed}
	}
}

func (l *subListener) Close() error {
	var err error
	l.once.Do(func() {
		close(l.done)
		for {
			select {
			case c := <-l.ch:
				c.Close()
				continue
			default:
			}
			break
		}
		l.s.mu.Lock()
		l.s.closed++
		last := l.s.closed == 2
		l.s.mu.Unlock()
		if last {
			err = l.s.ln.Close()
		}
	})
	return err
}

func (l *subListener) Addr() net.Addr { return l.s.ln.Addr() }

// prefixConn replays the sniffed bytes before reading on.
type prefixConn struct {
	net.Conn
	prefix []byte
}

func (c *prefixConn) Read(p []byte) (int, error) {
	if len(c.prefix) > 0 {
		n := copy(p, c.prefix)
		c.prefix = c.prefix[n:]
		return n, nil
	}
	return c.Conn.Read(p)
}
