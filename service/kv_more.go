package service

import (
	"bytes"
	"fmt"
	"maps"
	"math"
	"slices"
)

// Operations over several keys of one request, and the remaining list,
// set and hash reads Redis's test suite exercises (issue 34): COPY, SMOVE,
// SINTERSTORE/SUNIONSTORE/SDIFFSTORE, SINTERCARD, LMOVE (and RPOPLPUSH),
// LPOS, HRANDFIELD. Each is one operation, so it is atomic on every
// protocol that runs it; the keys it touches besides Op.Key are declared
// (kvOp.keys) for locks and lazy expiry.

func init() {
	arg0 := func(op Op) []string { return []string{string(op.Args[0])} }
	argsFrom := func(i int) func(Op) []string {
		return func(op Op) []string { return argStrings(op.Args[i:]) }
	}
	addKVOps(map[string]kvOp{
		"copy":          {min: 1, max: 2, check: checkCopy, keys: arg0, run: (*KVState).opCopy},
		"smove":         {min: 2, max: 2, keys: arg0, run: (*KVState).opSMove},
		"setstore":      {min: 2, max: -1, check: checkSetStore, keys: argsFrom(1), run: (*KVState).opSetStore},
		"sintercard":    {read: true, min: 1, max: -1, check: checkInts(0), keys: argsFrom(1), run: (*KVState).opSInterCard},
		"lmove":         {min: 3, max: 3, check: checkLMove, keys: arg0, run: (*KVState).opLMove},
		"lpos":          {read: true, min: 1, max: 7, check: checkLPos, run: (*KVState).opLPos},
		"hrandfield":    {read: true, max: 2, check: checkHRandField, run: (*KVState).opHRandField},
		"setbit":        {min: 2, max: 2, check: checkBitOffset, run: (*KVState).opSetBit},
		"getbit":        {read: true, min: 1, max: 1, check: checkBitOffset, run: (*KVState).opGetBit},
		"zcombine":      {read: true, min: 4, max: -1, check: checkZCombine, keys: zcombineKeys, run: (*KVState).opZCombine},
		"zcombinestore": {min: 4, max: -1, check: checkZCombine, keys: zcombineKeys, run: (*KVState).opZCombineStore},
	})
}

// copy dst [replace]: the value and its deadline, 1; 0 when the source is
// missing or dst exists without replace.
func checkCopy(op Op) error {
	if len(op.Args) == 2 && string(op.Args[1]) != "replace" {
		return fmt.Errorf(errSyntax)
	}
	return nil
}

func (s *KVState) opCopy(op Op) Result {
	dst := string(op.Args[0])
	if dst == op.Key {
		return Errorf("source and destination objects are the same")
	}
	e, ok := s.live(op.Key)
	if !ok {
		return Int(0)
	}
	if _, exists := s.live(dst); exists && len(op.Args) < 2 {
		return Int(0)
	}
	if e.c != nil {
		e.c = e.c.clone(s.tok)
	} else {
		e.v = bytes.Clone(e.v)
	}
	s.put(dst, e)
	return Int(1)
}

// smove dst member: 1 when member moved (or is in a source equal to dst).
func (s *KVState) opSMove(op Op) Result {
	dst := string(op.Args[0])
	_, sc, bad := s.liveOf(op.Key, tSet)
	if bad != nil {
		return *bad
	}
	if _, _, bad := s.liveOf(dst, tSet); bad != nil {
		return *bad
	}
	if sc == nil {
		return Int(0)
	}
	if _, ok := sc.set[string(op.Args[1])]; !ok {
		return Int(0)
	}
	if dst == op.Key {
		return Int(1)
	}
	s.opSRem(Op{Kind: "srem", Key: op.Key, Args: op.Args[1:2]})
	s.opSAdd(Op{Kind: "sadd", Key: dst, Args: op.Args[1:2]})
	return Int(1)
}

// setstore sinter|sunion|sdiff key [key ...] (Op.Key the destination):
// the result replaces the destination (deleted when empty); int size.
func checkSetStore(op Op) error {
	switch string(op.Args[0]) {
	case "sinter", "sunion", "sdiff":
		return nil
	}
	return fmt.Errorf(errSyntax)
}

