package service

import (
	"fmt"
)

// Pops over several keys, the operations behind LMPOP, ZMPOP and the
// blocking list and sorted-set commands (BLPOP, BRPOP, BLMPOP, BLMOVE,
// BRPOPLPUSH, BZPOPMIN, BZPOPMAX, BZMPOP; issue 34). Each is one operation,
// so the choice of the key and the pop are atomic wherever it runs; the
// gateway blocks (gateway/blocking.go): it sends the operation again when
// a key may have changed, until one answers something other than nil.
//
// The first argument of each is the wait flag: "0" on a command's first
// attempt, "1" on the attempts of a blocked client. With "0" a key of
// another type answers WRONGTYPE, as the command does in Redis; with "1" it
// counts as empty, because a blocked client in Redis is served only by a
// key that holds its type (a key that became a string leaves it blocked).
//
//	lmpop wait left|right count [key ...]   first non-empty list of Op.Key, keys: [key, [elem ...]] | nil
//	zmpop wait min|max count [key ...]      first non-empty zset: [key, [member, score, ...]] | nil
//	blmove wait dst left|right left|right    LMOVE that answers nil (not WRONGTYPE) for an empty source
//	bready list|zset [key ...]               1 when one of the keys holds a non-empty list (zset), else 0

func init() {
	from := func(i int) func(Op) []string {
		return func(op Op) []string { return argStrings(op.Args[i:]) }
	}
	addKVOps(map[string]kvOp{
		"lmpop":  {min: 3, max: -1, check: checkMPop("left", "right"), keys: from(3), run: (*KVState).opLMPop},
		"zmpop":  {min: 3, max: -1, check: checkMPop("min", "max"), keys: from(3), run: (*KVState).opZMPop},
		"blmove": {min: 4, max: 4, check: checkBLMove, keys: from(1), run: (*KVState).opBLMove},
		"bready": {read: true, min: 1, max: -1, check: checkBReady, keys: from(1), run: (*KVState).opBReady},
	})
}

func checkWait(a []byte) error {
	if w := string(a); w != "0" && w != "1" {
		return fmt.Errorf("wait flag must be 0 or 1")
	}
	return nil
}

func checkMPop(a, b string) func(Op) error {
	return func(op Op) error {
		if err := checkWait(op.Args[0]); err != nil {
			return err
		}
		if w := string(op.Args[1]); w != a && w != b {
			return fmt.Errorf(errSyntax)
		}
		if n, ok := parseInt(op.Args[2]); !ok || n <= 0 {
			return fmt.Errorf("count should be greater than 0")
		}
		return nil
	}
}

func checkBLMove(op Op) error {
	if err := checkWait(op.Args[0]); err != nil {
		return err
	}
	for _, a := range op.Args[2:] {
		if w := string(a); w != "left" && w != "right" {
			return fmt.Errorf(errSyntax)
		}
	}
	return nil
}

func checkBReady(op Op) error {
	if t := string(op.Args[0]); t != "list" && t != "zset" {
		return fmt.Errorf("bready takes list or zset")
	}
	return nil
}

// mpopKeys is Op.Key followed by the keys from argument i on.
func mpopKeys(op Op, i int) []string {
	return append([]string{op.Key}, argStrings(op.Args[i:])...)
}

// firstNonEmpty returns the first of keys that holds a non-empty
// collection of type t, or a WRONGTYPE error for a key of another type met
// before it (none when wait is set: such keys count as empty).
func (s *KVState) firstNonEmpty(keys []string, t kvType, wait bool) (string, bool, *Result) {
	for _, k := range keys {
		_, c, bad := s.liveOf(k, t)
		if bad != nil {
			if wait {
				continue
			}
			return "", false, bad
		}
		if c != nil {
			return k, true, nil
		}
	}
	return "", false, nil
}

func (s *KVState) opLMPop(op Op) Result {
	k, ok, bad := s.firstNonEmpty(mpopKeys(op, 3), tList, string(op.Args[0]) == "1")
	if bad != nil {
		return *bad
	}
	if !ok {
		return Nil()
	}
	kind := "lpop"
	if string(op.Args[1]) == "right" {
		kind = "rpop"
	}
	return Array(Bytes([]byte(k)), s.opPop(Op{Kind: kind, Key: k, Args: op.Args[2:3]}))
}

func (s *KVState) opZMPop(op Op) Result {
	k, ok, bad := s.firstNonEmpty(mpopKeys(op, 3), tZSet, string(op.Args[0]) == "1")
	if bad != nil {
		return *bad
	}
	if !ok {
		return Nil()
	}
	kind := "zpopmin"
	if string(op.Args[1]) == "max" {
		kind = "zpopmax"
	}
	return Array(Bytes([]byte(k)), s.opZPop(Op{Kind: kind, Key: k, Args: op.Args[2:3]}))
}

// opBLMove is LMOVE as Redis's BLMOVE checks it: the source first (nil when
// empty, WRONGTYPE unless waiting), then the destination's type.
func (s *KVState) opBLMove(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tList)
	if bad != nil {
		if string(op.Args[0]) == "1" {
			return Nil()
		}
		return *bad
	}
	if c == nil {
		return Nil()
	}
	return s.opLMove(Op{Kind: "lmove", Key: op.Key, Args: op.Args[1:]})
}

func (s *KVState) opBReady(op Op) Result {
	t := tList
	if string(op.Args[0]) == "zset" {
		t = tZSet
	}
	if _, ok, _ := s.firstNonEmpty(mpopKeys(op, 1), t, true); ok {
		return Int(1)
	}
	return Int(0)
}
