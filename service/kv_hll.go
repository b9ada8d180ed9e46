package service

import (
	"encoding/binary"
	"fmt"
	"math"
	"math/bits"
	"math/rand/v2"
	"slices"
	"strconv"
	"strings"
)

// HyperLogLog (issue 34), a port of Redis 7.0's hyperloglog.c: an HLL is
// a string holding Redis's own encoding byte for byte (the "HYLL" header
// with its cached cardinality, then the sparse opcodes or the 16384 dense
// 6-bit registers), so GETRANGE, APPEND and SETRANGE see what they see in
// Redis, and a value copied from Redis (GET, then SET) is an HLL here.
//
//	pfadd maxbytes [element ...]   W  int (1 when a register changed or the key was created)
//	pfcount [key ...]              W  int (one key: the cached cardinality, or
//	                                  the estimate, then cached in the value;
//	                                  several keys: the estimate of their union)
//	pfmerge maxbytes [src ...]     W  OK (Op.Key the destination, merged too)
//	pfdebug getreg|decode|encoding|todense
//	                               W  the registers | the sparse opcodes | "dense"/"sparse" | int
//
// Decisions. maxbytes is hll-sparse-max-bytes (Redis's server setting, a
// CONFIG parameter per gateway here): the gateway sends its value with
// every PFADD and PFMERGE, so every replica promotes a sparse HLL to dense
// at the same point whichever node took the command. PFCOUNT is a write:
// like Redis it stores the estimate in the value's header (the suite reads
// the header's validity bit back with GETRANGE), and a write is what
// changes state on every replica alike. Estimates use the same arithmetic
// as Redis (Ertl's estimator, round half away from zero), so they equal
// redis-server's for the same elements (TestHLLMatchesRedis).

func init() {
	addKVOps(map[string]kvOp{
		"pfadd":   {min: 1, max: -1, check: checkInts(0), run: (*KVState).opPFAdd},
		"pfcount": {max: -1, keys: func(op Op) []string { return argStrings(op.Args) }, run: (*KVState).opPFCount},
		"pfmerge": {min: 1, max: -1, check: checkInts(0), keys: func(op Op) []string { return argStrings(op.Args[1:]) }, run: (*KVState).opPFMerge},
		"pfdebug": {min: 1, max: -1, run: (*KVState).opPFDebug},
	})
}

const (
	hllP         = 14
	hllQ         = 64 - hllP
	hllRegisters = 1 << hllP
	hllBits      = 6
	hllRegMax    = 1<<hllBits - 1
	hllHdrSize   = 16
	hllDenseSize = hllHdrSize + (hllRegisters*hllBits+7)/8
	hllDense     = 0
	hllSparse    = 1
	hllAlphaInf  = 0.721347520444481703680

	sparseValMaxValue = 32
	sparseValMaxLen   = 4
	sparseZeroMaxLen  = 64
	sparseXZeroMaxLen = 16384

	errHLLInvalid = "INVALIDOBJ Corrupted HLL object detected"
	errNotHLL     = "WRONGTYPE Key is not a valid HyperLogLog string value."
)

// murmur64A is Redis's MurmurHash64A (endian neutral).
func murmur64A(key []byte, seed uint64) uint64 {
	const m = 0xc6a4a7935bd1e995
	const r = 47
	h := seed ^ (uint64(len(key)) * m)
	n := len(key) - len(key)&7
	for i := 0; i < n; i += 8 {
		k := binary.LittleEndian.Uint64(key[i:])
		k *= m
		k ^= k >> r
		k *= m
		h ^= k
		h *= m
	}
	if rest := key[n:]; len(rest) > 0 {
		for i := len(rest) - 1; i >= 0; i-- {
			h ^= uint64(rest[i]) << (8 * i)
		}
		h *= m
	}
	h ^= h >> r
	h *= m
	h ^= h >> r
	return h
}

// hllPatLen returns the register an element hashes to and the length of
// its 000..1 pattern (Redis's hllPatLen).
func hllPatLen(ele []byte) (int, uint8) {
	h := murmur64A(ele, 0xadc83b19)
	index := int(h & (hllRegisters - 1))
	h >>= hllP
	h |= 1 << hllQ
	return index, uint8(bits.TrailingZeros64(h) + 1)
}

