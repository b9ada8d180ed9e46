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
