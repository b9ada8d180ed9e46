package service

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// String operations (package documentation, "Strings"), including the
// register subset ABD and the blocking protocol run.

func init() {
	addKVOps(map[string]kvOp{
		"get":         {read: true, run: (*KVState).opGet},
		"exists":      {read: true, run: (*KVState).opExists},
		"set":         {min: 1, max: 8, check: checkSet, run: (*KVState).opSet},
		"del":         {run: (*KVState).opDel},
		"unlink":      {run: (*KVState).opDel},
		"getset":      {min: 1, max: 1, run: (*KVState).opGetSet},
		"getdel":      {run: (*KVState).opGetDel},
		"getex":       {max: -1, check: checkGetEx, run: (*KVState).opGetEx},
		"append":      {min: 1, max: 1, run: (*KVState).opAppend},
		"incr":        {min: 1, max: 1, check: checkInts(0), run: (*KVState).opIncr},
		"incrbyfloat": {min: 1, max: 1, check: checkFloat(0), run: (*KVState).opIncrByFloat},
		"strlen":      {read: true, run: (*KVState).opStrlen},
		"getrange":    {read: true, min: 2, max: 2, check: checkInts(0, 1), run: (*KVState).opGetRange},
		"setrange":    {min: 2, max: 2, check: checkInts(0), run: (*KVState).opSetRange},
		"cas":         {min: 2, max: 2, run: (*KVState).opCAS},
	})
}

func checkFloat(i int) func(Op) error {
	return func(op Op) error {
		if _, ok := parseFloat(op.Args[i]); !ok {
			return fmt.Errorf(errNotFloat)
		}
		return nil
	}
}

// strOrAnswer returns key's string (ok), or the answer when there is
// none: WRONGTYPE for another type, nil without a key. The answer is a
// value, not a pointer: a pointer to a nil answer made by each call
// escaped, one allocation per GET of a missing key.
func (s *KVState) strOrAnswer(key string) (_ kvEntry, answer Result, ok bool) {
	e, ok, bad := s.str(key)
	switch {
	case bad != nil:
		return e, *bad, false
	case !ok:
		return e, Nil(), false
	}
	return e, Result{}, true
}

// str returns key's string: ok false without a key, bad set for another
// type.
func (s *KVState) str(key string) (e kvEntry, ok bool, bad *Result) {
	e, ok = s.live(key)
	if ok && e.c != nil {
		r := wrongType()
		return e, true, &r
	}
	return e, ok, nil
}

func (s *KVState) opGet(op Op) Result {
	e, none, ok := s.strOrAnswer(op.Key)
	if !ok {
		return none
	}
	return Bytes(e.v)
}

func (s *KVState) opExists(op Op) Result {
	if _, ok := s.live(op.Key); ok {
		return Int(1)
	}
	return Int(0)
}

func (s *KVState) opDel(op Op) Result {
	if _, ok := s.m[op.Key]; !ok {
		return Int(0)
	}
	s.del(op.Key)
	return Int(1)
}

// setOpts are SET's options.
type setOpts struct {
	nx, xx, get, keepttl bool
	ttl                  *ttlArg
}

