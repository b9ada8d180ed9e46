package service

import (
	"fmt"
	"math"
	"math/bits"
	"strings"
)

// Bit operations on strings (issue 34), after Redis 7.0's bitops.c: each
// is one operation, so BITOP is atomic across its keys on every protocol
// that runs it. Option words arrive lower-cased from the gateway.
//
//	bitcount [start end [byte|bit]]       R  int (0 without a key)
//	bitpos bit [start [end [byte|bit]]]   R  int (-1: none in the range)
//	bitop and|or|xor|not src ...          W  int (Op.Key the destination: the
//	                                         result's length; deleted when 0)
//	bitfield (get T off | set T off v | incrby T off n | overflow wrap|sat|fail) ...
//	                                      W  array of int | nil (nil: FAIL overflow)
//	bitfield_ro (get T off) ...           R  array of int
//
// Errors come in Redis's order: a syntax error Redis finds before looking
// the key up is found by Validate (so it never enters a log); one Redis
// finds after (BITCOUNT's and BITPOS's ranges) is the operation's answer.

func init() {
	addKVOps(map[string]kvOp{
		"bitcount":    {read: true, max: 3, run: (*KVState).opBitCount},
		"bitpos":      {read: true, min: 1, max: 4, check: checkBitPos, run: (*KVState).opBitPos},
		"bitop":       {min: 2, max: -1, check: checkBitOp, keys: func(op Op) []string { return argStrings(op.Args[1:]) }, run: (*KVState).opBitOp},
		"bitfield":    {max: -1, check: checkBitField, run: (*KVState).opBitField},
		"bitfield_ro": {read: true, max: -1, check: checkBitField, run: (*KVState).opBitField},
	})
}

// bitRange converts a BITCOUNT/BITPOS range to bytes [start, end] of a
// string of n bytes, with masks of the bits outside the range in the first
// and last byte (bit ranges only); start > end is an empty range.
func bitRange(start, end int64, n int, isBit bool) (s, e int64, firstMask, lastMask byte) {
	tot := int64(n)
	if isBit {
		tot <<= 3
	}
	if start < 0 {
		start += tot
	}
	if end < 0 {
		end += tot
	}
	start, end = max(start, 0), max(end, 0)
	if end >= tot {
		end = tot - 1
	}
	if isBit && start <= end {
		firstMask = ^byte((1<<(8-(start&7)))-1) & 0xff
		lastMask = byte((1 << (7 - (end & 7))) - 1)
		start >>= 3
		end >>= 3
	}
	return start, end, firstMask, lastMask
}

// rangeUnit parses BYTE or BIT.
func rangeUnit(a []byte) (isBit bool, err error) {
	switch string(a) {
	case "bit":
		return true, nil
	case "byte":
		return false, nil
	}
	return false, fmt.Errorf(errSyntax)
}

func popcount(b []byte) int64 {
	var n int
	for _, x := range b {
		n += bits.OnesCount8(x)
	}
	return int64(n)
}

func (s *KVState) opBitCount(op Op) Result {
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	if !ok {
		return Int(0)
	}
	v := e.v
	if len(op.Args) == 0 {
		return Int(popcount(v))
	}
	if len(op.Args) == 1 {
		return Errorf(errSyntax)
	}
	n, good := argInts(op, 0, 1)
	if !good {
		return Errorf(errNotInt)
	}
	if n[0] < 0 && n[1] < 0 && n[0] > n[1] {
		return Int(0)
	}
	isBit := false
	if len(op.Args) == 3 {
		b, err := rangeUnit(op.Args[2])
		if err != nil {
			return Errorf("%v", err)
		}
		isBit = b
	}
	start, end, fm, lm := bitRange(n[0], n[1], len(v), isBit)
	if start > end {
		return Int(0)
	}
	count := popcount(v[start : end+1])
	count -= popcount([]byte{v[start] & fm, v[end] & lm})
	return Int(count)
}

func checkBitPos(op Op) error {
	b, ok := parseInt(op.Args[0])
	if !ok {
		return fmt.Errorf(errNotInt)
	}
	if b != 0 && b != 1 {
		return fmt.Errorf("The bit argument must be 1 or 0.")
	}
	return nil
}

