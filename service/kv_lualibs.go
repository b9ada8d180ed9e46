package service

import (
	"bytes"
	"encoding/binary"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math"
	"slices"
	"strconv"
	"strings"

	lua "github.com/yuin/gopher-lua"
)

// The Lua libraries Redis gives scripts beside Lua's own (Redis 7.0's
// deps/lua: lua_cjson.c, lua_cmsgpack.c, lua_bit.c, lua_struct.c), written
// here against gopher-lua: no maintained Go implementation of these four
// exists for gopher-lua (layeh/gopher-json has another API and has not
// changed since 2016), and each is small. They follow the C libraries'
// encodings byte for byte where Redis's tests look (cmsgpack's formats,
// cjson's number format) and are deterministic, as a script must be: every
// replica runs it (kv_script.go). Tables are walked with LTable.Next, whose
// order is the keys' insertion order in gopher-lua (never a Go map's).
//
// Differences: cjson.encode_keep_buffer and encode_number_precision are
// accepted and change nothing; struct covers the formats b B h H l L T i I
// (with sizes) f d s c x and the endianness marks < > = !; bit's numbers
// are wrapped to 32 bits as LuaBitOp does.

// openScriptLibs adds cjson, cmsgpack, bit and struct to L's globals.
func openScriptLibs(L *lua.LState) {
	L.SetGlobal("cjson", openCJSON(L))
	L.SetGlobal("cmsgpack", openCMsgpack(L))
	L.SetGlobal("bit", openBit(L))
	L.SetGlobal("struct", openStruct(L))
}

func setFuncs(L *lua.LState, t *lua.LTable, fns map[string]lua.LGFunction) {
	// Sorted: the table's key order (its iteration order) is the same on
	// every replica.
	for _, n := range slices.Sorted(maps.Keys(fns)) {
		t.RawSetString(n, L.NewFunction(fns[n]))
	}
}

// ---- cjson ----

type cjsonConf struct {
	encodeDepth, decodeDepth int
	invalidNumbers           bool
}

func openCJSON(L *lua.LState) *lua.LTable {
	conf := &cjsonConf{encodeDepth: 1000, decodeDepth: 1000}
	null := L.NewUserData() // cjson.null
	t := L.NewTable()
	setter := func(get func() lua.LValue, set func(L *lua.LState)) lua.LGFunction {
		return func(L *lua.LState) int {
			if L.GetTop() > 0 {
				set(L)
			}
			L.Push(get())
			return 1
		}
	}
	setFuncs(L, t, map[string]lua.LGFunction{
		"encode": func(L *lua.LState) int {
			if L.GetTop() != 1 {
				L.ArgError(1, "expected 1 argument")
			}
			var b strings.Builder
			if err := cjsonEncode(&b, L.Get(1), conf, null, 0); err != "" {
				L.RaiseError("%s", err)
			}
			L.Push(lua.LString(b.String()))
			return 1
		},
		"decode": func(L *lua.LState) int {
			s := L.CheckString(1)
			dec := json.NewDecoder(strings.NewReader(s))
			dec.UseNumber()
			v, err := cjsonDecode(L, dec, conf, null, 1)
			if err == "" {
				if _, e := dec.Token(); e != io.EOF {
					err = "Expected the end but found invalid token at character " + strconv.FormatInt(dec.InputOffset()+1, 10)
				}
			}
			if err != "" {
				L.RaiseError("%s", err)
			}
			L.Push(v)
			return 1
		},
		"encode_max_depth": setter(func() lua.LValue { return lua.LNumber(conf.encodeDepth) }, func(L *lua.LState) {
			conf.encodeDepth = L.CheckInt(1)
		}),
		"decode_max_depth": setter(func() lua.LValue { return lua.LNumber(conf.decodeDepth) }, func(L *lua.LState) {
			conf.decodeDepth = L.CheckInt(1)
		}),
		"encode_invalid_numbers": setter(func() lua.LValue { return lua.LBool(conf.invalidNumbers) }, func(L *lua.LState) {
			conf.invalidNumbers = lua.LVAsBool(L.Get(1))
		}),
		"decode_invalid_numbers":  func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"encode_keep_buffer":      func(L *lua.LState) int { L.Push(lua.LTrue); return 1 },
		"encode_number_precision": func(L *lua.LState) int { L.Push(lua.LNumber(14)); return 1 },
		"encode_sparse_array": func(L *lua.LState) int {
			L.Push(lua.LFalse)
			L.Push(lua.LNumber(2))
			L.Push(lua.LNumber(10))
			return 3
		},
	})
	t.RawSetString("null", null)
	t.RawSetString("_NAME", lua.LString("cjson"))
	t.RawSetString("_VERSION", lua.LString("2.1.0"))
	return t
}

