package nemesis

import (
	"bufio"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/config"
)

// TestDeployOnSeparateHosts follows docs/DEPLOY.md on the namespace
// harness, where each node is a host of its own: three `synod node`
// processes, each in its network namespace with its own address and host
// name (n<i>.synod.test, from a hosts file `ip netns exec` mounts over
// /etc/hosts, as DNS would give on real hosts), read one cluster file naming
// those host names and the guide's ports, with the certificates and the
// secret `synod certs --config` wrote, peers on mutual TLS and clients on TLS
// only. A write through n1 is read through n2 and n3 over TLS with the client
// certificate, each server verified under its host name; a wrong host name,
// a client with no certificate and plaintext are refused; SIGTERM stops
// every node with status 0.
func TestDeployOnSeparateHosts(t *testing.T) {
	if why := Available(); why != "" {
		t.Skip(why)
	}
	if testing.Short() {
		t.Skip("starts real nodes in network namespaces")
	}
	dir := t.TempDir()
	bin, err := cluster.BuildSynod(dir)
	if err != nil {
		t.Fatal(err)
	}
	h, err := NewNet(3)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { h.Close() })

	// Host names: one hosts file per namespace (ip netns exec bind-mounts
	// /etc/netns/<ns>/hosts over /etc/hosts).
	const domain = "synod.test"
	host := func(i int) string { return fmt.Sprintf("n%d.%s", i, domain) }
	var hosts strings.Builder
	hosts.WriteString("127.0.0.1 localhost\n")
	for i := 1; i <= 3; i++ {
		fmt.Fprintf(&hosts, "%s %s\n", h.nodeIP(i), host(i))
	}
	for i := 1; i <= 3; i++ {
		etc := filepath.Join("/etc/netns", h.ns(i))
		if err := os.MkdirAll(etc, 0o755); err != nil {
			t.Skipf("cannot give the namespaces host names: %v", err)
		}
		t.Cleanup(func() { os.RemoveAll(etc) })
		if err := os.WriteFile(filepath.Join(etc, "hosts"), []byte(hosts.String()), 0o644); err != nil {
			t.Fatal(err)
		}
	}

	// The cluster file names host names and the guide's ports.
	cfgPath := filepath.Join(dir, "cluster.yaml")
	cfg := &config.Cluster{
		Cluster:    "deploytest",
		DataDir:    "data",
		Namespaces: []config.Namespace{{Name: "default", Protocol: "paxos", Service: "kv"}},
	}
	for i := 1; i <= 3; i++ {
		cfg.Nodes = append(cfg.Nodes, config.Node{ID: fmt.Sprintf("n%d", i),
			Peer: net.JoinHostPort(host(i), "7000"), Client: net.JoinHostPort(host(i), "6379")})
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Save(cfgPath); err != nil {
		t.Fatal(err)
	}
	// synod certs --config: CA, node certificates for those host names, a
	// client certificate, the secret; then the cluster file turns them on.
	if out, err := exec.Command(bin, "certs", "--config", cfgPath, "--out", filepath.Join(dir, "tls"), "--client", "app").CombinedOutput(); err != nil {
		t.Fatalf("synod certs: %v: %s", err, out)
	}
	secret, err := os.ReadFile(filepath.Join(dir, "tls", certs.SecretFile))
	if err != nil {
		t.Fatal(err)
	}
	cfg.Secret = strings.TrimSpace(string(secret))
	cfg.TLS = &config.TLS{Dir: "tls", Clients: config.ClientsRequired}
	if err := cfg.Save(cfgPath); err != nil {
		t.Fatal(err)
	}

	var cmds []*exec.Cmd
	var exited []chan error
	for i := 1; i <= 3; i++ {
		logPath := filepath.Join(dir, fmt.Sprintf("n%d.log", i))
		lf, err := os.Create(logPath)
		if err != nil {
			t.Fatal(err)
		}
		cmd := exec.Command("ip", "netns", "exec", h.ns(i), bin, "node", "--config", cfgPath, "--id", fmt.Sprintf("n%d", i))
		cmd.Stdout, cmd.Stderr = lf, lf
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		lf.Close()
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		cmds, exited = append(cmds, cmd), append(exited, done)
		t.Cleanup(func() {
			cmd.Process.Signal(syscall.SIGKILL)
			if t.Failed() {
				b, _ := os.ReadFile(logPath)
				t.Logf("log of n%d:\n%s", i, deployLogTail(string(b), 3000))
			}
		})
	}

	ca, err := certs.LoadPool(filepath.Join(dir, "tls", certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	ccf, ckf := certs.ClientFiles("app")
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, "tls", ccf), filepath.Join(dir, "tls", ckf))
	if err != nil {
		t.Fatal(err)
	}
	// The client dials each node's address from outside its namespace and
	// verifies the server under serverName.
	dial := func(i int, serverName string, withCert bool) (*tls.Conn, error) {
		tc := &tls.Config{RootCAs: ca, ServerName: serverName, MinVersion: tls.VersionTLS12}
		if withCert {
			tc.Certificates = []tls.Certificate{pair}
		}
		d := &net.Dialer{Timeout: 2 * time.Second}
		c, err := tls.DialWithDialer(d, "tcp", net.JoinHostPort(h.nodeIP(i), "6379"), tc)
		if err != nil {
			return nil, err
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		return c, nil
	}
	call := func(i int, args ...string) (string, error) {
		c, err := dial(i, host(i), true)
		if err != nil {
			return "", err
		}
		defer c.Close()
		return deployRESP(c, args...)
	}

	// Every node answers PING over TLS (and exits in no case).
	for i := 1; i <= 3; i++ {
		deadline := time.Now().Add(30 * time.Second)
		for {
			select {
			case err := <-exited[i-1]:
				t.Fatalf("n%d exited during startup: %v", i, err)
			default:
			}
			r, err := call(i, "PING")
			if err == nil && r == "PONG" {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("n%d: no PONG over TLS within 30s: %q %v", i, r, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}

	// A write through n1 (retried until a leader is elected) ...
	deadline := time.Now().Add(30 * time.Second)
	for {
		r, err := call(1, "SET", "deployed", "on-three-hosts")
		if err == nil && r == "OK" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("SET through n1: %q %v", r, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
	// ... is read through the other hosts (paxos reads are linearizable).
	for _, i := range []int{2, 3} {
		r, err := call(i, "GET", "deployed")
		if err != nil || r != "on-three-hosts" {
			t.Errorf("GET through n%d: %q %v, want on-three-hosts", i, r, err)
		}
	}

	// Refusals: a certificate checked under another host name, a client
	// without a certificate is served (the client port verifies one only
	// when given) but plaintext is not.
	if c, err := dial(2, host(3), true); err == nil {
		c.Close()
		t.Errorf("n2's certificate verified for %s", host(3))
	}
	if c, err := dial(2, host(2), false); err != nil {
		t.Errorf("TLS without a client certificate: %v", err)
	} else {
		if r, err := deployRESP(c, "GET", "deployed"); r != "on-three-hosts" {
			t.Errorf("GET without a client certificate: %q %v", r, err)
		}
		c.Close()
	}
	if err := ping(net.JoinHostPort(h.nodeIP(2), "6379"), 2*time.Second); err == nil {
		t.Error("plaintext PING answered on a port with tls.clients: required")
	}

	// SIGTERM: each node drains and exits 0.
	for i, cmd := range cmds {
		cmd.Process.Signal(syscall.SIGTERM)
		select {
		case err := <-exited[i]:
			if err != nil {
				t.Errorf("n%d after SIGTERM: %v", i+1, err)
			}
		case <-time.After(15 * time.Second):
			t.Errorf("n%d still running 15s after SIGTERM", i+1)
		}
	}
}

// deployRESP sends one RESP command and reads a simple-string, error, integer or
// bulk reply (nil as "").
func deployRESP(c net.Conn, args ...string) (string, error) {
	var b strings.Builder
	fmt.Fprintf(&b, "*%d\r\n", len(args))
	for _, a := range args {
		fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
	}
	if _, err := c.Write([]byte(b.String())); err != nil {
		return "", err
	}
	r := bufio.NewReader(c)
	line, err := r.ReadString('\n')
	if err != nil {
		return "", err
	}
	line = strings.TrimRight(line, "\r\n")
	switch {
	case line == "":
		return "", errors.New("empty reply")
	case line[0] == '+' || line[0] == ':':
		return line[1:], nil
	case line[0] == '-':
		return "", errors.New(line[1:])
	case line == "$-1":
		return "", nil
	case line[0] == '$':
		v, err := r.ReadString('\n')
		return strings.TrimRight(v, "\r\n"), err
	}
	return "", fmt.Errorf("unexpected reply %q", line)
}

func deployLogTail(s string, n int) string {
	if len(s) > n {
		return "…" + s[len(s)-n:]
	}
	return s
}
