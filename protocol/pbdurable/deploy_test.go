package pbdurable

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
)

// TestPerNodeSQLiteRefused (issue 29): a cluster file whose pbdurable
// namespace keeps objects in the database on several nodes, without a
// shared durability_dsn, is refused at start with the reason (each node
// would recover from its own SQLite file); a shared database, a mapping
// without database objects, or one node is accepted.
func TestPerNodeSQLiteRefused(t *testing.T) {
	file := func(nodes int, params string) string {
		s := "cluster: t\ndurability: memory\nnodes:\n"
		for i := 1; i <= nodes; i++ {
			s += fmt.Sprintf("  - {id: n%d, client: 127.0.0.1:%d, peer: 127.0.0.1:%d}\n", i, 7000+i, 7100+i)
		}
		return s + "namespaces:\n  - {name: d, protocol: pbdurable, service: kv, params: {" + params + "}}\n"
	}
	for _, tc := range []struct {
		nodes  int
		params string
		refuse bool
	}{
		{3, "mapping: db", true},
		{3, "", true}, // the default mapping is db
		{3, "mapping: pbdb", true},
		{3, "mapping: reconstructible", false}, // kv: State and Replies kept nowhere
		{3, "mapping: db, durability_dsn: /tmp/shared.db", false},
		{3, "mapping: pb", false},
		{1, "mapping: db", false},
	} {
		_, err := config.Parse([]byte(file(tc.nodes, tc.params)))
		if tc.refuse != (err != nil) {
			t.Errorf("%d nodes, params {%s}: error %v, want refused %v", tc.nodes, tc.params, err, tc.refuse)
			continue
		}
		if err != nil && !strings.Contains(err.Error(), "durability_dsn") {
			t.Errorf("%d nodes, params {%s}: the refusal does not name durability_dsn: %v", tc.nodes, tc.params, err)
		}
	}
}

// TestPBDBTakeOverRefused (rule "durable means durable": a configuration
// that cannot keep the promise is refused at start with the reason): a
// mapping with replicated and database objects (pbdb) on several nodes
// with durability fsync is refused, naming the take-over hazard and the
// way out, since its take-overs from a live primary can break
// all-or-nothing (TestPBDBTakeOverHazard). One node, durability memory,
// mappings pb and db, and unsafe_takeover=true are accepted. Fails on the
// code before the refusal (every case was accepted).
func TestPBDBTakeOverRefused(t *testing.T) {
	file := func(durability string, nodes int, service, params string) string {
		s := "cluster: t\ndurability: " + durability + "\ndata_dir: /tmp/synod-pbdb-refused\nnodes:\n"
		for i := 1; i <= nodes; i++ {
			s += fmt.Sprintf("  - {id: n%d, client: 127.0.0.1:%d, peer: 127.0.0.1:%d}\n", i, 7000+i, 7100+i)
		}
		return s + "namespaces:\n  - {name: d, protocol: pbdurable, service: " + service + ", params: {durability_dsn: /tmp/shared.db, " + params + "}}\n"
	}
	for _, tc := range []struct {
		durability string
		nodes      int
		service    string
		params     string
		refuse     bool
	}{
		{"fsync", 3, "kv", "mapping: pbdb", true},
		{"fsync", 2, "kv", "mapping: pbdb", true},
		{"fsync", 3, "gridmatchmaker", "mapping: pbdb", true},
		{"fsync", 3, "kv", "mapping: pbdb, unsafe_takeover: \"true\"", false},
		{"fsync", 3, "kv", "mapping: pbdb, unsafe_takeover: \"false\"", true},
		{"fsync", 1, "kv", "mapping: pbdb", false},
		{"memory", 3, "kv", "mapping: pbdb", false},
		{"fsync", 3, "kv", "mapping: pb", false},
		{"fsync", 3, "kv", "mapping: db", false},
		{"fsync", 3, "gridmatchmaker", "mapping: db", false},
	} {
		_, err := config.Parse([]byte(file(tc.durability, tc.nodes, tc.service, tc.params)))
		if tc.refuse != (err != nil) {
			t.Errorf("%s, %d nodes, %s {%s}: error %v, want refused %v", tc.durability, tc.nodes, tc.service, tc.params, err, tc.refuse)
			continue
		}
		if err != nil && (!strings.Contains(err.Error(), "take") || !strings.Contains(err.Error(), "unsafe_takeover=true")) {
			t.Errorf("%s, %d nodes, %s {%s}: the refusal does not give the reason and the way out: %v", tc.durability, tc.nodes, tc.service, tc.params, err)
		}
	}
}
