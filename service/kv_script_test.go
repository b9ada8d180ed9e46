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