// Dense registers: 6 bits each, from the least significant bit of each
// byte on (HLL_DENSE_GET_REGISTER). r is the register array; the byte past
// its end reads as 0 (Redis reads the string's terminator there).
func denseGet(r []byte, i int) uint8 {
	b := i * hllBits / 8
	fb := uint(i * hllBits & 7)
	b0 := uint(r[b])
	var b1 uint
	if b+1 < len(r) {
		b1 = uint(r[b+1])
	}
	return uint8((b0>>fb | b1<<(8-fb)) & hllRegMax)
}

func denseSet(r []byte, i int, v uint8) {
	b := i * hllBits / 8
	fb := uint(i * hllBits & 7)
	r[b] &^= byte(hllRegMax << fb)
	r[b] |= byte(uint(v) << fb)
	if b+1 < len(r) {
		r[b+1] &^= byte(hllRegMax >> (8 - fb))
		r[b+1] |= byte(uint(v) >> (8 - fb))
	}
}

// Sparse opcodes: ZERO 00xxxxxx, XZERO 01xxxxxx xxxxxxxx, VAL 1vvvvvxx.
func isZero(b byte) bool  { return b&0xc0 == 0 }
func isXZero(b byte) bool { return b&0xc0 == 0x40 }
func isVal(b byte) bool   { return b&0x80 != 0 }
func zeroLen(b byte) int  { return int(b&0x3f) + 1 }
func valValue(b byte) int { return int(b>>2&0x1f) + 1 }
func valLen(b byte) int   { return int(b&0x3) + 1 }

// xzeroLen reads the XZERO at h[p]; a missing second byte reads as 0.
func xzeroLen(h []byte, p int) int {
	var lo int
	if p+1 < len(h) {
		lo = int(h[p+1])
	}
	return (int(h[p]&0x3f)<<8 | lo) + 1
}

func valOp(v, n int) byte { return byte((v-1)<<2|(n-1)) | 0x80 }

func appendZeros(seq []byte, n int) []byte {
	if n > sparseZeroMaxLen {
		return append(seq, byte((n-1)>>8)|0x40, byte((n-1)&0xff))
	}
	return append(seq, byte(n-1))
}

// newHLL is an empty HLL: sparse, one XZERO per 16384 registers.
func newHLL() []byte {
	h := make([]byte, hllHdrSize, hllHdrSize+2)
	copy(h, "HYLL")
	h[4] = hllSparse
	return appendZeros(h, hllRegisters)
}

// validHLL is Redis's isHLLObjectOrReply (the type check done).
func validHLL(h []byte) bool {
	if len(h) < hllHdrSize || string(h[:4]) != "HYLL" || h[4] > hllSparse {
		return false
	}
	return h[4] != hllDense || len(h) == hllDenseSize
}

func invalidateCache(h []byte) { h[15] |= 0x80 }

// sparseToDense converts a sparse HLL (Redis's hllSparseToDense): the
// header is kept, cached cardinality included; ok false when the opcodes
// do not cover exactly the 16384 registers.
func sparseToDense(h []byte) ([]byte, bool) {
	if h[4] == hllDense {
		return h, true
	}
	d := make([]byte, hllDenseSize)
	copy(d, h[:hllHdrSize])
	d[4] = hllDense
	r := d[hllHdrSize:]
	idx := 0
	for p := hllHdrSize; p < len(h); {
		switch b := h[p]; {
		case isZero(b):
			idx += zeroLen(b)
			p++
		case isXZero(b):
			idx += xzeroLen(h, p)
			p += 2
		default:
			n, v := valLen(b), valValue(b)
			if n+idx > hllRegisters {
				return nil, false
			}
			for range n {
				denseSet(r, idx, uint8(v))
				idx++
			}
			p++
		}
		if idx > hllRegisters {
			break // runs on past the registers: corrupt (Redis finds it at the end too)
		}
	}
	return d, idx == hllRegisters
}

