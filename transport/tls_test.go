package transport

import (
	"bufio"
	"crypto/tls"
	"crypto/x509"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/certs"
)

type testCA struct {
	t  *testing.T
	ca *certs.Authority
}

func newTestCA(t *testing.T) testCA {
	ca, err := certs.NewAuthority("c")
	if err != nil {
		t.Fatal(err)
	}
	return testCA{t, ca}
}

// config returns a TLS configuration for identity (cluster, kind, name).
func (c testCA) config(cluster, kind, name string) *tls.Config {
	cp, kp, err := c.ca.Issue(certs.Identity{Cluster: cluster, Kind: kind, Name: name}, []string{"127.0.0.1"})
	if err != nil {
		c.t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(cp, kp)
	if err != nil {
		c.t.Fatal(err)
	}
	pool := x509.NewCertPool()
	pool.AddCert(c.ca.Cert)
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool}
}

func tlsPair(t *testing.T, ca testCA) (t1, t2 *Transport, in2 *inbox, log2 *logBuf) {
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	log2, in2 = &logBuf{}, newInbox()
	t1 = startWith(t, Options{Cluster: "c", Self: "n1", Peers: peers, Listener: l1, Secret: "tls-and-secret-too", TLS: ca.config("c", "node", "n1")})
	t2 = startWith(t, Options{Cluster: "c", Self: "n2", Peers: peers, Listener: l2, Secret: "tls-and-secret-too", TLS: ca.config("c", "node", "n2"),
		Logger: log2.logger(), Handler: in2.handler})
	return
}

func TestMutualTLSExchange(t *testing.T) {
	t1, _, in2, _ := tlsPair(t, newTestCA(t))
	t1.Send("n2", "ns", []byte("over tls"))
	in2.expect(t, got{"n1", "ns", "over tls"})
}

// tlsDial connects to addr with cfg and runs the handshake as node from.
func tlsDial(t *testing.T, addr string, cfg *tls.Config, from string) (string, error) {
	cfg = cfg.Clone()
	cfg.InsecureSkipVerify = true
	c, err := tls.Dial("tcp", addr, cfg)
	if err != nil {
		return "", err
	}
	defer c.Close()
	c.SetDeadline(time.Now().Add(5 * time.Second))
	return Authenticate(c, bufio.NewReader(c), "tls-and-secret-too", Handshake{Version: Version, Cluster: "c", From: from, To: "n2", Nonce: NewNonce()})
}

func TestCertificateNamingAnotherNodeRefused(t *testing.T) {
	ca := newTestCA(t)
	t1, t2, in2, log2 := tlsPair(t, ca)
	addr := t2.Addr().String()
	// A certificate from the right CA for n3, claiming to be n1; a client
	// certificate; and one for node n1 of another cluster.
	for _, c := range []struct {
		cfg  *tls.Config
		want string
	}{
		{ca.config("c", "node", "n3"), `certificate names node "n3", but the peer claims to be node "n1"`},
		{ca.config("c", "client", "n1"), "not a node"},
		{ca.config("other", "node", "n1"), "of another cluster"},
	} {
		r, err := tlsDial(t, addr, c.cfg, "n1")
		if err != nil || !strings.Contains(r, c.want) {
			t.Fatalf("refusal %q (%v), want %q", r, err, c.want)
		}
	}
	logs := log2.String()
	if !strings.Contains(logs, `msg="refused peer connection"`) || !strings.Contains(logs, `but the peer claims to be node \"n1\"`) {
		t.Fatalf("refusal not logged:\n%s", logs)
	}
	// A certificate from another CA does not get through TLS at all.
	if _, err := tlsDial(t, addr, newTestCA(t).config("c", "node", "n1"), "n1"); err == nil {
		t.Fatal("a certificate from another CA was accepted")
	}
	t1.Send("n2", "ns", []byte("still up"))
	in2.expect(t, got{"n1", "ns", "still up"})
}

func TestDialerChecksAcceptorIdentity(t *testing.T) {
	ca := newTestCA(t)
	// n1 dials the address of "n2", where a node holding n3's certificate
	// listens (a mis-wired or hijacked address).
	l1, l2 := listen(t), listen(t)
	peers := map[automaton.NodeID]string{"n1": l1.Addr().String(), "n2": l2.Addr().String()}
	var log1 logBuf
	t1 := startWith(t, Options{Cluster: "c", Self: "n1", Peers: peers, Listener: l1, TLS: ca.config("c", "node", "n1"), Logger: log1.logger()})
	startWith(t, Options{Cluster: "c", Self: "n2", Peers: peers, Listener: l2, TLS: ca.config("c", "node", "n3")})
	t1.Send("n2", "ns", []byte("x"))
	waitFor(t, func() bool {
		return strings.Contains(log1.String(), `certificate names node \"n3\", but the peer claims to be node \"n2\"`)
	})
}

func TestPlaintextToTLSPortRefused(t *testing.T) {
	t1, t2, in2, log2 := tlsPair(t, newTestCA(t))
	for range 10 {
		c, err := net.Dial("tcp", t2.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetDeadline(time.Now().Add(5 * time.Second))
		_, err = Authenticate(c, bufio.NewReader(c), "tls-and-secret-too", Handshake{Version: Version, Cluster: "c", From: "n1", To: "n2", Nonce: NewNonce()})
		if err == nil {
			t.Fatal("a plaintext handshake got an answer from a TLS-only port")
		}
		c.Close()
	}
	waitFor(t, func() bool { return strings.Contains(log2.String(), "not TLS (plaintext to the TLS-only peer port?)") })
	if n := strings.Count(log2.String(), "TLS handshake failed"); n != 1 {
		t.Fatalf("10 plaintext connections logged %d times, want once:\n%s", n, log2)
	}
	t1.Send("n2", "ns", []byte("fine"))
	in2.expect(t, got{"n1", "ns", "fine"})
}
