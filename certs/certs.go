// Package certs makes and loads a Synod cluster's credentials: a cluster
// certificate authority, node certificates whose identity names the node id,
// client certificates, the cluster secret that authenticates peers without
// TLS, and password hashes for users (password.go). `synod certs` drives it.
//
// Every certificate uses ECDSA P-256 keys (crypto/x509). A certificate's
// identity is a URI subject alternative name
//
//	synod://<cluster>/node/<id>      a node
//	synod://<cluster>/client/<name>  a client
//
// repeated as the subject's common name (<id> or <name>). Peers check the URI
// (IdentityOf), not the host names: a node id is the one thing both ends of
// a peer connection agree on, while addresses change and may be NATed. Node
// certificates also carry the host names and IP addresses of the node's
// addresses (and localhost), so that ordinary TLS clients such as
// `redis-cli --tls --cacert ca.crt` verify them as servers.
//
// Files in a certificate directory: ca.crt and ca.key (the CA; keep ca.key
// off the nodes in production), node-<id>.crt/.key, client-<name>.crt/.key,
// secret.txt and metrics-token.txt. Keys are written with mode 0600.
package certs

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/pem"
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// File names in a certificate directory.
const (
	CAFile     = "ca.crt"
	CAKeyFile  = "ca.key"
	SecretFile = "secret.txt"
	// MetricsTokenFile holds a random bearer token for the metrics port
	// (the cluster file's metrics_token).
	MetricsTokenFile = "metrics-token.txt"
)

// NodeFiles are node id's certificate and key file names.
func NodeFiles(id string) (cert, key string) { return "node-" + id + ".crt", "node-" + id + ".key" }

// ClientFiles are client name's certificate and key file names.
func ClientFiles(name string) (cert, key string) {
	return "client-" + name + ".crt", "client-" + name + ".key"
}

// Kinds of identity.
const (
	KindNode   = "node"
	KindClient = "client"
)

// Identity is who a certificate names.
type Identity struct {
	Cluster, Kind, Name string
}

func (id Identity) String() string { return id.URI().String() }

// URI is the identity's subject alternative name.
func (id Identity) URI() *url.URL {
	return &url.URL{Scheme: "synod", Host: id.Cluster, Path: "/" + id.Kind + "/" + id.Name}
}

// IdentityOf returns the Synod identity a certificate names, if any.
func IdentityOf(c *x509.Certificate) (Identity, bool) {
	for _, u := range c.URIs {
		if u.Scheme != "synod" {
			continue
		}
		kind, name, ok := strings.Cut(strings.TrimPrefix(u.Path, "/"), "/")
		if ok && name != "" && (kind == KindNode || kind == KindClient) {
			return Identity{Cluster: u.Host, Kind: kind, Name: name}, true
		}
	}
	return Identity{}, false
}

// Authority is a cluster CA.
type Authority struct {
	Cert *x509.Certificate
	Key  *ecdsa.PrivateKey
}

// Validity of the certificates made here.
const (
	CAValidity   = 10 * 365 * 24 * time.Hour
	LeafValidity = 2 * 365 * 24 * time.Hour
)

func serial() *big.Int {
	n, _ := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	return n
}

// NewAuthority makes a self-signed CA for cluster.
func NewAuthority(cluster string) (*Authority, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber:          serial(),
		Subject:               pkix.Name{CommonName: "Synod cluster CA " + cluster, Organization: []string{"synod:" + cluster}},
		NotBefore:             now.Add(-time.Hour),
		NotAfter:              now.Add(CAValidity),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
		MaxPathLenZero:        true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		return nil, err
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// Issue signs a certificate for id. hosts (DNS names or IP addresses) become
// server names; a node certificate may act as a TLS server and client, a
// client certificate only as a client.
func (a *Authority) Issue(id Identity, hosts []string) (certPEM, keyPEM []byte, err error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, nil, err
	}
	now := time.Now()
	tmpl := &x509.Certificate{
		SerialNumber: serial(),
		Subject:      pkix.Name{CommonName: id.Name, Organization: []string{"synod:" + id.Cluster}, OrganizationalUnit: []string{id.Kind}},
		NotBefore:    now.Add(-time.Hour),
		NotAfter:     now.Add(LeafValidity),
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
		URIs:         []*url.URL{id.URI()},
	}
	if id.Kind == KindNode {
		tmpl.ExtKeyUsage = append(tmpl.ExtKeyUsage, x509.ExtKeyUsageServerAuth)
	}
	seen := map[string]bool{}
	for _, h := range hosts {
		if h == "" || seen[h] {
			continue
		}
		seen[h] = true
		if ip := net.ParseIP(h); ip != nil {
			tmpl.IPAddresses = append(tmpl.IPAddresses, ip)
		} else {
			tmpl.DNSNames = append(tmpl.DNSNames, h)
		}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, a.Cert, &key.PublicKey, a.Key)
	if err != nil {
		return nil, nil, err
	}
	kder, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		return nil, nil, err
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}),
		pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), nil
}