// firstBit is the position of the first bit equal to bit in b; without
// one, -1 when looking for a 1, else the bit just past b (Redis's
// redisBitpos: a string is zero-padded on the right).
func firstBit(b []byte, bit bool) int64 {
	for i, x := range b {
		if !bit {
			x = ^x
		}
		if x != 0 {
			return int64(i)*8 + int64(bits.LeadingZeros8(x))
		}
	}
	if bit {
		return -1
	}
	return int64(len(b)) * 8
}

func (s *KVState) opBitPos(op Op) Result {
	bit := op.Args[0][0] == '1'
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	if !ok {
		if bit {
			return Int(-1)
		}
		return Int(0)
	}
	v := e.v
	var start, end int64
	var fm, lm byte
	endGiven := false
	if len(op.Args) == 1 {
		start, end = 0, int64(len(v))-1
	} else {
		st, good := parseInt(op.Args[1])
		if !good {
			return Errorf(errNotInt)
		}
		isBit := false
		if len(op.Args) == 4 {
			b, err := rangeUnit(op.Args[3])
			if err != nil {
				return Errorf("%v", err)
			}
			isBit = b
		}
		var en int64
		if len(op.Args) >= 3 {
			en, good = parseInt(op.Args[2])
			if !good {
				return Errorf(errNotInt)
			}
			endGiven = true
		} else if isBit {
			en = int64(len(v))<<3 + 7
		} else {
			en = int64(len(v)) - 1
		}
		start, end, fm, lm = bitRange(st, en, len(v), isBit)
	}
	if start > end {
		return Int(-1)
	}
	// The range's bytes, with the bits outside it forced to the value not
	// looked for.
	r := append([]byte(nil), v[start:end+1]...)
	if bit {
		r[0] &^= fm
		r[len(r)-1] &^= lm
	} else {
		r[0] |= fm
		r[len(r)-1] |= lm
	}
	pos := firstBit(r, bit)
	if endGiven && !bit && pos == int64(len(r))*8 {
		return Int(-1)
	}
	if pos != -1 {
		pos += start << 3
	}
	return Int(pos)
}

func checkBitOp(op Op) error {
	switch string(op.Args[0]) {
	case "and", "or", "xor":
	case "not":
		if len(op.Args) != 2 {
			return fmt.Errorf("ERR BITOP NOT must be called with a single source key.")
		}
	default:
		return fmt.Errorf(errSyntax)
	}
	return nil
}

func (s *KVState) opBitOp(op Op) Result {
	srcs := make([][]byte, 0, len(op.Args)-1)
	maxLen := 0
	for _, k := range op.Args[1:] {
		e, ok, bad := s.str(string(k))
		if bad != nil {
			return *bad
		}
		if !ok {
			srcs = append(srcs, nil)
			continue
		}
		srcs = append(srcs, e.v)
		maxLen = max(maxLen, len(e.v))
	}
	if maxLen == 0 {
		if _, ok := s.m[op.Key]; ok {
			s.del(op.Key)
		}
		return Int(0)
	}
	at := func(b []byte, j int) byte {
		if j < len(b) {
			return b[j]
		}
		return 0
	}
	res := make([]byte, maxLen)
	name := string(op.Args[0])
	for j := range res {
		out := at(srcs[0], j)
		if name == "not" {
			out = ^out
		}
		for _, b := range srcs[1:] {
			switch name {
			case "and":
				out &= at(b, j)
			case "or":
				out |= at(b, j)
			case "xor":
				out ^= at(b, j)
			}
		}
		res[j] = out
	}
	s.putString(op.Key, res, 0)
	return Int(int64(maxLen))
}

// bitfield's sub-operations.
const (
	bfGet = iota
	bfSet
	bfIncr
)

// Overflow kinds.
const (
	bfWrap = iota
	bfSat
	bfFail
)

type bitfieldOp struct {
	code, overflow int
	signed         bool
	bits           uint
	offset         uint64
	v              int64
}