func (s *KVState) opSetStore(op Op) Result {
	r := s.opSetAlgebra(Op{Kind: string(op.Args[0]), Key: string(op.Args[1]), Args: op.Args[2:]})
	if r.Type != ResultArray {
		return r
	}
	if _, ok := s.m[op.Key]; ok {
		s.del(op.Key)
	}
	if len(r.Elems) > 0 {
		ms := make([][]byte, len(r.Elems))
		for i, x := range r.Elems {
			ms[i] = x.Bytes
		}
		s.opSAdd(Op{Kind: "sadd", Key: op.Key, Args: ms})
	}
	return Int(int64(len(r.Elems)))
}

// sintercard limit [key ...] (Op.Key the first set): the intersection's
// size, at most limit (0: no limit).
func (s *KVState) opSInterCard(op Op) Result {
	limit, _ := parseInt(op.Args[0])
	r := s.opSetAlgebra(Op{Kind: "sinter", Key: op.Key, Args: op.Args[1:]})
	if r.Type != ResultArray {
		return r
	}
	n := int64(len(r.Elems))
	if limit > 0 && n > limit {
		n = limit
	}
	return Int(n)
}

// lmove dst left|right left|right: pops from the source's end and pushes
// onto the destination's; the element | nil.
func checkLMove(op Op) error {
	for _, w := range op.Args[1:] {
		if string(w) != "left" && string(w) != "right" {
			return fmt.Errorf(errSyntax)
		}
	}
	return nil
}

func (s *KVState) opLMove(op Op) Result {
	dst := string(op.Args[0])
	_, c, bad := s.liveOf(op.Key, tList)
	if bad != nil {
		return *bad
	}
	if _, _, bad := s.liveOf(dst, tList); bad != nil {
		return *bad
	}
	if c == nil {
		return Nil()
	}
	pop, push := "rpop", "rpush"
	if string(op.Args[1]) == "left" {
		pop = "lpop"
	}
	if string(op.Args[2]) == "left" {
		push = "lpush"
	}
	r := s.opPop(Op{Kind: pop, Key: op.Key})
	if r.Type != ResultBytes {
		return r
	}
	s.opPush(Op{Kind: push, Key: dst, Args: [][]byte{r.Bytes}})
	return r
}

// lpos elem [rank r] [count n] [maxlen m]: the index of the rank-th match
// (negative rank: from the tail) | nil; with count, up to n indexes (0:
// all); maxlen bounds the elements compared.
type lposOpts struct {
	rank, count, maxlen int64
	counted             bool
}

