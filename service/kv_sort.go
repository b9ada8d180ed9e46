package service

import (
	"bytes"
	"cmp"
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// SORT and SORT_RO (issue 34), after Redis 7.0's sort.c: one operation,
// so the sort, its lookups and the STORE are atomic.
//
//	sort [option ...]               R  array (bytes | nil per GET)
//	sortstore dst [option ...]      W  int (the stored list's length; dst deleted when 0)
//	sortkeys [option ...]           R  as sort, with BY/GET patterns
//	sortkeysstore dst [option ...]  W  as sortstore, with BY/GET patterns
//
// Options (words lower-case): asc, desc, alpha, limit offset count,
// by pattern, get pattern.
//
// Decisions. A BY pattern with '*', or a GET pattern other than '#', reads
// keys the request does not name (weight_<element>, obj_<element>->field).
// Those forms are their own kinds, "sortkeys" and "sortkeysstore", marked
// as keyspace operations: a service that runs operations in parallel by
// their declared keys (the sharded KV of eve, adam and orca-primary)
// refuses them, as it refuses KEYS, instead of running them beside writes
// to keys they read; and the gateway refuses the patterns in a sharded
// namespace, as Redis Cluster does ("BY option of SORT denied in Cluster
// mode."). Where Redis's order is its memory's (a set's members with BY
// nosort, equal BY values, which its unstable qsort leaves in any order),
// the order here is the members' byte order, the same on every replica;
// ALPHA compares bytes (Redis's strcoll in the C locale).

func init() {
	dst := func(op Op) []string { return []string{string(op.Args[0])} }
	addKVOps(map[string]kvOp{
		"sort":          {read: true, max: -1, check: checkSort, run: (*KVState).opSort},
		"sortstore":     {min: 1, max: -1, check: checkSort, keys: dst, run: (*KVState).opSort},
		"sortkeys":      {read: true, max: -1, keyspace: true, check: checkSort, run: (*KVState).opSort},
		"sortkeysstore": {min: 1, max: -1, keyspace: true, check: checkSort, keys: dst, run: (*KVState).opSort},
	})
}

// sortOpts are SORT's parsed options.
type sortOpts struct {
	desc, alpha, dontSort bool
	by                    []byte // nil: the elements themselves
	gets                  [][]byte
	offset, count         int64
	store                 string
	storing               bool
	patterns              bool // by or a get reads other keys
}

// parseSort parses op's options (after the destination for the store
// kinds).
func parseSort(op Op) (sortOpts, error) {
	o := sortOpts{count: -1}
	a := op.Args
	if strings.HasSuffix(op.Kind, "store") {
		o.store, o.storing, a = string(a[0]), true, a[1:]
	}
	for j := 0; j < len(a); j++ {
		left := len(a) - j - 1
		switch w := string(a[j]); {
		case w == "asc":
			o.desc = false
		case w == "desc":
			o.desc = true
		case w == "alpha":
			o.alpha = true
		case w == "limit" && left >= 2:
			off, ok1 := parseInt(a[j+1])
			n, ok2 := parseInt(a[j+2])
			if !ok1 || !ok2 {
				return o, fmt.Errorf(errNotInt)
			}
			o.offset, o.count = off, n
			j += 2
		case w == "by" && left >= 1:
			o.by = a[j+1]
			o.dontSort = !bytes.Contains(o.by, []byte("*"))
			o.patterns = o.patterns || !o.dontSort
			j++
		case w == "get" && left >= 1:
			o.gets = append(o.gets, a[j+1])
			o.patterns = o.patterns || string(a[j+1]) != "#"
			j++
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	return o, nil
}

// SortReadsKeys reports whether SORT's options (lower-cased words) hold a
// BY or GET pattern that reads other keys: the gateway then sends the
// sortkeys kinds.
func SortReadsKeys(args [][]byte) bool {
	o, err := parseSort(Op{Kind: "sort", Args: args})
	return err == nil && o.patterns
}

func checkSort(op Op) error {
	o, err := parseSort(op)
	if err == nil && o.patterns != strings.HasPrefix(op.Kind, "sortkeys") {
		return fmt.Errorf("%s: BY/GET patterns that read other keys need the sortkeys kinds, and only they", op.Kind)
	}
	return err
}

// lookupPattern is Redis's lookupKeyByPattern: "#" is the element itself;
// otherwise the first '*' is replaced by the element and the key's string
// read, or with "->field" after the '*' the field of the key's hash. ok
// is false when there is no such value (or no '*').
func (s *KVState) lookupPattern(pat []byte, ele string) ([]byte, bool) {
	if string(pat) == "#" {
		return []byte(ele), true
	}
	star := bytes.IndexByte(pat, '*')
	if star < 0 {
		return nil, false
	}
	keyPat, field := pat, ""
	if f := bytes.Index(pat[star+1:], []byte("->")); f >= 0 && star+1+f+2 < len(pat) {
		keyPat, field = pat[:star+1+f], string(pat[star+1+f+2:])
	}
	key := string(keyPat[:star]) + ele + string(keyPat[star+1:])
	e, ok := s.live(key)
	if !ok {
		return nil, false
	}
	if field != "" {
		if e.typ() != tHash {
			return nil, false
		}
		v, ok := e.c.h[field]
		return v, ok
	}
	if e.c != nil {
		return nil, false
	}
	return e.v, true
}

// sortScore parses a numeric sort weight as Redis's strtod check does:
// the whole string (leading blanks allowed, empty is 0), finite or
// infinite but not NaN or out of range.
func sortScore(b []byte) (float64, bool) {
	t := strings.TrimLeft(string(b), " \t\n\v\f\r")
	if t == "" {
		return 0, true
	}
	f, err := strconv.ParseFloat(t, 64)
	return f, err == nil && !math.IsNaN(f)
}

type sortItem struct {
	ele   string
	score float64
	cmp   []byte
	has   bool // cmp found (ALPHA with BY)
}

func (s *KVState) opSort(op Op) Result {
	o, _ := parseSort(op)
	e, ok := s.live(op.Key)
	var items []sortItem
	native := false // the value's own order (list, sorted set)
	if ok {
		switch e.typ() {
		case tList:
			for _, x := range e.c.l {
				items = append(items, sortItem{ele: string(x)})
			}
			native = true
		case tSet:
			for _, m := range members(e.c) {
				items = append(items, sortItem{ele: m})
			}
		case tZSet:
			for _, z := range e.c.zs {
				items = append(items, sortItem{ele: z.m})
			}
			native = true
		default:
			return wrongType()
		}
	}
	if o.dontSort && ok && e.typ() == tSet && o.storing {
		o.dontSort, o.alpha, o.by = false, true, nil
	}
	n := int64(len(items))
	start := min(max(o.offset, 0), n)
	count := min(max(o.count, -1), n)
	end := n - 1
	if count >= 0 {
		end = start + count - 1
	}
	if start >= n {
		start, end = n-1, n-2
	}
	end = min(end, n-1)

	bad := false
	if o.dontSort {
		if native && o.desc {
			slices.Reverse(items)
		}
	} else {
		for i := range items {
			it := &items[i]
			v, found := []byte(it.ele), true
			if o.by != nil {
				v, found = s.lookupPattern(o.by, it.ele)
				if !found {
					continue
				}
			}
			if o.alpha {
				if o.by != nil {
					it.cmp, it.has = v, true
				}
				continue
			}
			f, good := sortScore(v)
			if !good {
				bad = true
			}
			it.score = f
		}
		slices.SortStableFunc(items, func(a, b sortItem) int {
			var c int
			switch {
			case !o.alpha:
				c = cmp.Compare(a.score, b.score)
				if c == 0 {
					c = compareStrings(a.ele, b.ele)
				}
			case o.by != nil:
				switch {
				case !a.has || !b.has:
					c = cmp.Compare(btoi(a.has), btoi(b.has))
				default:
					c = bytes.Compare(a.cmp, b.cmp)
				}
			default:
				c = strings.Compare(a.ele, b.ele)
			}
			if o.desc {
				return -c
			}
			return c
		})
	}
	if bad {
		return Errorf("One or more scores can't be converted into double")
	}
	var out []Result
	var stored [][]byte
	for j := start; j <= end; j++ {
		ele := items[j].ele
		if len(o.gets) == 0 {
			out = append(out, Bytes([]byte(ele)))
			stored = append(stored, []byte(ele))
			continue
		}
		for _, g := range o.gets {
			v, found := s.lookupPattern(g, ele)
			switch {
			case found:
				out = append(out, Bytes(slices.Clone(v)))
				stored = append(stored, slices.Clone(v))
			default:
				out = append(out, Nil())
				stored = append(stored, []byte{})
			}
		}
	}
	if !o.storing {
		return Array(out...)
	}
	if _, exists := s.m[o.store]; exists {
		s.del(o.store)
	}
	if len(stored) > 0 {
		c := newColl(tList, s.tok)
		c.l = stored
		s.store(o.store, kvEntry{}, c)
	}
	return Int(int64(len(stored)))
}

// compareStrings is Redis's compareStringObjects: two integers (as Redis
// keeps them encoded: canonical decimal) compare as numbers, anything else
// as bytes.
func compareStrings(a, b string) int {
	x, err1 := strconv.ParseInt(a, 10, 64)
	y, err2 := strconv.ParseInt(b, 10, 64)
	if err1 == nil && err2 == nil && strconv.FormatInt(x, 10) == a && strconv.FormatInt(y, 10) == b {
		return cmp.Compare(x, y)
	}
	return strings.Compare(a, b)
}

func btoi(b bool) int {
	if b {
		return 1
	}
	return 0
}
