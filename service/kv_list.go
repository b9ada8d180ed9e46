package service

import (
	"bytes"
	"fmt"
	"slices"
	"strings"
)

// Lists (package documentation, "Lists").

func init() {
	addKVOps(map[string]kvOp{
		"lpush":   {min: 1, max: -1, run: (*KVState).opPush},
		"rpush":   {min: 1, max: -1, run: (*KVState).opPush},
		"lpushx":  {min: 1, max: -1, run: (*KVState).opPush},
		"rpushx":  {min: 1, max: -1, run: (*KVState).opPush},
		"lpop":    {max: 1, check: checkCount, run: (*KVState).opPop},
		"rpop":    {max: 1, check: checkCount, run: (*KVState).opPop},
		"lrange":  {read: true, min: 2, max: 2, check: checkInts(0, 1), run: (*KVState).opLRange},
		"llen":    {read: true, run: (*KVState).opLLen},
		"lindex":  {read: true, min: 1, max: 1, check: checkInts(0), run: (*KVState).opLIndex},
		"lset":    {min: 2, max: 2, check: checkInts(0), run: (*KVState).opLSet},
		"lrem":    {min: 2, max: 2, check: checkInts(0), run: (*KVState).opLRem},
		"ltrim":   {min: 2, max: 2, check: checkInts(0, 1), run: (*KVState).opLTrim},
		"linsert": {min: 3, max: 3, check: checkLInsert, run: (*KVState).opLInsert},
	})
}

// checkCount checks an optional positive COUNT (LPOP, RPOP, SPOP, ZPOPMIN).
func checkCount(op Op) error {
	if len(op.Args) == 0 {
		return nil
	}
	n, ok := parseInt(op.Args[0])
	if !ok || n < 0 {
		return fmt.Errorf("value is out of range, must be positive")
	}
	return nil
}

func (s *KVState) list(key string) (kvEntry, *coll, *Result) { return s.liveOf(key, tList) }

// opPush is LPUSH, RPUSH, LPUSHX and RPUSHX: the length after.
func (s *KVState) opPush(op Op) Result {
	x := strings.HasSuffix(op.Kind, "x")
	e, c, bad := s.mutable(op.Key, tList, !x)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	if op.Kind[0] == 'l' {
		add := make([][]byte, len(op.Args))
		for i, a := range op.Args {
			add[len(add)-1-i] = a
		}
		c.l = append(add, c.l...)
	} else {
		c.l = append(c.l, op.Args...)
	}
	s.store(op.Key, e, c)
	return Int(int64(len(c.l)))
}

// opPop is LPOP and RPOP, with an optional count (then an array).
func (s *KVState) opPop(op Op) Result {
	e, c, bad := s.mutable(op.Key, tList, false)
	if bad != nil {
		return *bad
	}
	counted := len(op.Args) == 1
	if c == nil {
		return Nil()
	}
	n := 1
	if counted {
		k, _ := parseInt(op.Args[0])
		n = int(min(k, int64(len(c.l))))
	}
	var got [][]byte
	if op.Kind == "lpop" {
		got = slices.Clone(c.l[:n])
		c.l = c.l[n:]
	} else {
		for i := 0; i < n; i++ {
			got = append(got, c.l[len(c.l)-1-i])
		}
		c.l = c.l[:len(c.l)-n]
	}
	if n > 0 {
		s.store(op.Key, e, c)
	}
	if !counted {
		return Bytes(got[0])
	}
	return BytesArray(got...)
}

func (s *KVState) opLRange(op Op) Result {
	_, c, bad := s.list(op.Key)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Array()
	}
	n, _ := argInts(op, 0, 1)
	lo, hi := span(n[0], n[1], len(c.l))
	return BytesArray(c.l[lo:hi]...)
}

func (s *KVState) opLLen(op Op) Result {
	_, c, bad := s.list(op.Key)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	return Int(int64(len(c.l)))
}

// index turns a Redis index (negative from the end) into a position, -1
// when out of range.
func index(i int64, n int) int {
	if i < 0 {
		i += int64(n)
	}
	if i < 0 || i >= int64(n) {
		return -1
	}
	return int(i)
}

func (s *KVState) opLIndex(op Op) Result {
	_, c, bad := s.list(op.Key)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Nil()
	}
	i, _ := parseInt(op.Args[0])
	if j := index(i, len(c.l)); j >= 0 {
		return Bytes(c.l[j])
	}
	return Nil()
}

func (s *KVState) opLSet(op Op) Result {
	e, c, bad := s.mutable(op.Key, tList, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Errorf("no such key")
	}
	i, _ := parseInt(op.Args[0])
	j := index(i, len(c.l))
	if j < 0 {
		return Errorf("index out of range")
	}
	c.l[j] = op.Args[1]
	s.store(op.Key, e, c)
	return OK()
}

// opLRem removes count occurrences of an element: from the head when
// count > 0, from the tail when count < 0, all when 0.
func (s *KVState) opLRem(op Op) Result {
	e, c, bad := s.mutable(op.Key, tList, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	cnt, _ := parseInt(op.Args[0])
	elem := op.Args[1]
	limit := int64(len(c.l))
	if cnt != 0 {
		limit = min(limit, max(cnt, -cnt))
	}
	keep := make([]bool, len(c.l))
	removed := int64(0)
	for k := range c.l {
		i := k
		if cnt < 0 {
			i = len(c.l) - 1 - k
		}
		if removed < limit && bytes.Equal(c.l[i], elem) {
			removed++
			continue
		}
		keep[i] = true
	}
	if removed == 0 {
		return Int(0)
	}
	var out [][]byte
	for i, x := range c.l {
		if keep[i] {
			out = append(out, x)
		}
	}
	c.l = out
	s.store(op.Key, e, c)
	return Int(removed)
}

func (s *KVState) opLTrim(op Op) Result {
	e, c, bad := s.mutable(op.Key, tList, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return OK()
	}
	n, _ := argInts(op, 0, 1)
	lo, hi := span(n[0], n[1], len(c.l))
	if lo == 0 && hi == len(c.l) {
		return OK()
	}
	c.l = c.l[lo:hi]
	s.store(op.Key, e, c)
	return OK()
}

func checkLInsert(op Op) error {
	if w := strings.ToLower(string(op.Args[0])); w != "before" && w != "after" {
		return fmt.Errorf(errSyntax)
	}
	return nil
}

// opLInsert answers the length after, -1 without the pivot, 0 without a
// key.
func (s *KVState) opLInsert(op Op) Result {
	e, c, bad := s.mutable(op.Key, tList, false)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	i := slices.IndexFunc(c.l, func(x []byte) bool { return bytes.Equal(x, op.Args[1]) })
	if i < 0 {
		return Int(-1)
	}
	if strings.ToLower(string(op.Args[0])) == "after" {
		i++
	}
	c.l = slices.Insert(c.l, i, op.Args[2])
	s.store(op.Key, e, c)
	return Int(int64(len(c.l)))
}
