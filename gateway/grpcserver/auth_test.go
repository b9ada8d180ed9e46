package grpcserver

import (
	"bytes"
	"context"
	"crypto/tls"
	"log/slog"
	"net"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/credentials"
	"google.golang.org/grpc/metadata"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/api/synodpb"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// syncBuf is a log sink safe for the server's goroutines.
type syncBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuf) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuf) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

func hashPW(t *testing.T, pw string) string {
	h, err := certs.HashPasswordCost(pw, certs.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	return h
}

// authServer starts a TLS gRPC server over namespaces default and orders
// with the password "admin-pw" and two users, and returns a dialer for
// clients with the given certificate (nil: none) and the server's log.
func authServer(t *testing.T) (dial func(cert *tls.Certificate) synodpb.SynodClient, dir string, log *syncBuf) {
	t.Helper()
	dir = t.TempDir()
	if _, err := certs.Generate(dir, certs.Spec{Cluster: "c", Nodes: []certs.Node{{ID: "n1"}},
		Clients: []string{"reporting", "orders-app", "ghost"}}); err != nil {
		t.Fatal(err)
	}
	tc, err := certs.LoadNodeTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	tc.ClientAuth = tls.VerifyClientCertIfGiven // as package daemon sets it
	tc.MinVersion = tls.VersionTLS12
	b := gatewaytest.New(
		config.Namespace{Name: "default", Protocol: "memory", Service: "kv"},
		config.Namespace{Name: "orders", Protocol: "memory", Service: "kv"})
	log = &syncBuf{}
	s := New(b, Options{
		Password: "admin-pw", Cluster: "c", TLS: tc,
		Logger: slog.New(slog.NewTextHandler(log, nil)),
		Users: []config.User{
			{Name: "reporting", Password: hashPW(t, "rep-pw"), Access: map[string]string{"*": config.ReadOnly}},
			{Name: "orders-app", Password: hashPW(t, "ord-pw"), Access: map[string]string{"orders": config.ReadWrite}},
		},
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(l) }()
	t.Cleanup(func() { s.Close(); <-done })
	return func(cert *tls.Certificate) synodpb.SynodClient {
		ccfg := &tls.Config{RootCAs: tc.RootCAs, ServerName: "localhost"}
		if cert != nil {
			ccfg.Certificates = []tls.Certificate{*cert}
		}
		cc, err := grpc.NewClient("passthrough:///"+l.Addr().String(), grpc.WithTransportCredentials(credentials.NewTLS(ccfg)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cc.Close() })
		return synodpb.NewSynodClient(cc)
	}, dir, log
}

func loadPair(t *testing.T, dir, cert, key string) *tls.Certificate {
	t.Helper()
	p, err := tls.LoadX509KeyPair(filepath.Join(dir, cert), filepath.Join(dir, key))
	if err != nil {
		t.Fatal(err)
	}
	return &p
}

func clientPair(t *testing.T, dir, name string) *tls.Certificate {
	c, k := certs.ClientFiles(name)
	return loadPair(t, dir, c, k)
}

// as returns a call context with user and password metadata (user "" sends
// the password alone).
func as(t *testing.T, user, pw string) context.Context {
	c := ctx(t)
	if user != "" {
		c = metadata.AppendToOutgoingContext(c, synodpb.UserKey, user)
	}
	if pw != "" {
		c = metadata.AppendToOutgoingContext(c, synodpb.PasswordKey, pw)
	}
	return c
}

func wantCode(t *testing.T, what string, err error, code codes.Code, text string) {
	t.Helper()
	if status.Code(err) != code || !strings.Contains(status.Convert(err).Message(), text) {
		t.Fatalf("%s: %v, want %v containing %q", what, err, code, text)
	}
}

// TestUsersOverGRPC: the cluster file's users and their per-namespace
// rights apply on the gRPC port as on the Redis one, with the password in
// metadata.
func TestUsersOverGRPC(t *testing.T) {
	dial, _, _ := authServer(t)
	c := dial(nil)
	set := func(ns string) *synodpb.Request {
		return &synodpb.Request{Namespace: ns, Op: op("set", "k", "v")}
	}
	get := &synodpb.Request{Op: op("get", "k")}

	_, err := c.Do(ctx(t), set(""))
	wantCode(t, "no credentials", err, codes.Unauthenticated, "authentication required")
	_, err = c.Do(as(t, "", "wrong"), set(""))
	wantCode(t, "wrong password", err, codes.Unauthenticated, "WRONGPASS")
	_, err = c.Do(as(t, "reporting", "ord-pw"), set(""))
	wantCode(t, "another user's password", err, codes.Unauthenticated, "WRONGPASS")
	_, err = c.Do(as(t, "reporting", ""), set(""))
	wantCode(t, "user without password", err, codes.Unauthenticated, "without a password")

	if _, err := c.Do(as(t, "", "admin-pw"), set("")); err != nil {
		t.Fatalf("default user writes: %v", err)
	}
	if _, err := c.Do(as(t, "default", "admin-pw"), set("orders")); err != nil {
		t.Fatalf("default user, named, writes: %v", err)
	}
	// A read-only user reads but cannot write.
	r, err := c.Do(as(t, "reporting", "rep-pw"), get)
	if err != nil || string(r.GetResult().GetBytes()) != "v" {
		t.Fatalf("read-only user reads: %v %v", r, err)
	}
	_, err = c.Do(as(t, "reporting", "rep-pw"), set(""))
	wantCode(t, "read-only user writes", err, codes.PermissionDenied, "NOPERM User reporting has no permissions to run the 'set' command")
	_, err = c.Do(as(t, "reporting", "rep-pw"), &synodpb.Request{Ops: []*synodpb.Op{op("get", "k"), op("del", "k")}})
	wantCode(t, "read-only user's group with a write", err, codes.PermissionDenied, "NOPERM")
	// A user of one namespace reaches no other.
	if _, err := c.Do(as(t, "orders-app", "ord-pw"), set("orders")); err != nil {
		t.Fatalf("orders-app writes orders: %v", err)
	}
	_, err = c.Do(as(t, "orders-app", "ord-pw"), get)
	wantCode(t, "orders-app reads default", err, codes.PermissionDenied, "no permissions to access the 'default' namespace")
	nss, err := c.Namespaces(as(t, "orders-app", "ord-pw"), &synodpb.NamespacesRequest{})
	if err != nil || len(nss.GetNamespaces()) != 1 || nss.GetNamespaces()[0].GetName() != "orders" {
		t.Fatalf("orders-app's namespaces: %v %v, want orders alone", nss, err)
	}
	nss, err = c.Namespaces(as(t, "", "admin-pw"), &synodpb.NamespacesRequest{})
	if err != nil || len(nss.GetNamespaces()) != 2 {
		t.Fatalf("default user's namespaces: %v %v, want both", nss, err)
	}
	_, err = c.Info(ctx(t), &synodpb.InfoRequest{})
	wantCode(t, "Info without credentials", err, codes.Unauthenticated, "authentication required")
}

// TestCertificateNamesUser: with TLS, a client certificate signed by the
// cluster CA names the user (as etcd takes the certificate's CN); a node's
// certificate or one naming no configured user is refused; a password in
// metadata wins over the certificate.
func TestCertificateNamesUser(t *testing.T) {
	dial, dir, _ := authServer(t)
	rep := dial(clientPair(t, dir, "reporting"))
	r, err := rep.Do(ctx(t), &synodpb.Request{Op: op("get", "k")})
	if err != nil || r.GetResult() == nil {
		t.Fatalf("reporting's certificate reads: %v %v", r, err)
	}
	_, err = rep.Do(ctx(t), &synodpb.Request{Op: op("set", "k", "v")})
	wantCode(t, "reporting's certificate writes", err, codes.PermissionDenied, "NOPERM User reporting")
	if _, err := rep.Do(as(t, "orders-app", "ord-pw"), &synodpb.Request{Namespace: "orders", Op: op("set", "k", "v")}); err != nil {
		t.Fatalf("a password in metadata over reporting's certificate: %v", err)
	}
	_, err = rep.Do(as(t, "orders-app", "bad"), &synodpb.Request{Op: op("get", "k")})
	wantCode(t, "a wrong password with a good certificate", err, codes.Unauthenticated, "WRONGPASS")

	_, err = dial(clientPair(t, dir, "ghost")).Do(ctx(t), &synodpb.Request{Op: op("get", "k")})
	wantCode(t, "certificate of an unknown user", err, codes.Unauthenticated, `names user "ghost", which is not configured`)
	nc, nk := certs.NodeFiles("n1")
	_, err = dial(loadPair(t, dir, nc, nk)).Do(ctx(t), &synodpb.Request{Op: op("get", "k")})
	wantCode(t, "a node's certificate", err, codes.Unauthenticated, "not a client")

	// A certificate from another CA fails the handshake.
	other := t.TempDir()
	if _, err := certs.Generate(other, certs.Spec{Cluster: "c", Clients: []string{"reporting"}}); err != nil {
		t.Fatal(err)
	}
	if _, err := dial(clientPair(t, other, "reporting")).Do(ctx(t), &synodpb.Request{Op: op("get", "k")}); err == nil {
		t.Fatal("a client certificate from another CA was accepted")
	}
}

// TestRefusalsLoggedOnce: a flood of refused calls from one host costs one
// log line per kind within the interval, not one per call.
func TestRefusalsLoggedOnce(t *testing.T) {
	dial, _, log := authServer(t)
	c := dial(nil)
	for range 10 {
		c.Do(as(t, "", "wrong"), &synodpb.Request{Op: op("get", "k")})
		c.Do(as(t, "reporting", "rep-pw"), &synodpb.Request{Op: op("set", "k", "v")})
	}
	out := log.String()
	if n := strings.Count(out, "WRONGPASS"); n != 1 {
		t.Errorf("10 wrong passwords logged %d times, want once:\n%s", n, out)
	}
	if n := strings.Count(out, "NOPERM"); n != 1 {
		t.Errorf("10 refused writes logged %d times, want once:\n%s", n, out)
	}
}