// sparseSet sets register index to count if it is smaller (Redis's
// hllSparseSet), promoting to dense when count does not fit a VAL opcode
// or the value would grow beyond maxBytes. It changes h in place (or
// returns a new slice) and returns the new value and 1
// when a register changed, 0 when none did, -1 when h is corrupt.
func sparseSet(h []byte, index int, count uint8, maxBytes int64) ([]byte, int) {
	promote := func() ([]byte, int) {
		d, ok := sparseToDense(h)
		if !ok {
			return h, -1
		}
		if denseGet(d[hllHdrSize:], index) < count {
			denseSet(d[hllHdrSize:], index, count)
		}
		return d, 1
	}
	if count > sparseValMaxValue {
		return promote()
	}
	// Step 1: find the opcode covering index.
	p, end := hllHdrSize, len(h)
	first, prev, span := 0, -1, 0
	for p < end {
		oplen := 1
		switch b := h[p]; {
		case isZero(b):
			span = zeroLen(b)
		case isVal(b):
			span = valLen(b)
		default:
			span = xzeroLen(h, p)
			oplen = 2
		}
		if index <= first+span-1 {
			break
		}
		prev = p
		p += oplen
		first += span
	}
	if span == 0 || p >= end {
		return h, -1
	}
	b := h[p]
	oldlen := 1
	var runlen int
	switch {
	case isZero(b):
		runlen = zeroLen(b)
	case isXZero(b):
		runlen = xzeroLen(h, p)
		oldlen = 2
		if p+2 > end {
			return h, -1
		}
	default:
		runlen = valLen(b)
	}
	switch {
	case isVal(b) && valValue(b) >= int(count): // case A
		return h, 0
	case isVal(b) && runlen == 1, isZero(b) && runlen == 1: // cases B, C
		h[p] = valOp(int(count), 1)
	default: // case D: split the opcode
		last := first + span - 1
		seq := make([]byte, 0, 5)
		if isVal(b) {
			cur := valValue(b)
			if index != first {
				seq = append(seq, valOp(cur, index-first))
			}
			seq = append(seq, valOp(int(count), 1))
			if index != last {
				seq = append(seq, valOp(cur, last-index))
			}
		} else {
			if index != first {
				seq = appendZeros(seq, index-first)
			}
			seq = append(seq, valOp(int(count), 1))
			if index != last {
				seq = appendZeros(seq, last-index)
			}
		}
		if delta := len(seq) - oldlen; delta > 0 && int64(len(h)+delta) > maxBytes {
			return promote()
		}
		h = slices.Concat(h[:p], seq, h[p+oldlen:])
		end = len(h)
	}
	// Step 4: merge adjacent VAL opcodes of one value, scanning up to 5
	// opcodes from prev.
	p = hllHdrSize
	if prev >= 0 {
		p = prev
	}
	for scan := 5; p < end && scan > 0; scan-- {
		switch {
		case isXZero(h[p]):
			p += 2
			continue
		case isZero(h[p]):
			p++
			continue
		}
		if p+1 < end && isVal(h[p+1]) {
			v1, v2 := valValue(h[p]), valValue(h[p+1])
			if n := valLen(h[p]) + valLen(h[p+1]); v1 == v2 && n <= sparseValMaxLen {
				h[p+1] = valOp(v1, n)
				h = slices.Delete(h, p, p+1)
				end--
				continue
			}
		}
		p++
	}
	invalidateCache(h)
	return h, 1
}

// hllAdd adds one element (Redis's hllAdd).
func hllAdd(h, ele []byte, maxBytes int64) ([]byte, int) {
	index, count := hllPatLen(ele)
	if h[4] == hllDense {
		if denseGet(h[hllHdrSize:], index) < count {
			denseSet(h[hllHdrSize:], index, count)
			return h, 1
		}
		return h, 0
	}
	return sparseSet(h, index, count, maxBytes)
}

// hllHisto is the register histogram of h; ok false for sparse opcodes
// that do not cover exactly the registers.
func hllHisto(h []byte) (histo [64]int, ok bool) {
	if h[4] == hllDense {
		r := h[hllHdrSize:]
		for i := range hllRegisters {
			histo[denseGet(r, i)]++
		}
		return histo, true
	}
	idx := 0
	for p := hllHdrSize; p < len(h); {
		switch b := h[p]; {
		case isZero(b):
			n := zeroLen(b)
			idx += n
			histo[0] += n
			p++
		case isXZero(b):
			n := xzeroLen(h, p)
			idx += n
			histo[0] += n
			p += 2
		default:
			n := valLen(b)
			idx += n
			histo[valValue(b)] += n
			p++
		}
	}
	return histo, idx == hllRegisters
}

// hllSigma and hllTau are Ertl's functions (arXiv:1702.01284), as Redis
// computes them.
func hllSigma(x float64) float64 {
	if x == 1 {
		return math.Inf(1)
	}
	y, z := 1.0, x
	for {
		x *= x
		zp := z
		z += x * y
		y += y
		if zp == z {
			return z
		}
	}
}

func hllTau(x float64) float64 {
	if x == 0 || x == 1 {
		return 0
	}
	y, z := 1.0, 1-x
	for {
		x = math.Sqrt(x)
		zp := z
		y *= 0.5
		z -= (1 - x) * (1 - x) * y
		if zp == z {
			return z / 3
		}
	}
}

