package gateway

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"

	"github.com/synod-dev/synod/certs"
)

// Client-certificate users on the Redis-protocol port (issue 29), as on
// the gRPC API and as etcd takes the user from a certificate's common
// name. With tls.clients on, the listener asks for a client certificate
// and verifies one given against the cluster CA (package daemon). A
// connection whose certificate verified is logged in, once its TLS
// handshake is done and before its first command, as the user the
// certificate names (CertUser); it may still AUTH as another user, as any
// connection may. A certificate that names no configured user, a node, or
// another cluster logs nobody in: the refusal is logged (once per ten
// seconds per remote host) and the connection must AUTH, as one without a
// certificate must. Where no password and no user are configured every
// connection is already the default user and certificates change nothing.
// Redis's own equivalent is `tls-auth-clients-user CN` (Redis 8).

// CertUser returns the name of the user a client certificate verified
// against the cluster CA names: the name of its Synod identity
// synod://<cluster>/client/<name> (certs.IdentityOf, written by `synod
// certs --client <name>`), or its common name when it has no Synod
// identity. A node's certificate names no user (node certificates are for
// peers), nor does a client certificate of another cluster than cluster
// ("" accepts any).
func CertUser(c *x509.Certificate, cluster string) (string, error) {
	id, ok := certs.IdentityOf(c)
	if !ok {
		if c.Subject.CommonName == "" {
			return "", fmt.Errorf("the client certificate names no user (no Synod identity, no common name)")
		}
		return c.Subject.CommonName, nil
	}
	switch {
	case id.Kind != certs.KindClient:
		return "", fmt.Errorf("the client certificate names %s, not a client: node certificates are for peers", id)
	case cluster != "" && id.Cluster != cluster:
		return "", fmt.Errorf("the client certificate names %s, of another cluster than %q", id, cluster)
	}
	return id.Name, nil
}

// named is the user called name, logged in without a password (see
// Users.Named): ok false when no such user is configured.
func named(a *acl, password, name string) (u *aclUser, ok bool) {
	if _, user := a.users[name]; name == "default" && !user {
		return nil, password != ""
	}
	u, ok = a.users[name]
	return u, ok
}

// verifiedCert completes nc's TLS handshake, if nc speaks TLS, and returns
// the client's certificate when its chain verified against the cluster CA
// (else nil; a failed handshake is left for the first read to report).
func verifiedCert(nc net.Conn) *x509.Certificate {
	var tc *tls.Conn
	switch c := nc.(type) {
	case *tls.Conn:
		tc = c
	case *sniffConn:
		c.decide()
		tc, _ = c.c.(*tls.Conn)
	}
	if tc == nil || tc.Handshake() != nil {
		return nil
	}
	st := tc.ConnectionState()
	if len(st.VerifiedChains) == 0 || len(st.PeerCertificates) == 0 {
		return nil
	}
	return st.PeerCertificates[0]
}

// certLogin logs c in as the user its verified client certificate names
// (see above). It runs in c's goroutine before c reads its first command.
func (c *conn) certLogin() {
	if c.authed {
		return
	}
	cert := verifiedCert(c.nc)
	if cert == nil {
		return
	}
	s := c.s
	name, err := CertUser(cert, s.opts.Cluster)
	if err != nil {
		s.acl.refused(s.log, "cert", c.nc.RemoteAddr().String(), "client certificate refused", "id", c.id, "reason", err.Error())
		return
	}
	u, ok := named(s.acl, s.opts.Password, name)
	if !ok {
		s.acl.refused(s.log, "cert", c.nc.RemoteAddr().String(), "client certificate refused", "id", c.id,
			"reason", fmt.Sprintf("the client certificate names user %q, which is not configured", name))
		c.logRefusal("auth", "AUTH", name)
		return
	}
	c.mu.Lock() // c.user is read by CLIENT KILL USER (clientkill.go)
	c.authed, c.user = true, u
	c.mu.Unlock()
}
