package service

import (
	"testing"
	"time"
)

// TestKVStateFreeResult: every operation KV.StateFreeResult claims answers
// that result in every state tried (absent key, a string, other types, an
// expiring key, a deleted one); plain SETs are claimed, and the SET forms
// whose answer reads the state (GET, NX, XX) or the clock (PX) are not.
func TestKVStateFreeResult(t *testing.T) {
	states := map[string][]Op{
		"empty":    nil,
		"string":   {op("set", "k", "old")},
		"list":     {op("rpush", "k", "a", "b")},
		"hash":     {op("hset", "k", "f", "v")},
		"expiring": {op("set", "k", "old", "px", "100")},
		"deleted":  {op("set", "k", "old"), op("del", "k")},
	}
	claim := map[bool][]Op{
		true: {op("set", "k", "v"), op("set", "k", "")},
		false: {op("set", "k", "v", "get"), op("set", "k", "v", "nx"), op("set", "k", "v", "xx"),
			op("set", "k", "v", "px", "100"), op("get", "k"), op("incr", "k"), op("append", "k", "x")},
	}
	for should, ops := range claim {
		for _, o := range ops {
			want, ok := KV{}.StateFreeResult(o)
			if ok != should {
				t.Errorf("%v: claimed state-free %v, want %v", o, ok, should)
			}
			if !ok {
				continue
			}
			for name, prep := range states {
				s := KV{}.NewState()
				env := Env{Time: time.Unix(1000, 0).UnixNano()}
				for _, p := range prep {
					ApplyEnv(s, p, env)
				}
				if got := ApplyEnv(s, o, Env{Time: env.Time + 50e6}); got.String() != want.String() {
					t.Errorf("%s: %v answered %s, StateFreeResult says %s", name, o, got, want)
				}
			}
		}
	}
}
