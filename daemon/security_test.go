package daemon

import (
	"bufio"
	"context"
	"crypto/tls"
	"fmt"
	"net"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/client"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/node"
	"github.com/synod-dev/synod/service"
)

// TestSecureCluster: nodes made by New from a cluster file with a secret and
// tls (clients required) replicate over mutual TLS, and serve the
// Redis-protocol port over TLS only.
func TestSecureCluster(t *testing.T) {
	dir := t.TempDir()
	cfg := &config.Cluster{Cluster: "sec", Durability: config.Memory, Secret: certs.NewSecret(),
		TLS:        &config.TLS{Dir: dir, Clients: config.ClientsRequired},
		Namespaces: []config.Namespace{{Name: "default", Protocol: "paxos", Service: "kv"}}}
	var peerLns []net.Listener
	var spec certs.Spec
	spec.Cluster = cfg.Cluster
	for i := range 3 {
		pl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		cl, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		caddr := cl.Addr().String()
		cl.Close() // daemon.New listens on the client address itself
		peerLns = append(peerLns, pl)
		id := fmt.Sprintf("n%d", i+1)
		cfg.Nodes = append(cfg.Nodes, config.Node{ID: id, Peer: pl.Addr().String(), Client: caddr})
		spec.Nodes = append(spec.Nodes, certs.Node{ID: id})
	}
	if _, err := certs.Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	nodes := startNodes(t, cfg, func(i int) node.Options { return node.Options{PeerListener: peerLns[i]} })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	r, err := nodes[0].Do(ctx, "default", automaton.Request{ID: automaton.RequestID{Client: 7, Seq: 1}, Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}})
	if err != nil || r.Result.Type != service.ResultOK {
		t.Fatalf("set over a TLS cluster: %v %v", r.Result, err)
	}
	pool, err := certs.LoadPool(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	c, err := tls.Dial("tcp", cfg.Nodes[2].Client, &tls.Config{RootCAs: pool, ServerName: "127.0.0.1"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	c.Write([]byte("*2\r\n$3\r\nGET\r\n$1\r\nk\r\n"))
	br := bufio.NewReader(c)
	line, _ := br.ReadString('\n')
	val, _ := br.ReadString('\n')
	if strings.TrimSpace(line) != "$1" || strings.TrimSpace(val) != "v" {
		t.Fatalf("GET k over TLS on n3: %q %q", line, val)
	}
	// Plaintext to the client port is not answered.
	pc, err := net.Dial("tcp", cfg.Nodes[2].Client)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	pc.SetDeadline(time.Now().Add(5 * time.Second))
	pc.Write([]byte("*1\r\n$4\r\nPING\r\n"))
	if b, err := bufio.NewReader(pc).ReadString('\n'); err == nil && strings.Contains(b, "PONG") {
		t.Fatal("a plaintext PING was answered on a TLS-only port")
	}
}

// TestUsersEnforced: a node made by New from a cluster file with users
// asks for AUTH, checks the password against its hash, and refuses a
// read-only user's write with Redis's NOPERM, while serving its reads; its
// gRPC port applies the same users (checkGRPCUser).
func TestUsersEnforced(t *testing.T) {
	h, err := certs.HashPasswordCost("pw", certs.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	pl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	cl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	caddr := cl.Addr().String()
	cl.Close()
	cfg := &config.Cluster{Cluster: "u", Durability: config.Memory,
		Nodes:      []config.Node{{ID: "n1", Peer: pl.Addr().String(), Client: caddr}},
		Namespaces: []config.Namespace{{Name: "default", Protocol: "paxos", Service: "kv"}},
		Users:      []config.User{{Name: "alice", Password: h, Access: map[string]string{"*": config.ReadOnly}}}}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	gl, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	startNodes(t, cfg, func(int) node.Options { return node.Options{PeerListener: pl, GRPCListener: gl} })
	checkGRPCUser(t, gl.Addr().String())
	c, err := net.Dial("tcp", caddr)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReader(c)
	say := func(args ...string) string {
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		if _, err := c.Write([]byte(b.String())); err != nil {
			t.Fatal(err)
		}
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if strings.HasPrefix(line, "$") && line != "$-1\r\n" {
			v, _ := br.ReadString('\n')
			line += v
		}
		return strings.TrimSpace(line)
	}
	if r := say("GET", "k"); !strings.HasPrefix(r, "-NOAUTH") {
		t.Fatalf("GET before AUTH: %q", r)
	}
	if r := say("AUTH", "alice", "wrong"); !strings.HasPrefix(r, "-WRONGPASS") {
		t.Fatalf("AUTH with a wrong password: %q", r)
	}
	if r := say("AUTH", "alice", "pw"); r != "+OK" {
		t.Fatalf("AUTH alice: %q", r)
	}
	if r := say("SET", "k", "v"); !strings.HasPrefix(r, "-NOPERM") {
		t.Fatalf("a read-only user's SET: %q", r)
	}
	if r := say("GET", "k"); r != "$-1" {
		t.Fatalf("a read-only user's GET: %q", r)
	}
}

// checkGRPCUser: on the gRPC port at addr, read-only user alice (password
// pw) reads, her write is refused with PERMISSION_DENIED, and a wrong
// password is UNAUTHENTICATED.
func checkGRPCUser(t *testing.T, addr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	call := func(pw string, op service.Op) (service.Result, error) {
		c, err := client.NewGRPC([]string{addr}, client.Options{User: "alice", Password: pw})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		r, _, err := c.DoOp(ctx, "", op, client.OpOptions{})
		return r, err
	}
	if r, err := call("pw", service.Op{Kind: "get", Key: "k"}); err != nil || r.Type != service.ResultNil {
		t.Fatalf("alice's GET over gRPC: %v %v", r, err)
	}
	if _, err := call("pw", service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}); status.Code(err) != codes.PermissionDenied {
		t.Fatalf("alice's SET over gRPC: %v, want PERMISSION_DENIED", err)
	}
	if _, err := call("wrong", service.Op{Kind: "get", Key: "k"}); status.Code(err) != codes.Unauthenticated {
		t.Fatalf("a wrong password over gRPC: %v, want UNAUTHENTICATED", err)
	}
}
