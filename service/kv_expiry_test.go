package service

import (
	"testing"
)

func TestKVExpiry(t *testing.T) {
	s := newKVState()
	// t = 1000 s (in ms: 1_000_000).
	kvScript(t, s, 1_000_000, `
		set k v ex 10 => OK
		ttl k => (integer) 10
		pttl k => (integer) 10000
		expiretime k => (integer) 1010
		pexpiretime k => (integer) 1010000
		ttl nokey => (integer) -2
		set p v => OK
		ttl p => (integer) -1
		expire p 5 xx => (integer) 0
		expire p 5 gt => (integer) 0
		expire p 5 lt => (integer) 1
		expire p 50 nx => (integer) 0
		expire p 50 gt => (integer) 1
		expire p 40 lt => (integer) 1
		expire p 1 nx xx => (error) ERR NX and XX, GT or LT options at the same time are not compatible
		expire p 1 gt lt => (error) ERR GT and LT options at the same time are not compatible
		expire p 100 xx gt => (integer) 1
		expire p 50 => (integer) 1
		expire p 1 sometimes => (error) Unsupported option sometimes
		pexpire p 2500 => (integer) 1
		ttl p => (integer) 3
		persist p => (integer) 1
		persist p => (integer) 0
		ttl p => (integer) -1
		expireat p 2000 => (integer) 1
		ttl p => (integer) 1000
		pexpireat p 1000500 => (integer) 1
		pttl p => (integer) 500
		expire nokey 10 => (integer) 0
		set k v2 keepttl => OK
		ttl k => (integer) 10
		set k v3 => OK
		ttl k => (integer) -1
		set k v px 300 => OK
		getex k persist => "v"
		ttl k => (integer) -1
		getex k ex 7 => "v"
		ttl k => (integer) 7
		getex k => "v"
		getex k ex 0 => (error) invalid expire time in 'getex' command
		getex k px 1 2 => (error) syntax error
		getex nokey ex 0 => (nil)
		getex k ex x => (error) value is not an integer or out of range
		incr n 1 => (integer) 1
		expire n 100 => (integer) 1
		incr n 1 => (integer) 2
		ttl n => (integer) 100
		rename n n2 => OK
		ttl n2 => (integer) 100
		dbinfo - => [(integer) 3 (integer) 3 (integer) 35833]
		expire n2 -1 => (integer) 1
		exists n2 => (integer) 0
		set past v exat 999 => OK
		exists past => (integer) 0
	`)
	// 2 s later: p (deadline 1000.5 s) is gone for reads and writes.
	kvScript(t, s, 1_002_000, `
		get p => (nil)
		ttl p => (integer) -2
		ttl k => (integer) 5
		dbsize - => (integer) 1
		keys - * => ["k"]
		guard p exists 0 => OK
		set p new nx => OK
		ttl p => (integer) -1
	`)
}

// Time only moves forward: a write carrying an earlier time than one
// already applied (a leader with a slower clock) does not bring back an
// expired key, and a read never changes the state.
func TestKVClockMonotonic(t *testing.T) {
	s := newKVState()
	s.ApplyEnv(op("set", "k", "v", "px", "100"), Env{Time: 1000e6})
	s.ApplyEnv(op("set", "x", "1"), Env{Time: 1200e6})
	snap := string(s.Snapshot())
	if got := s.ApplyEnv(op("get", "k"), Env{Time: 5000e6}); !got.Equal(Nil()) {
		t.Fatalf("expired key read: %v", got)
	}
	if string(s.Snapshot()) != snap {
		t.Fatal("a read changed the state")
	}
	if got := s.ApplyEnv(op("append", "k", "x"), Env{Time: 900e6}); !got.Equal(Int(1)) {
		t.Fatalf("a write with an earlier time saw the expired key: %v", got)
	}
	if s.Clock() != 1200 {
		t.Fatalf("clock %d, want 1200", s.Clock())
	}
}

// Without an environment (ABD, ESDS, blocking) time is unknown: deadlines
// are refused, nothing expires.
func TestKVExpiryNeedsTime(t *testing.T) {
	s := newKVState()
	kvScript(t, s, 0, `
		set k v ex 10 => (error) `+errNoTime+`
		set k v => OK
		expire k 10 => (error) `+errNoTime+`
		getex k px 5 => (error) `+errNoTime+`
		ttl k => (integer) -1
		get k => "v"
	`)
}

