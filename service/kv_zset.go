package service

import (
	"fmt"
	"math"
	"slices"
	"strings"
)

// Sorted sets (package documentation, "Sorted sets"): members with float64
// scores, kept in (score, member) order.

func init() {
	addKVOps(map[string]kvOp{
		"zadd":      {min: 2, max: -1, check: checkZAdd, run: (*KVState).opZAdd},
		"zincrby":   {min: 2, max: 2, check: checkFloat(0), run: (*KVState).opZIncrBy},
		"zrem":      {min: 1, max: -1, run: (*KVState).opZRem},
		"zscore":    {read: true, min: 1, max: 1, run: (*KVState).opZScore},
		"zmscore":   {read: true, min: 1, max: -1, run: (*KVState).opZScore},
		"zcard":     {read: true, run: (*KVState).opZCard},
		"zcount":    {read: true, min: 2, max: 2, check: checkZCount, run: (*KVState).opZCount},
		"zrank":     {read: true, min: 1, max: 2, check: checkZRank, run: (*KVState).opZRank},
		"zrevrank":  {read: true, min: 1, max: 2, check: checkZRank, run: (*KVState).opZRank},
		"zrange":    {read: true, min: 2, max: 8, check: checkZRange, run: (*KVState).opZRange},
		"zremrange": {min: 2, max: 3, check: checkZRemRange, run: (*KVState).opZRemRange},
		"zpopmin":   {max: 1, check: checkCount, run: (*KVState).opZPop},
		"zpopmax":   {max: 1, check: checkCount, run: (*KVState).opZPop},
	})
}

// zsetScore sets member's score in c (adding it when new).
func (c *coll) zsetScore(m string, sc float64) {
	if old, ok := c.z[m]; ok {
		i, _ := slices.BinarySearchFunc(c.zs, zel{old, m}, zless)
		c.zs = slices.Delete(c.zs, i, i+1)
	}
	c.z[m] = sc
	i, _ := slices.BinarySearchFunc(c.zs, zel{sc, m}, zless)
	c.zs = slices.Insert(c.zs, i, zel{sc, m})
}

func (c *coll) zdel(m string) bool {
	old, ok := c.z[m]
	if !ok {
		return false
	}
	delete(c.z, m)
	i, _ := slices.BinarySearchFunc(c.zs, zel{old, m}, zless)
	c.zs = slices.Delete(c.zs, i, i+1)
	return true
}

type zaddOpts struct {
	nx, xx, gt, lt, ch, incr bool
	scores                   []float64
	members                  []string
}

func parseZAdd(op Op) (zaddOpts, error) {
	var o zaddOpts
	i := 0
flags:
	for ; i < len(op.Args); i++ {
		switch strings.ToLower(string(op.Args[i])) {
		case "nx":
			o.nx = true
		case "xx":
			o.xx = true
		case "gt":
			o.gt = true
		case "lt":
			o.lt = true
		case "ch":
			o.ch = true
		case "incr":
			o.incr = true
		default:
			break flags
		}
	}
	rest := op.Args[i:]
	if len(rest) == 0 || len(rest)%2 != 0 {
		return o, fmt.Errorf(errSyntax)
	}
	if o.nx && o.xx {
		return o, fmt.Errorf("ERR XX and NX options at the same time are not compatible")
	}
	if (o.gt && o.nx) || (o.lt && o.nx) || (o.gt && o.lt) {
		return o, fmt.Errorf("GT, LT, and/or NX options at the same time are not compatible")
	}
	if o.incr && len(rest) > 2 {
		return o, fmt.Errorf("ERR INCR option supports a single increment-element pair")
	}
	for j := 0; j < len(rest); j += 2 {
		sc, ok := parseFloat(rest[j])
		if !ok {
			return o, fmt.Errorf(errNotFloat)
		}
		o.scores = append(o.scores, sc)
		o.members = append(o.members, string(rest[j+1]))
	}
	return o, nil
}

func checkZAdd(op Op) error {
	_, err := parseZAdd(op)
	return err
}

// opZAdd answers the members added (and changed, with CH), or with INCR
// the new score (nil when a condition stopped it).
func (s *KVState) opZAdd(op Op) Result {
	o, _ := parseZAdd(op)
	e, c, bad := s.mutable(op.Key, tZSet, !o.xx)
	if bad != nil {
		return *bad
	}
	if c == nil {
		if o.incr {
			return Nil()
		}
		return Int(0)
	}
	added, changed := 0, 0
	var last Result = Nil()
	for i, m := range o.members {
		sc := o.scores[i]
		old, exists := c.z[m]
		if (o.nx && exists) || (o.xx && !exists) {
			continue
		}
		if o.incr && exists {
			sc += old
			if math.IsNaN(sc) {
				return Errorf("resulting score is not a number (NaN)")
			}
		}
		if exists && ((o.gt && sc <= old) || (o.lt && sc >= old)) {
			continue
		}
		if !exists {
			added++
		} else if sc != old {
			changed++
		} else {
			last = Bytes(formatFloat(sc))
			continue
		}
		c.zsetScore(m, sc)
		last = Bytes(formatFloat(sc))
	}
	if added+changed > 0 {
		s.store(op.Key, e, c)
	}
	if o.incr {
		return last
	}
	if o.ch {
		return Int(int64(added + changed))
	}
	return Int(int64(added))
}

