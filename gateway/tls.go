package gateway

import (
	"bufio"
	"crypto/tls"
	"net"
	"sync"
)

// TLS on the Redis-protocol port, as Redis serves it: `redis-cli --tls
// --cacert ca.crt` (docs/SECURITY.md). The node runtime calls Serve with a
// listener; the process that assembles the node (package daemon) wraps that
// listener with TLSListener when the cluster file's tls.clients asks for it.

// TLSListener returns a listener whose connections speak TLS with cfg. With
// optional set, a connection whose first byte is not a TLS handshake record
// (0x16) is served in plaintext instead, so that TLS and plaintext clients
// share the port during a migration (Redis runs a second port for this).
// The TLS handshake runs on the connection's first read, in its goroutine,
// never in Accept.
func TLSListener(l net.Listener, cfg *tls.Config, optional bool) net.Listener {
	if !optional {
		return tls.NewListener(l, cfg)
	}
	return &sniffListener{Listener: l, cfg: cfg}
}

type sniffListener struct {
	net.Listener
	cfg *tls.Config
}

func (l *sniffListener) Accept() (net.Conn, error) {
	c, err := l.Listener.Accept()
	if err != nil {
		return nil, err
	}
	return &sniffConn{Conn: c, cfg: l.cfg}, nil
}

// sniffConn decides on its first read between TLS and plaintext.
type sniffConn struct {
	net.Conn
	cfg  *tls.Config
	once sync.Once
	c    net.Conn // the decided connection
}

// bufConn reads through a bufio.Reader that holds peeked bytes.
type bufConn struct {
	net.Conn
	r *bufio.Reader
}

func (b *bufConn) Read(p []byte) (int, error) { return b.r.Read(p) }

const tlsHandshakeRecord = 0x16

func (s *sniffConn) decide() {
	s.once.Do(func() {
		br := bufio.NewReaderSize(s.Conn, 512)
		bc := &bufConn{Conn: s.Conn, r: br}
		if b, err := br.Peek(1); err == nil && b[0] == tlsHandshakeRecord {
			s.c = tls.Server(bc, s.cfg)
			return
		}
		s.c = bc
	})
}

func (s *sniffConn) Read(p []byte) (int, error) {
	s.decide()
	return s.c.Read(p)
}

// Write before the first read (the "max clients" refusal) goes out in
// plaintext; later writes follow the decision.
func (s *sniffConn) Write(p []byte) (int, error) {
	if s.c == nil {
		return s.Conn.Write(p)
	}
	return s.c.Write(p)
}