// fmtG formats a number as C's "%.14g" (cjson's and cmsgpack's default).
func fmtG(f float64) string {
	if f == math.Trunc(f) && math.Abs(f) < 1e15 {
		return strconv.FormatInt(int64(f), 10)
	}
	s := strconv.FormatFloat(f, 'g', 14, 64)
	if strings.ContainsAny(s, "e") {
		mant, exp, _ := strings.Cut(s, "e")
		if strings.Contains(mant, ".") {
			mant = strings.TrimRight(strings.TrimRight(mant, "0"), ".")
		}
		sign := exp[0]
		digits := strings.TrimLeft(exp[1:], "0")
		for len(digits) < 2 {
			digits = "0" + digits
		}
		return mant + "e" + string(sign) + digits
	}
	if strings.Contains(s, ".") {
		s = strings.TrimRight(strings.TrimRight(s, "0"), ".")
	}
	return s
}

func cjsonString(b *strings.Builder, s string) {
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '"':
			b.WriteString(`\"`)
		case '\\':
			b.WriteString(`\\`)
		case '/':
			b.WriteString(`\/`)
		case '\b':
			b.WriteString(`\b`)
		case '\f':
			b.WriteString(`\f`)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			if c < 0x20 || c == 0x7f {
				fmt.Fprintf(b, `\u%04x`, c)
			} else {
				b.WriteByte(c)
			}
		}
	}
	b.WriteByte('"')
}

// luaArrayLength is cjson's lua_array_length: the array length of t, 0 for
// an empty table, -1 when t must be an object; a sparse array is an error.
func luaArrayLength(t *lua.LTable) (int, string) {
	max, items := 0, 0
	for k, _ := t.Next(lua.LNil); k != lua.LNil; k, _ = t.Next(k) {
		n, ok := k.(lua.LNumber)
		if !ok || float64(n) < 1 || float64(n) != math.Floor(float64(n)) {
			return -1, ""
		}
		if int(n) > max {
			max = int(n)
		}
		items++
	}
	if max > 10 && max > items*2 {
		return 0, "Cannot serialise table: excessively sparse array"
	}
	return max, ""
}

func cjsonEncode(b *strings.Builder, v lua.LValue, conf *cjsonConf, null lua.LValue, depth int) string {
	switch x := v.(type) {
	case *lua.LNilType:
		b.WriteString("null")
	case lua.LBool:
		if x {
			b.WriteString("true")
		} else {
			b.WriteString("false")
		}
	case lua.LNumber:
		f := float64(x)
		if math.IsNaN(f) || math.IsInf(f, 0) {
			if !conf.invalidNumbers {
				return "Cannot serialise number: must not be NaN or Inf"
			}
			switch {
			case math.IsNaN(f):
				b.WriteString("nan")
			case f > 0:
				b.WriteString("inf")
			default:
				b.WriteString("-inf")
			}
			return ""
		}
		b.WriteString(fmtG(f))
	case lua.LString:
		cjsonString(b, string(x))
	case *lua.LTable:
		depth++
		if depth > conf.encodeDepth {
			return fmt.Sprintf("Cannot serialise, excessive nesting (%d)", depth)
		}
		n, err := luaArrayLength(x)
		if err != "" {
			return err
		}
		if n > 0 {
			b.WriteByte('[')
			for i := 1; i <= n; i++ {
				if i > 1 {
					b.WriteByte(',')
				}
				if e := cjsonEncode(b, x.RawGetInt(i), conf, null, depth); e != "" {
					return e
				}
			}
			b.WriteByte(']')
			return ""
		}
		b.WriteByte('{')
		first := true
		for k, val := x.Next(lua.LNil); k != lua.LNil; k, val = x.Next(k) {
			if !first {
				b.WriteByte(',')
			}
			first = false
			switch kk := k.(type) {
			case lua.LString:
				cjsonString(b, string(kk))
			case lua.LNumber:
				cjsonString(b, fmtG(float64(kk)))
			default:
				return "Cannot serialise table: table key must be a number or string"
			}
			b.WriteByte(':')
			if e := cjsonEncode(b, val, conf, null, depth); e != "" {
				return e
			}
		}
		b.WriteByte('}')
	default:
		if v == null {
			b.WriteString("null")
			return ""
		}
		return fmt.Sprintf("Cannot serialise %s: type not supported", v.Type().String())
	}
	return ""
}

