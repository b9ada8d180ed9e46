package service

import (
	"fmt"
	"slices"
)

// More sorted-set operations Redis's suite exercises (issue 34):
//
//	zrandmember [count [withscores]]  R  bytes | nil | array (random from the Env, as hrandfield)
//	zrangestore src start stop [zrange options]
//	                                  W  int (Op.Key the destination, replaced by what
//	                                     zrange src ... selects; deleted when empty)
//	zintercard limit [key ...]        R  int (the first key is Op.Key; limit 0: none)

func init() {
	addKVOps(map[string]kvOp{
		"zrandmember": {read: true, max: 2, check: checkZRandMember, run: (*KVState).opZRandMember},
		"zrangestore": {min: 3, max: 8, check: checkZRangeStore, keys: func(op Op) []string { return []string{string(op.Args[0])} }, run: (*KVState).opZRangeStore},
		"zintercard":  {read: true, min: 1, max: -1, check: checkInts(0), keys: func(op Op) []string { return argStrings(op.Args[1:]) }, run: (*KVState).opZInterCard},
	})
}

func checkZRandMember(op Op) error {
	if len(op.Args) == 0 {
		return nil
	}
	if _, ok := parseInt(op.Args[0]); !ok {
		return fmt.Errorf("value is not an integer or out of range")
	}
	if len(op.Args) == 2 && string(op.Args[1]) != "withscores" {
		return fmt.Errorf(errSyntax)
	}
	return nil
}

func (s *KVState) opZRandMember(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	var zs []zel
	if c != nil {
		zs = slices.Clone(c.zs)
	}
	r := s.env.Rand()
	if len(op.Args) == 0 {
		if len(zs) == 0 {
			return Nil()
		}
		return Bytes([]byte(zs[r.IntN(len(zs))].m))
	}
	k, _ := parseInt(op.Args[0])
	if k < -maxRandRepeats {
		return Errorf("value is out of range")
	}
	if len(zs) == 0 || k == 0 {
		return Array()
	}
	var pick []zel
	if k < 0 {
		for range -k {
			pick = append(pick, zs[r.IntN(len(zs))])
		}
	} else {
		r.Shuffle(len(zs), func(i, j int) { zs[i], zs[j] = zs[j], zs[i] })
		pick = zs[:min(int(k), len(zs))]
	}
	return zArray(pick, len(op.Args) == 2)
}

func checkZRangeStore(op Op) error {
	for _, a := range op.Args[3:] {
		if string(a) == "withscores" {
			return fmt.Errorf(errSyntax)
		}
	}
	return checkZRange(Op{Kind: "zrange", Key: string(op.Args[0]), Args: op.Args[1:]})
}

func (s *KVState) opZRangeStore(op Op) Result {
	a := append(slices.Clone(op.Args[1:]), []byte("withscores"))
	r := s.opZRange(Op{Kind: "zrange", Key: string(op.Args[0]), Args: a})
	if r.Type == ResultErr {
		return r
	}
	s.opDel(Op{Kind: "del", Key: op.Key})
	if len(r.Elems) == 0 {
		return Int(0)
	}
	add := make([][]byte, 0, len(r.Elems))
	for i := 0; i+1 < len(r.Elems); i += 2 {
		add = append(add, r.Elems[i+1].Bytes, r.Elems[i].Bytes)
	}
	s.opZAdd(Op{Kind: "zadd", Key: op.Key, Args: add})
	return Int(int64(len(r.Elems) / 2))
}

func (s *KVState) opZInterCard(op Op) Result {
	keys := append([]string{op.Key}, argStrings(op.Args[1:])...)
	a := [][]byte{[]byte("inter"), []byte("sum"), []byte(fmt.Sprint(len(keys)))}
	for _, k := range keys {
		a = append(a, []byte(k))
	}
	for range keys {
		a = append(a, []byte("1"))
	}
	r := s.opZCombine(Op{Kind: "zcombine", Args: a})
	if r.Type == ResultErr {
		return r
	}
	n := int64(len(r.Elems) / 2)
	if limit, _ := parseInt(op.Args[0]); limit > 0 {
		n = min(n, limit)
	}
	return Int(n)
}
