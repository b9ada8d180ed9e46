package gateway

import (
	"crypto/tls"
	"net"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// tlsServer serves a KV backend over TLS with a node certificate made by
// package certs, and returns its address and the CA file.
func tlsServer(t *testing.T, optional bool, opts ServerOptions) (addr, caFile string) {
	t.Helper()
	dir := t.TempDir()
	if _, err := certs.Generate(dir, certs.Spec{Cluster: "c", Nodes: []certs.Node{{ID: "n1"}}}); err != nil {
		t.Fatal(err)
	}
	cfg, err := certs.LoadNodeTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.MinVersion = tls.VersionTLS12
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(gatewaytest.KV(), opts)
	done := make(chan error, 1)
	go func() { done <- s.Serve(TLSListener(l, cfg, optional)) }()
	t.Cleanup(func() { s.Close(); <-done })
	return l.Addr().String(), filepath.Join(dir, certs.CAFile)
}

func TestRedisCLIOverTLS(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	addr, ca := tlsServer(t, false, ServerOptions{Password: "pw"})
	host, port, _ := net.SplitHostPort(addr)
	redis := func(args ...string) string {
		base := []string{"--tls", "--cacert", ca, "-h", host, "-p", port, "-a", "pw", "--no-auth-warning"}
		return strings.TrimSpace(runTool(t, "", cli, append(base, args...)...))
	}
	if got := redis("SET", "k", "over tls"); got != "OK" {
		t.Fatalf("SET: %q", got)
	}
	if got := redis("GET", "k"); got != "over tls" {
		t.Fatalf("GET: %q", got)
	}
	// Plaintext to the TLS-only port gets no answer.
	c := dial(t, addr)
	c.send("PING")
	c.expectClosed()
}

func TestOptionalTLSServesBoth(t *testing.T) {
	addr, ca := tlsServer(t, true, ServerOptions{})
	if got := dial(t, addr).do("PING"); got != "PONG" {
		t.Fatalf("plaintext PING: %s", got)
	}
	pool, err := certs.LoadPool(ca)
	if err != nil {
		t.Fatal(err)
	}
	nc, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool, ServerName: "localhost"})
	if err != nil {
		t.Fatal(err)
	}
	nc.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	b := make([]byte, 7)
	if n, err := nc.Read(b); err != nil || string(b[:n]) != "+PONG\r\n" {
		t.Fatalf("TLS PING: %q %v", b[:n], err)
	}
	nc.Close()
}
