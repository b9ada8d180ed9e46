package config

import (
	"strings"
	"testing"
)

func TestGRPCAddress(t *testing.T) {
	y := strings.Replace(good, `metrics: "127.0.0.1:9102"}`, `metrics: "127.0.0.1:9102", grpc: "127.0.0.1:7402"}`, 1)
	c, err := Parse([]byte(y))
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := c.Node("n2"); n.GRPC != "127.0.0.1:7402" {
		t.Errorf("n2 grpc = %q", n.GRPC)
	}
	if n, _ := c.Node("n1"); n.GRPC != "" {
		t.Errorf("n1 grpc = %q, want none (optional)", n.GRPC)
	}
	for _, tc := range []struct{ grpc, want string }{
		{"7402", `nodes[1].grpc: "7402" is not host:port`},
		{"127.0.0.1:0", "nodes[1].grpc"},
		{"127.0.0.1:6382", "nodes[1].grpc: address 127.0.0.1:6382 already used by nodes[1].client"},
	} {
		bad := strings.Replace(good, `metrics: "127.0.0.1:9102"}`, `metrics: "127.0.0.1:9102", grpc: "`+tc.grpc+`"}`, 1)
		if _, err := Parse([]byte(bad)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("grpc %q: error %v, want %q", tc.grpc, err, tc.want)
		}
	}
}
