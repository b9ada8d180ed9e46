package service

import (
	"strings"
	"testing"
)

// TestScriptLibs: cjson, cmsgpack, bit and struct answer as Redis's C
// libraries do (the expected values are redis-server 7.0.15's, several from
// its tests/unit/scripting.tcl), and the globals and library tables are
// read-only.
func TestScriptLibs(t *testing.T) {
	hex := "local h = '' for i = 1, #e do h = h .. string.format('%02x', string.byte(e, i)) end return h"
	for _, c := range []struct{ body, want string }{
		{"return table.concat(cjson.decode('[0.0, -5e3, -1, 0.3e-3, 1023.2, 0e10]'), ' ')", `"0 -5000 -1 0.0003 1023.2 0"`},
		{"local d = cjson.decode('{\"keya\": \"a\", \"keyb\": \"b\"}') return {d.keya, d.keyb}", `["a" "b"]`},
		{"return cjson.encode({1, 'two', {x=true}, 0.5})", `"[1,\"two\",{\"x\":true},0.5]"`},
		{"return cjson.encode({})", `"{}"`},
		{"return cjson.encode('a/b\\n')", `"\"a\\/b\\n\""`},
		{"return cjson.decode('[1,null]')[2] == cjson.null", "(integer) 1"},
		{"local t = {} t[false] = 1 return cjson.encode(t)", "(error) user_script:1: Cannot serialise table: table key must be a number or string"},
		{"cjson.encode_max_depth(1) return cjson.encode({{}})", "(error) user_script:1: Cannot serialise, excessive nesting (2)"},
		{"cjson.decode_max_depth(1) return cjson.decode('{\"a\": [1]}')", "(error) user_script:1: Found too many nested data structures (2)"},
		{"return cjson.encode({n = 0/0})", "(error) user_script:1: Cannot serialise number: must not be NaN or Inf"},
		{"local e = cmsgpack.pack(0.1) " + hex, `"cb3fb999999999999a"`},
		{"local e = cmsgpack.pack(-1099511627776) " + hex, `"d3ffffff0000000000"`},
		{"local e = cmsgpack.pack({1, 2}, 'ab', true, 300, -33, 1.5) " + hex, `"920102a26162c3cd012cd0dfca3fc00000"`},
		{"local a = {x=nil,y=5} local b = {x=a} a['x'] = b local e = cmsgpack.pack(a) " + hex,
			`"82a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a17882a17905a17881a178c0"`},
		{"local t = cmsgpack.unpack(cmsgpack.pack({a = 1, b = {1, 2, 'x'}})) return {t.a, t.b[3]}", `[(integer) 1 "x"]`},
		{"local e = cmsgpack.pack('a', 'b', 'c') local o, v = cmsgpack.unpack_limit(e, 1, 0) local o2, v2 = cmsgpack.unpack_one(e, o) return {o, v, o2, v2}", `[(integer) 2 "a" (integer) 4 "b"]`},
		{"return {bit.tobit(1), bit.band(1), bit.bxor(1, 2), bit.bor(1,2,4,8,16,32,64,128), bit.tobit(0xffffffff), bit.lshift(1, 31), bit.rshift(-1, 28), bit.arshift(-256, 4), bit.tohex(255), bit.tohex(-1, -4), bit.bswap(0x12345678), bit.rol(0x80000001, 1)}",
			`[(integer) 1 (integer) 1 (integer) 3 (integer) 255 (integer) -1 (integer) -2147483648 (integer) 15 (integer) -16 "000000ff" "FFFF" (integer) 2018915346 (integer) 3]`},
		{"local s = struct.pack('>HBi4c2', 258, 7, -2, 'xy') local a, b, c, d, n = struct.unpack('>HBi4c2', s) return {#s, a, b, c, d, n, struct.size('>HBi4')}", `[(integer) 9 (integer) 258 (integer) 7 (integer) -2 "xy" (integer) 10 (integer) 7]`},
		{"setmetatable(_G, {})", "(error) user_script:1: Attempt to modify a readonly table"},
		{"local g = getmetatable(_G) g.__index = {}", "(error) user_script:1: Attempt to modify a readonly table"},
		{"redis = function() return 1 end", "(error) user_script:1: Attempt to modify a readonly table"},
		{"_G = {}", "(error) user_script:1: Attempt to modify a readonly table"},
		{"redis.call = function() return 1 end", "(error) user_script:1: Attempt to modify a readonly table"},
		{"cjson.encode = function() return 1 end", "(error) user_script:1: Attempt to modify a readonly table"},
		{"cmsgpack.pack = function() return 1 end", "(error) user_script:1: Attempt to modify a readonly table"},
		{"bit.lshift = function() return 1 end", "(error) user_script:1: Attempt to modify a readonly table"},
		{"local t = setmetatable({}, {__index = function() return 7 end}) return t.x", "(integer) 7"},
		{"return loadfile('x')", "(error) user_script:1: Script attempted to access nonexistent global variable 'loadfile'"},
	} {
		got := newKVState().Apply(op("eval", "k", "eval", c.body, "0")).String()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%s:\n got %s\nwant %s", c.body, got, c.want)
		}
	}
}

