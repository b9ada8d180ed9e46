package esds

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/config"
)

// TestMemoryModeRefused: a cluster file running esds on 3 nodes with
// durability memory is refused at start with the reason (a restarted
// replica lacks writes its peers hold, issue 29); fsync, one node, or
// volatile=true are accepted.
func TestMemoryModeRefused(t *testing.T) {
	file := func(durability, params string) string {
		s := "cluster: t\ndata_dir: /nonexistent\ndurability: " + durability + "\nnodes:\n"
		for _, p := range []string{"1", "2", "3"} {
			s += "  - {id: n" + p + ", peer: \"127.0.0.1:1" + p + "\", client: \"127.0.0.1:2" + p + "\"}\n"
		}
		return s + "namespaces:\n  - {name: default, protocol: esds, service: kv" + params + "}\n"
	}
	_, err := config.Parse([]byte(file("memory", "")))
	if err == nil || !strings.Contains(err.Error(), "durability memory") || !strings.Contains(err.Error(), "volatile=true") {
		t.Fatalf("esds on 3 nodes in memory mode: %v, want refused with the reason", err)
	}
	for _, ok := range []string{file("fsync", ""), file("memory", ", params: {volatile: \"true\"}")} {
		if _, err := config.Parse([]byte(ok)); err != nil {
			t.Errorf("refused: %v\n%s", err, ok)
		}
	}
}
