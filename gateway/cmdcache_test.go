package gateway

import "testing"

// TestCmdCache holds a connection's command cache to lookupCommand: the
// same command for every spelling of a name, the right one after the name
// changes, unknown names unknown (and not cached over a known one), and
// names longer than the cache still found.
func TestCmdCache(t *testing.T) {
	var k cmdCache
	names := []string{"SET", "SET", "set", "GET", "SeT", "nosuchcmd", "SET", "get", "GET",
		"clusterxxxxxxxxxxxxxxxxxx", "set", "CLIENT", "client", "config", "GET"}
	for _, n := range names {
		want, wok := lookupCommand([]byte(n))
		got, ok := k.lookup([]byte(n))
		if got != want || ok != wok {
			t.Fatalf("lookup(%q) = %v, %v; lookupCommand: %v, %v", n, got, ok, want, wok)
		}
	}
	// A buffer reused for the next name (the reader's) does not change
	// what the cache holds.
	buf := []byte("SET")
	k.lookup(buf)
	copy(buf, "GET")
	if got, _ := k.lookup(buf); got != commands["get"] {
		t.Fatalf("after the name's buffer changed to GET: %v", got)
	}
	if got, _ := k.lookup([]byte("SET")); got != commands["set"] {
		t.Fatalf("SET after GET: %v", got)
	}
}
