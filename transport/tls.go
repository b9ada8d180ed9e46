package transport

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"

	"github.com/synod-dev/synod/certs"
)

// Mutual TLS between peers (Options.TLS). Both sides present certificates
// signed by the cluster CA (package certs); each checks the other's chain
// against the CA and that the certificate's identity,
// synod://<cluster>/node/<id>, names this cluster and the node id the other
// side claims: the acceptor compares it with the handshake's From, the
// dialer with the node it meant to reach. Host names are not checked, since
// a node id, not an address, is what peers agree on. The challenge-response
// of auth.go still runs inside the TLS connection.

// tlsConfigs derives the acceptor's and dialer's configurations from
// Options.TLS, which holds the node's key pair and the CA in RootCAs.
func (t *Transport) tlsConfigs() error {
	base := t.o.TLS
	if base == nil {
		return nil
	}
	if len(base.Certificates) == 0 || base.RootCAs == nil {
		return errors.New("transport: Options.TLS needs the node's certificate and the cluster CA (RootCAs)")
	}
	t.srvTLS = acceptorTLS(base)
	if src := t.o.TLSSource; src != nil {
		t.srvTLS.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return acceptorTLS(src()), nil }
	}
	return nil
}

// acceptorTLS is the acceptor's configuration derived from base.
func acceptorTLS(base *tls.Config) *tls.Config {
	srv := base.Clone()
	srv.ClientAuth = tls.RequireAndVerifyClientCert
	srv.ClientCAs = base.RootCAs
	srv.MinVersion = tls.VersionTLS13
	return srv
}

// baseTLS is the current TLS configuration (Options.TLSSource, else TLS).
func (t *Transport) baseTLS() *tls.Config {
	if t.o.TLSSource != nil {
		return t.o.TLSSource()
	}
	return t.o.TLS
}

// clientTLS is the dialer's configuration for reaching node want.
func (t *Transport) clientTLS(want string) *tls.Config {
	base := t.baseTLS()
	cfg := base.Clone()
	cfg.MinVersion = tls.VersionTLS13
	cfg.InsecureSkipVerify = true // replaced by VerifyConnection: identity, not host name
	roots := base.RootCAs
	cfg.VerifyConnection = func(cs tls.ConnectionState) error {
		if len(cs.PeerCertificates) == 0 {
			return errors.New("peer presented no certificate")
		}
		if _, err := verifyChain(cs.PeerCertificates, roots, x509.ExtKeyUsageServerAuth); err != nil {
			return err
		}
		return t.checkIdentity(cs.PeerCertificates[0], want)
	}
	return cfg
}

func verifyChain(chain []*x509.Certificate, roots *x509.CertPool, usage x509.ExtKeyUsage) ([][]*x509.Certificate, error) {
	inter := x509.NewCertPool()
	for _, c := range chain[1:] {
		inter.AddCert(c)
	}
	return chain[0].Verify(x509.VerifyOptions{Roots: roots, Intermediates: inter, KeyUsages: []x509.ExtKeyUsage{usage}})
}

// checkIdentity returns an error unless cert names node want of this cluster.
func (t *Transport) checkIdentity(cert *x509.Certificate, want string) error {
	id, ok := certs.IdentityOf(cert)
	switch {
	case !ok:
		return fmt.Errorf("certificate %q names no Synod identity", cert.Subject.CommonName)
	case id.Kind != certs.KindNode:
		return fmt.Errorf("certificate names %s, not a node", id)
	case id.Cluster != t.o.Cluster:
		return fmt.Errorf("certificate names %s, of another cluster than %q", id, t.o.Cluster)
	case id.Name != want:
		return fmt.Errorf("certificate names node %q, but the peer claims to be node %q", id.Name, want)
	}
	return nil
}

// acceptTLS runs the server side of the TLS handshake on an accepted
// connection (whose deadline is set), and returns the TLS connection.
func (t *Transport) acceptTLS(c net.Conn) (*tls.Conn, error) {
	tc := tls.Server(c, t.srvTLS)
	if err := tc.HandshakeContext(t.ctx); err != nil {
		var rh tls.RecordHeaderError
		if errors.As(err, &rh) {
			return nil, fmt.Errorf("not TLS (plaintext to the TLS-only peer port?): %w", err)
		}
		return nil, err
	}
	return tc, nil
}

// dialTLS runs the client side of the TLS handshake to peer p.
func (p *peer) dialTLS(ctx context.Context, c net.Conn) (net.Conn, error) {
	tc := tls.Client(c, p.t.clientTLS(string(p.id)))
	if err := tc.HandshakeContext(ctx); err != nil {
		return nil, fmt.Errorf("TLS: %w", err)
	}
	return tc, nil
}
