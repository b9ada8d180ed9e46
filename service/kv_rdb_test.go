package service

import (
	"bufio"
	"bytes"
	"encoding/hex"
	"fmt"
	"os"
	"strings"
	"testing"
)

// redisDumps reads testdata/redis_dump.txt: DUMP payloads redis-server
// 7.0.15 answered for the values redisDumpSetup builds.
func redisDumps(t *testing.T) map[string][]byte {
	f, err := os.Open("testdata/redis_dump.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	out := map[string][]byte{}
	sc := bufio.NewScanner(f)
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		k, h, ok := strings.Cut(sc.Text(), " ")
		if !ok || strings.HasPrefix(k, "#") {
			continue
		}
		b, err := hex.DecodeString(h)
		if err != nil {
			t.Fatal(err)
		}
		out[k] = b
	}
	return out
}

// redisDumpSetup builds the values of testdata/redis_dump.txt.
func redisDumpSetup(t *testing.T, s *KVState) {
	t.Helper()
	do := func(kind, key string, args ...string) {
		t.Helper()
		if r := s.ApplyEnv(op(kind, key, args...), Env{Time: 1e15, Seed: 7}); r.Err != "" {
			t.Fatalf("%s %s %v: %s", kind, key, args, r.Err)
		}
	}
	do("set", "s1", "bar")
	do("set", "s2", "12345")
	do("set", "s3", "-5")
	do("set", "s4", "3000000000")
	do("set", "s5", strings.Repeat("a", 100))
	do("set", "s6", "hello world this is a long string 0123456789")
	do("set", "s7", "")
	do("rpush", "l1", "a", "b", "c", "1", "2", "300", "-7", "70000")
	for i := 1; i <= 1000; i++ {
		do("rpush", "l2", fmt.Sprintf("element-%d", i))
	}
	do("sadd", "t1", "1", "2", "3", "-70000")
	do("sadd", "t2", "x")
	do("sadd", "t3", "5")
	do("hset", "h1", "f", "v")
	do("hset", "h2", "f", strings.Repeat("b", 100))
	do("zadd", "z1", "1", "a", "2.5", "b", "-3", "c", "inf", "d", "0.1", "e")
	for i := 1; i <= 200; i++ {
		do("zadd", "z2", fmt.Sprintf("%d.5", i), fmt.Sprintf("m%d", i))
	}
	s.ApplyEnv(xadd("x1", "1-1", "f", "v"), Env{Time: 1e15})
	s.ApplyEnv(xadd("x1", "1-2", "f", "w"), Env{Time: 1e15})
	s.ApplyEnv(xadd("x1", "2-0", "g", "x", "h", "y"), Env{Time: 1e15})
	do("xdel", "x1", "1-2")
	do("xgroup", "x1", "create", "g1", "0")
	do("xgroup", "x1", "create", "g2", "1-1")
}