func (s *KVState) opZIncrBy(op Op) Result {
	e, c, bad := s.mutable(op.Key, tZSet, true)
	if bad != nil {
		return *bad
	}
	d, _ := parseFloat(op.Args[0])
	m := string(op.Args[1])
	sc := c.z[m] + d
	if math.IsNaN(sc) {
		return Errorf("resulting score is not a number (NaN)")
	}
	c.zsetScore(m, sc)
	s.store(op.Key, e, c)
	return Bytes(formatFloat(sc))
}

func (s *KVState) opZRem(op Op) Result {
	return s.removeMembers(op, tZSet, (*coll).zdel)
}

// opZScore is ZSCORE and ZMSCORE.
func (s *KVState) opZScore(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	out := make([]Result, len(op.Args))
	for i, m := range op.Args {
		out[i] = Nil()
		if c != nil {
			if sc, ok := c.z[string(m)]; ok {
				out[i] = Bytes(formatFloat(sc))
			}
		}
	}
	if op.Kind == "zscore" {
		return out[0]
	}
	return Array(out...)
}

func (s *KVState) opZCard(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	return Int(int64(len(c.zs)))
}

// scoreBound is one end of a score range: "(1.5" is exclusive.
type scoreBound struct {
	v    float64
	excl bool
}

func parseScoreBound(b []byte) (scoreBound, bool) {
	if len(b) > 0 && b[0] == '(' {
		v, ok := parseFloat(b[1:])
		return scoreBound{v, true}, ok
	}
	v, ok := parseFloat(b)
	return scoreBound{v, false}, ok
}

func (lo scoreBound) below(x float64) bool { return x > lo.v || (!lo.excl && x == lo.v) }
func (hi scoreBound) above(x float64) bool { return x < hi.v || (!hi.excl && x == hi.v) }

// lexBound is one end of a lex range: "[a" inclusive, "(a" exclusive, "-"
// and "+" the ends.
type lexBound struct {
	v          string
	excl       bool
	minus, inf bool
}

func parseLexBound(b []byte) (lexBound, bool) {
	switch {
	case string(b) == "-":
		return lexBound{minus: true}, true
	case string(b) == "+":
		return lexBound{inf: true}, true
	case len(b) > 0 && (b[0] == '[' || b[0] == '('):
		return lexBound{v: string(b[1:]), excl: b[0] == '('}, true
	}
	return lexBound{}, false
}

func (lo lexBound) below(x string) bool {
	switch {
	case lo.minus:
		return true
	case lo.inf:
		return false
	}
	return x > lo.v || (!lo.excl && x == lo.v)
}

func (hi lexBound) above(x string) bool {
	switch {
	case hi.inf:
		return true
	case hi.minus:
		return false
	}
	return x < hi.v || (!hi.excl && x == hi.v)
}

func checkZCount(op Op) error {
	_, ok1 := parseScoreBound(op.Args[0])
	_, ok2 := parseScoreBound(op.Args[1])
	if !ok1 || !ok2 {
		return fmt.Errorf("min or max is not a float")
	}
	return nil
}

func (s *KVState) opZCount(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	lo, _ := parseScoreBound(op.Args[0])
	hi, _ := parseScoreBound(op.Args[1])
	n := 0
	for _, z := range c.zs {
		if lo.below(z.score) && hi.above(z.score) {
			n++
		}
	}
	return Int(int64(n))
}

func checkZRank(op Op) error {
	if len(op.Args) == 2 && strings.ToLower(string(op.Args[1])) != "withscore" {
		return fmt.Errorf(errSyntax)
	}
	return nil
}

// opZRank is ZRANK and ZREVRANK, with WITHSCORE an array [rank, score].
func (s *KVState) opZRank(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Nil()
	}
	m := string(op.Args[0])
	sc, ok := c.z[m]
	if !ok {
		return Nil()
	}
	i, _ := slices.BinarySearchFunc(c.zs, zel{sc, m}, zless)
	if op.Kind == "zrevrank" {
		i = len(c.zs) - 1 - i
	}
	if len(op.Args) == 2 {
		return Array(Int(int64(i)), Bytes(formatFloat(sc)))
	}
	return Int(int64(i))
}

// zrangeOpts are ZRANGE's arguments.
type zrangeOpts struct {
	byScore, byLex, rev, withScores, limited bool
	offset, count                            int64
}

