package mc

import (
	"strings"
	"testing"
)

// afterPrefix returns the world after the first n events of the prefix
// of model's declared model, protocol running in it.
func afterPrefix(t *testing.T, protocol, model string, n int, beforeFsync bool) *world {
	t.Helper()
	cfg := NewConfig(protocol)
	m := NewConfig(model)
	cfg.Model, cfg.Net, cfg.Timers, cfg.Crashes, cfg.CrashBeforeFsync = m.Model, m.Net, m.Timers, m.Crashes, beforeFsync
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{cfg: cfg, some: map[string]*PropResult{SomeWrite: {}, SomeRead: {}}}
	if _, why, err := c.applyPrefix(w, cfg.Model.Prefix[:n]); err != nil || why != "" {
		t.Fatalf("%s: prefix: %q %v", protocol, why, err)
	}
	return w
}

func unsyncedCrash(w *world, node int) (Event, bool) {
	for _, ev := range w.enabled() {
		if ev.Kind == EvCrashUnsynced && ev.Node == node {
			return ev, true
		}
	}
	return Event{}, false
}

// TestCrashBeforeFsync: after n3 accepts the write (the first 8 events of
// paxos.CrashBeforeFsyncModel's prefix), paxos-broken-earlyack's n3, whose
// Accepted left Early, may crash before its fsync and lose its vote;
// paxos's n3, whose Accepted waits for the fsync, may not (so paxos cannot
// run the model's whole prefix: a configuration error naming that
// crash); without CrashBeforeFsync no such crash is enabled. The model
// catches paxos-broken-earlyack.
func TestCrashBeforeFsync(t *testing.T) {
	const model, n3, voted = "paxos-broken-earlyack", 2, 8
	w := afterPrefix(t, "paxos-broken-earlyack", model, voted, true)
	ev, ok := unsyncedCrash(w, n3)
	if !ok {
		t.Fatalf("paxos-broken-earlyack: n3 cannot crash before its fsync after an Early 2b")
	}
	before := w.nodes[n3].diskSum
	if err := w.apply(ev); err != nil {
		t.Fatal(err)
	}
	if w.nodes[n3].diskSum == before || w.nodes[n3].a != nil {
		t.Fatalf("the crash before the fsync kept n3's records (or n3 up)")
	}
	if _, ok := unsyncedCrash(afterPrefix(t, "paxos", model, voted, true), n3); ok {
		t.Fatalf("paxos: n3 may lose an acceptance its Accepted waited for")
	}
	cfg := NewConfig(model)
	cfg.Protocol = "paxos"
	if _, err := Check(cfg); err == nil || !strings.Contains(err.Error(), `"n3 crashes before its fsync, losing 1 unsynced record(s)" is not enabled`) {
		t.Fatalf("paxos in earlyack's model: %v", err)
	}
	for _, ev := range afterPrefix(t, "paxos-broken-earlyack", model, voted, false).enabled() {
		if ev.Kind == EvCrashUnsynced {
			t.Fatalf("a crash before an fsync is enabled without CrashBeforeFsync: %+v", ev)
		}
	}
	caught(t, "paxos-broken-earlyack", "chosen with a value other")
}

// TestAnswerEarly: crashes before an fsync span steps and follow
// positioned answers (unsynced.go). After n3's Accepted reaches n1 (the
// model's prefix up to its crash), paxos's n1 has answered client 1 with
// its acceptance of instance 1 waited for, so a crash before its fsync
// may lose only the chosen-prefix record "c" written after the answer;
// paxos-broken-answerearly's n1, whose acceptance carries no position,
// answered without it, and may also lose the acceptance, persisted a
// step earlier. The model catches the broken variant (the read at n2
// misses the acknowledged write); paxos cannot run its prefix, and with
// the crash it may have there (losing "c") it explores as many states as
// the broken variant needed and shows no violation.
func TestAnswerEarly(t *testing.T) {
	const model = "paxos-broken-answerearly"
	answered := len(NewConfig(model).Model.Prefix) - 2
	for proto, want := range map[string]string{model: "losing 2 unsynced", "paxos": "losing 1 unsynced"} {
		w := afterPrefix(t, proto, model, answered, true)
		ev, ok := unsyncedCrash(w, 0)
		if !ok || !strings.Contains(w.describe(ev), want) {
			t.Fatalf("%s: n1 after answering: crash before fsync %v %q, want %q", proto, ok, w.describe(ev), want)
		}
	}
	caught(t, model, "not linearizable")
	cfg := NewConfig(model)
	cfg.Protocol = "paxos"
	if _, err := Check(cfg); err == nil || !strings.Contains(err.Error(), `"n1 crashes before its fsync, losing 2 unsynced record(s)" is not enabled`) {
		t.Fatalf("paxos in answerearly's model: %v", err)
	}
	cfg.Model.Prefix = append(cfg.Model.Prefix[:answered:answered],
		"n1 crashes before its fsync, losing 1 unsynced record(s)", "n1 restarts")
	cfg.MaxStates = 17000
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil {
		t.Fatalf("paxos violates in answerearly's model:\n%s", r.Violation)
	}
	t.Logf("paxos after the crash it may have: %d states, depth %d after the prefix, no violation", r.States, r.Depth)
}
