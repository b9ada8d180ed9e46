package mc

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/protocol/paxos"
)

// caught checks broken in its declared model and wants a violation
// containing want that replays from fresh automata.
func caught(t *testing.T, broken, want string) *Result {
	t.Helper()
	r, err := Check(NewConfig(broken))
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil || !strings.Contains(r.Violation.Violation, want) {
		t.Fatalf("%s: %q not caught in %d states: %v", broken, want, r.States, r.Violation)
	}
	if why, err := r.Violation.Replay(); err != nil || why == "" {
		t.Fatalf("%s: the counterexample does not replay: %q %v", broken, why, err)
	}
	t.Logf("%s: %d states, %d events, %v", broken, r.States, len(r.Violation.Events), r.Elapsed.Round(1e6))
	return r
}

// clean checks correct in broken's declared model (its workload, network,
// timers, crash bound and prefix) to depth, with at most maxStates states (0: no bound), and
// wants no violation.
func clean(t *testing.T, correct, broken string, depth, maxStates int) *Result {
	t.Helper()
	cfg := NewConfig(correct)
	cfg.Model = automaton.ModelOf(broken)
	cfg.Net, _ = ParseNetwork(cfg.Model.Network)
	cfg.Timers, cfg.Depth, cfg.MaxStates = cfg.Model.Timers, depth, maxStates
	cfg.Crashes, cfg.CrashBeforeFsync = cfg.Model.Crashes, cfg.Model.CrashBeforeFsync
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil {
		t.Fatalf("%s in %s's model: %v", correct, broken, r.Violation)
	}
	t.Logf("%s in %s's model to depth %d: %d states (complete %v), %v", correct, broken, depth, r.States, r.Complete, r.Elapsed.Round(1e6))
	return r
}

// TestLeaderChangeModel: in the leader-change model (one write, a timer
// budget of 4, inboxes drained from the highest node) the checker finds
// paxos-broken-skipphase1values' lost write, while paxos itself, checked
// in the same model (as many states as the broken variant needed), finds
// no violation.
func TestLeaderChangeModel(t *testing.T) {
	bad := caught(t, "paxos-broken-skipphase1values", "chosen with a value other")
	ok := clean(t, "paxos", "paxos-broken-skipphase1values", len(bad.Violation.Events), 15000)
	if !ok.Sometimes[0].Reached {
		t.Fatalf("paxos in the leader-change model: no write completes")
	}
}

// TestReadModel: pbpaxos's read model (protocol/pbpaxos.ReadModel: one
// fanned-out X-Paxos read, one timer firing, which is n1's first
// takeover) catches both broken variants by their invariants; pbpaxos
// itself, every state within one event more than the longer
// counterexample (the first depth at which its read can be answered),
// shows no violation, and its read is answered.
func TestReadModel(t *testing.T) {
	nc := caught(t, "pbpaxos-broken-noconfirm", "reads-confirmed")
	es := caught(t, "pbpaxos-broken-earlyserve", "serve-after-takeover")
	ok := clean(t, "pbpaxos", "pbpaxos-broken-earlyserve", max(len(nc.Violation.Events), len(es.Violation.Events))+1, 0)
	if !ok.Complete || ok.HistoryChecks == 0 {
		t.Fatalf("pbpaxos in the read model: complete %v, %d histories with the read answered", ok.Complete, ok.HistoryChecks)
	}
}

// TestSequentialWritesModel: fastpaxos's model of one client writing
// twice (protocol/fastpaxos.SequentialWritesModel: one election, bynode)
// catches fastpaxos-broken-classiclearn and fastpaxos-broken-skipgap;
// fastpaxos itself, every state within the longer counterexample's
// depth, shows no violation, and a write completes.
func TestSequentialWritesModel(t *testing.T) {
	caught(t, "fastpaxos-broken-classiclearn", "which no quorum chose")
	sg := caught(t, "fastpaxos-broken-skipgap", "executed prefix")
	ok := clean(t, "fastpaxos", "fastpaxos-broken-skipgap", len(sg.Violation.Events), 0)
	if !ok.Complete || !ok.Sometimes[0].Reached {
		t.Fatalf("fastpaxos in the sequential-writes model: complete %v, write completes %v", ok.Complete, ok.Sometimes[0].Reached)
	}
}