// Save writes the CA's certificate and key into dir.
func (a *Authority) Save(dir string) error {
	kder, err := x509.MarshalECPrivateKey(a.Key)
	if err != nil {
		return err
	}
	if err := os.WriteFile(filepath.Join(dir, CAFile), pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: a.Cert.Raw}), 0o644); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, CAKeyFile), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kder}), 0o600)
}

// LoadAuthority reads the CA from dir.
func LoadAuthority(dir string) (*Authority, error) {
	pair, err := tls.LoadX509KeyPair(filepath.Join(dir, CAFile), filepath.Join(dir, CAKeyFile))
	if err != nil {
		return nil, fmt.Errorf("certs: load CA: %w", err)
	}
	key, ok := pair.PrivateKey.(*ecdsa.PrivateKey)
	if !ok {
		return nil, errors.New("certs: CA key is not ECDSA")
	}
	cert, err := x509.ParseCertificate(pair.Certificate[0])
	if err != nil {
		return nil, err
	}
	return &Authority{Cert: cert, Key: key}, nil
}

// Node is a node to issue a certificate for.
type Node struct {
	ID    string
	Hosts []string // host names or IPs it is reached by
}

// Spec says what Generate makes.
type Spec struct {
	Cluster string
	Nodes   []Node
	Clients []string
}

// Generate writes into dir (created if missing) the CA (reused when dir
// already has one), a certificate for every node and client, and the cluster
// secret (kept when present). It returns the files it wrote.
func Generate(dir string, s Spec) ([]string, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, err
	}
	var wrote []string
	ca, err := LoadAuthority(dir)
	if err != nil {
		if _, statErr := os.Stat(filepath.Join(dir, CAFile)); statErr == nil {
			return nil, err // a CA is there but unreadable: do not overwrite it
		}
		if ca, err = NewAuthority(s.Cluster); err != nil {
			return nil, err
		}
		if err := ca.Save(dir); err != nil {
			return nil, err
		}
		wrote = append(wrote, CAFile, CAKeyFile)
	}
	write := func(id Identity, hosts []string, cf, kf string) error {
		c, k, err := ca.Issue(id, hosts)
		if err != nil {
			return err
		}
		if err := os.WriteFile(filepath.Join(dir, cf), c, 0o644); err != nil {
			return err
		}
		wrote = append(wrote, cf, kf)
		return os.WriteFile(filepath.Join(dir, kf), k, 0o600)
	}
	for _, n := range s.Nodes {
		cf, kf := NodeFiles(n.ID)
		hosts := append([]string{"localhost", "127.0.0.1", "::1"}, n.Hosts...)
		if err := write(Identity{s.Cluster, KindNode, n.ID}, hosts, cf, kf); err != nil {
			return nil, err
		}
	}
	for _, c := range s.Clients {
		cf, kf := ClientFiles(c)
		if err := write(Identity{s.Cluster, KindClient, c}, nil, cf, kf); err != nil {
			return nil, err
		}
	}
	for _, f := range []string{SecretFile, MetricsTokenFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			if err := os.WriteFile(filepath.Join(dir, f), []byte(NewSecret()+"\n"), 0o600); err != nil {
				return nil, err
			}
			wrote = append(wrote, f)
		}
	}
	return wrote, nil
}

// NewSecret returns a random cluster secret (32 bytes, hex).
func NewSecret() string {
	var b [32]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// LoadPool reads a CA certificate file into a pool.
func LoadPool(caFile string) (*x509.CertPool, error) {
	b, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("certs: %s holds no PEM certificate", caFile)
	}
	return pool, nil
}

// LoadNodeTLS is LoadTLS for node id's files in certificate directory dir.
func LoadNodeTLS(dir, id string) (*tls.Config, error) {
	cf, kf := NodeFiles(id)
	return LoadTLS(filepath.Join(dir, CAFile), filepath.Join(dir, cf), filepath.Join(dir, kf))
}

// LoadTLS returns a TLS configuration holding the key pair in certFile and
// keyFile and trusting the CA in caFile (as RootCAs and ClientCAs). Callers
// set the client-authentication policy.
func LoadTLS(caFile, certFile, keyFile string) (*tls.Config, error) {
	pool, err := LoadPool(caFile)
	if err != nil {
		return nil, err
	}
	pair, err := tls.LoadX509KeyPair(certFile, keyFile)
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	return &tls.Config{Certificates: []tls.Certificate{pair}, RootCAs: pool, ClientCAs: pool, MinVersion: tls.VersionTLS13}, nil
}
