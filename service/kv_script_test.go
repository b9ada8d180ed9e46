package service

import (
	"strings"
	"testing"
)

// TestKVEval: a script's reply conversions, a table holding itself is an
// error (it crashed every replica before the depth bound), an endless
// loop stops at the instruction budget with BUSY, and two replicas
// applying the same script answer alike (math.random is seeded alike).
func TestKVEval(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"return {1, 'a', {2}, nil, 3}", `[(integer) 1 "a" [(integer) 2]]`},
		{"return {ok='fine'}", "(error) " + StatusPrefix + "fine"},
		{"return {ok='OK'}", "OK"},
		{"return {err='BAD thing'}", "(error) BAD thing"},
		{"return 3.7", "(integer) 3"},
		{"return true", "(integer) 1"},
		{"return false", "(nil)"},
		{"return KEYS[1] .. ARGV[1]", `"kv"`},
		{"local t = {}; t[1] = t; return t", "(error) reached lua stack limit"},
		{"return redis.call('get', 'k')", "(error) ERR Redis commands cannot be run here (no command mapping, or a library being loaded)"},
		{"return nosuch", "(error) user_script:1: Script attempted to access nonexistent global variable 'nosuch'"},
		{"x = 1", "(error) user_script:1: Attempt to modify a readonly table"},
		{"return os.time()", "(error) user_script:1: Script attempted to access nonexistent global variable 'os'"},
	} {
		s := newKVState()
		got := s.Apply(op("eval", "k", "eval", c.body, "1", "k", "v")).String()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: got %s, want %s", c.body, got, c.want)
		}
	}
	if got := newKVState().Apply(op("eval", "", "eval", "while true do end", "0")).String(); !strings.Contains(got, "BUSY script exceeded its budget") {
		t.Errorf("endless loop: %s", got)
	}
	a := newKVState().Apply(op("eval", "", "eval", "return {math.random(1000000), math.random(1000000)}", "0")).String()
	b := newKVState().Apply(op("eval", "", "eval", "return {math.random(1000000), math.random(1000000)}", "0")).String()
	if a != b {
		t.Errorf("math.random differs between replicas: %s, %s", a, b)
	}
	lib := "#!lua name=l\nredis.register_function('f', function(KEYS, ARGV) return ARGV[1] end)\nredis.register_function{function_name='g', callback=function() return 2 end}"
	if names, msg := CheckLibrary([]byte(lib)); msg != "" || strings.Join(names, ",") != "f,g" {
		t.Errorf("CheckLibrary: %v %q", names, msg)
	}
	if got := newKVState().Apply(op("eval", "", "fcall:f", lib, "0", "x")).String(); got != `"x"` {
		t.Errorf("fcall: %s", got)
	}
	if _, msg := CheckLibrary([]byte("#!lua name=l\nreturn 1")); msg != "No functions registered" {
		t.Errorf("a library without functions: %q", msg)
	}
}

// TestScriptReportModes: a report prefix wraps the result, an error's too,
// with the (here empty: no command mapping) report; without it the result
// is plain; a bad mode is still refused.
func TestScriptReportModes(t *testing.T) {
	s := newKVState()
	for mode, want := range map[string]string{
		"calls:eval":     "[[] (integer) 1]",
		"ro:counts:eval": "[[] (integer) 1]",
		"eval":           "(integer) 1",
	} {
		if got := s.Apply(op("eval", "", mode, "return 1", "0")).String(); got != want {
			t.Errorf("%s: got %s, want %s", mode, got, want)
		}
	}
	if got := s.Apply(op("eval", "", "calls:eval", "return redis.call('get', 'k')", "0")).String(); !strings.HasPrefix(got, "[[] (error) ERR Redis commands cannot be run here") {
		t.Errorf("error wrapped: %s", got)
	}
	if got := s.Apply(op("eval", "", "calls:nosuch", "return 1", "0")).String(); !strings.Contains(got, "eval mode must be eval or fcall") {
		t.Errorf("bad mode: %s", got)
	}
}