// TestSentToAllModel: esds's model of one write sent to every replica
// (protocol/esds.SentToAllModel: send=all, one gossip round) catches
// esds-broken-maxlabel; esds itself exhausts it without a violation, and
// the write completes.
func TestSentToAllModel(t *testing.T) {
	caught(t, "esds-broken-maxlabel", "labels only decrease")
	ok := clean(t, "esds", "esds-broken-maxlabel", 20, 0)
	if ok.Frontier != 0 || !ok.Complete || !ok.Sometimes[0].Reached {
		t.Fatalf("esds in the sent-to-all model: frontier %d, complete %v, write completes %v", ok.Frontier, ok.Complete, ok.Sometimes[0].Reached)
	}
}

// TestTimerBudget: with "quiet:N" no path fires more than N timers, and
// the budget is what makes a timer-driven model finite.
func TestTimerBudget(t *testing.T) {
	cfg := NewConfig("paxos")
	cfg.Model = paxos.LeaderChangeModel()
	cfg.Timers, cfg.Depth = "quiet:1", 40
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil || r.Frontier != 0 || !r.Complete {
		t.Fatalf("paxos with one timer: violation %v, frontier %d, complete %v (%d states)", r.Violation, r.Frontier, r.Complete, r.States)
	}
	if !r.Sometimes[0].Reached {
		t.Errorf("one election should let a write complete")
	}
	w, _ := newWorld(&cfg)
	for _, ev := range r.Sometimes[0].Witness {
		if err := w.apply(ev); err != nil {
			t.Fatal(err)
		}
	}
	for _, ev := range w.enabled() {
		if ev.Kind == EvTimer {
			t.Errorf("a timer is enabled after the budget is spent: %+v", ev)
		}
	}
}

// TestByNode: on a bynode network only messages to the highest-numbered
// node with mail are deliverable.
func TestByNode(t *testing.T) {
	cfg := NewConfig("paxos")
	cfg.Net, _ = ParseNetwork("bynode")
	w, err := newWorld(&cfg)
	if err != nil {
		t.Fatal(err)
	}
	w.flight = []message{{from: 0, to: 1}, {from: 0, to: 2}, {from: 1, to: 2, data: []byte{1}}, {from: 2, to: 0}}
	var got []int
	for _, ev := range w.enabled() {
		if ev.Kind == EvDeliver {
			got = append(got, w.flight[ev.Msg].to)
		}
	}
	if len(got) != 2 || got[0] != 2 || got[1] != 2 {
		t.Fatalf("deliverable destinations %v, want [2 2]", got)
	}
}

// TestCollisionModel: fastpaxos's collision model, which starts after a
// scripted prefix (n2's election), catches fastpaxos-broken-stalevote; the
// counterexample begins with the prefix's events and replays from fresh
// automata. fastpaxos itself, in the same model to the counterexample's
// depth, shows no violation.
func TestCollisionModel(t *testing.T) {
	bad := caught(t, "fastpaxos-broken-stalevote", "below its promise")
	m := automaton.ModelOf("fastpaxos-broken-stalevote")
	if bad.Violation.Prefix != len(m.Prefix) || len(m.Prefix) == 0 {
		t.Fatalf("counterexample prefix %d, model prefix %d", bad.Violation.Prefix, len(m.Prefix))
	}
	for i, want := range m.Prefix {
		if got := bad.Violation.Events[i].Desc; got != want {
			t.Fatalf("counterexample event %d is %q, want the prefix's %q", i+1, got, want)
		}
	}
	clean(t, "fastpaxos", "fastpaxos-broken-stalevote", len(bad.Violation.Events)-len(m.Prefix), 20000)
}

