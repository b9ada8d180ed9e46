package config

import (
	"bytes"
	"runtime"
	"testing"
)

// FuzzParse parses a cluster file. Parsing allocates at most 4 MB plus 4 KB
// per input byte (YAML aliases cannot blow it up); a file that parses
// validates again, has unique node ids and addresses and namespace names
// that are valid names, and marshals to YAML that parses to a config that
// marshals to the same bytes.
func FuzzParse(f *testing.F) {
	f.Add([]byte(good))
	f.Add([]byte(good + "durability: memory\nstorage: pebble\nsecret: s\npassword: p\n"))
	f.Add([]byte("cluster: demo\ndurability: memory\nnodes:\n  - {id: n1, peer: \"127.0.0.1:1\", client: \"127.0.0.1:2\", grpc: \"127.0.0.1:3\"}\nnamespaces:\n  - {name: a, protocol: abd, service: kv, transport: grpc-stream, params: {x: \"1\"}}\n"))
	f.Add([]byte("a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\nc: &c [*b, *b, *b, *b, *b, *b, *b, *b, *b]\nd: [*c, *c, *c, *c, *c, *c, *c, *c, *c]\n"))
	f.Add([]byte("cluster: [\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var c *Cluster
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		c, err = Parse(data)
		runtime.ReadMemStats(&m1)
		if n := m1.TotalAlloc - m0.TotalAlloc; n > 4<<20+4096*uint64(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		if err := c.Validate(); err != nil {
			t.Fatalf("a parsed config does not validate again: %v", err)
		}
		seen := map[string]bool{}
		for _, n := range c.Nodes {
			for _, k := range []string{"id " + n.ID, "addr " + n.Peer, "addr " + n.Client} {
				if seen[k] {
					t.Fatalf("%s accepted twice", k)
				}
				seen[k] = true
			}
		}
		for _, ns := range c.Namespaces {
			if !nameRE.MatchString(ns.Name) || seen["ns "+ns.Name] {
				t.Fatalf("namespace %q accepted", ns.Name)
			}
			seen["ns "+ns.Name] = true
		}
		b, err := c.Marshal()
		if err != nil {
			t.Fatalf("a parsed config does not marshal: %v", err)
		}
		again, err := Parse(b)
		if err != nil {
			t.Fatalf("marshalled config %s does not parse: %v", b, err)
		}
		if b2, _ := again.Marshal(); !bytes.Equal(b, b2) {
			t.Fatalf("config marshals as\n%s\nthen as\n%s", b, b2)
		}
	})
}
