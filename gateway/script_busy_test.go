package gateway

import (
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/gateway/gatewaytest"
	"github.com/synod-dev/synod/service"
)

// start sends a command without reading its reply.
func (c *tconn) start(args ...string) {
	c.t.Helper()
	c.send(args...)
	if err := c.w.Flush(); err != nil {
		c.t.Fatal(err)
	}
}

// waitBusy polls PING until the node answers BUSY.
func waitBusy(t *testing.T, c *tconn) string {
	t.Helper()
	for deadline := time.Now().Add(30 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if got := c.do("PING"); strings.Contains(got, "BUSY") {
			return got
		}
	}
	t.Fatal("the node never answered BUSY")
	return ""
}

// TestScriptBusy: past busy-reply-threshold (lua-time-limit) a script makes
// the node answer BUSY to other commands (a MULTI is marked, EXEC aborts),
// SCRIPT KILL and FUNCTION KILL stop the run of their kind when it wrote
// nothing, a run that wrote first is UNKILLABLE, and a busy run's write is
// refused (service/kv_script_busy.go), as Redis's busy-script tests expect
// (multi, scripting and functions units).
func TestScriptBusy(t *testing.T) {
	b := gatewaytest.MustAutomaton(t, pxName, "kv")
	_, addr := startServer(t, b, ServerOptions{})
	c, rd, k := dial(t, addr), dial(t, addr), dial(t, addr)
	run(t, c, []step{
		cmd("CONFIG SET lua-time-limit 10", "OK"),
		cmd("CONFIG GET busy-reply-threshold", "1) \"busy-reply-threshold\"\n2) \"10\""),
		cmd("SET xx 1", "OK"),
		cmd("SCRIPT KILL", "(error) NOTBUSY No scripts in execution right now."),
	})
	evalBusy := "(error) BUSY Redis is busy running a script. You can only call SCRIPT KILL or SHUTDOWN NOSAVE."
	fnBusy := "(error) BUSY Redis is busy running a script. You can only call FUNCTION KILL or SHUTDOWN NOSAVE."

	// A busy EVAL: BUSY, MULTI marked, FUNCTION KILL refused, SCRIPT KILL.
	rd.start("EVAL", "local f = function() while 1 do redis.call('ping') end end while 1 do pcall(f) end", "0")
	if got := waitBusy(t, c); got != evalBusy {
		t.Fatalf("PING while busy: %s", got)
	}
	run(t, c, []step{
		cmd("MULTI", "OK"),
		cmd("INCR xx", evalBusy),
	})
	run(t, k, []step{
		cmd("FUNCTION KILL", evalBusy),
		cmd("SCRIPT KILL", "OK"),
	})
	if got := rd.reply().String(); !strings.Contains(got, "Script killed by user with SCRIPT KILL...") {
		t.Errorf("the killed script answered %s", got)
	}
	run(t, c, []step{
		cmd("INCR xx", "QUEUED"),
		cmd("EXEC", "(error) "+execAbort),
		cmd("GET xx", `"1"`),
		cmd("PING", "PONG"),
	})

	// EXEC while busy aborts with the BUSY error.
	run(t, c, []step{cmd("MULTI", "OK"), cmd("INCR xx", "QUEUED")})
	rd.start("EVAL", "local a = 1 while true do a = a + 1 end", "0")
	waitBusy(t, c)
	run(t, c, []step{
		cmd("EXEC", "(error) EXECABORT Transaction discarded because of: "+strings.TrimPrefix(evalBusy, "(error) ")),
		cmd("SCRIPT KILL", "OK"),
		cmd("PING", "PONG"),
		cmd("GET xx", `"1"`),
	})
	rd.reply()

	// A function: FUNCTION STATS shows it, SCRIPT KILL refused, FUNCTION KILL.
	if got := c.do("FUNCTION", "LOAD", "REPLACE", "#!lua name=test\nredis.register_function('test', function() local a = 1 while true do a = a + 1 end end)"); got != `"test"` {
		t.Fatalf("FUNCTION LOAD: %s", got)
	}
	rd.start("FCALL", "test", "0")
	if got := waitBusy(t, c); got != fnBusy {
		t.Fatalf("PING while a function is busy: %s", got)
	}
	if got := c.do("FUNCTION", "STATS"); !strings.Contains(got, "running_script") || !strings.Contains(got, `"test"`) || !strings.Contains(got, `"fcall"`) || !strings.Contains(got, "duration_ms") {
		t.Errorf("FUNCTION STATS while busy: %s", got)
	}
	run(t, c, []step{cmd("SCRIPT KILL", fnBusy), cmd("FUNCTION KILL", "OK"), cmd("PING", "PONG")})
	if got := rd.reply().String(); !strings.Contains(got, "killed by user") {
		t.Errorf("the killed function answered %s", got)
	}

	// A script that wrote before its mark cannot be killed; it ends at
	// its budget with its write kept.
	rd.start("EVAL", "redis.call('set', KEYS[1], 'y') while true do end", "1", "x")
	waitBusy(t, c)
	if got := c.do("SCRIPT", "KILL"); !strings.HasPrefix(got, "(error) UNKILLABLE") {
		t.Errorf("SCRIPT KILL of a script that wrote: %s", got)
	}
	if got := rd.budgetReply().String(); !strings.Contains(got, "exceeded its budget") {
		t.Errorf("the unkillable script answered %s", got)
	}
	// Past its mark a script that has not written may not write: at every
	// replica alike, whatever the kill's timing.
	run(t, c, []step{
		cmd("GET x", `"y"`),
	})
	if got := c.do("EVAL", "local i = 0 while i < 2000000 do i = i + 1 end return redis.call('set', KEYS[1], 'z')", "1", "x"); got != "(error) "+service.ErrBusyWrite {
		t.Errorf("a write past the mark: %s", got)
	}
	run(t, c, []step{
		cmd("GET x", `"y"`),
		// With the default threshold nothing is ever busy.
		cmd("CONFIG SET lua-time-limit 5000", "OK"),
	})
	if got := c.do("EVAL", "local i = 0 while i < 2000000 do i = i + 1 end return redis.call('set', KEYS[1], 'z')", "1", "x"); got != "OK" {
		t.Errorf("the same write with the default threshold: %s", got)
	}
	run(t, c, []step{cmd("GET x", `"z"`)})
}
