// Package pgserver starts a private PostgreSQL server from the Debian
// packages (/usr/lib/postgresql/<version>/bin): initdb into a fresh data
// directory, postgres on a free 127.0.0.1 port with its socket in that
// directory, stopped by its PID and removed by Stop. Tests and the seed
// 002 durability experiment use it; when the binaries are absent, Start
// returns ErrNotInstalled and callers skip with that message.
package pgserver

import (
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"
)

// ErrNotInstalled says no PostgreSQL binaries were found.
var ErrNotInstalled = errors.New("PostgreSQL is not installed (no /usr/lib/postgresql/*/bin/postgres; apt-get install -y postgresql)")

// Server is a running private server.
type Server struct {
	Dir  string // data directory (removed by Stop)
	Port int
	bin  string
	cred *syscall.Credential
	cmd  *exec.Cmd
	done chan error
}

// Bin returns the newest installed PostgreSQL bin directory.
func Bin() (string, error) {
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	sort.Strings(dirs)
	for i := len(dirs) - 1; i >= 0; i-- {
		if _, err := os.Stat(filepath.Join(dirs[i], "postgres")); err == nil {
			return dirs[i], nil
		}
	}
	return "", ErrNotInstalled
}

// Start creates a cluster in a new temporary directory and starts it.
// As root (PostgreSQL refuses to run as root) the server runs as the
// postgres user, which must exist (the Debian package creates it).
func Start() (*Server, error) { return StartIn("") }

// StartIn is Start with the data directory created inside parent ("":
// the system's temporary directory), so that whoever removes parent
// removes a directory a Stop that never finished left (an experiment's
// scratch directory). As root, parent is made traversable (mode 0711) for
// the postgres user, and so are its ancestors inside the system's
// temporary directory (a test's t.TempDir is two levels of mode 0700).
func StartIn(parent string) (*Server, error) {
	bin, err := Bin()
	if err != nil {
		return nil, err
	}
	if parent != "" && os.Geteuid() == 0 {
		if err := traversable(parent); err != nil {
			return nil, err
		}
	}
	dir, err := os.MkdirTemp(parent, "synod-pg-")
	if err != nil {
		return nil, err
	}
	s := &Server{Dir: dir, bin: bin, done: make(chan error, 1)}
	var cred *syscall.Credential
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgserver: running as root and no postgres user: %w", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			os.RemoveAll(dir)
			return nil, err
		}
	}
	s.cred = cred
	data := filepath.Join(dir, "data")
	run := s.command
	if out, err := run("initdb", "-D", data, "-U", "synod", "--auth=trust", "--no-sync", "-E", "UTF8").CombinedOutput(); err != nil {
		os.RemoveAll(dir)
		return nil, fmt.Errorf("pgserver: initdb: %v\n%s", err, out)
	}
	port, err := freePort()
	if err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	s.Port = port
	logf, _ := os.Create(filepath.Join(dir, "postgres.log"))
	s.cmd = run("postgres", "-D", data, "-p", strconv.Itoa(port), "-h", "127.0.0.1", "-k", dir,
		"-c", "fsync=on", "-c", "max_connections=50", "-c", "shared_buffers=16MB")
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		os.RemoveAll(dir)
		return nil, err
	}
	go func() { s.done <- s.cmd.Wait(); logf.Close() }()
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), time.Second)
		if err == nil {
			c.Close()
			break
		}
		select {
		case err := <-s.done:
			log, _ := os.ReadFile(filepath.Join(dir, "postgres.log"))
			os.RemoveAll(dir)
			return nil, fmt.Errorf("pgserver: postgres exited: %v\n%s", err, log)
		default:
		}
		if time.Now().After(deadline) {
			s.Stop()
			return nil, fmt.Errorf("pgserver: postgres did not listen on %d within 30s", port)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := s.CreateDB("synod"); err != nil {
		s.Stop()
		return nil, err
	}
	return s, nil
}

func (s *Server) command(name string, args ...string) *exec.Cmd {
	c := exec.Command(filepath.Join(s.bin, name), args...)
	c.Dir = s.Dir
	if s.cred != nil {
		c.SysProcAttr = &syscall.SysProcAttr{Credential: s.cred}
	}
	return c
}

// CreateDB creates a database and returns its connection string. The
// server accepts connections a moment before it accepts logins, so it
// tries a few times.
func (s *Server) CreateDB(name string) (string, error) {
	var out []byte
	var err error
	for i := 0; i < 20; i++ {
		out, err = s.command("createdb", "-h", "127.0.0.1", "-p", strconv.Itoa(s.Port), "-U", "synod", name).CombinedOutput()
		if err == nil {
			return fmt.Sprintf("postgres://synod@127.0.0.1:%d/%s?sslmode=disable", s.Port, name), nil
		}
		time.Sleep(100 * time.Millisecond)
	}
	return "", fmt.Errorf("pgserver: createdb %s: %v %s", name, err, out)
}

// DSN is the connection string for the server's database synod.
func (s *Server) DSN() string {
	return fmt.Sprintf("postgres://synod@127.0.0.1:%d/synod?sslmode=disable", s.Port)
}

// Stop stops the server by its PID (SIGINT: fast shutdown, then SIGKILL)
// and removes its data directory.
func (s *Server) Stop() error {
	if s.cmd != nil && s.cmd.Process != nil {
		_ = s.cmd.Process.Signal(syscall.SIGINT)
		select {
		case <-s.done:
		case <-time.After(10 * time.Second):
			_ = s.cmd.Process.Kill()
			<-s.done
		}
	}
	return os.RemoveAll(s.Dir)
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// traversable gives others search (x) permission on dir and on its
// ancestors below the system's temporary directory; a directory outside
// it that others cannot search is an error.
func traversable(dir string) error {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return err
	}
	tmp := filepath.Clean(os.TempDir())
	for d := dir; d != tmp && d != "/" && d != "."; d = filepath.Dir(d) {
		st, err := os.Stat(d)
		if err != nil {
			return err
		}
		if st.Mode().Perm()&0o001 != 0 {
			continue
		}
		if !strings.HasPrefix(d, tmp+string(filepath.Separator)) {
			return fmt.Errorf("pgserver: %s is not searchable by the postgres user; use a directory under %s", d, tmp)
		}
		if err := os.Chmod(d, st.Mode().Perm()|0o011); err != nil {
			return err
		}
	}
	return nil
}