// testScriptCommands installs a small command mapping (SET denyoom, DEL,
// GET) for the test, as the gateway's table would.
func testScriptCommands(t *testing.T) {
	old := scriptCommand
	t.Cleanup(func() { scriptCommand = old })
	SetScriptCommands(func(args [][]byte) (ScriptCmd, string) {
		name := strings.ToLower(string(args[0]))
		one := func(rs []Result) Result { return rs[0] }
		switch {
		case name == "set" && len(args) == 3:
			return ScriptCmd{Known: true, DenyOOM: true, Ops: []Op{op("set", string(args[1]), string(args[2]))}, Render: one}, ""
		case name == "get" && len(args) == 2:
			return ScriptCmd{Known: true, Ops: []Op{op("get", string(args[1]))}, Render: one}, ""
		case name == "del" && len(args) == 2:
			return ScriptCmd{Known: true, Ops: []Op{op("del", string(args[1]))}, Render: one}, ""
		}
		return ScriptCmd{}, "ERR Unknown Redis command called from script"
	})
}

// TestScriptOOM: an operation sent over maxmemory (ScriptOOM) runs as
// Redis runs a script that starts over maxmemory: a script that declares
// flags without no-writes or allow-oom is refused before it runs, an EVAL
// without a shebang gets the OOM error from a denyoom command until it has
// written (redis.pcall returns it), allow-oom runs anything; without the
// prefix nothing is refused. The report counts the refusal once.
func TestScriptOOM(t *testing.T) {
	testScriptCommands(t)
	lib := "#!lua name=l\nredis.register_function('w', function() return redis.call('set', 'x', '1') end)\n" +
		"redis.register_function{function_name='a', callback=function() return redis.call('set', 'x', '2') end, flags={'allow-oom'}}\n" +
		"redis.register_function{function_name='r', callback=function() return redis.call('get', 'x') end, flags={'no-writes'}}"
	oom := "(error) " + OOMError
	for _, c := range []struct{ mode, body, want, x string }{
		{"oom:eval", "return redis.call('set', 'x', 'y')", oom, "(nil)"},
		{"oom:eval", "local t = redis.pcall('set', 'x', 'y') return t['err']", `"` + OOMError + `"`, "(nil)"},
		{"oom:eval", "return redis.call('get', 'x')", "(nil)", "(nil)"},
		{"oom:eval", "redis.call('del', 'x') return redis.call('set', 'x', 'y')", "OK", `"y"`}, // wrote first
		{"oom:eval", "#!lua\nreturn 1", oom, "(nil)"},
		{"oom:eval", "#!lua flags=no-writes\nreturn redis.call('get', 'x')", "(nil)", "(nil)"},
		{"oom:eval", "#!lua flags=allow-oom\nreturn redis.call('set', 'x', 'z')", "OK", `"z"`},
		{"ro:oom:eval", "return redis.call('get', 'x')", "(nil)", "(nil)"},
		{"oom:fcall:w", lib, oom, "(nil)"},
		{"oom:fcall:a", lib, "OK", `"2"`},
		{"oom:fcall:r", lib, "(nil)", "(nil)"},
		{"eval", "return redis.call('set', 'x', 'y')", "OK", `"y"`},
		{"eval", "#!lua\nreturn redis.call('set', 'x', 'y')", "OK", `"y"`},
		{"fcall:w", lib, "OK", `"1"`},
	} {
		s := newKVState()
		got := s.Apply(op("eval", "x", c.mode, c.body, "1", "x")).String()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s %q: got %s, want %s", c.mode, c.body, got, c.want)
		}
		if x := s.Apply(op("get", "x")).String(); x != c.x {
			t.Errorf("%s %q: x is %s, want %s", c.mode, c.body, x, c.x)
		}
	}
	// The report: SET refused once (not a call), its code counted once,
	// the reply marked as counted; a pcall'd refusal returned as the reply
	// likewise; a script's own error reply is not marked.
	for body, want := range map[string]string{
		"return redis.call('set', 'x', 'y')":                         `[[["c" "set" (integer) 0 (integer) 1 (integer) 0] ["e" "OOM"] ["x"]] (error) ` + OOMError,
		"return redis.pcall('set', 'x', 'y')":                        `[[["c" "set" (integer) 0 (integer) 1 (integer) 0] ["e" "OOM"] ["x"]] (error) ` + OOMError,
		"redis.pcall('set', 'x', 'y') return redis.call('get', 'x')": `[[["c" "set" (integer) 0 (integer) 1 (integer) 0] ["c" "get" (integer) 1 (integer) 0 (integer) 0] ["e" "OOM"]] (nil)]`,
		"return redis.error_reply('MY_ERR x')":                       `[[] (error) MY_ERR x]`,
	} {
		if got := newKVState().Apply(op("eval", "x", "counts:oom:eval", body, "1", "x")).String(); !strings.HasPrefix(got, want) {
			t.Errorf("report of %q: got %s, want %s", body, got, want)
		}
	}
}