func parseZRange(op Op) (zrangeOpts, error) {
	o := zrangeOpts{count: -1}
	a := op.Args[2:]
	for i := 0; i < len(a); i++ {
		switch strings.ToLower(string(a[i])) {
		case "byscore":
			o.byScore = true
		case "bylex":
			o.byLex = true
		case "rev":
			o.rev = true
		case "withscores":
			o.withScores = true
		case "limit":
			if i+2 >= len(a) {
				return o, fmt.Errorf(errSyntax)
			}
			n, ok := argInts(Op{Args: a}, i+1, i+2)
			if !ok {
				return o, fmt.Errorf(errNotInt)
			}
			o.limited, o.offset, o.count = true, n[0], n[1]
			i += 2
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	switch {
	case o.byScore && o.byLex:
		return o, fmt.Errorf(errSyntax)
	case o.limited && !o.byScore && !o.byLex:
		return o, fmt.Errorf("syntax error, LIMIT is only supported in combination with either BYSCORE or BYLEX")
	case o.withScores && o.byLex:
		return o, fmt.Errorf("syntax error, WITHSCORES not supported in combination with BYLEX")
	}
	lo, hi := op.Args[0], op.Args[1]
	switch {
	case o.byScore:
		_, ok1 := parseScoreBound(lo)
		_, ok2 := parseScoreBound(hi)
		if !ok1 || !ok2 {
			return o, fmt.Errorf("min or max is not a float")
		}
	case o.byLex:
		_, ok1 := parseLexBound(lo)
		_, ok2 := parseLexBound(hi)
		if !ok1 || !ok2 {
			return o, fmt.Errorf("min or max not valid string range item")
		}
	default:
		if _, ok := argInts(op, 0, 1); !ok {
			return o, fmt.Errorf(errNotInt)
		}
	}
	return o, nil
}

func checkZRange(op Op) error {
	_, err := parseZRange(op)
	return err
}

// checkZRemRange: start stop [byscore|bylex], as zrange takes them.
func checkZRemRange(op Op) error {
	if len(op.Args) == 3 {
		if m := string(op.Args[2]); m != "byscore" && m != "bylex" {
			return fmt.Errorf(errSyntax)
		}
	}
	return checkZRange(op)
}

// opZRemRange is ZREMRANGEBYRANK (no mode), ZREMRANGEBYSCORE (byscore) and
// ZREMRANGEBYLEX (bylex): it removes what zrange with the same arguments
// selects and answers how many.
func (s *KVState) opZRemRange(op Op) Result {
	r := s.opZRange(Op{Kind: "zrange", Key: op.Key, Args: op.Args})
	if r.Type != ResultArray {
		return r
	}
	if len(r.Elems) == 0 {
		return Int(0)
	}
	members := make([][]byte, len(r.Elems))
	for i, e := range r.Elems {
		members[i] = e.Bytes
	}
	return s.opZRem(Op{Kind: "zrem", Key: op.Key, Args: members})
}

// opZRange is ZRANGE with its options (and so ZRANGEBYSCORE, ZREVRANGE,
// ZREVRANGEBYSCORE, ZRANGEBYLEX, mapped by the gateway).
func (s *KVState) opZRange(op Op) Result {
	o, _ := parseZRange(op)
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Array()
	}
	els := slices.Clone(c.zs)
	if o.rev {
		slices.Reverse(els)
	}
	var sel []zel
	switch {
	case o.byScore || o.byLex:
		a, b := op.Args[0], op.Args[1]
		if o.rev {
			a, b = b, a // REV takes max then min
		}
		for _, z := range els {
			var in bool
			if o.byScore {
				lo, _ := parseScoreBound(a)
				hi, _ := parseScoreBound(b)
				in = lo.below(z.score) && hi.above(z.score)
			} else {
				lo, _ := parseLexBound(a)
				hi, _ := parseLexBound(b)
				in = lo.below(z.m) && hi.above(z.m)
			}
			if in {
				sel = append(sel, z)
			}
		}
		if o.limited {
			if o.offset < 0 || o.offset >= int64(len(sel)) {
				sel = nil
			} else {
				sel = sel[o.offset:]
				if o.count >= 0 && o.count < int64(len(sel)) {
					sel = sel[:o.count]
				}
			}
		}
	default:
		n, _ := argInts(op, 0, 1)
		lo, hi := span(n[0], n[1], len(els))
		sel = els[lo:hi]
	}
	return zArray(sel, o.withScores)
}

func zArray(sel []zel, withScores bool) Result {
	out := make([]Result, 0, len(sel)*2)
	for _, z := range sel {
		out = append(out, Bytes([]byte(z.m)))
		if withScores {
			out = append(out, Bytes(formatFloat(z.score)))
		}
	}
	return Array(out...)
}

// opZPop is ZPOPMIN and ZPOPMAX: member, score pairs.
func (s *KVState) opZPop(op Op) Result {
	e, c, bad := s.mutable(op.Key, tZSet, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Array()
	}
	n := int64(1)
	if len(op.Args) == 1 {
		n, _ = parseInt(op.Args[0])
	}
	n = min(n, int64(len(c.zs)))
	var got []zel
	for range n {
		z := c.zs[0]
		if op.Kind == "zpopmax" {
			z = c.zs[len(c.zs)-1]
		}
		got = append(got, z)
		c.zdel(z.m)
	}
	if n > 0 {
		s.store(op.Key, e, c)
	}
	return zArray(got, true)
}
