package gateway

import (
	"context"
	"crypto/tls"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestRedisCLIClientCertificateUser: with mutual TLS on the Redis-protocol
// port, a real redis-cli presenting a client certificate signed by the
// cluster CA (`redis-cli --tls --cert --key`) is logged in as the user the
// certificate names, with that user's rights; a certificate naming no
// configured user, a node's certificate and another cluster's certificate
// log nobody in (NOAUTH, the refusal logged once per host), and AUTH still
// switches user over a certificate.
func TestRedisCLIClientCertificateUser(t *testing.T) {
	cli := redisTool(t, "redis-cli")
	dir := t.TempDir()
	if _, err := certs.Generate(dir, certs.Spec{Cluster: "c", Nodes: []certs.Node{{ID: "n1"}},
		Clients: []string{"reporting", "writer", "ghost"}}); err != nil {
		t.Fatal(err)
	}
	// A client certificate of another cluster signed by the same CA.
	ca, err := certs.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	crt, key, err := ca.Issue(certs.Identity{Cluster: "other", Kind: certs.KindClient, Name: "writer"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	os.WriteFile(filepath.Join(dir, "other.crt"), crt, 0o600)
	os.WriteFile(filepath.Join(dir, "other.key"), key, 0o600)

	cfg, err := certs.LoadNodeTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	cfg.ClientAuth = tls.VerifyClientCertIfGiven // as package daemon sets it
	cfg.MinVersion = tls.VersionTLS12
	hash := func(pw string) string {
		h, err := certs.HashPasswordCost(pw, certs.MinIterations)
		if err != nil {
			t.Fatal(err)
		}
		return h
	}
	logger, logged := testLogger()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	s := NewServer(gatewaytest.KV(), ServerOptions{Password: "pw", Cluster: "c",
		Logger: logger,
		Users: []config.User{
			{Name: "reporting", Password: hash("rep-pw"), Access: map[string]string{"*": config.ReadOnly}},
			{Name: "writer", Password: hash("wr-pw"), Access: map[string]string{"*": config.ReadWrite}},
		}})
	done := make(chan error, 1)
	go func() { done <- s.Serve(TLSListener(l, cfg, false)) }()
	t.Cleanup(func() { s.Close(); <-done })
	host, port, _ := net.SplitHostPort(l.Addr().String())

	// redis prints a reply (redis-cli prints error replies on stdout
	// without failing when they are not the last command's).
	redis := func(certFile, keyFile string, args ...string) string {
		t.Helper()
		base := []string{"--tls", "--cacert", filepath.Join(dir, certs.CAFile), "-h", host, "-p", port, "--no-auth-warning"}
		if certFile != "" {
			base = append(base, "--cert", filepath.Join(dir, certFile), "--key", filepath.Join(dir, keyFile))
		}
		ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
		defer cancel()
		out, _ := exec.CommandContext(ctx, cli, append(base, args...)...).CombinedOutput()
		return strings.TrimSpace(string(out))
	}
	client := func(name string) (string, string) { return certs.ClientFiles(name) }

	wc, wk := client("writer")
	if got := redis(wc, wk, "SET", "k", "by writer"); got != "OK" {
		t.Fatalf("writer's certificate, SET: %q", got)
	}
	rc, rk := client("reporting")
	if got := redis(rc, rk, "GET", "k"); got != "by writer" {
		t.Fatalf("reporting's certificate, GET: %q", got)
	}
	if got := redis(rc, rk, "SET", "k", "by reporting"); !strings.Contains(got, "NOPERM User reporting") {
		t.Fatalf("reporting's certificate, SET (read-only user): %q", got)
	}
	// AUTH switches the user over the certificate's.
	if got := redis(rc, rk, "-a", "pw", "SET", "k", "by default"); got != "OK" {
		t.Fatalf("reporting's certificate, then AUTH default: %q", got)
	}
	if got := redis(rc, rk, "--user", "reporting", "-a", "wrong", "GET", "k"); !strings.Contains(got, "WRONGPASS") {
		t.Fatalf("a wrong password over a good certificate: %q", got)
	}

	nc, nk := certs.NodeFiles("n1")
	gc, gk := client("ghost")
	for _, c := range []struct{ what, crt, key string }{
		{"no certificate", "", ""},
		{"a certificate naming no configured user", gc, gk},
		{"a node's certificate", nc, nk},
		{"another cluster's certificate", "other.crt", "other.key"},
	} {
		if got := redis(c.crt, c.key, "GET", "k"); !strings.Contains(got, "NOAUTH") {
			t.Errorf("%s, GET: %q, want NOAUTH", c.what, got)
		}
	}
	// A certificate from another CA fails the handshake.
	other := t.TempDir()
	if _, err := certs.Generate(other, certs.Spec{Cluster: "c", Clients: []string{"writer"}}); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{wc, wk} {
		b, _ := os.ReadFile(filepath.Join(other, f))
		os.WriteFile(filepath.Join(dir, "ca2-"+f), b, 0o600)
	}
	if got := redis("ca2-"+wc, "ca2-"+wk, "SET", "k", "x"); got == "OK" {
		t.Errorf("a client certificate of another CA wrote: %q", got)
	}
	// Refusals are logged once per kind and host within ten seconds: the
	// ghost's came first, the three after it are suppressed.
	redis(gc, gk, "GET", "k")
	out := logged()
	if n := strings.Count(out, "client certificate refused"); n != 1 || !strings.Contains(out, `names user \"ghost\", which is not configured`) {
		t.Errorf("certificate refusals logged %d times, want once (the ghost's):\n%s", n, out)
	}
}
