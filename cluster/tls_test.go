package cluster

import (
	"crypto/tls"
	"io"
	"net"
	"testing"
	"time"

	"github.com/synod-dev/synod/config"
)

// TestUpWithTLS: a 3-node cluster started with TLS has its certificates
// before any node starts, requires TLS on the client ports, answers PING
// over TLS with the cluster CA and refuses plaintext.
func TestUpWithTLS(t *testing.T) {
	c := up(t, UpOptions{Nodes: 3, Protocol: "abd", Service: "kv", Durability: config.Memory, TLS: true})
	if c.Config.TLS == nil || c.Config.TLS.Clients != config.ClientsRequired || len(c.Config.Secret) < config.MinSecretLen {
		t.Fatalf("cluster file: tls %+v, secret of %d characters", c.Config.TLS, len(c.Config.Secret))
	}
	tc, err := c.ClientTLS()
	if err != nil || tc == nil {
		t.Fatalf("ClientTLS: %v, %v", tc, err)
	}
	for _, n := range c.Nodes {
		if err := PingTLS(n.Client, "", tc, 5*time.Second); err != nil {
			t.Errorf("%s: PING over TLS: %v", n.ID, err)
		}
		if err := Ping(n.Client, "", 5*time.Second); err == nil {
			t.Errorf("%s: plaintext PING answered on a TLS-only port", n.ID)
		}
	}
	// Plaintext gets no RESP reply: the connection ends.
	nc, err := net.Dial("tcp", c.Nodes[0].Client)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	nc.SetDeadline(time.Now().Add(10 * time.Second))
	io.WriteString(nc, "*1\r\n$4\r\nPING\r\n")
	if b, _ := io.ReadAll(nc); len(b) > 0 && b[0] == '+' {
		t.Errorf("plaintext got a RESP reply %q", b)
	}
	// A TLS client that does not trust the cluster CA is refused.
	if err := PingTLS(c.Nodes[0].Client, "", &tls.Config{MinVersion: tls.VersionTLS12}, 5*time.Second); err == nil {
		t.Errorf("PING over TLS without the cluster CA succeeded")
	}
	st, err := c.Status()
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range st {
		if !s.PingOK {
			t.Errorf("status of %s: ping %s", s.ID, s.PingErr)
		}
	}
}