// TestEvalShebang: EVAL's "#!lua" line, its flags, and no-writes.
func TestEvalShebang(t *testing.T) {
	for _, c := range []struct{ body, want string }{
		{"#!lua\nreturn 1", "(integer) 1"},
		{"#!not-lua\nreturn 1", "(error) ERR Unexpected engine in script shebang: not-lua"},
		{"#!lua badger=data\nreturn 1", "(error) ERR Unknown lua shebang option: badger=data"},
		{"#!lua flags=allow-oom,what?\nreturn 1", "(error) ERR Unexpected flag in script shebang: what?"},
		{"#!lua\n\nreturn nosuch", "(error) user_script:3: Script attempted to access nonexistent global variable 'nosuch'"},
	} {
		s := newKVState()
		got := s.Apply(op("eval", "x", "eval", c.body, "1", "x")).String()
		if !strings.HasPrefix(got, c.want) {
			t.Errorf("%q:\n got %s\nwant %s", c.body, got, c.want)
		}
	}
}

// TestFunctionFlags: register_function's named arguments are checked as
// Redis checks them; no-writes makes a function read-only, and FCALL_RO
// runs only such functions.
func TestFunctionFlags(t *testing.T) {
	lib := "#!lua name=l\nredis.register_function{function_name='ro', callback=function() return redis.pcall('set', 'x', 1) end, flags={'no-writes'}}\n" +
		"redis.register_function{function_name='rw', callback=function() return 1 end, description='d'}"
	for _, c := range []struct{ mode, want string }{
		{"fcall:rw", "(integer) 1"},
		{"ro:fcall:rw", "(error) ERR Can not execute a script with write flag using *_ro command."},
		{"ro:fcall:ro", "(error) ERR Redis commands cannot be run here"}, // allowed; no command mapping in this test
	} {
		if got := newKVState().Apply(op("eval", "x", c.mode, lib, "0")).String(); !strings.HasPrefix(got, c.want) {
			t.Errorf("%s: got %s, want %s", c.mode, got, c.want)
		}
	}
	for body, want := range map[string]string{
		"redis.register_function()":    "wrong number of arguments to redis.register_function",
		"redis.register_function('f')": "calling redis.register_function with a single argument is only applicable to Lua table",
		"redis.register_function{function_name='f', callback=function() end, description=1}":     "description argument given to redis.register_function must be a string",
		"redis.register_function{function_name='f', callback=function() end, flags='no-writes'}": "flags argument to redis.register_function must be a table representing function flags",
		"redis.register_function{function_name='f', callback=function() end, flags={'bad'}}":     "unknown flag given",
		"redis.register_function('a b', function() end)":                                         "Library names can only contain letters, numbers, or underscores(_)",
		"redis.register_function('', function() end)":                                            "Library names can only contain letters, numbers, or underscores(_)",
	} {
		if _, msg := CheckLibrary([]byte("#!lua name=l\n" + body)); !strings.Contains(msg, want) {
			t.Errorf("%s: %q, want %q", body, msg, want)
		}
	}
}
