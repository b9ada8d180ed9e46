package gateway

import (
	"strings"
	"testing"
)

// TestLookupCommand: lookupCommand finds what the lower-cased lookup
// finds, for every command in upper, mixed and lower case, for names
// longer than its buffer and for Unicode names that strings.ToLower maps
// onto ASCII (the Kelvin sign lowers to "k").
func TestLookupCommand(t *testing.T) {
	names := []string{"\u212Aeys", "S\u212Aip", strings.Repeat("X", 40), "", "nosuchcommand"}
	for name := range commands {
		names = append(names, name, strings.ToUpper(name), strings.ToUpper(name[:1])+name[1:])
	}
	for _, n := range names {
		want, wok := commands[strings.ToLower(n)]
		got, ok := lookupCommand([]byte(n))
		if ok != wok || got != want {
			t.Fatalf("lookupCommand(%q) = %v, %v; the lower-cased lookup gives %v, %v", n, got, ok, want, wok)
		}
	}
	if testing.AllocsPerRun(100, func() { lookupCommand([]byte("SET")) }) != 0 {
		t.Fatal("lookupCommand allocates for an ASCII name")
	}
}
