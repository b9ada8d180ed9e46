package config

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/certs"
)

func TestSecurityValidation(t *testing.T) {
	hash, err := certs.HashPasswordCost("pw", certs.MinIterations)
	if err != nil {
		t.Fatal(err)
	}
	base := `cluster: c
durability: memory
nodes: [{id: n1, peer: "127.0.0.1:7001", client: "127.0.0.1:6381"}]
namespaces: [{name: default, protocol: abd, service: kv}]
`
	ok := base + `secret: 0123456789abcdef0123
tls: {dir: tls, clients: required, metrics: required}
metrics_token: 0123456789abcdef0123
users:
  - {name: alice, password: "` + hash + `", access: {"*": read-only, default: read-write}}
`
	c, err := Parse([]byte(ok))
	if err != nil {
		t.Fatal(err)
	}
	if c.TLS == nil || c.TLS.Clients != ClientsRequired || c.Users[0].Access["default"] != ReadWrite || !c.MetricsTLS() || c.MetricsToken == "" {
		t.Fatalf("parsed %+v", c)
	}
	for _, tc := range []struct{ extra, want string }{
		{"secret: short\n", "secret: must be at least 16"},
		{"tls: {clients: required}\n", "tls.dir: required"},
		{"tls: {dir: x, clients: yes}\n", `tls.clients: "yes" must be`},
		{"tls: {dir: x, metrics: optional}\n", `tls.metrics: "optional" must be`},
		{"metrics_token: short\n", "metrics_token: must be at least 16"},
		{"users: [{name: bob, password: plain, access: {default: read-only}}]\n", "users[0].password: not a password hash"},
		{"users: [{name: bob, password: \"" + hash + "\", access: {nope: read-only}}]\n", `users[0].access: unknown namespace "nope"`},
		{"users: [{name: bob, password: \"" + hash + "\", access: {default: admin}}]\n", `users[0].access[default]: "admin" must be`},
		{"users: [{name: bob, password: \"" + hash + "\"}]\n", "users[0].access: empty"},
		{"password: x\nusers: [{name: default, password: \"" + hash + "\", access: {default: read-only}}]\n", `users[0].name: user "default" is already defined`},
	} {
		_, err := Parse([]byte(base + tc.extra))
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want %q", tc.extra, err, tc.want)
		}
	}
	grpc := strings.Replace(base, "service: kv}", "service: kv, transport: grpc-unary}", 1) + "tls: {dir: x}\n"
	if _, err := Parse([]byte(grpc)); err == nil || !strings.Contains(err.Error(), "namespaces[0].transport") {
		t.Errorf("tls with a gRPC peer transport: %v", err)
	}
}