func cjsonDecode(L *lua.LState, dec *json.Decoder, conf *cjsonConf, null lua.LValue, depth int) (lua.LValue, string) {
	tok, err := dec.Token()
	if err != nil {
		return lua.LNil, "Expected value but found invalid token at character " + strconv.FormatInt(dec.InputOffset()+1, 10)
	}
	switch x := tok.(type) {
	case json.Delim:
		if depth > conf.decodeDepth {
			return lua.LNil, fmt.Sprintf("Found too many nested data structures (%d) at character %d", depth, dec.InputOffset())
		}
		t := L.NewTable()
		if x == '[' {
			for i := 1; dec.More(); i++ {
				v, e := cjsonDecode(L, dec, conf, null, depth+1)
				if e != "" {
					return lua.LNil, e
				}
				t.RawSetInt(i, v)
			}
		} else {
			for dec.More() {
				k, err := dec.Token()
				ks, ok := k.(string)
				if err != nil || !ok {
					return lua.LNil, "Expected object key string but found invalid token at character " + strconv.FormatInt(dec.InputOffset()+1, 10)
				}
				v, e := cjsonDecode(L, dec, conf, null, depth+1)
				if e != "" {
					return lua.LNil, e
				}
				t.RawSetString(ks, v)
			}
		}
		if _, err := dec.Token(); err != nil { // the closing delimiter
			return lua.LNil, "Expected comma or end but found invalid token at character " + strconv.FormatInt(dec.InputOffset()+1, 10)
		}
		return t, ""
	case string:
		return lua.LString(x), ""
	case json.Number:
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			return lua.LNil, "Expected value but found invalid number at character " + strconv.FormatInt(dec.InputOffset(), 10)
		}
		return lua.LNumber(f), ""
	case bool:
		return lua.LBool(x), ""
	case nil:
		return null, ""
	}
	return lua.LNil, "Expected value but found invalid token"
}

// ---- cmsgpack ----

const cmsgpackMaxNesting = 16 // LUACMSGPACK_MAX_NESTING

func openCMsgpack(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	setFuncs(L, t, map[string]lua.LGFunction{
		"pack": func(L *lua.LState) int {
			n := L.GetTop()
			if n == 0 {
				L.ArgError(0, "MessagePack pack needs input.")
			}
			var b bytes.Buffer
			for i := 1; i <= n; i++ {
				mpEncode(&b, L.Get(i), 0)
			}
			L.Push(lua.LString(b.String()))
			return 1
		},
		"unpack":       func(L *lua.LState) int { return mpUnpack(L, 0, 0, false) },
		"unpack_one":   func(L *lua.LState) int { return mpUnpack(L, 1, L.OptInt(2, 0), true) },
		"unpack_limit": func(L *lua.LState) int { return mpUnpack(L, L.CheckInt(2), L.OptInt(3, 0), true) },
	})
	t.RawSetString("_NAME", lua.LString("cmsgpack"))
	t.RawSetString("_VERSION", lua.LString("lua-cmsgpack 0.4.0"))
	return t
}