const errBitfieldType = "Invalid bitfield type. Use something like i16 u8. Note that u64 is not supported but i64 is."

// parseBitField parses BITFIELD's sub-commands (Redis's bitfieldGeneric),
// returning them and the highest bit a write reaches (-1: no write).
func parseBitField(a [][]byte) ([]bitfieldOp, int64, error) {
	var out []bitfieldOp
	overflow := bfWrap
	highest := int64(-1)
	for j := 0; j < len(a); j++ {
		rem := len(a) - j - 1
		var code int
		switch w := strings.ToLower(string(a[j])); {
		case w == "get" && rem >= 2:
			code = bfGet
		case w == "set" && rem >= 3:
			code = bfSet
		case w == "incrby" && rem >= 3:
			code = bfIncr
		case w == "overflow" && rem >= 1:
			j++
			switch strings.ToLower(string(a[j])) {
			case "wrap":
				overflow = bfWrap
			case "sat":
				overflow = bfSat
			case "fail":
				overflow = bfFail
			default:
				return nil, 0, fmt.Errorf("Invalid OVERFLOW type specified")
			}
			continue
		default:
			return nil, 0, fmt.Errorf(errSyntax)
		}
		t := string(a[j+1])
		if t == "" || (t[0] != 'i' && t[0] != 'u') {
			return nil, 0, fmt.Errorf(errBitfieldType)
		}
		signed := t[0] == 'i'
		nb, ok := parseInt([]byte(t[1:]))
		if !ok || nb < 1 || (signed && nb > 64) || (!signed && nb > 63) {
			return nil, 0, fmt.Errorf(errBitfieldType)
		}
		o := string(a[j+2])
		hash := strings.HasPrefix(o, "#")
		off, ok := parseInt([]byte(strings.TrimPrefix(o, "#")))
		if ok && hash {
			if off > math.MaxInt64/nb || off < math.MinInt64/nb {
				ok = false
			} else {
				off *= nb
			}
		}
		if !ok || off < 0 || off>>3 >= 512<<20 {
			return nil, 0, fmt.Errorf("bit offset is not an integer or out of range")
		}
		bop := bitfieldOp{code: code, overflow: overflow, signed: signed, bits: uint(nb), offset: uint64(off)}
		if code != bfGet {
			highest = max(highest, off+nb-1)
			v, ok := parseInt(a[j+3])
			if !ok {
				return nil, 0, fmt.Errorf(errNotInt)
			}
			bop.v = v
		}
		out = append(out, bop)
		j += 3
		if code == bfGet {
			j--
		}
	}
	return out, highest, nil
}

func checkBitField(op Op) error {
	_, highest, err := parseBitField(op.Args)
	if err == nil && op.Kind == "bitfield_ro" && highest >= 0 {
		return fmt.Errorf("ERR BITFIELD_RO only supports the GET subcommand")
	}
	return err
}

func getUnsignedBits(p []byte, off uint64, n uint) uint64 {
	var v uint64
	for range n {
		var b uint64
		if i := off >> 3; i < uint64(len(p)) {
			b = uint64(p[i]>>(7-off&7)) & 1
		}
		v = v<<1 | b
		off++
	}
	return v
}

func getSignedBits(p []byte, off uint64, n uint) int64 {
	v := int64(getUnsignedBits(p, off, n))
	if n < 64 && v&(1<<(n-1)) != 0 {
		v |= -1 << n
	}
	return v
}

func setBits(p []byte, off uint64, n uint, v uint64) {
	for j := range n {
		bit := byte(v>>(n-1-j)) & 1
		i, sh := off>>3, 7-off&7
		p[i] = p[i]&^(1<<sh) | bit<<sh
		off++
	}
}

// unsignedOverflow is Redis's checkUnsignedBitfieldOverflow: 1 on
// overflow, -1 on underflow, 0 when value+incr fits; limit is the value to
// store instead under the overflow kind (wrap, sat).
func unsignedOverflow(value uint64, incr int64, n uint, kind int) (int, uint64) {
	mx := uint64(1)<<n - 1
	maxIncr := int64(mx - value)
	minIncr := -int64(value)
	wrap := func() uint64 { return (value + uint64(incr)) &^ (math.MaxUint64 << n) }
	switch {
	case value > mx || (incr > 0 && incr > maxIncr):
		if kind == bfWrap {
			return 1, wrap()
		}
		return 1, mx
	case incr < 0 && incr < minIncr:
		if kind == bfWrap {
			return -1, wrap()
		}
		return -1, 0
	}
	return 0, 0
}

