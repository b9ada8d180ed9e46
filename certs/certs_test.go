package certs

import (
	"crypto/x509"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestGenerateAndLoad(t *testing.T) {
	dir := t.TempDir()
	spec := Spec{Cluster: "demo", Nodes: []Node{{ID: "n1", Hosts: []string{"10.0.0.1", "db1.example"}}, {ID: "n2"}}, Clients: []string{"app"}}
	if _, err := Generate(dir, spec); err != nil {
		t.Fatal(err)
	}
	cfg, err := LoadNodeTLS(dir, "n1")
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := x509.ParseCertificate(cfg.Certificates[0].Certificate[0])
	if err != nil {
		t.Fatal(err)
	}
	id, ok := IdentityOf(leaf)
	if !ok || id != (Identity{"demo", KindNode, "n1"}) || leaf.Subject.CommonName != "n1" {
		t.Fatalf("identity %v %v (CN %q)", id, ok, leaf.Subject.CommonName)
	}
	if _, err := leaf.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, DNSName: "db1.example"}); err != nil {
		t.Fatalf("node certificate does not verify as server db1.example: %v", err)
	}
	if err := leaf.VerifyHostname("10.0.0.1"); err != nil {
		t.Fatal(err)
	}
	ccf, ckf := ClientFiles("app")
	ccfg, err := LoadTLS(filepath.Join(dir, CAFile), filepath.Join(dir, ccf), filepath.Join(dir, ckf))
	if err != nil {
		t.Fatal(err)
	}
	cleaf, _ := x509.ParseCertificate(ccfg.Certificates[0].Certificate[0])
	if id, _ := IdentityOf(cleaf); id.Kind != KindClient {
		t.Fatalf("client certificate names %v", id)
	}
	if _, err := cleaf.Verify(x509.VerifyOptions{Roots: cfg.RootCAs, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}}); err == nil {
		t.Fatal("a client certificate verifies as a server")
	}
	if st, _ := os.Stat(filepath.Join(dir, "node-n1.key")); st.Mode().Perm() != 0o600 {
		t.Fatalf("key file mode %v", st.Mode())
	}
	// A second run keeps the CA and the secret.
	ca1, _ := os.ReadFile(filepath.Join(dir, CAFile))
	sec1, _ := os.ReadFile(filepath.Join(dir, SecretFile))
	if _, err := Generate(dir, Spec{Cluster: "demo", Nodes: []Node{{ID: "n3"}}}); err != nil {
		t.Fatal(err)
	}
	ca2, _ := os.ReadFile(filepath.Join(dir, CAFile))
	sec2, _ := os.ReadFile(filepath.Join(dir, SecretFile))
	if string(ca1) != string(ca2) || string(sec1) != string(sec2) || len(strings.TrimSpace(string(sec1))) != 64 {
		t.Fatal("a second run replaced the CA or the secret")
	}
}

func TestPasswordHash(t *testing.T) {
	enc, err := HashPasswordCost("hunter2", MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	h, err := ParsePasswordHash(enc)
	if err != nil {
		t.Fatal(err)
	}
	if !h.Verify("hunter2") || h.Verify("hunter3") || h.Verify("") {
		t.Fatal("verify")
	}
	if strings.Contains(enc, "hunter2") {
		t.Fatal("hash holds the password")
	}
	enc2, _ := HashPasswordCost("hunter2", MinIterations)
	if enc2 == enc {
		t.Fatal("no salt")
	}
	for _, bad := range []string{"hunter2", "pbkdf2-sha256$10$AAAAAAAAAAA$AAAA", "md5$1$2$3", strings.Replace(enc, "$10000$", "$10x$", 1)} {
		if _, err := ParsePasswordHash(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}
