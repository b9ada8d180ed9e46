package config

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	_ "github.com/synod-dev/synod/service" // matchmaker
)

// TestBrokenVariantsNeedAllowBroken: a live cluster file refuses a
// deliberately broken protocol variant unless allow_broken is set.
func TestBrokenVariantsNeedAllowBroken(t *testing.T) {
	load := func(body string) error {
		p := filepath.Join(t.TempDir(), "c.yaml")
		if err := os.WriteFile(p, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
		_, err := Load(p)
		return err
	}
	broken := strings.Replace(good, "protocol: abd", "protocol: abd-broken-nowriteback", 1)
	err := load(broken)
	if err == nil || !strings.Contains(err.Error(), "namespaces[0].protocol") || !strings.Contains(err.Error(), "allow_broken") {
		t.Fatalf("broken variant without allow_broken: %v", err)
	}
	if err := load("allow_broken: true\n" + broken); err != nil {
		t.Fatalf("broken variant with allow_broken: %v", err)
	}
	// The unknown-protocol error lists real protocols only.
	err = load(strings.Replace(good, "protocol: abd", "protocol: nosuch", 1))
	if err == nil || strings.Contains(err.Error(), "broken") {
		t.Fatalf("unknown protocol error offers broken variants: %v", err)
	}
}

// TestNondeterministicServiceRefused: a protocol whose replicas apply
// operations independently is refused a nondeterministic service.
func TestNondeterministicServiceRefused(t *testing.T) {
	p := filepath.Join(t.TempDir(), "c.yaml")
	if err := os.WriteFile(p, []byte(strings.Replace(good, "service: kv", "service: matchmaker", 1)), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := Load(p)
	if err == nil || !strings.Contains(err.Error(), "namespaces[0].service") || !strings.Contains(err.Error(), "nondeterministic") {
		t.Fatalf("abd with the matchmaker: %v", err)
	}
}