// hllEstimate is Redis's hllCount from a register histogram.
func hllEstimate(histo [64]int) uint64 {
	m := float64(hllRegisters)
	z := m * hllTau((m-float64(histo[hllQ+1]))/m)
	for j := hllQ; j >= 1; j-- {
		z += float64(histo[j])
		z *= 0.5
	}
	z += m * hllSigma(float64(histo[0])/m)
	return uint64(math.Round(hllAlphaInf * m * m / z))
}

// hllMerge raises max[i] to every register of h; false when h is corrupt.
func hllMerge(max *[hllRegisters]uint8, h []byte) bool {
	if h[4] == hllDense {
		r := h[hllHdrSize:]
		for i := range max {
			if v := denseGet(r, i); v > max[i] {
				max[i] = v
			}
		}
		return true
	}
	i := 0
	for p := hllHdrSize; p < len(h); {
		switch b := h[p]; {
		case isZero(b):
			i += zeroLen(b)
			p++
		case isXZero(b):
			i += xzeroLen(h, p)
			p += 2
		default:
			n, v := valLen(b), uint8(valValue(b))
			if n+i > hllRegisters {
				return false
			}
			for range n {
				if v > max[i] {
					max[i] = v
				}
				i++
			}
			p++
		}
		if i > hllRegisters {
			return false
		}
	}
	return i == hllRegisters
}

// hllOf returns key's HLL (a copy, to change), nil without a key, or the
// error to answer.
func (s *KVState) hllOf(key string) ([]byte, kvEntry, *Result) {
	e, ok, bad := s.str(key)
	if bad != nil {
		return nil, e, bad
	}
	if !ok {
		return nil, e, nil
	}
	if !validHLL(e.v) {
		r := Errorf(errNotHLL)
		return nil, e, &r
	}
	return slices.Clone(e.v), e, nil
}

func (s *KVState) opPFAdd(op Op) Result {
	maxBytes, _ := parseInt(op.Args[0])
	h, e, bad := s.hllOf(op.Key)
	if bad != nil {
		return *bad
	}
	updated := 0
	if h == nil {
		h = newHLL()
		e.exp = 0
		updated++
	}
	for _, ele := range op.Args[1:] {
		var r int
		h, r = hllAdd(h, ele, maxBytes)
		if r < 0 {
			return Errorf(errHLLInvalid)
		}
		updated += r
	}
	if updated == 0 {
		return Int(0)
	}
	invalidateCache(h)
	s.putString(op.Key, h, e.exp)
	return Int(1)
}

func (s *KVState) opPFCount(op Op) Result {
	if len(op.Args) > 0 {
		var max [hllRegisters]uint8
		for _, k := range append([]string{op.Key}, argStrings(op.Args)...) {
			h, _, bad := s.hllOf(k)
			if bad != nil {
				return *bad
			}
			if h != nil && !hllMerge(&max, h) {
				return Errorf(errHLLInvalid)
			}
		}
		var histo [64]int
		for _, v := range max {
			histo[v]++
		}
		return Int(int64(hllEstimate(histo)))
	}
	h, e, bad := s.hllOf(op.Key)
	if bad != nil {
		return *bad
	}
	if h == nil {
		return Int(0)
	}
	if h[15]&0x80 == 0 {
		return Int(int64(binary.LittleEndian.Uint64(h[8:16])))
	}
	histo, ok := hllHisto(h)
	if !ok {
		return Errorf(errHLLInvalid)
	}
	card := hllEstimate(histo)
	binary.LittleEndian.PutUint64(h[8:16], card)
	s.putString(op.Key, h, e.exp)
	return Int(int64(card))
}

func (s *KVState) opPFMerge(op Op) Result {
	maxBytes, _ := parseInt(op.Args[0])
	var max [hllRegisters]uint8
	dense := false
	for _, k := range append([]string{op.Key}, argStrings(op.Args[1:])...) {
		h, _, bad := s.hllOf(k)
		if bad != nil {
			return *bad
		}
		if h == nil {
			continue
		}
		dense = dense || h[4] == hllDense
		if !hllMerge(&max, h) {
			return Errorf(errHLLInvalid)
		}
	}
	h, e, _ := s.hllOf(op.Key)
	if h == nil {
		h = newHLL()
		e.exp = 0
	}
	if dense {
		d, ok := sparseToDense(h)
		if !ok {
			return Errorf(errHLLInvalid)
		}
		h = d
	}
	for j, v := range max {
		if v == 0 {
			continue
		}
		if h[4] == hllDense {
			if denseGet(h[hllHdrSize:], j) < v {
				denseSet(h[hllHdrSize:], j, v)
			}
		} else {
			h, _ = sparseSet(h, j, v, maxBytes)
		}
	}
	invalidateCache(h)
	s.putString(op.Key, h, e.exp)
	return OK()
}

