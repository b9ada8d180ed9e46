package gateway

import (
	"strings"
	"testing"

	"github.com/synod-dev/synod/gateway/gatewaytest"
)

// TestScripts runs EVAL, EVALSHA, SCRIPT and FUNCTION/FCALL on the live
// atomic protocols: redis.call runs the command table's plans on the
// replica's state, errors keep their codes, globals are protected, a
// read-only script cannot write, and an endless loop stops at the
// instruction budget.
func TestScripts(t *testing.T) {
	lib := "#!lua name=mylib\nredis.register_function('incrby2', function(KEYS, ARGV) return redis.call('incrby', KEYS[1], 2) end)"
	for name, b := range atomicBackends(t) {
		t.Run(name, func(t *testing.T) {
			_, addr := startServer(t, b, ServerOptions{})
			c := dial(t, addr)
			run(t, c, []step{
				{[]string{"EVAL", "return 'hello'", "0"}, `"hello"`},
				{[]string{"EVAL", "return {1,2,'x',{3}}", "0"}, "1) (integer) 1\n2) (integer) 2\n3) \"x\"\n4) 1) (integer) 3"},
				{[]string{"EVAL", "redis.call('set', KEYS[1], ARGV[1]); return redis.call('get', KEYS[1])", "1", "k", "v"}, `"v"`},
				{[]string{"EVAL", "return redis.call('incr', KEYS[1])", "1", "n"}, "(integer) 1"},
				{[]string{"EVAL", "return redis.call('lpush', KEYS[1], 'x')", "1", "k"}, "(error) WRONGTYPE Operation against a key holding the wrong kind of value"},
				{[]string{"EVAL", "return redis.pcall('lpush', KEYS[1], 'x')", "1", "k"}, "(error) WRONGTYPE Operation against a key holding the wrong kind of value"},
				{[]string{"EVAL", "return redis.call('get', KEYS[1]) == false", "1", "nope"}, "(integer) 1"},
				{[]string{"EVAL", "return {ok='fine'}", "0"}, "fine"},
				{[]string{"EVAL", "return redis.call('nosuch')", "0"}, "(error) ERR Unknown Redis command called from script"},
				{[]string{"EVAL", "return redis.call('blpop', 'l', 0)", "0"}, "(error) ERR This Redis command is not allowed from script"},
				{[]string{"EVAL_RO", "return redis.call('del', KEYS[1])", "1", "k"}, "(error) ERR Write commands are not allowed from read-only scripts."},
				{[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('del', KEYS[1])", "1", "k"}, "(error) ERR Write commands are not allowed from read-only scripts."},
				{[]string{"EVAL", "#!lua flags=no-writes\nreturn redis.call('exists', KEYS[1])", "1", "k"}, "(integer) 1"},
				{[]string{"EVAL", "return 1", "-1"}, "(error) ERR Number of keys can't be negative"},
				{[]string{"EVALSHA", "ffd632c7d33e571e9f24556ebed26c3479a87130", "0"}, "(error) NOSCRIPT No matching script. Please use EVAL."},
				{[]string{"SCRIPT", "LOAD", "return ARGV[1]"}, `"` + "098e0f0d1448c0a81dafe820f66d460eb09263da" + `"`},
				{[]string{"EVALSHA", "098E0F0D1448C0A81DAFE820F66D460EB09263DA", "0", "a"}, `"a"`},
				{[]string{"SCRIPT", "EXISTS", "098e0f0d1448c0a81dafe820f66d460eb09263da", "00"}, "1) (integer) 1\n2) (integer) 0"},
				{[]string{"FUNCTION", "LOAD", lib}, `"mylib"`},
				{[]string{"FUNCTION", "LOAD", lib}, "(error) ERR Library 'mylib' already exists"},
				{[]string{"FCALL", "incrby2", "1", "n"}, "(integer) 3"},
				{[]string{"FCALL", "nope", "0"}, "(error) ERR Function not found"},
				{[]string{"MULTI"}, "OK"},
				{[]string{"EVAL", "return redis.call('incr', KEYS[1])", "1", "n"}, "QUEUED"},
				{[]string{"EXEC"}, "1) (integer) 4"},
			})
			if got := c.do("EVAL", "return a", "0"); !strings.Contains(got, "nonexistent global variable 'a'") {
				t.Errorf("reading an undefined global: %s", got)
			}
			if got := c.do("EVAL", "a = 1", "0"); !strings.Contains(got, "Attempt to modify a readonly table") {
				t.Errorf("creating a global: %s", got)
			}
			c.send("EVAL", "while true do end", "0")
			if got := c.budgetReply().String(); !strings.Contains(got, "BUSY script exceeded its budget") {
				t.Errorf("endless loop: %s", got)
			}
			// math.random starts from the operation's logged Env: two runs
			// differ (Redis 7's "random numbers are random now"); reseeded,
			// they agree.
			if got := c.do("EVAL", "return tostring(math.random())", "0"); got == c.do("EVAL", "return tostring(math.random())", "0") {
				t.Errorf("math.random drew the same number in two runs: %s", got)
			}
			if got := c.do("EVAL", "math.randomseed(10) return tostring(math.random())", "0"); got != c.do("EVAL", "math.randomseed(10) return tostring(math.random())", "0") {
				t.Errorf("math.randomseed(10) did not repeat the sequence: %s", got)
			}
			c.do("SCRIPT", "FLUSH")
			c.do("SCRIPT", "LOAD", "return 1")
			c.do("SCRIPT", "LOAD", "return 2")
			if got := c.do("INFO", "memory"); !strings.Contains(got, "number_of_cached_scripts:2") {
				t.Errorf("INFO memory after two SCRIPT LOADs: %s", got)
			}
			if got := c.do("EVAL", "return redis.sha1hex()", "0"); !strings.Contains(got, "wrong number of arguments") {
				t.Errorf("redis.sha1hex(): %s", got)
			}
		})
	}
}

// TestScriptOOM: over maxmemory, scripts answer as in Redis's scripting
// tests "Consistent eval error reporting" and "reject script do not cause a
// Lua stack leak": a script with a shebang and no no-writes flag is refused
// with OOM, a legacy EVAL's SET answers OOM (redis.pcall returns it), and
// INFO counts the refusal once: errorstat OOM 1, total_error_replies 1,
// SET rejected (not called), EVAL failed unless the script caught it.
func TestScriptOOM(t *testing.T) {
	_, addr := startServer(t, gatewaytest.MustAutomaton(t, pxName, "kv"), ServerOptions{})
	r := dial(t, addr)
	oom := "(error) OOM command not allowed when used memory > 'maxmemory'."
	stats := func(wantEvalFailed string) {
		t.Helper()
		info := r.bulk("INFO", "all")
		for _, want := range []string{"errorstat_OOM:count=1\r", "total_error_replies:1\r",
			"cmdstat_set:calls=0,usec=0,usec_per_call=0.00,rejected_calls=1,failed_calls=0\r",
			"rejected_calls=0,failed_calls=" + wantEvalFailed + "\r"} {
			if !strings.Contains(info, want) {
				t.Errorf("INFO lacks %q:\n%s", want, info)
			}
		}
		if strings.Contains(info, "errorstat_ERR") {
			t.Errorf("INFO counts an ERR:\n%s", info)
		}
	}
	run(t, r, []step{
		cmd("CONFIG SET maxmemory 1", "OK"),
		{[]string{"EVAL", "#!lua\nreturn 1", "0"}, oom},
		{[]string{"EVAL", "#!lua flags=no-writes\nreturn 1", "0"}, "(integer) 1"},
		cmd("CONFIG RESETSTAT", "OK"),
		{[]string{"EVAL", "return redis.call('set','x','y')", "1", "x"}, oom},
	})
	stats("1")
	run(t, r, []step{
		cmd("CONFIG RESETSTAT", "OK"),
		{[]string{"EVAL", "local t = redis.pcall('set','x','y') if t['err'] == \"OOM command not allowed when used memory > 'maxmemory'.\" then return 1 else return 0 end", "1", "x"}, "(integer) 1"},
	})
	stats("0")
	run(t, r, []step{
		cmd("CONFIG RESETSTAT", "OK"),
		{[]string{"EVAL", "return redis.pcall('set','x','y')", "1", "x"}, oom},
	})
	stats("1")
	run(t, r, []step{
		cmd("CONFIG SET maxmemory 0", "OK"),
		{[]string{"EVAL", "#!lua\nreturn redis.call('set','x','y')", "1", "x"}, "OK"},
		// A command's failure (not a refusal) counts once too.
		cmd("CONFIG RESETSTAT", "OK"),
		{[]string{"EVAL", "return redis.call('select',99)", "0"}, "(error) ERR DB index is out of range"},
	})
	info := r.bulk("INFO", "all")
	for _, want := range []string{"errorstat_ERR:count=1\r", "total_error_replies:1\r", "cmdstat_select:calls=1,", "rejected_calls=0,failed_calls=1\r"} {
		if !strings.Contains(info, want) {
			t.Errorf("INFO lacks %q:\n%s", want, info)
		}
	}
}