// signedOverflow is Redis's checkSignedBitfieldOverflow.
func signedOverflow(value, incr int64, n uint, kind int) (int, int64) {
	mx := int64(math.MaxInt64)
	if n < 64 {
		mx = 1<<(n-1) - 1
	}
	mn := -mx - 1
	maxIncr := int64(uint64(mx) - uint64(value))
	minIncr := mn - value
	wrap := func() int64 {
		c := uint64(value) + uint64(incr)
		if n < 64 {
			mask := uint64(math.MaxUint64) << n
			if c&(1<<(n-1)) != 0 {
				c |= mask
			} else {
				c &^= mask
			}
		}
		return int64(c)
	}
	switch {
	case value > mx || (n != 64 && incr > maxIncr) || (value >= 0 && incr > 0 && incr > maxIncr):
		if kind == bfWrap {
			return 1, wrap()
		}
		return 1, mx
	case value < mn || (n != 64 && incr < minIncr) || (value < 0 && incr < 0 && incr < minIncr):
		if kind == bfWrap {
			return -1, wrap()
		}
		return -1, mn
	}
	return 0, 0
}

func (s *KVState) opBitField(op Op) Result {
	ops, highest, _ := parseBitField(op.Args)
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	v := e.v
	changed := false
	if highest >= 0 {
		need := int(highest>>3) + 1
		if need > MaxValueSize {
			return Errorf("string exceeds maximum allowed size (proto-max-bulk-len)")
		}
		nv := make([]byte, max(len(v), need))
		copy(nv, v)
		changed = !ok || len(nv) != len(v)
		v = nv
	}
	out := make([]Result, 0, len(ops))
	for _, b := range ops {
		switch {
		case b.code == bfGet && b.signed:
			out = append(out, Int(getSignedBits(v, b.offset, b.bits)))
		case b.code == bfGet:
			out = append(out, Int(int64(getUnsignedBits(v, b.offset, b.bits))))
		case b.signed:
			old := getSignedBits(v, b.offset, b.bits)
			var nv, ret int64
			var of int
			if b.code == bfIncr {
				var lim int64
				of, lim = signedOverflow(old, b.v, b.bits, b.overflow)
				nv = old + b.v
				if of != 0 {
					nv = lim
				}
				ret = nv
			} else {
				var lim int64
				of, lim = signedOverflow(b.v, 0, b.bits, b.overflow)
				nv = b.v
				if of != 0 {
					nv = lim
				}
				ret = old
			}
			if of != 0 && b.overflow == bfFail {
				out = append(out, Nil())
				continue
			}
			out = append(out, Int(ret))
			setBits(v, b.offset, b.bits, uint64(nv))
			changed = changed || old != nv
		default:
			old := getUnsignedBits(v, b.offset, b.bits)
			var nv, ret uint64
			var of int
			if b.code == bfIncr {
				var lim uint64
				of, lim = unsignedOverflow(old, b.v, b.bits, b.overflow)
				nv = old + uint64(b.v)
				if of != 0 {
					nv = lim
				}
				ret = nv
			} else {
				var lim uint64
				of, lim = unsignedOverflow(uint64(b.v), 0, b.bits, b.overflow)
				nv = uint64(b.v)
				if of != 0 {
					nv = lim
				}
				ret = old
			}
			if of != 0 && b.overflow == bfFail {
				out = append(out, Nil())
				continue
			}
			out = append(out, Int(int64(ret)))
			setBits(v, b.offset, b.bits, nv)
			changed = changed || old != nv
		}
	}
	if changed {
		if !ok {
			e.exp = 0
		}
		s.putString(op.Key, v, e.exp)
	}
	return Array(out...)
}