// TestRedisDump: Synod's DUMP of each value is the payload redis-server
// 7.0.15 dumped for it, byte for byte (so redis-server restores it), and
// each of redis-server's payloads restores on Synod to the value Synod
// built. A payload with one bit changed is refused, and one whose object
// is damaged answers "Bad data format".
func TestRedisDump(t *testing.T) {
	s := newKVState()
	redisDumpSetup(t, s)
	want := redisDumps(t)
	if len(want) != 17 {
		t.Fatalf("%d payloads in testdata", len(want))
	}
	for k, p := range want {
		got := s.ApplyEnv(op("dump", k), Env{Time: 1e15})
		if !bytes.Equal(got.Bytes, p) {
			t.Errorf("DUMP %s:\n got %x\nwant %x", k, got.Bytes, p)
		}
		r := newKVState()
		if res := r.ApplyEnv(Op{Kind: "restore", Key: k, Args: [][]byte{[]byte("0"), p}}, Env{Time: 1e15}); res.Type != ResultOK {
			t.Errorf("RESTORE %s: %v", k, res)
			continue
		}
		if r.m[k].hash(k) != s.m[k].hash(k) {
			t.Errorf("RESTORE %s: the value differs from Synod's", k)
		}
		bad := bytes.Clone(p)
		bad[len(bad)/2] ^= 4
		if res := r.ApplyEnv(Op{Kind: "restore", Key: "b", Args: [][]byte{[]byte("0"), bad}}, Env{Time: 1e15}); res.Err != "ERR DUMP payload version or checksum are wrong" {
			t.Errorf("RESTORE %s with a changed bit: %v", k, res)
		}
	}
	// A damaged object with a right checksum: a list with a count past
	// its end.
	dam := redisPayload([]byte{rdbList, 5, 1, 'a'})
	if res := s.ApplyEnv(Op{Kind: "restore", Key: "d", Args: [][]byte{[]byte("0"), dam}}, Env{Time: 1e15}); res.Err != "Bad data format" {
		t.Errorf("damaged list: %v", res)
	}
	// A version above Redis 7.0's.
	v11 := redisPayload([]byte{rdbString, 1, 'a'})
	v11[len(v11)-10] = 11
	if res := s.ApplyEnv(Op{Kind: "restore", Key: "d", Args: [][]byte{[]byte("0"), v11}}, Env{Time: 1e15}); res.Err != "ERR DUMP payload version or checksum are wrong" {
		t.Errorf("version 11: %v", res)
	}
}

// redisPayload wraps an RDB object as DUMP does (version 10 and CRC).
func redisPayload(obj []byte) []byte {
	b := append(bytes.Clone(obj), rdbVersion, 0)
	crc := redisCRC64(b)
	for i := 0; i < 8; i++ {
		b = append(b, byte(crc>>(8*i)))
	}
	return b
}

// TestRedisCRC64: crc64.c's check value.
func TestRedisCRC64(t *testing.T) {
	if got := redisCRC64([]byte("123456789")); got != 0xe9c6d914c4b8d9ca {
		t.Fatalf("crc64 %x", got)
	}
}

// TestRedisLegacyStream: the RDB_TYPE_STREAM_LISTPACKS payload of Redis 5
// that type/stream-cgroups restores ("Loading from legacy"), with its
// entries-added and the groups' entries-read derived as rdbLoadObject does.
func TestRedisLegacyStream(t *testing.T) {
	p, err := hex.DecodeString("0f011000000000000000010000000000000000c3404a4057165700000023000201040101018464617461050001030100" +
		"20010381610204200a0001400a0062600a0002400a0063600a4022018164200a4039200a0065600a0005400a0066200a" +
		"00ff02060002026731050004000000000000000100000000000000003ef783437a010000010000000000000002000000" +
		"00000000003ef783437a01000001000000000000000400000000000000003ef783437a01000001000000000000000500" +
		"000000000000003ef783437a0100000101036331313ef783437a01000004000000000000000100000000000000000000" +
		"000000000002000000000000000000000000000000040000000000000000000000000000000500000000000000000267" +
		"320000000009003d52ef6867521dfa")
	if err != nil {
		t.Fatal(err)
	}
	s := newKVState()
	if r := s.ApplyEnv(Op{Kind: "restore", Key: "x", Args: [][]byte{[]byte("0"), p}}, Env{Time: 1e15}); r.Type != ResultOK {
		t.Fatalf("restore: %v", r)
	}
	st := s.m["x"].c.st
	if st.length != 2 || st.added != 2 || !st.maxDel.zero() || st.first != (streamID{5, 0}) || st.last != (streamID{6, 0}) {
		t.Errorf("stream %+v", st)
	}
	g1, g2 := st.groups["g1"], st.groups["g2"]
	if g1 == nil || g2 == nil || g1.read != 1 || g2.read != 0 || len(g1.pel) != 4 || len(g1.consumers["c11"].pel) != 4 {
		t.Errorf("groups %+v %+v", g1, g2)
	}
}
