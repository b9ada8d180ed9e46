package service

import (
	"fmt"
	"maps"
	"math"
	"slices"
	"strconv"
)

// Hashes (package documentation, "Hashes").

func init() {
	addKVOps(map[string]kvOp{
		"hset":         {min: 2, max: -1, check: checkPairs, run: (*KVState).opHSet},
		"hsetnx":       {min: 2, max: 2, run: (*KVState).opHSet},
		"hget":         {read: true, min: 1, max: 1, run: (*KVState).opHGet},
		"hmget":        {read: true, min: 1, max: -1, run: (*KVState).opHMGet},
		"hdel":         {min: 1, max: -1, run: (*KVState).opHDel},
		"hgetall":      {read: true, run: (*KVState).opHGetAll},
		"hkeys":        {read: true, run: (*KVState).opHGetAll},
		"hvals":        {read: true, run: (*KVState).opHGetAll},
		"hlen":         {read: true, run: (*KVState).opHLen},
		"hexists":      {read: true, min: 1, max: 1, run: (*KVState).opHGet},
		"hstrlen":      {read: true, min: 1, max: 1, run: (*KVState).opHGet},
		"hincrby":      {min: 2, max: 2, check: checkInts(1), run: (*KVState).opHIncrBy},
		"hincrbyfloat": {min: 2, max: 2, check: checkFloat(1), run: (*KVState).opHIncrBy},
	})
}

func checkPairs(op Op) error {
	if len(op.Args)%2 != 0 {
		return fmt.Errorf("%w for '%s' command", ErrArity, op.Kind)
	}
	return nil
}

// opHSet is HSET (field value pairs; answers the fields added) and HSETNX.
func (s *KVState) opHSet(op Op) Result {
	e, c, bad := s.mutable(op.Key, tHash, true)
	if bad != nil {
		return *bad
	}
	if op.Kind == "hsetnx" {
		if _, ok := c.h[string(op.Args[0])]; ok {
			return Int(0)
		}
	}
	added := 0
	for i := 0; i < len(op.Args); i += 2 {
		f := string(op.Args[i])
		if _, ok := c.h[f]; !ok {
			added++
		}
		c.h[f] = op.Args[i+1]
	}
	s.store(op.Key, e, c)
	return Int(int64(added))
}

// opHGet is HGET, HEXISTS and HSTRLEN.
func (s *KVState) opHGet(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tHash)
	if bad != nil {
		return *bad
	}
	var v []byte
	ok := false
	if c != nil {
		v, ok = c.h[string(op.Args[0])]
	}
	switch op.Kind {
	case "hexists":
		return boolInt(ok)
	case "hstrlen":
		return Int(int64(len(v)))
	}
	if !ok {
		return Nil()
	}
	return Bytes(v)
}

func (s *KVState) opHMGet(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tHash)
	if bad != nil {
		return *bad
	}
	out := make([]Result, len(op.Args))
	for i, f := range op.Args {
		out[i] = Nil()
		if c != nil {
			if v, ok := c.h[string(f)]; ok {
				out[i] = Bytes(v)
			}
		}
	}
	return Array(out...)
}

func (s *KVState) opHDel(op Op) Result {
	return s.removeMembers(op, tHash, func(c *coll, f string) bool {
		_, ok := c.h[f]
		delete(c.h, f)
		return ok
	})
}

// opHGetAll is HGETALL (field, value pairs), HKEYS and HVALS, in field
// order.
func (s *KVState) opHGetAll(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tHash)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Array()
	}
	var out []Result
	for _, f := range slices.Sorted(maps.Keys(c.h)) {
		if op.Kind != "hvals" {
			out = append(out, Bytes([]byte(f)))
		}
		if op.Kind != "hkeys" {
			out = append(out, Bytes(c.h[f]))
		}
	}
	return Array(out...)
}

func (s *KVState) opHLen(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tHash)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	return Int(int64(len(c.h)))
}

// opHIncrBy is HINCRBY and HINCRBYFLOAT.
func (s *KVState) opHIncrBy(op Op) Result {
	e, c, bad := s.mutable(op.Key, tHash, true)
	if bad != nil {
		return *bad
	}
	f := string(op.Args[0])
	cur, had := c.h[f]
	var res Result
	if op.Kind == "hincrby" {
		var n int64
		if had {
			v, ok := parseInt(cur)
			if !ok {
				return Errorf("hash value is not an integer")
			}
			n = v
		}
		d, _ := parseInt(op.Args[1])
		r := n + d
		if (d > 0 && r < n) || (d < 0 && r > n) {
			return Errorf("increment or decrement would overflow")
		}
		c.h[f] = []byte(strconv.FormatInt(r, 10))
		res = Int(r)
	} else {
		var n float64
		if had {
			v, ok := parseFloat(cur)
			if !ok {
				return Errorf("hash value is not a float")
			}
			n = v
		}
		d, _ := parseFloat(op.Args[1])
		if math.IsNaN(d) || math.IsInf(d, 0) {
			return Errorf("value is NaN or Infinity") // Redis checks the increment first
		}
		r := n + d
		if math.IsNaN(r) || math.IsInf(r, 0) {
			return Errorf("increment would produce NaN or Infinity")
		}
		c.h[f] = []byte(strconv.FormatFloat(r, 'f', -1, 64))
		res = Bytes(c.h[f])
	}
	s.store(op.Key, e, c)
	return res
}

func boolInt(b bool) Result {
	if b {
		return Int(1)
	}
	return Int(0)
}