func mpEncodeInt(b *bytes.Buffer, n int64) {
	var w [9]byte
	switch {
	case n >= 0 && n <= 127:
		b.WriteByte(byte(n))
	case n >= 0 && n <= 0xff:
		b.Write([]byte{0xcc, byte(n)})
	case n >= 0 && n <= 0xffff:
		w[0] = 0xcd
		binary.BigEndian.PutUint16(w[1:], uint16(n))
		b.Write(w[:3])
	case n >= 0 && n <= 0xffffffff:
		w[0] = 0xce
		binary.BigEndian.PutUint32(w[1:], uint32(n))
		b.Write(w[:5])
	case n >= 0:
		w[0] = 0xcf
		binary.BigEndian.PutUint64(w[1:], uint64(n))
		b.Write(w[:9])
	case n >= -32:
		b.WriteByte(byte(int8(n)))
	case n >= -128:
		b.Write([]byte{0xd0, byte(int8(n))})
	case n >= -32768:
		w[0] = 0xd1
		binary.BigEndian.PutUint16(w[1:], uint16(int16(n)))
		b.Write(w[:3])
	case n >= -2147483648:
		w[0] = 0xd2
		binary.BigEndian.PutUint32(w[1:], uint32(int32(n)))
		b.Write(w[:5])
	default:
		w[0] = 0xd3
		binary.BigEndian.PutUint64(w[1:], uint64(n))
		b.Write(w[:9])
	}
}

func mpHeader(b *bytes.Buffer, n int, fix byte, c16, c32 byte, fixMax int) {
	var w [5]byte
	switch {
	case n <= fixMax:
		b.WriteByte(fix | byte(n))
	case n <= 0xffff:
		w[0] = c16
		binary.BigEndian.PutUint16(w[1:], uint16(n))
		b.Write(w[:3])
	default:
		w[0] = c32
		binary.BigEndian.PutUint32(w[1:], uint32(n))
		b.Write(w[:5])
	}
}

func mpEncode(b *bytes.Buffer, v lua.LValue, level int) {
	switch x := v.(type) {
	case lua.LBool:
		if x {
			b.WriteByte(0xc3)
		} else {
			b.WriteByte(0xc2)
		}
	case lua.LNumber:
		f := float64(x)
		if !math.IsInf(f, 0) && !math.IsNaN(f) && f == math.Trunc(f) && f >= -9.2233720368547758e18 && f < 9.2233720368547758e18 {
			mpEncodeInt(b, int64(f))
			return
		}
		if float64(float32(f)) == f {
			var w [5]byte
			w[0] = 0xca
			binary.BigEndian.PutUint32(w[1:], math.Float32bits(float32(f)))
			b.Write(w[:])
			return
		}
		var w [9]byte
		w[0] = 0xcb
		binary.BigEndian.PutUint64(w[1:], math.Float64bits(f))
		b.Write(w[:])
	case lua.LString:
		n := len(x)
		var w [5]byte
		switch {
		case n < 32:
			b.WriteByte(0xa0 | byte(n))
		case n <= 0xff:
			b.Write([]byte{0xd9, byte(n)})
		case n <= 0xffff:
			w[0] = 0xda
			binary.BigEndian.PutUint16(w[1:], uint16(n))
			b.Write(w[:3])
		default:
			w[0] = 0xdb
			binary.BigEndian.PutUint32(w[1:], uint32(n))
			b.Write(w[:5])
		}
		b.WriteString(string(x))
	case *lua.LTable:
		if level == cmsgpackMaxNesting {
			b.WriteByte(0xc0)
			return
		}
		max, count, array := 0, 0, true
		for k, _ := x.Next(lua.LNil); k != lua.LNil; k, _ = x.Next(k) {
			count++
			n, ok := k.(lua.LNumber)
			if !ok || float64(n) < 1 || float64(n) != math.Floor(float64(n)) {
				array = false
				continue
			}
			if int(n) > max {
				max = int(n)
			}
		}
		if array && max == count {
			mpHeader(b, max, 0x90, 0xdc, 0xdd, 15)
			for i := 1; i <= max; i++ {
				mpEncode(b, x.RawGetInt(i), level+1)
			}
			return
		}
		mpHeader(b, count, 0x80, 0xde, 0xdf, 15)
		for k, val := x.Next(lua.LNil); k != lua.LNil; k, val = x.Next(k) {
			mpEncode(b, k, level+1)
			mpEncode(b, val, level+1)
		}
	default:
		b.WriteByte(0xc0)
	}
}

