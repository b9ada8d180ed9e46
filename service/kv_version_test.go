package service

import (
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
)

func version(s *KVState, key string) string {
	return strconv.FormatInt(s.Apply(op("version", key)).Int, 10)
}

func guardOK(s *KVState, key, v string) bool {
	r := s.Apply(op(GuardKind, key, "version", v))
	if r.IsErr() && !IsGuardFailure(r) {
		panic(r.String())
	}
	return !r.IsErr()
}

// Every kind of change to a key fails a guard taken before it: writes,
// deletion, deletion and re-creation, expiry, rename (both ends), FLUSHDB.
func TestKVGuardSeesEveryChange(t *testing.T) {
	for _, c := range []struct {
		name   string
		setup  []Op
		change []Op
	}{
		{"overwrite same value", []Op{op("set", "k", "v")}, []Op{op("set", "k", "v")}},
		{"delete", []Op{op("set", "k", "v")}, []Op{op("del", "k")}},
		{"delete and re-create", []Op{op("set", "k", "v")}, []Op{op("del", "k"), op("set", "k", "v")}},
		{"create", nil, []Op{op("set", "k", "v")}},
		{"create and delete", nil, []Op{op("set", "k", "v"), op("del", "k")}},
		{"hash field", []Op{op("hset", "k", "f", "1")}, []Op{op("hincrby", "k", "f", "1")}},
		{"list pop to empty", []Op{op("rpush", "k", "a")}, []Op{op("lpop", "k")}},
		{"rename away", []Op{op("set", "k", "v")}, []Op{op("rename", "k", "j")}},
		{"rename onto", []Op{op("set", "k", "v"), op("set", "j", "w")}, []Op{op("rename", "j", "k")}},
		{"flushdb", []Op{op("set", "k", "v")}, []Op{op("flushdb", "")}},
		{"flushdb and re-create", []Op{op("set", "k", "v")}, []Op{op("flushdb", ""), op("set", "k", "v")}},
	} {
		t.Run(c.name, func(t *testing.T) {
			s := newKVState()
			applyAll(s, c.setup...)
			v := version(s, "k")
			s.Apply(op("set", "other", "x")) // unrelated writes do not matter
			if !guardOK(s, "k", v) {
				t.Fatal("guard failed without a change")
			}
			applyAll(s, c.change...)
			if guardOK(s, "k", v) {
				t.Fatalf("guard passed after %v", c.change)
			}
		})
	}
	// Expiry is a change too: removed lazily by a write, or actively.
	s := newKVState()
	s.ApplyEnv(op("set", "k", "v", "px", "100"), Env{Time: 1e9})
	v := version(s, "k")
	s.ApplyEnv(op("set", "other", "x"), Env{Time: 2e9})
	if guardOK(s, "k", v) {
		t.Fatal("guard passed after the key expired")
	}
}

// The generation rule on random histories: whenever a key changed between
// two reads of its version, the versions differ (and a replica restored
// from a snapshot answers every version alike).
func TestKVVersionsRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	s := newKVState()
	s.SetTombstoneLimit(3)
	keys := 6
	vers := map[string]string{}
	vals := map[string]string{}
	for k := range keys {
		key := fmt.Sprint("k", k)
		vers[key], vals[key] = version(s, key), content(s)[key]
	}
	for step := range 3000 {
		o := randomKVOp(r, keys)
		switch r.IntN(20) {
		case 0:
			o = op("flushdb", "")
		case 1:
			o = op("rename", o.Key, fmt.Sprint("k", r.IntN(keys)))
		}
		before := s.Version()
		had := map[string]bool{}
		for k := range s.m {
			had[k] = true
		}
		res := s.Apply(o)
		changed := s.Version() != before
		for k := range keys {
			key := fmt.Sprint("k", k)
			v := version(s, key)
			wrote := changed && (o.Key == key || (o.Kind == "flushdb" && had[key]) || (o.Kind == "rename" && string(o.Args[0]) == key))
			if wrote && v == vers[key] {
				t.Fatalf("step %d %v (%v): version of %s unchanged at %s", step, o, res, key, v)
			}
			if !wrote && v != vers[key] && s.m[key].gen != 0 {
				t.Fatalf("step %d %v: version of present %s moved without a write", step, o, key)
			}
			vers[key] = v
		}
		if step%200 == 0 {
			c := newKVState()
			if err := c.Restore(s.Snapshot()); err != nil {
				t.Fatal(err)
			}
			for k := range keys {
				key := fmt.Sprint("k", k)
				if version(c, key) != vers[key] {
					t.Fatalf("restored replica answers version %s for %s, want %s", version(c, key), key, vers[key])
				}
			}
		}
	}
}

func TestKVGuardExists(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		guard k exists 0 => OK
		guard k exists 1 => (error) GUARDFAILED key "k" exists: false
		set k v => OK
		guard k exists 1 => OK
		guard k version x => (error) value is not an integer or out of range
		guard k maybe 1 => (error) syntax error
	`)
}
