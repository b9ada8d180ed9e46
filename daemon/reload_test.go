package daemon

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log/slog"
	"math/big"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/node"
)

type lockedBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func listen(t *testing.T) net.Listener {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// serial is the serial number of the certificate the TLS server at addr
// presents to a client holding cert (nil: none) and offering protos.
func serial(t *testing.T, addr string, pool *x509.CertPool, cert *tls.Certificate, protos ...string) *big.Int {
	t.Helper()
	cfg := &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", NextProtos: protos}
	if cert != nil {
		cfg.Certificates = []tls.Certificate{*cert}
	}
	c, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", addr, cfg)
	if err != nil {
		t.Fatalf("TLS to %s: %v", addr, err)
	}
	defer c.Close()
	return c.ConnectionState().PeerCertificates[0].SerialNumber
}

// TestCertificateReloadOnSIGHUP: a node made by New with tls on its client,
// gRPC, metrics and peer ports takes new certificates on SIGHUP: new
// handshakes on every port present the new one, a connection opened before
// keeps working, and a broken file is refused with a log line while the
// certificate in use stays. The metrics port asks for the bearer token.
func TestCertificateReloadOnSIGHUP(t *testing.T) {
	dir := t.TempDir()
	pl, cl, gl, ml := listen(t), listen(t), listen(t), listen(t)
	token := certs.NewSecret()
	cfg := &config.Cluster{Cluster: "rl", Durability: config.Memory, Secret: certs.NewSecret(),
		TLS:          &config.TLS{Dir: dir, Clients: config.ClientsRequired, Metrics: config.ClientsRequired},
		MetricsToken: token,
		Nodes:        []config.Node{{ID: "n1", Peer: pl.Addr().String(), Client: cl.Addr().String(), Metrics: ml.Addr().String(), GRPC: gl.Addr().String()}},
		Namespaces:   []config.Namespace{{Name: "default", Protocol: "paxos", Service: "kv"}}}
	spec := certs.Spec{Cluster: cfg.Cluster, Nodes: []certs.Node{{ID: "n1"}}}
	if _, err := certs.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	logs := &lockedBuf{}
	log := slog.New(slog.NewTextHandler(logs, nil))
	nodes := startNodes(t, cfg, func(int) node.Options {
		return node.Options{Logger: log, PeerListener: pl, ClientListener: cl, GRPCListener: gl, MetricsListener: ml}
	})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { ReloadOnSIGHUP(ctx, nodes[0], log); close(done) }()
	t.Cleanup(func() { cancel(); <-done })

	pool, err := certs.LoadPool(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	nc, nk := certs.NodeFiles("n1")
	peerCert, err := tls.LoadX509KeyPair(filepath.Join(dir, nc), filepath.Join(dir, nk))
	if err != nil {
		t.Fatal(err)
	}
	ports := map[string]func() *big.Int{
		"client":  func() *big.Int { return serial(t, cl.Addr().String(), pool, nil) },
		"gRPC":    func() *big.Int { return serial(t, gl.Addr().String(), pool, nil, "h2") },
		"metrics": func() *big.Int { return serial(t, ml.Addr().String(), pool, nil) },
		"peer":    func() *big.Int { return serial(t, pl.Addr().String(), pool, &peerCert) },
	}
	old := ports["client"]()
	for name, f := range ports {
		if s := f(); s.Cmp(old) != 0 {
			t.Fatalf("%s port presents serial %v, client port %v", name, s, old)
		}
	}

	// A connection opened before the reload.
	before, err := tls.Dial("tcp", cl.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer before.Close()
	br := bufio.NewReader(before)
	ping := func() string {
		before.SetDeadline(time.Now().Add(10 * time.Second))
		before.Write([]byte("*1\r\n$4\r\nPING\r\n"))
		line, _ := br.ReadString('\n')
		return strings.TrimSpace(line)
	}
	if r := ping(); r != "+PONG" {
		t.Fatalf("PING before the reload: %q", r)
	}

	if _, err := certs.Generate(dir, spec); err != nil { // new node certificate, same CA
		t.Fatal(err)
	}
	sighup := func() {
		if err := syscall.Kill(os.Getpid(), syscall.SIGHUP); err != nil {
			t.Fatal(err)
		}
	}
	sighup()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(logs.String(), "certificates reloaded") {
		if time.Now().After(deadline) {
			t.Fatalf("no reload logged after SIGHUP:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	fresh := ports["client"]()
	if fresh.Cmp(old) == 0 {
		t.Fatal("after SIGHUP the client port still presents the old certificate")
	}
	for name, f := range ports {
		if s := f(); s.Cmp(fresh) != 0 {
			t.Errorf("after SIGHUP the %s port presents serial %v, want the new %v", name, s, fresh)
		}
	}
	if before.ConnectionState().PeerCertificates[0].SerialNumber.Cmp(old) != 0 {
		t.Error("the connection opened before the reload changed certificate")
	}
	if r := ping(); r != "+PONG" {
		t.Fatalf("PING on the connection opened before the reload: %q", r)
	}

	// A broken certificate file is refused; the certificate in use stays.
	if err := os.WriteFile(filepath.Join(dir, nc), []byte("not a certificate"), 0o644); err != nil {
		t.Fatal(err)
	}
	sighup()
	for !strings.Contains(logs.String(), "certificates not reloaded") {
		if time.Now().After(deadline.Add(10 * time.Second)) {
			t.Fatalf("no refusal logged after SIGHUP with a broken file:\n%s", logs)
		}
		time.Sleep(20 * time.Millisecond)
	}
	for name, f := range ports {
		if s := f(); s.Cmp(fresh) != 0 {
			t.Errorf("after a refused reload the %s port presents serial %v, want %v", name, s, fresh)
		}
	}

	// The metrics port: TLS only, the bearer token for all but /healthz.
	hc := &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"}}}
	get := func(scheme, path, auth string) int {
		req, _ := http.NewRequest("GET", scheme+"://"+ml.Addr().String()+path, nil)
		if auth != "" {
			req.Header.Set("Authorization", auth)
		}
		resp, err := hc.Do(req)
		if err != nil {
			return -1
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}
	for _, c := range []struct {
		scheme, path, auth string
		want               int
	}{
		{"https", "/metrics", "Bearer " + token, 200},
		{"https", "/debug/pprof/cmdline", "Bearer " + token, 200},
		{"https", "/metrics", "", 401},
		{"https", "/metrics", "Bearer wrong" + token, 401},
		{"https", "/debug/pprof/cmdline", "", 401},
		{"https", "/healthz", "", 200},
		{"http", "/metrics", "Bearer " + token, -1}, // plaintext to the TLS port: no HTTP answer
	} {
		if got := get(c.scheme, c.path, c.auth); got != c.want && !(c.want == -1 && got == 400) {
			t.Errorf("%s %s with %q: status %d, want %d", c.scheme, c.path, c.auth, got, c.want)
		}
	}
	if n := strings.Count(logs.String(), "metrics request refused"); n != 1 {
		t.Errorf("3 refused metrics requests logged %d times, want once (rate limited)", n)
	}
}
