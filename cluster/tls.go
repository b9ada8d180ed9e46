package cluster

import (
	"crypto/tls"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/synod-dev/synod/certs"
	"github.com/synod-dev/synod/config"
)

// TLS for a local cluster (UpOptions.TLS, `synod cluster up --tls`).
//
// The certificates are generated before any node starts: Up chooses the
// cluster's name and ports first (newConfig), so it knows what the
// certificates must name, writes the CA, a certificate per node, one client
// certificate ("client") and the cluster secret into DIR/tls, and sets
// secret and tls {dir, clients: required} in the cluster file. Peers then
// use mutual TLS, and the Redis-protocol and gRPC ports speak only TLS. The
// readiness check (and Status) ping over TLS, trusting the cluster CA, so
// nothing needs a plaintext port. A stopped cluster without TLS is given it
// when Up is asked for TLS; one with TLS keeps it whatever Up is asked.

// TLSDir is the certificate directory inside a cluster directory.
const TLSDir = "tls"

// ClientCertName is the client certificate Up issues with TLS.
const ClientCertName = "client"

// enableTLS generates the certificates and the secret for cfg into
// dir/tls and turns TLS on in cfg (clients: required).
func enableTLS(dir string, cfg *config.Cluster) error {
	tlsDir := filepath.Join(dir, TLSDir)
	if _, err := certs.Generate(tlsDir, certs.Spec{Cluster: cfg.Cluster, Nodes: CertNodes(cfg), Clients: []string{ClientCertName}}); err != nil {
		return fmt.Errorf("cluster: generating certificates: %w", err)
	}
	secret, err := os.ReadFile(filepath.Join(tlsDir, certs.SecretFile))
	if err != nil {
		return fmt.Errorf("cluster: %w", err)
	}
	cfg.Secret = strings.TrimSpace(string(secret))
	cfg.TLS = &config.TLS{Dir: tlsDir, Clients: config.ClientsRequired}
	return nil
}

// CertNodes lists cfg's nodes with the hosts of their addresses, which
// their certificates must name.
func CertNodes(cfg *config.Cluster) []certs.Node {
	var nodes []certs.Node
	for _, n := range cfg.Nodes {
		cn := certs.Node{ID: n.ID}
		for _, a := range []string{n.Peer, n.Client, n.GRPC} {
			if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
				cn.Hosts = append(cn.Hosts, h)
			}
		}
		nodes = append(nodes, cn)
	}
	return nodes
}

// ClientTLS returns the TLS configuration a client of cfg's nodes uses
// (trusting the cluster CA, presenting the "client" certificate when there
// is one), or nil when the client ports do not serve TLS.
func ClientTLS(cfg *config.Cluster) (*tls.Config, error) {
	if on, _ := cfg.ClientTLS(); !on {
		return nil, nil
	}
	pool, err := certs.LoadPool(filepath.Join(cfg.TLS.Dir, certs.CAFile))
	if err != nil {
		return nil, fmt.Errorf("cluster: %w", err)
	}
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	cf, kf := certs.ClientFiles(ClientCertName)
	if pair, err := tls.LoadX509KeyPair(filepath.Join(cfg.TLS.Dir, cf), filepath.Join(cfg.TLS.Dir, kf)); err == nil {
		tc.Certificates = []tls.Certificate{pair}
	}
	return tc, nil
}

// ClientTLS is the TLS configuration for c's client ports (nil without TLS).
func (c *Cluster) ClientTLS() (*tls.Config, error) { return ClientTLS(c.Config) }