// mpUnpack decodes up to limit objects (0: all) of argument 1 from offset;
// withOffset pushes the next offset (-1 at the end) first.
func mpUnpack(L *lua.LState, limit, offset int, withOffset bool) int {
	s := L.CheckString(1)
	if offset < 0 || limit < 0 {
		L.ArgError(2, "Invalid request to unpack with offset of "+strconv.Itoa(offset)+" and limit of "+strconv.Itoa(limit)+".")
	}
	if offset > len(s) {
		L.ArgError(2, "Start offset "+strconv.Itoa(offset)+" greater than input length "+strconv.Itoa(len(s))+".")
	}
	d := &mpDecoder{L: L, s: s, pos: offset}
	var out []lua.LValue
	for d.pos < len(s) && (limit == 0 || len(out) < limit) {
		out = append(out, d.value())
	}
	if withOffset {
		next := d.pos
		if next >= len(s) {
			next = -1
		}
		L.Push(lua.LNumber(next))
	}
	for _, v := range out {
		L.Push(v)
	}
	if withOffset {
		return len(out) + 1
	}
	return len(out)
}

type mpDecoder struct {
	L   *lua.LState
	s   string
	pos int
}

func (d *mpDecoder) take(n int) string {
	if n < 0 || d.pos+n > len(d.s) {
		d.L.RaiseError("Missing bytes in input.")
	}
	b := d.s[d.pos : d.pos+n]
	d.pos += n
	return b
}

func (d *mpDecoder) u(n int) uint64 {
	b := d.take(n)
	var v uint64
	for i := 0; i < n; i++ {
		v = v<<8 | uint64(b[i])
	}
	return v
}

func (d *mpDecoder) table(n int, isMap bool) lua.LValue {
	t := d.L.NewTable()
	for i := 1; i <= n; i++ {
		if isMap {
			k := d.value()
			v := d.value()
			if k != lua.LNil {
				t.RawSet(k, v)
			}
		} else {
			t.RawSetInt(i, d.value())
		}
	}
	return t
}

func (d *mpDecoder) value() lua.LValue {
	c := d.take(1)[0]
	switch {
	case c <= 0x7f:
		return lua.LNumber(c)
	case c >= 0xe0:
		return lua.LNumber(int8(c))
	case c&0xe0 == 0xa0:
		return lua.LString(d.take(int(c & 0x1f)))
	case c&0xf0 == 0x90:
		return d.table(int(c&0x0f), false)
	case c&0xf0 == 0x80:
		return d.table(int(c&0x0f), true)
	}
	switch c {
	case 0xc0:
		return lua.LNil
	case 0xc2:
		return lua.LFalse
	case 0xc3:
		return lua.LTrue
	case 0xcc, 0xcd, 0xce, 0xcf:
		return lua.LNumber(float64(d.u(1 << (c - 0xcc))))
	case 0xd0:
		return lua.LNumber(int8(d.u(1)))
	case 0xd1:
		return lua.LNumber(int16(d.u(2)))
	case 0xd2:
		return lua.LNumber(int32(d.u(4)))
	case 0xd3:
		return lua.LNumber(float64(int64(d.u(8))))
	case 0xca:
		return lua.LNumber(math.Float32frombits(uint32(d.u(4))))
	case 0xcb:
		return lua.LNumber(math.Float64frombits(d.u(8)))
	case 0xd9, 0xc4:
		return lua.LString(d.take(int(d.u(1))))
	case 0xda, 0xc5:
		return lua.LString(d.take(int(d.u(2))))
	case 0xdb, 0xc6:
		return lua.LString(d.take(int(d.u(4))))
	case 0xdc:
		return d.table(int(d.u(2)), false)
	case 0xdd:
		return d.table(int(d.u(4)), false)
	case 0xde:
		return d.table(int(d.u(2)), true)
	case 0xdf:
		return d.table(int(d.u(4)), true)
	}
	d.L.RaiseError("Bad data format in input.")
	return lua.LNil
}

