package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/adam"
	_ "github.com/synod-dev/synod/protocol/paxos"
	_ "github.com/synod-dev/synod/protocol/pb"
	_ "github.com/synod-dev/synod/protocol/pbpaxos"
	_ "github.com/synod-dev/synod/protocol/unreplicated"
)

// An adam namespace whose callee is missing, or runs a protocol that does
// not serve nested requests, is refused at configuration time; with a
// paxos, pbpaxos or unreplicated callee it is accepted.
func TestCalleeMustExistAndServeNested(t *testing.T) {
	const adam = "  - {name: default, protocol: adam, service: kv}\n"
	base := strings.Replace(good, "  - {name: default, protocol: abd, service: kv}\n", adam, 1)
	cases := []struct {
		extra, want string
	}{
		{"", `calls namespace "remote", which this cluster does not have`},
		{"  - {name: remote, protocol: abd, service: kv}\n", "does not serve nested requests"},
		{"  - {name: remote, protocol: paxos, service: kv}\n", ""},
		{"  - {name: remote, protocol: pbpaxos, service: kv}\n", ""},
		{"  - {name: remote, protocol: unreplicated, service: kv}\n", ""},
		{"  - {name: remote, protocol: pb, service: kv}\n", "protocol pb does not serve nested requests"},
		{"  - {name: other, protocol: paxos, service: kv}\n", `calls namespace "remote"`},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(base + tc.extra))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("extra %q: refused: %v", tc.extra, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("extra %q: error %v, want one containing %q", tc.extra, err, tc.want)
		}
	}
	withParam := strings.Replace(base, "service: kv}", "service: kv, params: {callee: other}}", 1) +
		"  - {name: other, protocol: paxos, service: kv}\n"
	if _, err := Parse([]byte(withParam)); err != nil {
		t.Errorf("callee=other with a paxos namespace other: %v", err)
	}
}

// A callee in another cluster (remotes.go): CLUSTER/NAMESPACE must name a
// remote the file lists, and the remote must be usable (addresses, name,
// credentials, TLS files); what cannot work is refused with the reason.
func TestRemoteCallee(t *testing.T) {
	adam := strings.Replace(good, "  - {name: default, protocol: abd, service: kv}\n",
		"  - {name: default, protocol: adam, service: kv, params: {callee: billing/ledger}}\n", 1)
	cases := []struct {
		remotes, want string
	}{
		{"", `calls "billing/ledger", but this cluster file lists no remote cluster "billing"`},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\", \"10.0.0.2:6379\"]}\n", ""},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"], user: shop, password: pw, timeout: 30s}\n", ""},
		{"remotes:\n  - {name: other, nodes: [\"10.0.0.1:6379\"]}\n", `lists no remote cluster "billing"`},
		{"remotes:\n  - {name: billing, nodes: []}\n", "lists no node address"},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1\"]}\n", "is not host:port"},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"], user: shop}\n", `user "shop" needs a password`},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"], timeout: soon}\n", "is not a positive duration"},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"], tls: {server_name: x}}\n", "needs the PEM file of the CA"},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"], tls: {ca: ca.crt, cert: c.crt}}\n", "cert and key go together"},
		{"remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"]}\n  - {name: billing, nodes: [\"10.0.0.2:6379\"]}\n", "listed twice"},
		{"remotes:\n  - {name: demo, nodes: [\"10.0.0.1:6379\"]}\n", "this cluster's own name"},
	}
	for _, tc := range cases {
		_, err := Parse([]byte(adam + tc.remotes))
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("remotes %q: refused: %v", tc.remotes, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("remotes %q: error %v, want one containing %q", tc.remotes, err, tc.want)
		}
	}
	bad := strings.Replace(adam, "billing/ledger", "billing/bad name", 1) + "remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"]}\n"
	if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), "is not a namespace name") {
		t.Errorf("callee billing/bad name: %v", err)
	}
	// Load resolves the CA relative to the file and refuses one that does
	// not load.
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	withTLS := adam + "remotes:\n  - {name: billing, nodes: [\"10.0.0.1:6379\"], tls: {ca: missing-ca.crt}}\n"
	if err := os.WriteFile(p, []byte(withTLS), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Load(p); err == nil || !strings.Contains(err.Error(), filepath.Join(dir, "missing-ca.crt")) {
		t.Errorf("missing CA: %v", err)
	}
}