func parseLPos(op Op) (lposOpts, error) {
	o := lposOpts{rank: 1}
	a := op.Args[1:]
	if len(a)%2 != 0 {
		return o, fmt.Errorf(errSyntax)
	}
	for i := 0; i < len(a); i += 2 {
		n, ok := parseInt(a[i+1])
		if !ok {
			return o, fmt.Errorf("value is not an integer or out of range")
		}
		switch string(a[i]) {
		case "rank":
			if n == 0 {
				return o, fmt.Errorf("ERR RANK can't be zero: use 1 to start from the first match, 2 from the second ... or use negative to start from the end of the list")
			}
			if n == -1<<63 {
				return o, fmt.Errorf("value is out of range, value must between -9223372036854775807 and 9223372036854775807")
			}
			o.rank = n
		case "count":
			if n < 0 {
				return o, fmt.Errorf("ERR COUNT can't be negative")
			}
			o.count, o.counted = n, true
		case "maxlen":
			if n < 0 {
				return o, fmt.Errorf("ERR MAXLEN can't be negative")
			}
			o.maxlen = n
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	return o, nil
}

func checkLPos(op Op) error {
	_, err := parseLPos(op)
	return err
}

func (s *KVState) opLPos(op Op) Result {
	o, _ := parseLPos(op)
	_, c, bad := s.liveOf(op.Key, tList)
	if bad != nil {
		return *bad
	}
	var l [][]byte
	if c != nil {
		l = c.l
	}
	var got []Result
	skip := o.rank - 1
	step, i := 1, 0
	if o.rank < 0 {
		skip, step, i = -o.rank-1, -1, len(l)-1
	}
	for n := int64(0); i >= 0 && i < len(l) && (o.maxlen == 0 || n < o.maxlen); i, n = i+step, n+1 {
		if !bytes.Equal(l[i], op.Args[0]) {
			continue
		}
		if skip > 0 {
			skip--
			continue
		}
		got = append(got, Int(int64(i)))
		if !o.counted || (o.count > 0 && int64(len(got)) >= o.count) {
			break
		}
	}
	if o.counted {
		return Array(got...)
	}
	if len(got) == 0 {
		return Nil()
	}
	return got[0]
}

// maxRandRepeats bounds a negative count of HRANDFIELD and SRANDMEMBER
// (picks that may repeat): Redis would build a reply of that many elements,
// which a count near -2^63 makes a node run out of memory; Synod answers
// Redis's out-of-range error instead.
const maxRandRepeats = 1 << 20

// hrandfield [count [withvalues]]: random fields from the operation's Env
// (a read: any pick is a valid answer, as SRANDMEMBER).
func checkHRandField(op Op) error {
	if len(op.Args) >= 1 {
		if _, ok := parseInt(op.Args[0]); !ok {
			return fmt.Errorf("value is not an integer or out of range")
		}
	}
	if len(op.Args) == 2 && string(op.Args[1]) != "withvalues" {
		return fmt.Errorf(errSyntax)
	}
	return nil
}

func (s *KVState) opHRandField(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tHash)
	if bad != nil {
		return *bad
	}
	var fs []string
	if c != nil {
		fs = slices.Sorted(maps.Keys(c.h))
	}
	r := s.env.Rand()
	if len(op.Args) == 0 {
		if len(fs) == 0 {
			return Nil()
		}
		return Bytes([]byte(fs[r.IntN(len(fs))]))
	}
	k, _ := parseInt(op.Args[0])
	withValues := len(op.Args) == 2
	if k < -maxRandRepeats {
		return Errorf("value is out of range")
	}
	if len(fs) == 0 || k == 0 {
		return Array()
	}
	var pick []string
	if k < 0 {
		for range -k {
			pick = append(pick, fs[r.IntN(len(fs))])
		}
	} else {
		r.Shuffle(len(fs), func(i, j int) { fs[i], fs[j] = fs[j], fs[i] })
		pick = fs[:min(int(k), len(fs))]
	}
	out := make([]Result, 0, len(pick)*2)
	for _, f := range pick {
		out = append(out, Bytes([]byte(f)))
		if withValues {
			out = append(out, Bytes(c.h[f]))
		}
	}
	return Array(out...)
}

// zcombine union|inter|diff sum|min|max n key1 ... keyn w1 ... wn
// (ZUNION, ZINTER, ZDIFF; Op.Key is unused, the keys are in Args) and
// zcombinestore with the same arguments and Op.Key the destination
// (ZUNIONSTORE, ZINTERSTORE, ZDIFFSTORE). A source may be a set (every
// member scores 1), as in Redis; zcombine answers member, score pairs in
// (score, member) order, zcombinestore the destination's size (the
// destination is replaced, deleted when empty).
func parseZCombine(op Op) (mode, agg string, keys []string, weights []float64, err error) {
	if len(op.Args) < 4 {
		return "", "", nil, nil, fmt.Errorf(errSyntax)
	}
	mode, agg = string(op.Args[0]), string(op.Args[1])
	if (mode != "union" && mode != "inter" && mode != "diff") || (agg != "sum" && agg != "min" && agg != "max") {
		return "", "", nil, nil, fmt.Errorf(errSyntax)
	}
	n, ok := parseInt(op.Args[2])
	if !ok || n < 1 || int64(len(op.Args)-3) != 2*n {
		return "", "", nil, nil, fmt.Errorf(errSyntax)
	}
	keys = argStrings(op.Args[3 : 3+n])
	for _, w := range op.Args[3+n:] {
		f, ok := parseFloat(w)
		if !ok {
			return "", "", nil, nil, fmt.Errorf("weight value is not a float")
		}
		weights = append(weights, f)
	}
	return mode, agg, keys, weights, nil
}

func checkZCombine(op Op) error {
	_, _, _, _, err := parseZCombine(op)
	return err
}

func zcombineKeys(op Op) []string {
	_, _, keys, _, _ := parseZCombine(op)
	return keys
}

func (s *KVState) zcombine(op Op) ([]zel, *Result) {
	mode, agg, keys, weights, _ := parseZCombine(op)
	srcs := make([]map[string]float64, len(keys))
	for i, k := range keys {
		e, ok := s.live(k)
		if !ok {
			continue
		}
		switch e.typ() {
		case tZSet:
			srcs[i] = e.c.z
		case tSet:
			m := make(map[string]float64, len(e.c.set))
			for x := range e.c.set {
				m[x] = 1
			}
			srcs[i] = m
		default:
			r := wrongType()
			return nil, &r
		}
	}
	acc := map[string]float64{}
	for m, sc := range srcs[0] {
		acc[m] = zweigh(sc, weights[0])
	}
	for i, src := range srcs[1:] {
		w := weights[i+1]
		switch mode {
		case "union":
			for m, sc := range src {
				if old, ok := acc[m]; ok {
					acc[m] = zaggregate(agg, old, zweigh(sc, w))
				} else {
					acc[m] = zweigh(sc, w)
				}
			}
		case "inter":
			for m, old := range acc {
				sc, ok := src[m]
				if !ok {
					delete(acc, m)
					continue
				}
				acc[m] = zaggregate(agg, old, zweigh(sc, w))
			}
		case "diff":
			for m := range src {
				delete(acc, m)
			}
		}
	}
	out := make([]zel, 0, len(acc))
	for m, sc := range acc {
		out = append(out, zel{sc, m})
	}
	slices.SortFunc(out, zless)
	return out, nil
}

// zweigh is score times weight; inf times 0 is 0, as Redis makes it.
func zweigh(sc, w float64) float64 {
	r := sc * w
	if math.IsNaN(r) {
		return 0
	}
	return r
}

func zaggregate(agg string, a, b float64) float64 {
	switch agg {
	case "min":
		return min(a, b)
	case "max":
		return max(a, b)
	}
	r := a + b
	if math.IsNaN(r) { // inf + -inf
		return 0
	}
	return r
}

func (s *KVState) opZCombine(op Op) Result {
	els, bad := s.zcombine(op)
	if bad != nil {
		return *bad
	}
	return zArray(els, true)
}

func (s *KVState) opZCombineStore(op Op) Result {
	els, bad := s.zcombine(op)
	if bad != nil {
		return *bad
	}
	if _, ok := s.m[op.Key]; ok {
		s.del(op.Key)
	}
	if len(els) > 0 {
		a := make([][]byte, 0, 2*len(els))
		for _, z := range els {
			a = append(a, formatFloat(z.score), []byte(z.m))
		}
		s.opZAdd(Op{Kind: "zadd", Key: op.Key, Args: a})
	}
	return Int(int64(len(els)))
}

// setbit offset 0|1 / getbit offset: a string's bit (bit 0 the most
// significant of byte 0, as Redis); setbit zero-pads and answers the old
// bit. Offsets run to 2^32-1 as in Redis, and the string stays within
// MaxValueSize.
func checkBitOffset(op Op) error {
	off, ok := parseInt(op.Args[0])
	if !ok || off < 0 || off >= 1<<32 {
		return fmt.Errorf("bit offset is not an integer or out of range")
	}
	if op.Kind == "setbit" {
		if v := string(op.Args[1]); v != "0" && v != "1" {
			return fmt.Errorf("bit is not an integer or out of range")
		}
	}
	return nil
}

func (s *KVState) opSetBit(op Op) Result {
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	off, _ := parseInt(op.Args[0])
	byteAt := int(off / 8)
	if byteAt >= MaxValueSize {
		return Errorf("string exceeds maximum allowed size (proto-max-bulk-len)")
	}
	nv := make([]byte, max(len(e.v), byteAt+1))
	copy(nv, e.v)
	mask := byte(1) << (7 - uint(off%8))
	old := int64(0)
	if nv[byteAt]&mask != 0 {
		old = 1
	}
	if op.Args[1][0] == '1' {
		nv[byteAt] |= mask
	} else {
		nv[byteAt] &^= mask
	}
	if !ok {
		e.exp = 0
	}
	s.putString(op.Key, nv, e.exp)
	return Int(old)
}

func (s *KVState) opGetBit(op Op) Result {
	e, _, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	off, _ := parseInt(op.Args[0])
	byteAt := off / 8
	if byteAt >= int64(len(e.v)) {
		return Int(0)
	}
	if e.v[byteAt]&(byte(1)<<(7-uint(off%8))) != 0 {
		return Int(1)
	}
	return Int(0)
}