// activeexpire removes due keys earliest deadline first, at most limit,
// and replicas applying it alike stay equal.
func TestKVActiveExpire(t *testing.T) {
	a, b := newKVState(), newKVState()
	for _, s := range []*KVState{a, b} {
		s.ApplyEnv(op("set", "late", "v", "px", "500"), Env{Time: 1000e6})
		s.ApplyEnv(op("set", "early", "v", "px", "100"), Env{Time: 1000e6})
		s.ApplyEnv(op("set", "mid", "v", "px", "200"), Env{Time: 1000e6})
		s.ApplyEnv(op("set", "keep", "v"), Env{Time: 1000e6})
	}
	if d, ok := a.NextDeadline(); !ok || d != 1100 {
		t.Fatalf("next deadline %d %v", d, ok)
	}
	env := Env{Time: 1300e6}
	if got := a.ApplyEnv(ActiveExpire(1), env); !got.Equal(Array(Bytes([]byte("early")))) {
		t.Fatalf("activeexpire 1: %v", got)
	}
	if got := a.ApplyEnv(op("exists", "early"), env); !got.Equal(Int(0)) {
		t.Fatal("the earliest deadline was not removed first")
	}
	if got := a.Len(); got != 3 {
		t.Fatalf("%d keys left in the map", got)
	}
	want := Array(Bytes([]byte("mid")))
	if got := a.ApplyEnv(ActiveExpire(10), env); !got.Equal(want) {
		t.Fatalf("activeexpire 10 answered %v, want %v (the keys it removed)", got, want)
	}
	b.ApplyEnv(ActiveExpire(10), env)
	sameState(t, "after active expiry", a, b)
	if a.Len() != 2 {
		t.Fatalf("%d keys left, want late and keep", a.Len())
	}
	if d, ok := a.NextDeadline(); !ok || d != 1500 {
		t.Fatalf("next deadline %d %v", d, ok)
	}
	// A negative limit is refused, not applied (it panicked every
	// replica); zero removes nothing.
	if got := a.ApplyEnv(ActiveExpire(-1), Env{Time: 2000e6}); !got.IsErr() {
		t.Fatalf("activeexpire -1 answered %v, want an error", got)
	}
	if got := a.ApplyEnv(ActiveExpire(0), Env{Time: 2000e6}); !got.Equal(Array()) || a.Len() != 2 {
		t.Fatalf("activeexpire 0 answered %v, left %d keys", got, a.Len())
	}
}

// TestKVDeadlineMap: after every way a deadline is set, kept, moved,
// changed or dropped, the deadline map holds exactly the keys with
// deadlines (checkExps), and a write reaps an expired key.
func TestKVDeadlineMap(t *testing.T) {
	s := newKVState()
	at := int64(1000)
	steps := []Op{
		op("set", "a", "v", "ex", "10"),
		op("set", "b", "v", "px", "101"),
		op("set", "c", "v"),
		op("expire", "c", "7"),
		op("pexpire", "c", "7001", "gt"),
		op("set", "a", "w", "keepttl"),
		op("set", "b", "w"), // drops b's deadline
		op("getex", "c", "persist"),
		op("getex", "c", "px", "55"),
		op("rename", "c", "d"),
		op("copy", "d", "e"),
		op("persist", "e"),
		op("set", "f", "v", "pxat", "1"), // already past: deleted at once
		op("del", "a"),
		op("set", "g", "v", "px", "5"),
	}
	for _, o := range steps {
		s.ApplyEnv(o, Env{Time: at * 1e6})
		if err := checkExps(s); err != nil {
			t.Fatalf("after %v: %v", o, err)
		}
	}
	// d expires at 1055 and g at 1005: a write to g at 1100 reaps g;
	// d stays in the map until a write or activeexpire removes it.
	s.ApplyEnv(op("append", "g", "x"), Env{Time: 1100e6})
	if got := s.ApplyEnv(op("strlen", "g"), Env{Time: 1100e6}); !got.Equal(Int(1)) {
		t.Fatalf("g was not reaped before the append: strlen %v", got)
	}
	if err := checkExps(s); err != nil {
		t.Fatal(err)
	}
	again := newKVState()
	if err := again.Restore(s.Snapshot()); err != nil {
		t.Fatal(err)
	}
	if err := checkExps(again); err != nil {
		t.Fatalf("restored: %v", err)
	}
	if len(again.exps) != 1 {
		t.Fatalf("restored deadline map %v, want d's alone", again.exps)
	}
}
