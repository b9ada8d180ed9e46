package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestHelpNamesEveryReadMode: SYNOD HELP names every read mode the contract
// defines (automaton.ReadMode), and SYNOD READ accepts each, so the help
// cannot fall behind a new mode (synod kv --read and the README name the
// same six).
func TestHelpNamesEveryReadMode(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	help := c.do("SYNOD", "HELP")
	var line string
	for _, l := range strings.Split(help, "\n") {
		if strings.Contains(l, "SYNOD READ [") {
			line = l
		}
	}
	if line == "" {
		t.Fatalf("SYNOD HELP has no SYNOD READ line:\n%s", help)
	}
	n := 0
	for m := automaton.ReadMode(0); ; m++ {
		name := m.String()
		if _, err := automaton.ParseReadMode(name); err != nil {
			break
		}
		n++
		if !strings.Contains(line, name) {
			t.Errorf("SYNOD HELP's read line does not name %q: %s", name, line)
		}
		if got := c.do("SYNOD", "READ", name); got != "OK" {
			t.Errorf("SYNOD READ %s: %s", name, got)
		}
	}
	if n < 6 {
		t.Errorf("only %d read modes found", n)
	}
}
