package service

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
)

const testLib = "#!lua name=mylib\nredis.register_function{function_name='hello', callback=function(keys, args) return 'hi ' .. args[1] end, description='says hi', flags={'no-writes'}}\nredis.register_function('setit', function(keys, args) return redis.call('set', keys[1], args[1]) end)"

func fcall(s *KVState, name string, args ...string) string {
	return s.Apply(op("eval", "", append([]string{"fcall:" + name, "", "0"}, args...)...)).String()
}

// TestFunctionLibraries: the library table is state. FCALL finds a
// function in it; it survives Snapshot/Restore, Delta/ApplyDelta, Clone
// and FLUSHALL; StateHash covers it; FUNCTION DUMP/RESTORE round-trips it
// with Redis's policies.
func TestFunctionLibraries(t *testing.T) {
	s := newKVState()
	if got := fcall(s, "hello", "x"); got != "(error) ERR Function not found" {
		t.Fatalf("fcall before load: %s", got)
	}
	h0 := s.StateHash()
	v0 := s.Version()
	if got := s.Apply(op("fnload", "", "append", testLib)).String(); got != `"mylib"` {
		t.Fatalf("fnload: %s", got)
	}
	if s.StateHash() == h0 {
		t.Fatal("StateHash did not change with a library")
	}
	if got := s.Apply(op("fnload", "", "append", testLib)).String(); got != "(error) ERR Library 'mylib' already exists" {
		t.Fatalf("second fnload: %s", got)
	}
	other := strings.Replace(testLib, "name=mylib", "name=other", 1)
	if got := s.Apply(op("fnload", "", "append", other)).String(); got != "(error) ERR Function hello already exists" {
		t.Fatalf("fnload of a clashing function: %s", got)
	}
	if got := fcall(s, "HELLO", "x"); got != `"hi x"` {
		t.Fatalf("fcall: %s", got)
	}
	if got := s.Apply(op("eval", "", "ro:fcall:setit", "", "1", "k", "v")).String(); !strings.Contains(got, "write flag") {
		t.Fatalf("fcall_ro of a writing function: %s", got)
	}
	list := s.Apply(op("fnlist", "", "withcode", "MY*"))
	e := &wire.Encoder{}
	EncodeResult(e, list)
	d := wire.NewDecoder(e.B)
	if DecodeResult(d); d.Done() != nil {
		t.Fatalf("fnlist's result does not travel between nodes: %v", d.Done())
	}
	if got := list.String(); !strings.Contains(got, `"hello" "says hi" ["no-writes"] "setit" (nil) []`) {
		t.Fatalf("fnlist: %s", got)
	}
	// Snapshot and Restore.
	r := newKVState()
	if err := r.Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if got := fcall(r, "hello", "y"); got != `"hi y"` {
		t.Fatalf("fcall after Restore: %s", got)
	}
	if r.StateHash() != s.StateHash() {
		t.Fatal("StateHash differs after Restore")
	}
	// Delta from before the load.
	d0 := newKVState()
	dl, err := s.Delta(v0)
	if err != nil {
		t.Fatal(err)
	}
	if err := d0.ApplyDelta(dl); err != nil {
		t.Fatal(err)
	}
	if got := fcall(d0, "hello", "z"); got != `"hi z"` {
		t.Fatalf("fcall after ApplyDelta: %s", got)
	}
	// Clone: a change on one side leaves the other.
	c := s.Clone().(*KVState)
	c.Apply(op("fndelete", "", "mylib"))
	if got := fcall(s, "hello", "x"); got != `"hi x"` {
		t.Fatalf("fcall after the clone's delete: %s", got)
	}
	if got := fcall(c, "hello", "x"); got != "(error) ERR Function not found" {
		t.Fatalf("fcall on the clone after its delete: %s", got)
	}
	// A delta carries a deletion too.
	vs := s.Version()
	s.Apply(op("fnflush", ""))
	dl, _ = s.Delta(vs)
	if err := r.ApplyDelta(dl); err != nil {
		t.Fatal(err)
	}
	if got := fcall(r, "hello", "x"); got != "(error) ERR Function not found" {
		t.Fatalf("fcall after a delta with the flush: %s", got)
	}
	// FLUSHALL keeps the libraries.
	s.Apply(op("fnload", "", "append", testLib))
	s.Apply(op("set", "k", "v"))
	s.Apply(op("flushdb", ""))
	if got := fcall(s, "hello", "x"); got != `"hi x"` {
		t.Fatalf("fcall after FLUSHALL: %s", got)
	}
	// DUMP and RESTORE.
	dump := s.Apply(op("fndump", "")).Bytes
	for _, c := range []struct{ policy, want string }{
		{"append", "(error) ERR Library mylib already exists"},
		{"replace", "OK"},
		{"flush", "OK"},
		{"nope", "(error) ERR Wrong restore policy given, value should be either FLUSH, APPEND or REPLACE."},
	} {
		if got := s.Apply(Op{Kind: "fnrestore", Args: [][]byte{dump, []byte(c.policy)}}).String(); got != c.want {
			t.Errorf("fnrestore %s: %s, want %s", c.policy, got, c.want)
		}
	}
	es := newKVState()
	if got := es.Apply(Op{Kind: "fnrestore", Args: [][]byte{dump}}).String(); got != "OK" || fcall(es, "hello", "q") != `"hi q"` {
		t.Fatalf("fnrestore into an empty state: %s", got)
	}
	bad := append([]byte(nil), dump...)
	bad[0] ^= 1
	if got := es.Apply(Op{Kind: "fnrestore", Args: [][]byte{bad}}).String(); got != "(error) ERR DUMP payload version or checksum are wrong" {
		t.Fatalf("fnrestore of a damaged payload: %s", got)
	}
	// The library API while loading (Redis 7's luaEngineCreate): only
	// redis.register_function, log and the version.
	for code, want := range map[string]string{
		"return math.random()":                 "Script attempted to access nonexistent global variable 'math'",
		"return redis.call('ping')":            "Script attempted to access nonexistent global variable 'call'",
		"return redis.setresp(3)":              "Script attempted to access nonexistent global variable 'setresp'",
		"mt = getmetatable(_G)":                "Script attempted to access nonexistent global variable 'getmetatable'",
		"a = 1":                                "Attempt to modify a readonly table",
		"local a = 1 while 1 do a = a + 1 end": "FUNCTION LOAD timeout",
	} {
		got := s.Apply(op("fnload", "", "replace", "#!lua name=lib2\n"+code)).String()
		if !strings.Contains(got, want) {
			t.Errorf("load of %q: %s, want %q", code, got, want)
		}
	}
	s.Apply(op("fnload", "", "replace", "#!lua name=lib3\nlocal lib = redis\nlib.register_function('f3', function() lib.register_function('f4', function() end) end)\nredis.register_function('f5', function() return math.floor(2.5) + #redis.sha1hex('x') end)"))
	if got := fcall(s, "f3"); !strings.Contains(got, "redis.register_function can only be called on FUNCTION LOAD command") {
		t.Errorf("register_function at run time: %s", got)
	}
	if got := fcall(s, "f5"); got != "(integer) 42" {
		t.Errorf("run-time globals in a function: %s", got)
	}
}