// ---- bit (LuaBitOp) ----

// tobit wraps a number to a signed 32-bit integer, as LuaBitOp.
func tobit(L *lua.LState, i int) int32 {
	f := float64(L.CheckNumber(i))
	f = math.RoundToEven(f)
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return 0
	}
	f = math.Mod(f, 4294967296)
	return int32(uint32(int64(f)))
}

func openBit(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	fold := func(op func(a, b int32) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			v := tobit(L, 1)
			for i := 2; i <= L.GetTop(); i++ {
				v = op(v, tobit(L, i))
			}
			L.Push(lua.LNumber(v))
			return 1
		}
	}
	shift := func(op func(a int32, n uint) int32) lua.LGFunction {
		return func(L *lua.LState) int {
			L.Push(lua.LNumber(op(tobit(L, 1), uint(tobit(L, 2))&31)))
			return 1
		}
	}
	setFuncs(L, t, map[string]lua.LGFunction{
		"tobit": func(L *lua.LState) int { L.Push(lua.LNumber(tobit(L, 1))); return 1 },
		"bnot":  func(L *lua.LState) int { L.Push(lua.LNumber(^tobit(L, 1))); return 1 },
		"band":  fold(func(a, b int32) int32 { return a & b }),
		"bor":   fold(func(a, b int32) int32 { return a | b }),
		"bxor":  fold(func(a, b int32) int32 { return a ^ b }),
		"lshift": shift(func(a int32, n uint) int32 {
			return int32(uint32(a) << n)
		}),
		"rshift":  shift(func(a int32, n uint) int32 { return int32(uint32(a) >> n) }),
		"arshift": shift(func(a int32, n uint) int32 { return a >> n }),
		"rol": shift(func(a int32, n uint) int32 {
			return int32(uint32(a)<<n | uint32(a)>>((32-n)&31))
		}),
		"ror": shift(func(a int32, n uint) int32 {
			return int32(uint32(a)>>n | uint32(a)<<((32-n)&31))
		}),
		"bswap": func(L *lua.LState) int {
			v := uint32(tobit(L, 1))
			L.Push(lua.LNumber(int32(v>>24 | (v>>8)&0xff00 | (v<<8)&0xff0000 | v<<24)))
			return 1
		},
		"tohex": func(L *lua.LState) int {
			v := uint32(tobit(L, 1))
			n := 8
			if L.GetTop() >= 2 {
				n = int(tobit(L, 2))
			}
			digits := "0123456789abcdef"
			if n < 0 {
				n = -n
				digits = "0123456789ABCDEF"
			}
			if n > 8 {
				n = 8
			}
			buf := make([]byte, n)
			for i := n - 1; i >= 0; i-- {
				buf[i] = digits[v&15]
				v >>= 4
			}
			L.Push(lua.LString(buf))
			return 1
		},
	})
	return t
}

// ---- struct (Roberto Ierusalimschy's lstrlib-like struct library) ----

func openStruct(L *lua.LState) *lua.LTable {
	t := L.NewTable()
	setFuncs(L, t, map[string]lua.LGFunction{
		"pack":   structPack,
		"unpack": structUnpack,
		"size": func(L *lua.LState) int {
			n := 0
			structWalk(L, L.CheckString(1), func(op byte, size int, little bool) {
				if op == 's' {
					L.ArgError(1, "options 's' has no fixed size")
				}
				n += size
			})
			L.Push(lua.LNumber(n))
			return 1
		},
	})
	return t
}

