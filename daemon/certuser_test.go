package daemon

import (
	"bufio"
	"crypto/tls"
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/node"
)

// TestRESPCertificateUser: a node with tls.clients on logs a RESP
// connection in as the user its client certificate names, and refuses a
// client certificate of another cluster signed by the same CA (the node
// gives the gateway its cluster's name).
func TestRESPCertificateUser(t *testing.T) {
	dir := t.TempDir()
	pl, cl := listen(t), listen(t)
	h, err := certs.HashPasswordCost("rep-pw", certs.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	cfg := &config.Cluster{Cluster: "cu", Durability: config.Memory, Secret: certs.NewSecret(),
		TLS:        &config.TLS{Dir: dir, Clients: config.ClientsRequired},
		Users:      []config.User{{Name: "reporting", Password: h, Access: map[string]string{"*": config.ReadOnly}}},
		Nodes:      []config.Node{{ID: "n1", Peer: pl.Addr().String(), Client: cl.Addr().String()}},
		Namespaces: []config.Namespace{{Name: "default", Protocol: "paxos", Service: "kv"}}}
	if _, err := certs.Generate(dir, certs.Spec{Cluster: cfg.Cluster, Nodes: []certs.Node{{ID: "n1"}}, Clients: []string{"reporting"}}); err != nil {
		t.Fatal(err)
	}
	if err := cfg.Validate(); err != nil {
		t.Fatal(err)
	}
	startNodes(t, cfg, func(int) node.Options { return node.Options{PeerListener: pl, ClientListener: cl} })

	pool, err := certs.LoadPool(filepath.Join(dir, certs.CAFile))
	if err != nil {
		t.Fatal(err)
	}
	cf, kf := certs.ClientFiles("reporting")
	mine, err := tls.LoadX509KeyPair(filepath.Join(dir, cf), filepath.Join(dir, kf))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := certs.LoadAuthority(dir)
	if err != nil {
		t.Fatal(err)
	}
	oc, ok, err := ca.Issue(certs.Identity{Cluster: "other", Kind: certs.KindClient, Name: "reporting"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	other, err := tls.X509KeyPair(oc, ok)
	if err != nil {
		t.Fatal(err)
	}
	do := func(cert tls.Certificate, args ...string) string {
		t.Helper()
		c, err := tls.Dial("tcp", cl.Addr().String(), &tls.Config{RootCAs: pool, ServerName: "127.0.0.1", Certificates: []tls.Certificate{cert}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close()
		c.SetDeadline(time.Now().Add(10 * time.Second))
		var b strings.Builder
		fmt.Fprintf(&b, "*%d\r\n", len(args))
		for _, a := range args {
			fmt.Fprintf(&b, "$%d\r\n%s\r\n", len(a), a)
		}
		c.Write([]byte(b.String()))
		line, err := bufio.NewReader(c).ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(line)
	}
	if r := do(mine, "GET", "k"); r != "$-1" {
		t.Errorf("reporting's certificate, GET: %q, want nil", r)
	}
	if r := do(mine, "SET", "k", "v"); !strings.HasPrefix(r, "-NOPERM User reporting") {
		t.Errorf("reporting's certificate, SET: %q, want NOPERM", r)
	}
	if r := do(other, "GET", "k"); !strings.HasPrefix(r, "-NOAUTH") {
		t.Errorf("another cluster's certificate naming reporting, GET: %q, want NOAUTH", r)
	}
}
