package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// COMMAND INFO gives the key positions clients (redis-cli, cluster-aware
// libraries, GUI browsers) rely on, and SYNOD HELP names every command.
func TestCommandTable(t *testing.T) {
	_, addr := startServer(t, gatewaytest.KV(), ServerOptions{})
	c := dial(t, addr)
	for _, tc := range []struct {
		name              string
		arity             int64
		first, last, step int64
		flag              string
	}{
		{"mset", -3, 1, -1, 2, "write"},
		{"rename", 3, 1, 2, 1, "write"},
		{"keys", 2, 0, 0, 0, "readonly"},
		{"hgetall", 2, 1, 1, 1, "readonly"},
		{"zadd", -4, 1, 1, 1, "denyoom"},
		{"watch", -2, 1, -1, 1, "fast"},
		{"sinter", -2, 1, -1, 1, "readonly"},
		{"ttl", 2, 1, 1, 1, "fast"},
	} {
		c.send("COMMAND", "INFO", tc.name)
		r := c.reply()
		if len(r.Elems) != 1 || len(r.Elems[0].Elems) != 10 {
			t.Fatalf("COMMAND INFO %s: %+v", tc.name, r)
		}
		e := r.Elems[0].Elems
		if string(e[0].Str) != tc.name || e[1].Int != tc.arity || e[3].Int != tc.first || e[4].Int != tc.last || e[5].Int != tc.step {
			t.Errorf("COMMAND INFO %s: name %s arity %d keys %d %d %d", tc.name, e[0].Str, e[1].Int, e[3].Int, e[4].Int, e[5].Int)
		}
		found := false
		for _, f := range e[2].Elems {
			found = found || string(f.Str) == tc.flag
		}
		if !found {
			t.Errorf("COMMAND INFO %s lacks flag %s", tc.name, tc.flag)
		}
	}
	help := c.do("SYNOD", "HELP")
	for name := range commands {
		if !strings.Contains(help, " "+strings.ToUpper(name)+" ") && !strings.Contains(help, " "+strings.ToUpper(name)+"\n") && !strings.HasSuffix(help, " "+strings.ToUpper(name)) {
			t.Errorf("SYNOD HELP does not list %s", strings.ToUpper(name))
		}
	}
}