// TestPrefix: a prefix event that is not enabled is a configuration error
// naming it; a prefix moves the search's root (the states counted are
// those after it) and the saved trace, loaded again, replays the prefix
// without applying it twice.
func TestPrefix(t *testing.T) {
	cfg := NewConfig("paxos")
	cfg.Model.Prefix = []string{"n3: timer 99 fires"}
	if _, err := Check(cfg); err == nil || !strings.Contains(err.Error(), `"n3: timer 99 fires" is not enabled`) {
		t.Fatalf("a prefix event that is not enabled: %v", err)
	}

	cfg = NewConfig("pb-broken-nodedup")
	full, err := Check(cfg)
	if err != nil || full.Violation == nil {
		t.Fatalf("without a prefix: %v %v", full.Violation, err)
	}
	var pre []string
	for _, ev := range full.Violation.Events[:3] {
		pre = append(pre, ev.Desc)
	}
	cfg.Model.Prefix = pre
	cut, err := Check(cfg)
	if err != nil || cut.Violation == nil {
		t.Fatalf("with the counterexample's first 3 events as prefix: %v %v", cut.Violation, err)
	}
	if cut.States >= full.States || cut.Violation.Prefix != 3 {
		t.Fatalf("prefix: %d states (without: %d), trace prefix %d", cut.States, full.States, cut.Violation.Prefix)
	}
	replaySaved(t, cut.Violation)
	t.Logf("pb-broken-nodedup: %d states, %d with a 3-event prefix", full.States, cut.States)
}

// TestCopiesModel: orca-primary's copies model (protocol/orcaprimary.
// CopiesModel: the orca service, two secondary copies) catches
// orca-primary-broken-earlyunlock by its invariant; orca-primary itself
// exhausts the model without a violation, its read is answered, and its
// histories are judged for sequential consistency over the orca service's
// own states (check's generic search, check/seq_generic.go, since ff0585c;
// before it the history check was skipped).
func TestCopiesModel(t *testing.T) {
	caught(t, "orca-primary-broken-earlyunlock", "readable-copies-agree")
	ok := clean(t, "orca-primary", "orca-primary-broken-earlyunlock", 24, 0)
	if ok.Frontier != 0 || !ok.Complete || !ok.Sometimes[1].Reached || ok.HistoryChecks == 0 {
		t.Fatalf("orca-primary in the copies model: frontier %d, complete %v, read answered %v, histories checked %d",
			ok.Frontier, ok.Complete, ok.Sometimes[1].Reached, ok.HistoryChecks)
	}
}

// TestHistoryServices: the history check names the model's service to
// package check, and is skipped where check has no model of it: kv
// (linearizable), a deterministic service under linearizability and orca
// under sequential consistency (check's generic search) are judged; the
// nondeterministic matchmaker and esds's kv are not.
func TestHistoryServices(t *testing.T) {
	for _, tc := range []struct {
		protocol, service string
		judged            bool
	}{
		{"paxos", "", true},
		{"paxos", "counter", true},
		{"paxos", "gridmatchmaker", true},
		{"paxos", "matchmaker", false},
		{"orca-primary", "orca", true},
		{"orca-primary", "", true},
		{"esds", "", false},
	} {
		cfg := NewConfig(tc.protocol)
		cfg.Model.Service = tc.service
		model, _ := automaton.ConsistencyOf(tc.protocol)
		opts, skip := checkOptions(&cfg, model)
		if (skip == "") != tc.judged {
			t.Errorf("%s with service %q: skipped %q, want judged %v", tc.protocol, tc.service, skip, tc.judged)
		}
		if want := map[bool]string{true: tc.service, false: "kv"}[tc.service != ""]; opts.Services[""] != want {
			t.Errorf("%s with service %q: check told %v", tc.protocol, tc.service, opts.Services)
		}
	}
}
