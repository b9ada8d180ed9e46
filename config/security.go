package config

import (
	"fmt"
	"sort"

	"github.com/synod-dev/synod/certs"
)

// Security settings of the cluster file (docs/SECURITY.md):
//
//	secret: 6c0f…                # peers prove they know it (challenge-response)
//	tls:
//	  dir: tls                   # ca.crt, node-<id>.crt/.key (synod certs); relative to the file
//	  clients: required          # the client and gRPC ports serve TLS too (or optional, off)
//	  metrics: required          # the metrics port serves TLS only (or off)
//	metrics_token: 3f9c…         # the metrics port asks for "Authorization: Bearer <token>"
//	users:
//	  - name: alice
//	    password: pbkdf2-sha256$600000$…$…   # synod certs hash-password
//	    access: {"*": read-only, orders: read-write}

// MinSecretLen is the shortest cluster secret accepted.
const MinSecretLen = 16

// TLS enables mutual TLS between peers with the cluster CA, and optionally
// TLS on the client ports.
type TLS struct {
	// Dir holds ca.crt and, for each node, node-<id>.crt and node-<id>.key,
	// as `synod certs` writes them. Relative to the cluster file.
	Dir string `yaml:"dir"`
	// Clients is TLS on the client ports, with the node's certificate:
	// ClientsOff ("" too), ClientsRequired (the Redis-protocol and gRPC
	// ports speak only TLS) or ClientsOptional (the Redis-protocol port
	// serves TLS and plaintext, told apart by the first byte; gRPC TLS only).
	Clients string `yaml:"clients,omitempty"`
	// Metrics is TLS on the metrics port (/metrics, /debug/pprof,
	// /healthz), with the node's certificate: ClientsOff ("" too) or
	// ClientsRequired.
	Metrics string `yaml:"metrics,omitempty"`
}

// MetricsTLS reports whether the metrics port serves TLS.
func (c *Cluster) MetricsTLS() bool { return c.TLS != nil && c.TLS.Metrics == ClientsRequired }

// Values of TLS.Clients.
const (
	ClientsOff      = "off"
	ClientsRequired = "required"
	ClientsOptional = "optional"
)

// ClientTLS reports whether the client ports serve TLS, and whether the
// Redis-protocol port also serves plaintext.
func (c *Cluster) ClientTLS() (on, optional bool) {
	if c.TLS == nil {
		return false, false
	}
	switch c.TLS.Clients {
	case ClientsRequired:
		return true, false
	case ClientsOptional:
		return true, true
	}
	return false, false
}

// Access levels of a user on a namespace.
const (
	ReadOnly  = "read-only"
	ReadWrite = "read-write"
)

// User is a client account: AUTH name password.
type User struct {
	Name string `yaml:"name"`
	// Password is a hash (certs.HashPassword), never the password itself.
	Password string `yaml:"password"`
	// Access maps a namespace, or "*" for every namespace, to ReadOnly or
	// ReadWrite. A namespace not named (and no "*") is not accessible.
	Access map[string]string `yaml:"access"`
}

func (c *Cluster) validateSecurity(bad func(field, f string, a ...any)) {
	if c.Secret != "" && len(c.Secret) < MinSecretLen {
		bad("secret", "must be at least %d characters (`synod certs` writes a random one to secret.txt)", MinSecretLen)
	}
	if c.TLS != nil {
		if c.TLS.Dir == "" {
			bad("tls.dir", "required: the directory `synod certs` wrote the CA and node certificates to")
		}
		switch c.TLS.Clients {
		case "", ClientsOff, ClientsRequired, ClientsOptional:
		default:
			bad("tls.clients", "%q must be %q, %q or %q", c.TLS.Clients, ClientsOff, ClientsRequired, ClientsOptional)
		}
		switch c.TLS.Metrics {
		case "", ClientsOff, ClientsRequired:
		default:
			bad("tls.metrics", "%q must be %q or %q", c.TLS.Metrics, ClientsOff, ClientsRequired)
		}
		for i, ns := range c.Namespaces {
			if ns.PeerTransport() != TransportTCP {
				bad(fmt.Sprintf("namespaces[%d].transport", i), "%q cannot be used with tls yet (its gRPC peer connections are not encrypted); use %q", ns.Transport, TransportTCP)
			}
		}
	}
	if c.MetricsToken != "" && len(c.MetricsToken) < MinSecretLen {
		bad("metrics_token", "must be at least %d characters (`synod certs` writes a random one to metrics-token.txt)", MinSecretLen)
	}
	nss := map[string]bool{"*": true}
	for _, ns := range c.Namespaces {
		nss[ns.Name] = true
	}
	names := map[string]bool{}
	for i, u := range c.Users {
		f := fmt.Sprintf("users[%d]", i)
		switch {
		case !nameRE.MatchString(u.Name):
			bad(f+".name", "%q must be 1-63 letters, digits, '_', '.' or '-'", u.Name)
		case names[u.Name]:
			bad(f+".name", "duplicate user %q", u.Name)
		case u.Name == "default" && c.Password != "":
			bad(f+".name", `user "default" is already defined by password; remove one of them`)
		}
		names[u.Name] = true
		if _, err := certs.ParsePasswordHash(u.Password); err != nil {
			bad(f+".password", "%v", err)
		}
		if len(u.Access) == 0 {
			bad(f+".access", "empty: name a namespace or \"*\" with %q or %q", ReadOnly, ReadWrite)
		}
		keys := make([]string, 0, len(u.Access))
		for k := range u.Access {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			if !nss[k] {
				bad(f+".access", "unknown namespace %q", k)
			}
			if v := u.Access[k]; v != ReadOnly && v != ReadWrite {
				bad(f+".access["+k+"]", "%q must be %q or %q", v, ReadOnly, ReadWrite)
			}
		}
	}
}
