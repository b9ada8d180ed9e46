package certs

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"
)

// Live is a node's TLS material (LoadNodeTLS) that can be reloaded from its
// files while the node runs, as on SIGHUP (docs/SECURITY.md): new
// handshakes use the new certificate, key and CA; established connections
// keep what they negotiated. A reload whose files do not load, or whose
// certificate is expired, not yet valid, or not signed by the CA in
// ca.crt, is refused and the old material stays in use. To rotate the CA,
// put both CAs in ca.crt (LoadPool reads every certificate of the file),
// reload every node, then issue new node certificates and reload again.
type Live struct {
	load func() (*tls.Config, error)
	mu   sync.Mutex // serializes Reload
	cur  atomic.Pointer[tls.Config]
	gen  atomic.Uint64
}

// LoadLive loads node id's material from certificate directory dir.
func LoadLive(dir, id string) (*Live, error) {
	return newLive(func() (*tls.Config, error) { return LoadNodeTLS(dir, id) })
}

func newLive(load func() (*tls.Config, error)) (*Live, error) {
	l := &Live{load: load}
	c, err := l.loadChecked()
	if err != nil {
		return nil, err
	}
	l.cur.Store(c)
	return l, nil
}

// loadChecked loads the files and checks the certificate against the CA.
func (l *Live) loadChecked() (*tls.Config, error) {
	c, err := l.load()
	if err != nil {
		return nil, err
	}
	if len(c.Certificates) == 0 || len(c.Certificates[0].Certificate) == 0 {
		return nil, errors.New("certs: no certificate")
	}
	leaf, err := x509.ParseCertificate(c.Certificates[0].Certificate[0])
	if err != nil {
		return nil, fmt.Errorf("certs: %w", err)
	}
	inter := x509.NewCertPool()
	for _, der := range c.Certificates[0].Certificate[1:] {
		if ic, err := x509.ParseCertificate(der); err == nil {
			inter.AddCert(ic)
		}
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: c.RootCAs, Intermediates: inter, CurrentTime: time.Now(),
		KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageAny}}); err != nil {
		return nil, fmt.Errorf("certs: the certificate does not verify against ca.crt: %w", err)
	}
	c.Certificates[0].Leaf = leaf
	return c, nil
}

// Current is the material in use: the certificate and the CA as
// LoadNodeTLS returns them. Callers must not modify it.
func (l *Live) Current() *tls.Config { return l.cur.Load() }

// Reload reads the files again. On error the material in use is kept.
func (l *Live) Reload() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, err := l.loadChecked()
	if err != nil {
		return err
	}
	l.cur.Store(c)
	l.gen.Add(1)
	return nil
}

// Server returns a server configuration whose every handshake uses
// derive applied to the current material (derive gets a copy it may
// change: client authentication, versions, ALPN). Its result is computed
// once per reload.
func (l *Live) Server(derive func(*tls.Config) *tls.Config) *tls.Config {
	type cached struct {
		gen uint64
		cfg *tls.Config
	}
	var cache atomic.Pointer[cached]
	get := func() *tls.Config {
		g := l.gen.Load() // before cur: a reload in between is seen next time
		if c := cache.Load(); c != nil && c.gen == g {
			return c.cfg
		}
		cfg := derive(l.cur.Load().Clone())
		cache.Store(&cached{gen: g, cfg: cfg})
		return cfg
	}
	out := get().Clone()
	out.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) { return get(), nil }
	return out
}
