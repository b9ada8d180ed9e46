package service

import (
	"crypto/sha256"
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
)

// TestKVDumpRestore: every type round-trips through DUMP and RESTORE with
// its TTL (relative and ABSTTL), RESTORE refuses an existing key without
// REPLACE, a past ABSTTL deletes instead of creating, a damaged payload is
// refused, and Redis's payloads and earlier Synod ones restore.
func TestKVDumpRestore(t *testing.T) {
	s := newKVState()
	const now = 1_000_000
	kvScript(t, s, now, `
set str bar => OK
hset h f v g w => (integer) 2
rpush l a b c => (integer) 3
sadd st x y => (integer) 2
zadd z 1 a 2.5 b => (integer) 2
`)
	for _, k := range []string{"str", "h", "l", "st", "z"} {
		before := s.m[k].hash(k)
		p := s.ApplyEnv(op("dump", k), Env{Time: now * 1e6})
		if p.Type != ResultBytes {
			t.Fatalf("dump %s: %v", k, p)
		}
		if r := s.ApplyEnv(Op{Kind: "restore", Key: k, Args: [][]byte{[]byte("0"), p.Bytes}}, Env{Time: now * 1e6}); !strings.HasPrefix(r.Err, "BUSYKEY") {
			t.Fatalf("restore over %s: %v", k, r)
		}
		s.ApplyEnv(op("del", k), Env{Time: now * 1e6})
		if r := s.ApplyEnv(Op{Kind: "restore", Key: k, Args: [][]byte{[]byte("5000"), p.Bytes}}, Env{Time: now * 1e6}); r.Type != ResultOK {
			t.Fatalf("restore %s: %v", k, r)
		}
		e := s.m[k]
		if e.exp != now+5000 {
			t.Errorf("%s: deadline %d, want %d", k, e.exp, now+5000)
		}
		e.exp = 0
		if e.hash(k) != before {
			t.Errorf("%s: restored value differs", k)
		}
		bad := append([]byte(nil), p.Bytes...)
		bad[0] ^= 1
		if r := s.ApplyEnv(Op{Kind: "restore", Key: "x", Args: [][]byte{[]byte("0"), bad}}, Env{Time: now * 1e6}); r.Err != "ERR DUMP payload version or checksum are wrong" {
			t.Errorf("damaged %s payload: %v", k, r)
		}
	}
	p := s.ApplyEnv(op("dump", "str"), Env{Time: now * 1e6}).Bytes
	kvScript(t, s, now, `
dump nosuch => (nil)
restore str -1 x replace => (error) Invalid TTL value, must be >= 0
restore str 0 x nope => (error) syntax error
restore str 0 x idletime -1 => (error) Invalid IDLETIME value, must be >= 0
`)
	// A payload of Redis 7.0 (DUMP of the string "bar") restores; with its
	// CRC's last byte changed it is refused.
	redis := []byte("\x00\x03bar\n\x00\xe6\xbeI`\xeef\xfd\x17")
	if r := s.ApplyEnv(Op{Kind: "restore", Key: "n", Args: [][]byte{[]byte("0"), redis}}, Env{Time: now * 1e6}); r.Type != ResultOK || string(s.m["n"].v) != "bar" {
		t.Errorf("Redis payload: %v", r)
	}
	redis[len(redis)-1]++
	if r := s.ApplyEnv(Op{Kind: "restore", Key: "m", Args: [][]byte{[]byte("0"), redis}}, Env{Time: now * 1e6}); r.Err != "ERR DUMP payload version or checksum are wrong" {
		t.Errorf("Redis payload with a wrong CRC: %v", r)
	}
	// A payload of an earlier Synod version (the canonical encoding,
	// 0xff 'S', SHA-256) still restores, so a logged RESTORE replays.
	w := &wire.Encoder{}
	kvEntry{v: []byte("old")}.encode(w)
	old := append(w.B, dumpVersion...)
	sum := sha256.Sum256(old)
	old = append(old, sum[:8]...)
	if r := s.ApplyEnv(Op{Kind: "restore", Key: "o", Args: [][]byte{[]byte("0"), old}}, Env{Time: now * 1e6}); r.Type != ResultOK || string(s.m["o"].v) != "old" {
		t.Errorf("earlier Synod payload: %v", r)
	}
	if r := s.ApplyEnv(Op{Kind: "restore", Key: "str", Args: [][]byte{[]byte("999"), p, []byte("absttl"), []byte("replace")}}, Env{Time: now * 1e6}); r.Type != ResultOK {
		t.Fatalf("restore absttl: %v", r)
	}
	if _, ok := s.m["str"]; ok {
		t.Error("RESTORE with a past ABSTTL and REPLACE left the key")
	}
}