// structWalk calls f for each item of the format: its option, its size
// and its endianness.
func structWalk(L *lua.LState, f string, fn func(op byte, size int, little bool)) {
	little := true
	for i := 0; i < len(f); i++ {
		op := f[i]
		num := func(def int) int {
			j := i + 1
			for j < len(f) && f[j] >= '0' && f[j] <= '9' {
				j++
			}
			if j == i+1 {
				return def
			}
			n, _ := strconv.Atoi(f[i+1 : j])
			i = j - 1
			return n
		}
		switch op {
		case ' ':
		case '<', '=':
			little = true
		case '>':
			little = false
		case '!':
			num(8)
		case 'b', 'B', 'x':
			fn(op, 1, little)
		case 'h', 'H':
			fn(op, 2, little)
		case 'l', 'L', 'T', 'd':
			fn(op, 8, little)
		case 'f':
			fn(op, 4, little)
		case 'i', 'I':
			n := num(4)
			if n < 1 || n > 8 {
				L.RaiseError("integral size %d is larger than limit of 8", n)
			}
			fn(op, n, little)
		case 'c':
			fn(op, num(1), little)
		case 's':
			fn(op, 0, little)
		default:
			L.RaiseError("invalid format option '%c'", op)
		}
	}
}

func putUint(b []byte, v uint64, little bool) {
	n := len(b)
	for i := 0; i < n; i++ {
		if little {
			b[i] = byte(v >> (8 * i))
		} else {
			b[n-1-i] = byte(v >> (8 * i))
		}
	}
}

func getUint(b string, little bool) uint64 {
	var v uint64
	n := len(b)
	for i := 0; i < n; i++ {
		if little {
			v |= uint64(b[i]) << (8 * i)
		} else {
			v |= uint64(b[n-1-i]) << (8 * i)
		}
	}
	return v
}

func structPack(L *lua.LState) int {
	var out []byte
	arg := 2
	structWalk(L, L.CheckString(1), func(op byte, size int, little bool) {
		switch op {
		case 'x':
			out = append(out, 0)
		case 'f', 'd':
			f := float64(L.CheckNumber(arg))
			arg++
			b := make([]byte, size)
			if size == 4 {
				putUint(b, uint64(math.Float32bits(float32(f))), little)
			} else {
				putUint(b, math.Float64bits(f), little)
			}
			out = append(out, b...)
		case 'c', 's':
			s := L.CheckString(arg)
			arg++
			if op == 's' {
				out = append(append(out, s...), 0)
				return
			}
			if size == 0 {
				size = len(s)
			}
			if len(s) < size {
				L.ArgError(arg-1, "string too short")
			}
			out = append(out, s[:size]...)
		default:
			v := int64(L.CheckNumber(arg))
			arg++
			b := make([]byte, size)
			putUint(b, uint64(v), little)
			out = append(out, b...)
		}
	})
	L.Push(lua.LString(out))
	return 1
}

func structUnpack(L *lua.LState) int {
	data := L.CheckString(2)
	pos := L.OptInt(3, 1) - 1
	if pos < 0 || pos > len(data) {
		L.ArgError(3, "offset out of range")
	}
	n := 0
	need := func(size int) string {
		if pos+size > len(data) {
			L.ArgError(2, "data string too short")
		}
		s := data[pos : pos+size]
		pos += size
		return s
	}
	structWalk(L, L.CheckString(1), func(op byte, size int, little bool) {
		switch op {
		case 'x':
			need(1)
			return
		case 'f':
			L.Push(lua.LNumber(math.Float32frombits(uint32(getUint(need(4), little)))))
		case 'd':
			L.Push(lua.LNumber(math.Float64frombits(getUint(need(8), little))))
		case 's':
			end := strings.IndexByte(data[pos:], 0)
			if end < 0 {
				L.ArgError(2, "unfinished string in data")
			}
			L.Push(lua.LString(data[pos : pos+end]))
			pos += end + 1
		case 'c':
			L.Push(lua.LString(need(size)))
		default:
			v := getUint(need(size), little)
			if op == 'b' || op == 'h' || op == 'l' || op == 'i' {
				shift := uint(64 - 8*size)
				L.Push(lua.LNumber(float64(int64(v<<shift) >> shift)))
			} else {
				L.Push(lua.LNumber(float64(v)))
			}
		}
		n++
	})
	L.Push(lua.LNumber(pos + 1))
	return n + 1
}
