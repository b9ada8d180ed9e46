package certs

import (
	"crypto/tls"
	"os"
	"path/filepath"
	"testing"
)

// TestLiveReload: Reload takes a new certificate of the same CA, refuses
// one of another CA or a key that does not match, keeping the one in use,
// and a Server configuration follows the reloads.
func TestLiveReload(t *testing.T) {
	dir, other := t.TempDir(), t.TempDir()
	spec := Spec{Cluster: "c", Nodes: []Node{{ID: "n1"}}}
	for _, d := range []string{dir, other} {
		if _, err := Generate(d, spec); err != nil {
			t.Fatal(err)
		}
	}
	l, err := LoadLive(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	srv := l.Server(func(c *tls.Config) *tls.Config { c.MinVersion = tls.VersionTLS12; return c })
	served := func() string {
		c, err := srv.GetConfigForClient(nil)
		if err != nil || c.MinVersion != tls.VersionTLS12 {
			t.Fatalf("derived config: %v %v", c, err)
		}
		return c.Certificates[0].Leaf.SerialNumber.String()
	}
	first := served()
	if _, err := Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	if err := l.Reload(); err != nil {
		t.Fatal(err)
	}
	second := served()
	if second == first {
		t.Fatal("the server configuration did not follow the reload")
	}
	cf, kf := NodeFiles("n1")
	copyFile := func(from, to string) {
		b, err := os.ReadFile(from)
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(to, b, 0o600); err != nil {
			t.Fatal(err)
		}
	}
	// Another CA's certificate and key: does not verify against ca.crt.
	copyFile(filepath.Join(other, cf), filepath.Join(dir, cf))
	copyFile(filepath.Join(other, kf), filepath.Join(dir, kf))
	if err := l.Reload(); err == nil {
		t.Fatal("a certificate of another CA was reloaded")
	}
	// This CA's certificate with another key.
	if _, err := Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	copyFile(filepath.Join(other, kf), filepath.Join(dir, kf))
	if err := l.Reload(); err == nil {
		t.Fatal("a key that does not match its certificate was reloaded")
	}
	if got := served(); got != second {
		t.Fatalf("after refused reloads the server presents %s, want %s", got, second)
	}
}
