package mc

import (
	"testing"
)

// afterPrefix returns the world after the model's prefix of protocol
// checked in model's declarer's model.
func afterPrefix(t *testing.T, protocol, model string, beforeFsync bool) *world {
	t.Helper()
	cfg := NewConfig(protocol)
	m := NewConfig(model)
	cfg.Model, cfg.Net, cfg.Timers, cfg.Crashes, cfg.CrashBeforeFsync = m.Model, m.Net, m.Timers, m.Crashes, beforeFsync
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	c := &checker{cfg: cfg, some: map[string]*PropResult{SomeWrite: {}, SomeRead: {}}}
	if _, why, err := c.applyPrefix(w, cfg.Model.Prefix); err != nil || why != "" {
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

// TestCrashBeforeFsync: after n3 accepts the write (paxos.
// CrashBeforeFsyncModel's prefix), paxos-broken-earlyack's n3, whose
// Accepted left Early, may crash before its fsync and lose its vote;
// paxos's n3, whose Accepted waits for the fsync, may not; without
// CrashBeforeFsync no such crash is enabled.
func TestCrashBeforeFsync(t *testing.T) {
	const model, n3 = "paxos-broken-earlyack", 2
	w := afterPrefix(t, "paxos-broken-earlyack", model, true)
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
	if _, ok := unsyncedCrash(afterPrefix(t, "paxos", model, true), n3); ok {
		t.Fatalf("paxos: n3 may lose an acceptance its Accepted waited for")
	}
	for _, ev := range afterPrefix(t, "paxos-broken-earlyack", model, false).enabled() {
		if ev.Kind == EvCrashUnsynced {
			t.Fatalf("a crash before an fsync is enabled without CrashBeforeFsync: %+v", ev)
		}
	}
}
