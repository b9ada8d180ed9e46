package gateway

import (
	"strconv"

	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/synoderr"
)

// LCS key1 key2 [LEN] [IDX] [MINMATCHLEN len] [WITHMATCHLEN] (Redis 7.0's
// lcsCommand, t_string.c): the longest common subsequence of two strings.
// The plan reads both keys in one group (atomic where the protocol applies
// groups, as Redis reads them in one command) and computes the answer here
// from the two values: the dynamic-programming table is the gateway's
// transient memory, never the replicated state's. Errors come in Redis's
// order: a key of another type first, then the options, then the sizes.

func init() {
	register("string", &command{name: "lcs", arity: -3, flags: fRead, first: 1, last: 2, step: 1, plan: planLCS})
}

// defaultBulkLen is proto-max-bulk-len's default, the LCS table's bound
// when the plan runs without a server (inside a script).
const defaultBulkLen = 512 << 20

func planLCS(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("lcs"); !ok {
		return p
	}
	var getLen, getIdx, withMatchLen bool
	var minMatchLen int64
	optErr := ""
	for j := 3; j < len(args) && optErr == ""; j++ {
		switch opt := lower(args[j]); {
		case opt == "idx":
			getIdx = true
		case opt == "len":
			getLen = true
		case opt == "withmatchlen":
			withMatchLen = true
		case opt == "minmatchlen" && j+1 < len(args):
			n, err := strconv.ParseInt(string(args[j+1]), 10, 64)
			if err != nil {
				optErr = "ERR value is not an integer or out of range"
				break
			}
			minMatchLen = max(n, 0)
			j++
		default:
			optErr = "ERR syntax error"
		}
	}
	if optErr == "" && getLen && getIdx {
		optErr = "ERR If you want both the length and indexes, please just use IDX."
	}
	limit := int64(defaultBulkLen)
	if c.s != nil {
		limit = c.s.lim.bulkLen.Load()
	}
	return perKey("get", args[1:3], func(rs []service.Result) service.Result {
		var ab [2][]byte
		for i, r := range rs {
			if k, isErr := r.ErrKind(); isErr && k == synoderr.WrongType {
				return errResult("ERR The specified keys must contain string values")
			}
			if r.Type == service.ResultErr {
				return r
			}
			ab[i] = r.Bytes
		}
		if optErr != "" {
			return errResult("%s", optErr)
		}
		a, b := ab[0], ab[1]
		if (int64(len(a))+1)*(int64(len(b))+1)*4 > limit {
			return errResult("ERR Insufficient memory, transient memory for LCS exceeds proto-max-bulk-len")
		}
		return lcs(a, b, getLen, getIdx, withMatchLen, minMatchLen)
	})
}

// lcs is lcsCommand's computation and reply.
func lcs(a, b []byte, getLen, getIdx, withMatchLen bool, minMatchLen int64) service.Result {
	alen, blen := len(a), len(b)
	tab := make([]uint32, (alen+1)*(blen+1))
	at := func(i, j int) uint32 { return tab[j+i*(blen+1)] }
	for i := 1; i <= alen; i++ {
		for j := 1; j <= blen; j++ {
			switch {
			case a[i-1] == b[j-1]:
				tab[j+i*(blen+1)] = at(i-1, j-1) + 1
			default:
				tab[j+i*(blen+1)] = max(at(i-1, j), at(i, j-1))
			}
		}
	}
	idx := int(at(alen, blen))
	if getLen && !getIdx {
		return service.Int(int64(idx))
	}
	result := make([]byte, idx)
	var matches []service.Result
	aStart, aEnd, bStart, bEnd := alen, 0, 0, 0 // aStart == alen: no range open
	for i, j := alen, blen; i > 0 && j > 0; {
		emit := false
		if a[i-1] == b[j-1] {
			result[idx-1] = a[i-1]
			if aStart == alen {
				aStart, aEnd, bStart, bEnd = i-1, i-1, j-1, j-1
			} else if aStart == i && bStart == j {
				aStart--
				bStart--
			} else {
				emit = true
			}
			if aStart == 0 || bStart == 0 {
				emit = true
			}
			idx--
			i--
			j--
		} else {
			if at(i-1, j) > at(i, j-1) {
				i--
			} else {
				j--
			}
			if aStart != alen {
				emit = true
			}
		}
		matchLen := int64(aEnd - aStart + 1)
		if emit {
			if getIdx && (minMatchLen == 0 || matchLen >= minMatchLen) {
				m := []service.Result{
					service.Array(service.Int(int64(aStart)), service.Int(int64(aEnd))),
					service.Array(service.Int(int64(bStart)), service.Int(int64(bEnd))),
				}
				if withMatchLen {
					m = append(m, service.Int(matchLen))
				}
				matches = append(matches, service.Array(m...))
			}
			aStart = alen
		}
	}
	if getIdx {
		return asMap(service.Array(
			service.Bytes([]byte("matches")), service.Array(matches...),
			service.Bytes([]byte("len")), service.Int(int64(at(alen, blen))),
		))
	}
	return service.Bytes(result)
}
