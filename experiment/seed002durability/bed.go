package seed002durability

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"

	"github.com/synod-dev/synod/durability"
	"github.com/synod-dev/synod/durability/pgserver"
	"github.com/synod-dev/synod/durability/sqlstore"
	"github.com/synod-dev/synod/wire"
)

// The test bed: the seed's three machines (clients, the service, the
// database and backup) as three parts of this process on loopback TCP.
// A client sends one request line and waits for the answer line; the
// service runs each request as one atomic action (startA .. commitA):
// the database statements in one transaction, the replicated objects'
// buffer shipped to the backup, whose acknowledgement the answer waits
// for. Requests are served one at a time, as one service instance
// holding its state objects does.

// backup is the backup service: it acknowledges each shipped buffer on
// receipt, then applies it (IV.C.2: "the backup can issue the state
// updates after sending this acknowledgment").
type backup struct {
	ln   net.Listener
	set  *durability.Set
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func startBackup(set *durability.Set) (*backup, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	b := &backup{ln: ln, set: set}
	b.wg.Add(1)
	go b.serve()
	return b, nil
}

func (b *backup) serve() {
	defer b.wg.Done()
	c, err := b.ln.Accept()
	if err != nil {
		return
	}
	defer c.Close()
	r := bufio.NewReader(c)
	var hdr [4]byte
	for {
		if _, err := io.ReadFull(r, hdr[:]); err != nil {
			return
		}
		buf := make([]byte, binary.BigEndian.Uint32(hdr[:]))
		if _, err := io.ReadFull(r, buf); err != nil {
			return
		}
		if _, err := c.Write([]byte{1}); err != nil {
			return
		}
		d := wire.NewDecoder(buf)
		ups := durability.DecodeUpdates(d)
		if err := d.Done(); err == nil {
			err = b.set.Apply(ups)
		}
		if err != nil {
			b.mu.Lock()
			b.errs = append(b.errs, err)
			b.mu.Unlock()
		}
	}
}

func (b *backup) close() error {
	b.ln.Close()
	b.wg.Wait()
	if len(b.errs) > 0 {
		return fmt.Errorf("backup: %v", b.errs[0])
	}
	return nil
}

// service is the primary service process.
type service struct {
	ln     net.Listener
	handle func(line string) (string, durability.Work, error)
	store  *sqlstore.Store
	bconn  net.Conn
	mu     sync.Mutex
	wg     sync.WaitGroup
	conns  sync.WaitGroup
	failed error
}

func startService(handle func(string) (string, durability.Work, error), store *sqlstore.Store, bk *backup) (*service, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	s := &service{ln: ln, handle: handle, store: store}
	if bk != nil {
		if s.bconn, err = net.Dial("tcp", bk.ln.Addr().String()); err != nil {
			ln.Close()
			return nil, err
		}
	}
	s.wg.Add(1)
	go s.accept()
	return s, nil
}

func (s *service) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.conns.Add(1)
		go s.conn(c)
	}
}

func (s *service) conn(c net.Conn) {
	defer s.conns.Done()
	defer c.Close()
	r := bufio.NewReader(c)
	for {
		line, err := r.ReadString('\n')
		if err != nil {
			return
		}
		ans, err := s.do(strings.TrimSpace(line))
		if err != nil {
			s.mu.Lock()
			if s.failed == nil {
				s.failed = err
			}
			s.mu.Unlock()
			ans = "ERR " + err.Error()
		}
		if _, err := io.WriteString(c, ans+"\n"); err != nil {
			return
		}
	}
}

// do runs one request as one atomic action and makes it durable before
// the answer: commitA's statements in one transaction, then the buffer to
// the backup and its acknowledgement.
func (s *service) do(line string) (string, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	ans, w, err := s.handle(line)
	if err != nil {
		return "", err
	}
	if len(w.SQL) > 0 {
		if err := s.store.Exec(context.Background(), w.SQL); err != nil {
			return "", err
		}
	}
	if len(w.Ship) > 0 {
		e := &wire.Encoder{B: make([]byte, 4, 64)}
		durability.EncodeUpdates(e, w.Ship)
		binary.BigEndian.PutUint32(e.B, uint32(len(e.B)-4))
		if _, err := s.bconn.Write(e.B); err != nil {
			return "", err
		}
		var ack [1]byte
		if _, err := io.ReadFull(s.bconn, ack[:]); err != nil {
			return "", err
		}
	}
	return ans, nil
}

func (s *service) close() error {
	s.ln.Close()
	s.wg.Wait()
	if s.bconn != nil {
		s.bconn.Close()
	}
	return s.failed
}

// client is one connection to the service.
type client struct {
	c net.Conn
	r *bufio.Reader
}

func dial(s *service) (*client, error) {
	c, err := net.Dial("tcp", s.ln.Addr().String())
	if err != nil {
		return nil, err
	}
	return &client{c: c, r: bufio.NewReader(c)}, nil
}

func (c *client) call(line string) (string, error) {
	if _, err := io.WriteString(c.c, line+"\n"); err != nil {
		return "", err
	}
	ans, err := c.r.ReadString('\n')
	if err != nil {
		return "", err
	}
	ans = strings.TrimSpace(ans)
	if strings.HasPrefix(ans, "ERR ") {
		return "", fmt.Errorf("%s", ans[4:])
	}
	return ans, nil
}

// database opens the cell's database: a fresh SQLite file in dir, or a
// fresh private PostgreSQL server (stopped by close).
func database(driver, dir string, sync bool) (*sqlstore.Store, func(), error) {
	switch driver {
	case "sqlite":
		st, err := sqlstore.Open(sqlstore.Config{Driver: sqlstore.SQLite, DSN: dir + "/state.db", Sync: sync})
		if err != nil {
			return nil, nil, err
		}
		return st, func() { st.Close() }, nil
	case "postgres":
		srv, err := pgserver.Start()
		if err != nil {
			return nil, nil, err
		}
		st, err := sqlstore.Open(sqlstore.Config{Driver: sqlstore.Postgres, DSN: srv.DSN(), Sync: sync})
		if err != nil {
			srv.Stop()
			return nil, nil, err
		}
		return st, func() { st.Close(); srv.Stop() }, nil
	}
	return nil, nil, fmt.Errorf("unknown database %q", driver)
}

func atoi(s string) int64 {
	v, _ := strconv.ParseInt(s, 10, 64)
	return v
}
