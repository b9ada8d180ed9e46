package gateway

import (
	"maps"
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestErrorStats: error replies are counted by code, top-level and inside
// EXEC, shown by INFO errorstats in Redis's format and by ErrorStats.
func TestErrorStats(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, "unreplicated", "kv")
	s, addr := startServer(t, b, ServerOptions{})
	c := dial(t, addr)
	run(t, c, []step{
		cmd("SET s text", "OK"),
		cmd("NOPE", "(error) ERR unknown command 'NOPE', with args beginning with: "),
		cmd("INCR s", "(error) ERR value is not an integer or out of range"),
		cmd("LPUSH s x", "(error) WRONGTYPE Operation against a key holding the wrong kind of value"),
		cmd("MULTI", "OK"),
		cmd("INCR s", "QUEUED"),
		cmd("EXEC", "1) (error) ERR value is not an integer or out of range"),
		cmd("MULTI", "OK"),
		cmd("GET", "(error) ERR wrong number of arguments for 'get' command"),
		cmd("EXEC", "(error) EXECABORT Transaction discarded because of previous errors."),
	})
	want := map[string]int64{"ERR": 4, "WRONGTYPE": 1, "EXECABORT": 1}
	if got := s.ErrorStats(); !maps.Equal(got, want) {
		t.Errorf("ErrorStats = %v, want %v", got, want)
	}
	c.send("INFO", "errorstats")
	info := string(c.reply().Str)
	for _, line := range []string{"# Errorstats", "errorstat_ERR:count=4", "errorstat_WRONGTYPE:count=1", "errorstat_EXECABORT:count=1"} {
		if !strings.Contains(info, line+"\r\n") {
			t.Errorf("INFO errorstats lacks %q:\n%s", line, info)
		}
	}
	c.send("INFO", "stats")
	if info := string(c.reply().Str); !strings.Contains(info, "total_error_replies:6\r\n") {
		t.Errorf("INFO stats:\n%s", info)
	}
}

// TestErrorStatsBounded: past maxErrorKinds distinct codes the rest count
// as OTHER.
func TestErrorStatsBounded(t *testing.T) {
	var e errorStats
	for i := 0; i < maxErrorKinds+10; i++ {
		e.add(strings.Repeat("X", i+2) + " made-up code")
	}
	e.add("no code here") // ERR, a new code past the bound
	m, total := e.snapshot()
	if len(m) != maxErrorKinds+1 || m["OTHER"] != 11 || m["ERR"] != 0 || total != maxErrorKinds+11 {
		t.Errorf("%d kinds, OTHER %d, ERR %d, total %d", len(m), m["OTHER"], m["ERR"], total)
	}
}
