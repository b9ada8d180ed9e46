package service

import (
	"maps"
	"slices"
)

// Sets (package documentation, "Sets"). Members are listed in byte order.

func init() {
	addKVOps(map[string]kvOp{
		"sadd":        {min: 1, max: -1, run: (*KVState).opSAdd},
		"srem":        {min: 1, max: -1, run: (*KVState).opSRem},
		"smembers":    {read: true, run: (*KVState).opSMembers},
		"sismember":   {read: true, min: 1, max: 1, run: (*KVState).opSIsMember},
		"smismember":  {read: true, min: 1, max: -1, run: (*KVState).opSIsMember},
		"scard":       {read: true, run: (*KVState).opSCard},
		"spop":        {max: 1, check: checkCount, run: (*KVState).opSPop},
		"srandmember": {read: true, max: 1, check: checkInts(0), run: (*KVState).opSRandMember},
		"sinter":      {read: true, max: -1, run: (*KVState).opSetAlgebra},
		"sunion":      {read: true, max: -1, run: (*KVState).opSetAlgebra},
		"sdiff":       {read: true, max: -1, run: (*KVState).opSetAlgebra},
	})
}

func (s *KVState) opSAdd(op Op) Result {
	e, c, bad := s.mutable(op.Key, tSet, true)
	if bad != nil {
		return *bad
	}
	n := 0
	for _, m := range op.Args {
		if _, ok := c.set[string(m)]; !ok {
			c.set[string(m)] = struct{}{}
			n++
		}
	}
	if n > 0 {
		s.store(op.Key, e, c)
	}
	return Int(int64(n))
}

func (s *KVState) opSRem(op Op) Result {
	return s.removeMembers(op, tSet, func(c *coll, m string) bool {
		_, ok := c.set[m]
		delete(c.set, m)
		return ok
	})
}

func members(c *coll) []string {
	if c == nil {
		return nil
	}
	return slices.Sorted(maps.Keys(c.set))
}

func stringsArray(ss []string) Result {
	out := make([]Result, len(ss))
	for i, x := range ss {
		out[i] = Bytes([]byte(x))
	}
	return Array(out...)
}

func (s *KVState) opSMembers(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tSet)
	if bad != nil {
		return *bad
	}
	return stringsArray(members(c))
}

// opSIsMember is SISMEMBER (an int) and SMISMEMBER (an array of them).
func (s *KVState) opSIsMember(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tSet)
	if bad != nil {
		return *bad
	}
	out := make([]Result, len(op.Args))
	for i, m := range op.Args {
		ok := false
		if c != nil {
			_, ok = c.set[string(m)]
		}
		out[i] = boolInt(ok)
	}
	if op.Kind == "sismember" {
		return out[0]
	}
	return Array(out...)
}

func (s *KVState) opSCard(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tSet)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Int(0)
	}
	return Int(int64(len(c.set)))
}

// opSPop removes members chosen from the state (pickIndex), so every
// replica removes the same ones.
func (s *KVState) opSPop(op Op) Result {
	e, c, bad := s.mutable(op.Key, tSet, false)
	if bad != nil {
		return *bad
	}
	counted := len(op.Args) == 1
	if c == nil {
		if counted {
			return Array()
		}
		return Nil()
	}
	n := 1
	if counted {
		k, _ := parseInt(op.Args[0])
		n = int(min(k, int64(len(c.set))))
	}
	ms := members(c)
	var got []string
	for i := 0; i < n; i++ {
		j := s.pickIndex(op.Key, i, len(ms))
		got = append(got, ms[j])
		delete(c.set, ms[j])
		ms = append(ms[:j], ms[j+1:]...)
	}
	if n > 0 {
		s.store(op.Key, e, c)
	}
	if !counted {
		return Bytes([]byte(got[0]))
	}
	return stringsArray(got)
}

// opSRandMember draws from the operation's environment: a positive count
// gives distinct members, a negative one may repeat.
func (s *KVState) opSRandMember(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tSet)
	if bad != nil {
		return *bad
	}
	ms := members(c)
	r := s.env.Rand()
	if len(op.Args) == 0 {
		if len(ms) == 0 {
			return Nil()
		}
		return Bytes([]byte(ms[r.IntN(len(ms))]))
	}
	k, _ := parseInt(op.Args[0])
	if len(ms) == 0 || k == 0 {
		return Array()
	}
	var got []string
	if k < -maxRandRepeats {
		return Errorf("value is out of range")
	}
	if k < 0 {
		for range -k {
			got = append(got, ms[r.IntN(len(ms))])
		}
		return stringsArray(got)
	}
	r.Shuffle(len(ms), func(i, j int) { ms[i], ms[j] = ms[j], ms[i] })
	return stringsArray(ms[:min(int(k), len(ms))])
}

// opSetAlgebra is SINTER, SUNION and SDIFF over Op.Key and the keys in
// Args, in one step; a missing key is an empty set.
func (s *KVState) opSetAlgebra(op Op) Result {
	keys := append([]string{op.Key}, argStrings(op.Args)...)
	sets := make([]map[string]struct{}, len(keys))
	for i, k := range keys {
		_, c, bad := s.liveOf(k, tSet)
		if bad != nil {
			return *bad
		}
		if c != nil {
			sets[i] = c.set
		}
	}
	acc := map[string]struct{}{}
	for m := range sets[0] {
		acc[m] = struct{}{}
	}
	for _, st := range sets[1:] {
		switch op.Kind {
		case "sinter":
			for m := range acc {
				if _, ok := st[m]; !ok {
					delete(acc, m)
				}
			}
		case "sunion":
			for m := range st {
				acc[m] = struct{}{}
			}
		case "sdiff":
			for m := range st {
				delete(acc, m)
			}
		}
	}
	return stringsArray(slices.Sorted(maps.Keys(acc)))
}

func argStrings(a [][]byte) []string {
	out := make([]string, len(a))
	for i, x := range a {
		out[i] = string(x)
	}
	return out
}
