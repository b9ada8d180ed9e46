package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/protocol/abd"
)

const good = `
cluster: demo
data_dir: data
nodes:
  - {id: n1, peer: "127.0.0.1:7001", client: "127.0.0.1:6381"}
  - {id: n2, peer: "127.0.0.1:7002", client: "127.0.0.1:6382", metrics: "127.0.0.1:9102"}
namespaces:
  - {name: default, protocol: abd, service: kv}
`

func TestLoadGood(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "c.yaml")
	if err := os.WriteFile(p, []byte(good), 0o644); err != nil {
		t.Fatal(err)
	}
	c, err := Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if c.Durability != Fsync {
		t.Errorf("durability default %q", c.Durability)
	}
	if c.DataDir != filepath.Join(dir, "data") {
		t.Errorf("relative data_dir resolved to %q", c.DataDir)
	}
	if n, err := c.Node("n2"); err != nil || n.Metrics != "127.0.0.1:9102" || n.Procs != 0 {
		t.Errorf("Node(n2) = %+v, %v", n, err)
	}
	if _, err := c.Node("n9"); err == nil || !strings.Contains(err.Error(), "n9") {
		t.Errorf("unknown node: %v", err)
	}
	// Save and load again gives the same members.
	if err := c.Save(p); err != nil {
		t.Fatal(err)
	}
	c2, err := Load(p)
	if err != nil || len(c2.Nodes) != 2 || c2.Namespaces[0].Protocol != "abd" {
		t.Fatalf("reload: %+v %v", c2, err)
	}
}

func TestErrorsNameTheField(t *testing.T) {
	cases := []struct{ edit, field string }{
		{"cluster: demo", "cluster: \"bad name!\""},
		{`peer: "127.0.0.1:7002"`, `peer: "127.0.0.1"`},
		{`client: "127.0.0.1:6382"`, `client: "127.0.0.1:6381"`},
		{"protocol: abd", "protocol: nosuch"},
		{"service: kv", "service: nosuch"},
		{"id: n2", "id: n1"},
		{"data_dir: data", "durability: sometimes"},
		{"data_dir: data", "colour: blue"},
		{`metrics: "127.0.0.1:9102"`, `metrics: "127.0.0.1:9102", procs: -1`},
	}
	wants := []string{"cluster:", "nodes[1].peer", "nodes[1].client", "namespaces[0].protocol", "namespaces[0].service", "nodes[1].id", "durability", "colour", "nodes[1].procs"}
	for i, tc := range cases {
		y := strings.Replace(good, tc.edit, tc.field, 1)
		_, err := Parse([]byte(y))
		if err == nil || !strings.Contains(err.Error(), wants[i]) {
			t.Errorf("case %d (%s): error %v does not name %q", i, tc.field, err, wants[i])
		}
	}
	if _, err := Parse([]byte("cluster: x\nnodes: []\nnamespaces: []\ndurability: memory\n")); err == nil ||
		!strings.Contains(err.Error(), "nodes") || !strings.Contains(err.Error(), "namespaces") {
		t.Errorf("empty cluster: %v", err)
	}
	if _, err := Parse([]byte(strings.Replace(good, "data_dir: data\n", "", 1))); err == nil || !strings.Contains(err.Error(), "data_dir") {
		t.Errorf("fsync without data_dir: %v", err)
	}
}