func parseSet(op Op) (setOpts, error) {
	var o setOpts
	a := op.Args[1:]
	for i := 0; i < len(a); i++ {
		w := strings.ToLower(string(a[i]))
		switch w {
		case "nx":
			o.nx = true
		case "xx":
			o.xx = true
		case "get":
			o.get = true
		case "keepttl":
			o.keepttl = true
		case "ex", "px", "exat", "pxat":
			if o.ttl != nil || i+1 >= len(a) {
				return o, fmt.Errorf(errSyntax)
			}
			t, err := parseTTL(w, a[i+1], "set")
			if err != nil {
				return o, err
			}
			o.ttl = &t
			i++
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	if (o.nx && o.xx) || (o.keepttl && o.ttl != nil) {
		return o, fmt.Errorf(errSyntax)
	}
	return o, nil
}

func checkSet(op Op) error {
	_, err := parseSet(op)
	return err
}

func (s *KVState) opSet(op Op) Result {
	o, _ := parseSet(op)
	if o.ttl != nil && !s.timed {
		return Errorf(errNoTime)
	}
	old, ok, bad := s.str(op.Key)
	if bad != nil && o.get {
		return *bad
	}
	prev := Nil()
	if o.get && ok {
		prev = Bytes(old.v)
	}
	if (o.nx && ok) || (o.xx && !ok) {
		return prev
	}
	var exp int64
	if o.keepttl && ok {
		exp = old.exp
	}
	if o.ttl != nil {
		d, err := o.ttl.deadline(s.now)
		if err != nil {
			return Errorf("%v", err)
		}
		exp = d
	}
	s.putString(op.Key, op.Args[0], exp)
	s.expireIfDue(op.Key)
	if o.get {
		return prev
	}
	return OK()
}

func (s *KVState) opGetSet(op Op) Result {
	return s.opSet(Op{Kind: "set", Key: op.Key, Args: [][]byte{op.Args[0], []byte("get")}})
}

func (s *KVState) opGetDel(op Op) Result {
	e, none, ok := s.strOrAnswer(op.Key)
	if !ok {
		return none
	}
	s.del(op.Key)
	return Bytes(e.v)
}

// checkGetEx checks GETEX's syntax: no option, persist, or one of ex, px,
// exat, pxat and a number (checked by opGetEx once the key is found, as
// Redis does: a missing key answers nil whatever the number).
func checkGetEx(op Op) error {
	if len(op.Args) == 0 {
		return nil
	}
	w := strings.ToLower(string(op.Args[0]))
	switch {
	case w == "persist" && len(op.Args) == 1:
		return nil
	case (w == "ex" || w == "px" || w == "exat" || w == "pxat") && len(op.Args) == 2:
		return nil
	}
	return fmt.Errorf(errSyntax)
}

func (s *KVState) opGetEx(op Op) Result {
	persist := len(op.Args) == 1
	if len(op.Args) == 2 && !s.timed {
		return Errorf(errNoTime)
	}
	e, none, ok := s.strOrAnswer(op.Key)
	if !ok {
		return none
	}
	var ttl *ttlArg
	if len(op.Args) == 2 {
		t, err := parseTTL(strings.ToLower(string(op.Args[0])), op.Args[1], "getex")
		if err != nil {
			return Errorf("%v", err)
		}
		ttl = &t
	}
	switch {
	case persist && e.exp != 0:
		e.exp = 0
		s.put(op.Key, e)
	case ttl != nil:
		d, err := ttl.deadline(s.now)
		if err != nil {
			return Errorf("%v", err)
		}
		e.exp = d
		s.put(op.Key, e)
		s.expireIfDue(op.Key)
	}
	return Bytes(e.v)
}

func (s *KVState) opAppend(op Op) Result {
	e, _, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	nv := make([]byte, 0, len(e.v)+len(op.Args[0]))
	nv = append(append(nv, e.v...), op.Args[0]...)
	if len(nv) > MaxValueSize {
		return Errorf("string exceeds maximum allowed size")
	}
	s.putString(op.Key, nv, e.exp)
	return Int(int64(len(nv)))
}

func (s *KVState) opIncr(op Op) Result {
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	var cur int64
	if ok {
		c, err := strconv.ParseInt(string(e.v), 10, 64)
		if err != nil {
			return Errorf(errNotInt)
		}
		cur = c
	}
	d, _ := parseInt(op.Args[0])
	n := cur + d
	if (d > 0 && n < cur) || (d < 0 && n > cur) {
		return Errorf("increment or decrement would overflow")
	}
	s.putString(op.Key, []byte(strconv.FormatInt(n, 10)), e.exp)
	return Int(n)
}

func (s *KVState) opIncrByFloat(op Op) Result {
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	var cur float64
	if ok {
		c, good := parseFloat(e.v)
		if !good {
			return Errorf(errNotFloat)
		}
		cur = c
	}
	d, _ := parseFloat(op.Args[0])
	n := cur + d
	if math.IsNaN(n) || math.IsInf(n, 0) {
		return Errorf("increment would produce NaN or Infinity")
	}
	v := []byte(strconv.FormatFloat(n, 'f', -1, 64))
	s.putString(op.Key, v, e.exp)
	return Bytes(v)
}

func (s *KVState) opStrlen(op Op) Result {
	e, _, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	return Int(int64(len(e.v)))
}

func (s *KVState) opGetRange(op Op) Result {
	e, _, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	n, _ := argInts(op, 0, 1)
	if n[0] < 0 && n[1] < 0 && n[0] > n[1] {
		return Bytes([]byte{})
	}
	lo, hi := span(n[0], n[1], len(e.v))
	return Bytes(append([]byte{}, e.v[lo:hi]...))
}

func (s *KVState) opSetRange(op Op) Result {
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	off, _ := parseInt(op.Args[0])
	val := op.Args[1]
	if off < 0 {
		return Errorf("offset is out of range")
	}
	if len(val) == 0 {
		return Int(int64(len(e.v)))
	}
	if off > MaxValueSize-int64(len(val)) { // off+len would overflow for offsets near 2^63
		return Errorf("string exceeds maximum allowed size (proto-max-bulk-len)")
	}
	n := max(len(e.v), int(off)+len(val))
	nv := make([]byte, n)
	copy(nv, e.v)
	copy(nv[off:], val)
	if !ok {
		e.exp = 0
	}
	s.putString(op.Key, nv, e.exp)
	return Int(int64(n))
}

func (s *KVState) opCAS(op Op) Result {
	e, ok, bad := s.str(op.Key)
	if bad != nil {
		return *bad
	}
	if !ok || string(e.v) != string(op.Args[0]) {
		return Int(0)
	}
	s.putString(op.Key, op.Args[1], e.exp)
	return Int(1)
}
