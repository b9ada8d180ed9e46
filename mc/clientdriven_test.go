package mc

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/protocol/abd"
	"github.com/synod-dev/synod/service"
)

// clientDrivenABD is abd's client-driven model (the broken variant's) for
// the named protocol.
func clientDrivenABD(name string) Config {
	cfg := NewConfig(name)
	cfg.Model = abd.ClientDrivenModel()
	cfg.Depth = cfg.Model.Depth
	return cfg
}

// TestClientDrivenABDCorrect: correct ABD's clients, running the
// coordinator themselves, stay linearizable over the whole model, and
// both a write and a read complete (the search is not vacuous).
func TestClientDrivenABDCorrect(t *testing.T) {
	cfg := clientDrivenABD("abd")
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation != nil {
		t.Fatalf("abd violates in the client-driven model:\n%s", r.Violation)
	}
	for _, s := range r.Sometimes {
		if !s.Reached {
			t.Errorf("sometimes %s: never reached in %d states", s.Name, r.States)
		}
	}
	t.Logf("abd client-driven: %d states, depth %d", r.States, r.Depth)
}

// TestClientDrivenTraceReplays: the broken variant's counterexample, saved
// as a file, records the client-driven mode, loads, and replays to the
// same verdict; read without the mode it does not replay (the mode is
// what makes the events mean what they meant). Its steps and the
// explorer's view say which phase each client is in.
func TestClientDrivenTraceReplays(t *testing.T) {
	const name = "abd-broken-clientnowriteback"
	cfg := NewConfig(name)
	r, err := Check(cfg)
	if err != nil {
		t.Fatal(err)
	}
	if r.Violation == nil {
		t.Fatalf("%s: not found in %d states", name, r.States)
	}
	if !strings.Contains(r.Violation.Violation, "not linearizable") {
		t.Fatalf("%s: found %q, want a linearizability violation", name, r.Violation.Violation)
	}
	p := filepath.Join(t.TempDir(), "cex.json")
	if err := r.Violation.Save(p); err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(p)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(raw), `"client_driven": true`) {
		t.Fatalf("the trace file does not record the client-driven mode:\n%s", raw)
	}
	tr, err := LoadTrace(p)
	if err != nil {
		t.Fatal(err)
	}
	why, err := tr.Replay()
	if err != nil || !strings.Contains(why, "not linearizable") {
		t.Fatalf("the loaded trace replays to %q, %v; want the linearizability violation", why, err)
	}
	if s := r.Violation.String(); !strings.Contains(s, "query phase to every node") || !strings.Contains(s, "abd.phase=store") {
		t.Errorf("the trace does not show the phases:\n%s", s)
	}
	v, err := tr.ViewAt(len(tr.Events))
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(v.Clients[0], "store phase") {
		t.Errorf("client 1's write is in its store phase at the end, the view says %q", v.Clients[0])
	}
	tr.cfg.Model.ClientDriven = false
	if why, err := tr.Replay(); err == nil && strings.Contains(why, "not linearizable") {
		t.Errorf("without the client-driven mode the trace still replays to %q", why)
	}
}

// TestClientDrivenRefused: a protocol without a client coordinator, or a
// script step the coordinator cannot run, is a configuration error.
func TestClientDrivenRefused(t *testing.T) {
	cfg := NewConfig("unreplicated")
	cfg.Model.ClientDriven = true
	if _, err := Check(cfg); err == nil || !strings.Contains(err.Error(), "coordinator") {
		t.Errorf("unreplicated, client-driven: %v, want a missing coordinator", err)
	}
	cfg = clientDrivenABD("abd")
	cfg.Model.Scripts = [][]service.Op{{{Kind: "incr", Key: "x"}}, {{Kind: "get", Key: "x"}}}
	if _, err := Check(cfg); err == nil || !strings.Contains(err.Error(), "client 1's step 1") {
		t.Errorf("abd, client-driven incr: %v, want client 1's step refused", err)
	}
}
