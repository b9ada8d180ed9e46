package cluster

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"net"
	"strings"
	"time"
)

// Ping dials a node's client address and sends a RESP PING (after AUTH when
// password is set); it succeeds only on a +PONG reply within timeout.
func Ping(addr, password string, timeout time.Duration) error {
	return PingTLS(addr, password, nil, timeout)
}

// PingTLS is Ping over TLS with tc (plaintext when tc is nil). The server
// name defaults to addr's host.
func PingTLS(addr, password string, tc *tls.Config, timeout time.Duration) error {
	var conn net.Conn
	var err error
	if tc != nil {
		if tc.ServerName == "" {
			tc = tc.Clone()
			tc.ServerName, _, _ = net.SplitHostPort(addr)
		}
		conn, err = tls.DialWithDialer(&net.Dialer{Timeout: timeout}, "tcp", addr, tc)
	} else {
		conn, err = net.DialTimeout("tcp", addr, timeout)
	}
	if err != nil {
		return err
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(timeout))
	r := bufio.NewReader(conn)
	if password != "" {
		if _, err := fmt.Fprintf(conn, "*2\r\n$4\r\nAUTH\r\n$%d\r\n%s\r\n", len(password), password); err != nil {
			return err
		}
		line, err := r.ReadString('\n')
		if err != nil {
			return fmt.Errorf("AUTH: %w", err)
		}
		if strings.TrimRight(line, "\r\n") != "+OK" {
			return fmt.Errorf("AUTH: unexpected reply %q", strings.TrimRight(line, "\r\n"))
		}
	}
	if _, err := conn.Write([]byte("*1\r\n$4\r\nPING\r\n")); err != nil {
		return err
	}
	line, err := r.ReadString('\n')
	if err != nil {
		return fmt.Errorf("PING: %w", err)
	}
	if got := strings.TrimRight(line, "\r\n"); got != "+PONG" {
		return fmt.Errorf("PING: unexpected reply %q", got)
	}
	return nil
}
