package service

import (
	"fmt"
	"maps"
	"slices"
	"strconv"
	"strings"
	"testing"
)

func TestKVKeyspace(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		set a 1 => OK
		rpush l x => (integer) 1
		hset h f v => (integer) 1
		keys - * => ["a" "h" "l"]
		keys - [ah] => ["a" "h"]
		keys - ? => ["a" "h" "l"]
		keys - [^a] => ["h" "l"]
		dbsize - => (integer) 3
		rename l l2 => OK
		type l2 => "list"
		exists l => (integer) 0
		rename nokey x => (error) no such key
		renamenx a h => (integer) 0
		renamenx a b => (integer) 1
		rename b b => OK
		rename b h => OK
		type h => "string"
		get h => "1"
		dbinfo - => [(integer) 2 (integer) 0 (integer) 0]
		flushdb - => OK
		dbsize - => (integer) 0
		keys - * => []
		randomkey - => (nil)
		scan - 0 => ["0" []]
		scan - x => (error) invalid cursor
		scan - 0 count 0 => (error) syntax error
		scan - 0 match => (error) syntax error
	`)
}

func TestGlobMatch(t *testing.T) {
	for _, c := range []struct {
		p, s string
		want bool
	}{
		{"*", "", true}, {"h?llo", "hello", true}, {"h?llo", "hllo", false},
		{"h*llo", "heeeello", true}, {"h[ae]llo", "hallo", true}, {"h[ae]llo", "hillo", false},
		{"h[^e]llo", "hallo", true}, {"h[^e]llo", "hello", false}, {"h[a-b]llo", "hbllo", true},
		{`h\*llo`, "h*llo", true}, {`h\*llo`, "hello", false}, {"user:*:name", "user:12:name", true},
		{"a*b*c", "axxbyyc", true}, {"a*b*c", "axxbyy", false},
		{"*a", "a", true}, {"*a", "", false}, {"a*", "a", true}, {"*b*", "abc", true}, {"a**b", "ab", true},
		// Redis's regression test for CVE-2022-36021: exponential before
		// skipLonger (2^20 tries per key, seconds), immediate after.
		{"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 40), false},
		{"a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 40) + "b", true},
	} {
		if got := globMatch([]byte(c.p), []byte(c.s)); got != c.want {
			t.Errorf("globMatch(%q, %q) = %v", c.p, c.s, got)
		}
	}
}

// scanAll runs a whole SCAN, calling between(step) before each page.
func scanAll(t *testing.T, s *KVState, count int, between func(int)) map[string]int {
	t.Helper()
	seen := map[string]int{}
	cur := "0"
	for step := 0; ; step++ {
		if step > 10000 {
			t.Fatal("scan does not end")
		}
		between(step)
		r := s.Apply(op("scan", "", cur, "count", strconv.Itoa(count)))
		if r.Type != ResultArray || len(r.Elems) != 2 {
			t.Fatalf("scan answer %v", r)
		}
		for _, k := range r.Elems[1].Elems {
			seen[string(k.Bytes)]++
		}
		cur = string(r.Elems[0].Bytes)
		if cur == "0" {
			return seen
		}
	}
}

// SCAN returns every key present for the whole scan exactly once, while
// other keys are written and deleted between the pages.
func TestKVScanStableUnderWrites(t *testing.T) {
	s := newKVState()
	for i := range 500 {
		s.Apply(op("set", fmt.Sprintf("stable%d", i), "v"))
	}
	for i := range 300 {
		s.Apply(op("set", fmt.Sprintf("churn%d", i), "v"))
	}
	seen := scanAll(t, s, 7, func(step int) {
		s.Apply(op("del", fmt.Sprintf("churn%d", step)))
		s.Apply(op("set", fmt.Sprintf("new%d", step), "v"))
	})
	for i := range 500 {
		if n := seen[fmt.Sprintf("stable%d", i)]; n != 1 {
			t.Fatalf("stable%d returned %d times", i, n)
		}
	}
	// MATCH and TYPE filter the pages; the union is the filtered keyspace.
	s.Apply(op("hset", "stable-hash", "f", "v"))
	got := map[string]bool{}
	cur := "0"
	for {
		r := s.Apply(op("scan", "", cur, "match", "stable*", "type", "hash", "count", "50"))
		for _, k := range r.Elems[1].Elems {
			got[string(k.Bytes)] = true
		}
		if cur = string(r.Elems[0].Bytes); cur == "0" {
			break
		}
	}
	if !maps.Equal(got, map[string]bool{"stable-hash": true}) {
		t.Fatalf("scan match type: %v", slices.Collect(maps.Keys(got)))
	}
}