func (s *KVState) opPFDebug(op Op) Result {
	sub := strings.ToLower(string(op.Args[0]))
	h, e, bad := s.hllOf(op.Key)
	if bad != nil {
		return *bad
	}
	if h == nil {
		return Errorf("The specified key does not exist")
	}
	if len(op.Args) != 1 && (sub == "getreg" || sub == "decode" || sub == "encoding" || sub == "todense") {
		return Errorf("Wrong number of arguments for the '%s' subcommand", op.Args[0])
	}
	switch sub {
	case "getreg", "todense":
		conv := int64(0)
		if h[4] == hllSparse {
			d, ok := sparseToDense(h)
			if !ok {
				return Errorf(errHLLInvalid)
			}
			h, conv = d, 1
			s.putString(op.Key, h, e.exp)
		}
		if sub == "todense" {
			return Int(conv)
		}
		out := make([]Result, hllRegisters)
		for j := range out {
			out[j] = Int(int64(denseGet(h[hllHdrSize:], j)))
		}
		return Array(out...)
	case "decode":
		if h[4] != hllSparse {
			return Errorf("ERR HLL encoding is not sparse")
		}
		var parts []string
		for p := hllHdrSize; p < len(h); {
			switch b := h[p]; {
			case isZero(b):
				parts = append(parts, "z:"+strconv.Itoa(zeroLen(b)))
				p++
			case isXZero(b):
				parts = append(parts, "Z:"+strconv.Itoa(xzeroLen(h, p)))
				p += 2
			default:
				parts = append(parts, fmt.Sprintf("v:%d,%d", valValue(b), valLen(b)))
				p++
			}
		}
		return Bytes([]byte(strings.Join(parts, " ")))
	case "encoding":
		if h[4] == hllDense {
			return Bytes([]byte("dense"))
		}
		return Bytes([]byte("sparse"))
	}
	return Errorf("Unknown PFDEBUG subcommand '%s'", op.Args[0])
}

// HLLSelfTest is PFSELFTEST (Redis's pfselftestCommand), run on this
// package's encoding outside any state: the dense registers keep what is
// written to them without touching their neighbours, and adding up to 10
// million elements to a dense and a sparse HLL (promoted at maxBytes)
// keeps the estimates equal and within 6 standard errors at every power
// of ten. rng picks the register values and the elements.
func HLLSelfTest(maxBytes int64, rng *rand.Rand) error {
	regs := make([]byte, hllDenseSize-hllHdrSize)
	var want [hllRegisters]uint8
	for range 1000 {
		for i := range want {
			want[i] = uint8(rng.IntN(hllRegMax + 1))
			denseSet(regs, i, want[i])
		}
		for i := range want {
			if v := denseGet(regs, i); v != want[i] {
				return fmt.Errorf("TESTFAILED Register %d should be %d but is %d", i, want[i], v)
			}
		}
	}
	dense := newHLL()
	dense, _ = sparseToDense(dense)
	sparse := newHLL()
	relerr := 1.04 / math.Sqrt(hllRegisters)
	seed := rng.Uint64()
	ele := make([]byte, 8)
	checkpoint := int64(1)
	for j := int64(1); j <= 10_000_000; j++ {
		binary.LittleEndian.PutUint64(ele, uint64(j)^seed)
		dense, _ = hllAdd(dense, ele, maxBytes)
		sparse, _ = hllAdd(sparse, ele, maxBytes)
		if j != checkpoint {
			continue
		}
		if j < maxBytes/2 && sparse[4] != hllSparse {
			return fmt.Errorf("TESTFAILED sparse encoding not used")
		}
		hd, _ := hllHisto(dense)
		hs, _ := hllHisto(sparse)
		est := hllEstimate(hd)
		if est != hllEstimate(hs) {
			return fmt.Errorf("TESTFAILED dense/sparse disagree")
		}
		maxErr := int64(math.Ceil(relerr * 6 * float64(checkpoint)))
		if j == 10 {
			maxErr = 1
		}
		if d := checkpoint - int64(est); d > maxErr || -d > maxErr {
			return fmt.Errorf("TESTFAILED Too big error. card:%d abserr:%d", checkpoint, max(d, -d))
		}
		checkpoint *= 10
	}
	return nil
}
