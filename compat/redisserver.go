package compat

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"time"
)

// RedisServer is a redis-server process started by StartRedis.
type RedisServer struct {
	Addr string
	cmd  *exec.Cmd
	dir  string
}

// RedisDatabases is how many numbered databases StartRedis configures: the
// go-redis pass uses 0..31, the redis-py pass 32..63.
const RedisDatabases = 64

// PyDBOffset is the first database of the redis-py pass.
const PyDBOffset = 32

// StartRedis starts bin (redis-server) on a free 127.0.0.1 port with dir as
// its working directory, no persistence and RedisDatabases databases, and
// waits until it answers PING.
func StartRedis(bin, dir string) (*RedisServer, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close()
	logf, err := os.Create(filepath.Join(dir, "redis.log"))
	if err != nil {
		return nil, err
	}
	defer logf.Close()
	cmd := exec.Command(bin, "--port", strconv.Itoa(port), "--bind", "127.0.0.1", "--dir", dir,
		"--save", "", "--appendonly", "no", "--databases", strconv.Itoa(RedisDatabases), "--daemonize", "no")
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = childAttr()
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("compat: starting %s: %w", bin, err)
	}
	s := &RedisServer{Addr: net.JoinHostPort("127.0.0.1", strconv.Itoa(port)), cmd: cmd, dir: dir}
	deadline := time.Now().Add(10 * time.Second)
	for {
		if pingOK(s.Addr) {
			return s, nil
		}
		if time.Now().After(deadline) {
			s.Stop()
			b, _ := os.ReadFile(filepath.Join(dir, "redis.log"))
			return nil, fmt.Errorf("compat: redis-server on %s did not answer PING within 10s; its log:\n%s", s.Addr, b)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// Stop ends the server by its PID (SIGTERM, then SIGKILL after 5 s) and waits.
func (s *RedisServer) Stop() {
	if s == nil || s.cmd.Process == nil {
		return
	}
	_ = s.cmd.Process.Signal(syscall.SIGTERM)
	done := make(chan struct{})
	go func() { _ = s.cmd.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		_ = s.cmd.Process.Kill()
		<-done
	}
}

func pingOK(addr string) bool {
	c, err := net.DialTimeout("tcp", addr, time.Second)
	if err != nil {
		return false
	}
	defer c.Close()
	_ = c.SetDeadline(time.Now().Add(time.Second))
	if _, err := c.Write([]byte("PING\r\n")); err != nil {
		return false
	}
	line, err := bufio.NewReader(c).ReadString('\n')
	return err == nil && line == "+PONG\r\n"
}
