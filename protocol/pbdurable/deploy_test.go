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

// TestPBDBAccepted: a mapping with replicated and database objects
// (pbdb) on several nodes with durability fsync is accepted since its
// take-overs keep all-or-nothing (session 45, package doc "Take-overs
// from a live primary"; TestPBDBTakeOverKeepsAllOrNothing); session 44
// had refused it unless unsafe_takeover=true, which is still accepted
// (and ignored), so that cluster files that set it start.
func TestPBDBAccepted(t *testing.T) {
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
		{"fsync", 3, "kv", "mapping: pbdb", false},
		{"fsync", 2, "kv", "mapping: pbdb", false},
		{"fsync", 3, "gridmatchmaker", "mapping: pbdb", false},
		{"fsync", 3, "kv", "mapping: pbdb, unsafe_takeover: \"true\"", false},
		{"fsync", 3, "kv", "mapping: pbdb, unsafe_takeover: \"false\"", false},
		{"fsync", 1, "kv", "mapping: pbdb", false},
		{"memory", 3, "kv", "mapping: pbdb", false},
		{"fsync", 3, "kv", "mapping: pb", false},
		{"fsync", 3, "kv", "mapping: db", false},
		{"fsync", 3, "gridmatchmaker", "mapping: db", false},
	} {
		_, err := config.Parse([]byte(file(tc.durability, tc.nodes, tc.service, tc.params)))
		if tc.refuse != (err != nil) {
			t.Errorf("%s, %d nodes, %s {%s}: error %v, want refused %v", tc.durability, tc.nodes, tc.service, tc.params, err, tc.refuse)
		}
	}
}
