package gateway

import (
	"strings"
	"testing"
)

// TestLookupCommand: lookupCommand finds every command in lower, upper
// and mixed case; it lowers ASCII letters only, as Redis compares command
// names (the Kelvin sign, which strings.ToLower maps to "k", names no
// command); and it does not allocate for a short name (the pipelined path
// looks up every command).
func TestLookupCommand(t *testing.T) {
	for name, want := range commands {
		for _, n := range []string{name, strings.ToUpper(name), strings.ToUpper(name[:1]) + name[1:]} {
			if got, ok := lookupCommand([]byte(n)); !ok || got != want {
				t.Fatalf("lookupCommand(%q) = %v, %v; want %v", n, got, ok, want)
			}
		}
	}
	for _, n := range []string{"\u212Aeys", strings.Repeat("X", 40), "", "nosuchcommand"} {
		if got, ok := lookupCommand([]byte(n)); ok {
			t.Fatalf("lookupCommand(%q) = %v, want none", n, got)
		}
	}
	if testing.AllocsPerRun(100, func() { lookupCommand([]byte("SET")) }) != 0 {
		t.Fatal("lookupCommand allocates for a short name")
	}
}
