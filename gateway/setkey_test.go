package gateway

import (
	"testing"
	"unsafe"

	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
)

// TestSetKeyShared: a connection's SET of the key of its previous SET
// shares that SET's key string (one allocation fewer per pipelined SET of
// one key: fails when each SET converts its key anew), a different key
// gets its own string with its own bytes (fails when the previous string
// is reused without comparing), and the key does not change with the
// reader's buffer afterwards; scriptConn, shared by concurrent scripts,
// keeps nothing. Its one-operation list is carved, capped, from an array
// of opChunkLen (fails when each SET allocates its list, or when the list
// is carved uncapped: an append to one changes the next SET's).
func TestSetKeyShared(t *testing.T) {
	c := &conn{ns: config.Namespace{Name: "t", Service: "kv"}, svc: service.KV{}}
	set := func(c *conn, key string) service.Op {
		args := [][]byte{[]byte("SET"), []byte(key), []byte("v")}
		p := planSet(c, args)
		copy(args[1], "XXXXXXXX") // the reader reuses its buffer
		if len(p.ops) != 1 || p.ops[0].Key != key {
			t.Fatalf("SET %s planned %+v", key, p.ops)
		}
		return p.ops[0]
	}
	a1, a2 := set(c, "key:a"), set(c, "key:a")
	if unsafe.StringData(a1.Key) != unsafe.StringData(a2.Key) {
		t.Fatal("a second SET of the same key converted its key anew")
	}
	if b := set(c, "key:b"); unsafe.StringData(b.Key) == unsafe.StringData(a1.Key) {
		t.Fatal("a SET of another key shares the previous key's string")
	}
	if a3 := set(c, "key:a"); a3.Key != "key:a" || a1.Key != "key:a" {
		t.Fatalf("keys changed: %q, %q", a3.Key, a1.Key)
	}
	set(scriptConn, "key:s")
	if scriptConn.setKey != "" {
		t.Fatalf("scriptConn keeps a key: %q", scriptConn.setKey)
	}
	args := [][]byte{[]byte("SET"), []byte("key:a"), []byte("v")}
	if n := testing.AllocsPerRun(160, func() { planSet(c, args) }); n != 0 { // AllocsPerRun's integer mean: one list array per 16
		t.Fatalf("%v allocations per SET of the previous SET's key, want 0 (one array of lists per %d SETs)", n, opChunkLen)
	}
	p1, p2 := planSet(c, args), planSet(c, args)
	if cap(p1.ops) != 1 {
		t.Fatalf("a SET's operation list has capacity %d", cap(p1.ops))
	}
	_ = append(p1.ops, service.Op{Kind: "del", Key: "other"})
	if p2.ops[0].Key != "key:a" || p2.ops[0].Kind != "set" {
		t.Fatalf("an append to one SET's list changed the next SET's operation: %+v", p2.ops[0])
	}
}
