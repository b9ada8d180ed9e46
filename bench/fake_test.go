package bench

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"testing"
)

// fakeServer is a tiny map-based Redis-protocol server on 127.0.0.1 for tests.
// It understands GET, SET, AUTH, PING and SYNOD; inject may replace a reply.
type fakeServer struct {
	ln net.Listener
	wg sync.WaitGroup

	mu    sync.Mutex
	data  map[string]string
	cmds  map[string]int // command name -> count
	setup [][]string     // per connection, the non-GET/SET commands in order
	conns map[net.Conn]bool
	// inject, if set, is called for every GET/SET with the command's ordinal
	// among commands of its name (1-based); it returns a raw reply to send
	// instead (e.g. "-ERR x\r\n"), or "close" to drop the connection, or "".
	inject func(name string, n int) string
	// refuseSynod makes SYNOD commands fail, as on Redis.
	refuseSynod bool
	password    string
	// leader is the client address SYNOD LEADER names ("": none known).
	leader string
}

func newFakeServer(t *testing.T) *fakeServer {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := &fakeServer{ln: ln, data: map[string]string{}, cmds: map[string]int{}, conns: map[net.Conn]bool{}}
	s.wg.Add(1)
	go s.accept()
	t.Cleanup(s.stop)
	return s
}

func (s *fakeServer) addr() string { return s.ln.Addr().String() }

func (s *fakeServer) stop() {
	s.ln.Close()
	s.mu.Lock()
	for c := range s.conns {
		c.Close()
	}
	s.mu.Unlock()
	s.wg.Wait()
}

func (s *fakeServer) count(name string) int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.cmds[name]
}

func (s *fakeServer) accept() {
	defer s.wg.Done()
	for {
		c, err := s.ln.Accept()
		if err != nil {
			return
		}
		s.mu.Lock()
		s.conns[c] = true
		idx := len(s.setup)
		s.setup = append(s.setup, nil)
		s.mu.Unlock()
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.serve(c, idx)
			s.mu.Lock()
			delete(s.conns, c)
			s.mu.Unlock()
			c.Close()
		}()
	}
}

func readCommand(br *bufio.Reader) ([]string, error) {
	line, err := br.ReadString('\n')
	if err != nil {
		return nil, err
	}
	if !strings.HasPrefix(line, "*") {
		return nil, fmt.Errorf("want array, got %q", line)
	}
	n, err := strconv.Atoi(strings.TrimSpace(line[1:]))
	if err != nil {
		return nil, err
	}
	args := make([]string, n)
	for i := range args {
		line, err := br.ReadString('\n')
		if err != nil {
			return nil, err
		}
		l, err := strconv.Atoi(strings.TrimSpace(line[1:]))
		if err != nil || line[0] != '$' {
			return nil, fmt.Errorf("bad bulk header %q", line)
		}
		b := make([]byte, l+2)
		if _, err := io.ReadFull(br, b); err != nil {
			return nil, err
		}
		args[i] = string(b[:l])
	}
	return args, nil
}

func bulk(s string) string { return fmt.Sprintf("$%d\r\n%s\r\n", len(s), s) }

func (s *fakeServer) serve(c net.Conn, idx int) {
	br := bufio.NewReader(c)
	for {
		args, err := readCommand(br)
		if err != nil || len(args) == 0 {
			return
		}
		name := strings.ToUpper(args[0])
		var reply string
		s.mu.Lock()
		s.cmds[name]++
		n := s.cmds[name]
		inject := s.inject
		if name != "GET" && name != "SET" {
			s.setup[idx] = append(s.setup[idx], strings.Join(args, " "))
		}
		s.mu.Unlock()
		if inject != nil && (name == "GET" || name == "SET") {
			reply = inject(name, n)
			if reply == "close" {
				return
			}
		}
		if reply == "" {
			s.mu.Lock()
			switch {
			case name == "GET" && len(args) == 2:
				if v, ok := s.data[args[1]]; ok {
					reply = bulk(v)
				} else {
					reply = "$-1\r\n"
				}
			case name == "SET" && len(args) == 3:
				s.data[args[1]] = args[2]
				reply = "+OK\r\n"
			case name == "PING":
				reply = "+PONG\r\n"
			case name == "AUTH" && len(args) == 2:
				if args[1] == s.password {
					reply = "+OK\r\n"
				} else {
					reply = "-WRONGPASS invalid password\r\n"
				}
			case name == "SYNOD" && !s.refuseSynod && len(args) == 2 && strings.EqualFold(args[1], "leader"):
				reply = "*-1\r\n"
				if s.leader != "" {
					reply = "*2\r\n" + bulk("nX") + bulk(s.leader)
				}
			case name == "SYNOD" && !s.refuseSynod:
				reply = "+OK\r\n"
			default:
				reply = "-ERR unknown command '" + args[0] + "'\r\n"
			}
			s.mu.Unlock()
		}
		if _, err := io.WriteString(c, reply); err != nil {
			return
		}
	}
}

func bufioReader(c net.Conn) *bufio.Reader { return bufio.NewReader(c) }
func bufioWriter(c net.Conn) *bufio.Writer { return bufio.NewWriter(c) }
