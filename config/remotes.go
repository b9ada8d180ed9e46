package config

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// Other Synod clusters this cluster's namespaces call (nested requests,
// docs/NESTED.md "Callees in another cluster"):
//
//	remotes:
//	  - name: billing                # a callee names it: callee: billing/ledger
//	    nodes: [10.0.1.1:6379, 10.0.1.2:6379, 10.0.1.3:6379] # its Redis-protocol addresses
//	    user: shop                   # optional: AUTH user password at every connection
//	    password: s3cret             # (AUTH password alone when user is empty)
//	    tls: {ca: billing-ca.crt}    # optional: its client ports speak TLS; ca relative to this file
//	    timeout: 30s                 # how long one call keeps trying while no node answers (default 10s)
//
// A namespace's callee names a remote namespace as CLUSTER/NAMESPACE. The
// call travels over the Redis protocol (SYNOD CALL, gateway/call.go) with
// the id every replica of the caller computes alike, and the remote
// namespace's protocol deduplicates it like any nested request: the same
// promise as a callee of this cluster. A call that no node of the remote
// cluster answers within timeout (each attempt resent with the same id)
// fails its request with an error saying so; it never answers OK without
// the call.

// Remote is another Synod cluster a namespace may call.
type Remote struct {
	Name     string     `yaml:"name"`
	Nodes    []string   `yaml:"nodes"`
	User     string     `yaml:"user,omitempty"`
	Password string     `yaml:"password,omitempty"`
	TLS      *RemoteTLS `yaml:"tls,omitempty"`
	// Timeout is a duration ("10s" when empty).
	Timeout string `yaml:"timeout,omitempty"`
}

// RemoteTLS is TLS to a remote cluster's client ports.
type RemoteTLS struct {
	// CA is the PEM file of the certificate authority that signed the
	// remote nodes' certificates (its `synod certs` ca.crt). Relative to
	// the cluster file.
	CA string `yaml:"ca"`
	// ServerName, when set, is the name checked in the nodes'
	// certificates (default: the host of the address dialled).
	ServerName string `yaml:"server_name,omitempty"`
	// Cert and Key, when set, are a client certificate to present (for a
	// remote cluster that maps certificates to users). Relative to the
	// cluster file.
	Cert string `yaml:"cert,omitempty"`
	Key  string `yaml:"key,omitempty"`
}

// DefaultRemoteTimeout is how long a call to a remote cluster keeps trying
// when Remote.Timeout is empty.
const DefaultRemoteTimeout = 10 * time.Second

// CallTimeout is r's Timeout, DefaultRemoteTimeout when empty.
func (r Remote) CallTimeout() time.Duration {
	d, err := time.ParseDuration(r.Timeout)
	if err != nil || d <= 0 {
		return DefaultRemoteTimeout
	}
	return d
}

// Remote returns the remote cluster named name.
func (c *Cluster) Remote(name string) (Remote, bool) {
	for _, r := range c.Remotes {
		if r.Name == name {
			return r, true
		}
	}
	return Remote{}, false
}

// SplitCallee splits a callee name: "cluster/namespace" names a namespace of
// remote cluster "cluster"; a name without '/' is a namespace of this
// cluster (remote is then "").
func SplitCallee(callee string) (remote, namespace string) {
	if r, ns, ok := strings.Cut(callee, "/"); ok {
		return r, ns
	}
	return "", callee
}

// validateRemotes checks the remotes list.
func (c *Cluster) validateRemotes(bad func(field, f string, a ...any)) {
	seen := map[string]bool{}
	for i, r := range c.Remotes {
		f := fmt.Sprintf("remotes[%d]", i)
		switch {
		case !nameRE.MatchString(r.Name):
			bad(f+".name", "%q must be 1-63 letters, digits, '_', '.' or '-'", r.Name)
		case r.Name == c.Cluster:
			bad(f+".name", "%q is this cluster's own name: call its namespaces by their name alone", r.Name)
		case seen[r.Name]:
			bad(f+".name", "%q is listed twice", r.Name)
		}
		seen[r.Name] = true
		if len(r.Nodes) == 0 {
			bad(f+".nodes", "remote cluster %q lists no node address (its nodes' Redis-protocol host:port)", r.Name)
		}
		for j, a := range r.Nodes {
			if err := checkAddr(a); err != nil {
				bad(fmt.Sprintf("%s.nodes[%d]", f, j), "%v", err)
			}
		}
		if r.User != "" && r.Password == "" {
			bad(f+".password", "user %q needs a password (AUTH user password)", r.User)
		}
		if r.Timeout != "" {
			if d, err := time.ParseDuration(r.Timeout); err != nil || d <= 0 {
				bad(f+".timeout", "%q is not a positive duration (e.g. 10s)", r.Timeout)
			}
		}
		if t := r.TLS; t != nil {
			if t.CA == "" {
				bad(f+".tls.ca", "a TLS remote needs the PEM file of the CA that signed its nodes' certificates")
			}
			if (t.Cert == "") != (t.Key == "") {
				bad(f+".tls", "cert and key go together")
			}
		}
	}
}

// resolveRemotePaths makes the remotes' TLS files relative to the cluster
// file's directory and checks that they load (Load).
func (c *Cluster) resolveRemotePaths(dir string) error {
	var errs []error
	for i := range c.Remotes {
		t := c.Remotes[i].TLS
		if t == nil {
			continue
		}
		for _, p := range []*string{&t.CA, &t.Cert, &t.Key} {
			if *p != "" && !filepath.IsAbs(*p) {
				*p = filepath.Join(dir, *p)
			}
		}
		if _, err := c.Remotes[i].TLSConfig(""); err != nil {
			errs = append(errs, fmt.Errorf("remotes[%d].tls: %w", i, err))
		}
	}
	return errors.Join(errs...)
}

// TLSConfig is the TLS configuration for dialling addr of remote r (nil
// without TLS).
func (r Remote) TLSConfig(addr string) (*tls.Config, error) {
	t := r.TLS
	if t == nil {
		return nil, nil
	}
	pem, err := os.ReadFile(t.CA)
	if err != nil {
		return nil, err
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("%s holds no PEM certificate", t.CA)
	}
	cfg := &tls.Config{RootCAs: pool, ServerName: t.ServerName, MinVersion: tls.VersionTLS12}
	if cfg.ServerName == "" && addr != "" {
		if host, _, err := net.SplitHostPort(addr); err == nil {
			cfg.ServerName = host
		}
	}
	if t.Cert != "" {
		cert, err := tls.LoadX509KeyPair(t.Cert, t.Key)
		if err != nil {
			return nil, err
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg, nil
}
