package service

import (
	"cmp"
	"fmt"
	"math"
	"slices"
	"strings"

	"github.com/synod-dev/synod/shard"
)

// Expiry (package documentation, "Expiry" and "Which protocols"): deadlines
// are Unix milliseconds in the state; the state's clock is the largest Env
// time of the writes it applied; a key whose deadline is at or before the
// operation's time does not exist for it.

func init() {
	addKVOps(map[string]kvOp{
		"expire":       {min: 1, max: -1, check: checkExpire, run: (*KVState).opExpire},
		"pexpire":      {min: 1, max: -1, check: checkExpire, run: (*KVState).opExpire},
		"expireat":     {min: 1, max: -1, check: checkExpire, run: (*KVState).opExpire},
		"pexpireat":    {min: 1, max: -1, check: checkExpire, run: (*KVState).opExpire},
		"ttl":          {read: true, run: (*KVState).opTTL},
		"pttl":         {read: true, run: (*KVState).opTTL},
		"expiretime":   {read: true, run: (*KVState).opTTL},
		"pexpiretime":  {read: true, run: (*KVState).opTTL},
		"persist":      {run: (*KVState).opPersist},
		ActiveExpireOp: {min: 1, max: 1, check: checkActiveExpire, keyspace: true, run: (*KVState).opActiveExpire},
	})
}

// ActiveExpireOp is the kind of the internal operation a protocol's active
// expiry proposes (protocol/paxos/expiry.go, protocol/pbpaxos/expiry.go):
// "activeexpire limit" removes at most limit keys whose deadline has
// passed at the operation's time, earliest deadline first (but keys in a
// slot a writing cross-shard transaction holds: its commit applies its
// operations at its prepare's time, when they were live; kv_txn.go), and answers
// their names in that order (an array of bulk strings), the same at every
// replica: the proposing node publishes them as Redis's "expired"
// keyspace events (automaton.Announce, gateway/notify.go).
const ActiveExpireOp = "activeexpire"

// ActiveExpire returns the active expiry operation removing at most limit
// keys.
func ActiveExpire(limit int) Op {
	return Op{Kind: ActiveExpireOp, Args: [][]byte{fmt.Appendf(nil, "%d", limit)}}
}

// checkActiveExpire refuses a limit that is not a number of keys (a
// negative one sliced the due keys at a negative length: every replica
// applying it panicked; FuzzKVApply found it, crasher kept in testdata).
func checkActiveExpire(op Op) error {
	if n, ok := parseInt(op.Args[0]); !ok || n < 0 {
		return fmt.Errorf(errNotInt)
	}
	return nil
}

// errNoTime refuses a deadline where operations carry no time.
const errNoTime = "expiry needs a protocol that orders time (paxos, pbpaxos, pb, unreplicated)"

// TimedService is implemented by deterministic services whose operations
// read Env.Time (KV's expiry). A protocol that logs the environment for
// nondeterministic services logs it for these too (UsesEnv), chosen by the
// leader, so that replicas agree on the time.
type TimedService interface {
	UsesTime() bool
}

// UsesTime implements TimedService.
func (KV) UsesTime() bool { return true }

// UsesTime reports whether svc's operations read the time.
func UsesTime(svc Service) bool {
	t, ok := svc.(TimedService)
	return ok && t.UsesTime()
}

// UsesEnv reports whether svc's operations read their environment: a
// protocol must then make the replicas use the same one.
func UsesEnv(svc Service) bool { return IsNondeterministic(svc) || UsesTime(svc) }

// ExpiringState is a state with deadlines: its clock and its earliest
// deadline tell a leader when to propose ActiveExpire.
type ExpiringState interface {
	// Clock is the largest time (Unix ms) of the writes applied.
	Clock() int64
	// NextDeadline is the earliest deadline (Unix ms) of a key, ok false
	// when no key has one.
	NextDeadline() (int64, bool)
}

// Clock implements ExpiringState.
func (s *KVState) Clock() int64 { return s.clock }

// NextDeadline implements ExpiringState. O(keys with a deadline).
func (s *KVState) NextDeadline() (int64, bool) {
	first, ok := int64(0), false
	for _, d := range s.exps {
		if !ok || d < first {
			first, ok = d, true
		}
	}
	return first, ok
}

// ttlArg is an expiry argument: EX/PX (relative) or EXAT/PXAT (absolute),
// already in milliseconds.
type ttlArg struct {
	ms  int64
	abs bool
}

// parseTTL reads the number after an EX, PX, EXAT or PXAT option of cmd.
func parseTTL(unit string, b []byte, cmd string) (ttlArg, error) {
	n, ok := parseInt(b)
	if !ok {
		return ttlArg{}, fmt.Errorf(errNotInt)
	}
	bad := fmt.Errorf("invalid expire time in '%s' command", cmd)
	if n <= 0 {
		return ttlArg{}, bad
	}
	t := ttlArg{ms: n, abs: strings.HasSuffix(unit, "at")}
	if !strings.HasPrefix(unit, "p") {
		if n > math.MaxInt64/1000 {
			return ttlArg{}, bad
		}
		t.ms = n * 1000
	}
	return t, nil
}

// deadline is the absolute deadline at time now.
func (t ttlArg) deadline(now int64) (int64, error) {
	if t.abs {
		return t.ms, nil
	}
	if t.ms > math.MaxInt64-now {
		return 0, fmt.Errorf("invalid expire time")
	}
	return now + t.ms, nil
}

// reap removes key when it has expired at the operation's time (Redis's
// lazy expiry, done by writes only: a read changes nothing).
func (s *KVState) reap(key string) {
	if e, ok := s.m[key]; ok && e.exp != 0 && e.exp <= s.now {
		s.del(key)
	}
}

// expireIfDue removes key at once when a write gave it a deadline that
// has already passed (SET EXAT in the past; Redis deletes it).
func (s *KVState) expireIfDue(key string) { s.reap(key) }

// expireFlags are EXPIRE's NX, XX, GT and LT.
type expireFlags struct{ nx, xx, gt, lt bool }

func parseExpire(op Op) (ttlArg, expireFlags, error) {
	var f expireFlags
	unit := map[string]string{"expire": "ex", "pexpire": "px", "expireat": "exat", "pexpireat": "pxat"}[op.Kind]
	n, ok := parseInt(op.Args[0])
	if !ok {
		return ttlArg{}, f, fmt.Errorf(errNotInt)
	}
	for _, a := range op.Args[1:] {
		switch strings.ToLower(string(a)) {
		case "nx":
			f.nx = true
		case "xx":
			f.xx = true
		case "gt":
			f.gt = true
		case "lt":
			f.lt = true
		default:
			return ttlArg{}, f, fmt.Errorf("Unsupported option %s", a)
		}
	}
	switch {
	case f.nx && (f.xx || f.gt || f.lt):
		return ttlArg{}, f, fmt.Errorf("ERR NX and XX, GT or LT options at the same time are not compatible")
	case f.gt && f.lt:
		return ttlArg{}, f, fmt.Errorf("ERR GT and LT options at the same time are not compatible")
	}
	t := ttlArg{ms: n, abs: strings.HasSuffix(unit, "at")}
	if !strings.HasPrefix(unit, "p") {
		if n > math.MaxInt64/1000 || n < math.MinInt64/1000 {
			return t, f, fmt.Errorf("invalid expire time in '%s' command", op.Kind)
		}
		t.ms = n * 1000
	}
	return t, f, nil
}

func checkExpire(op Op) error {
	_, _, err := parseExpire(op)
	return err
}

// opExpire is EXPIRE, PEXPIRE, EXPIREAT and PEXPIREAT: 1 when the deadline
// was set (or the key deleted because it has passed), 0 when there is no
// key or a condition failed. A non-volatile key counts as an infinite TTL
// for GT and LT, as in Redis.
func (s *KVState) opExpire(op Op) Result {
	if !s.timed {
		return Errorf(errNoTime)
	}
	t, f, _ := parseExpire(op)
	e, ok := s.m[op.Key]
	if !ok {
		return Int(0)
	}
	d := t.ms
	if !t.abs {
		if (d > 0 && s.now > math.MaxInt64-d) || (d < 0 && s.now < math.MinInt64-d) {
			return Errorf("invalid expire time in '%s' command", op.Kind)
		}
		d += s.now
	}
	switch {
	case f.nx && e.exp != 0, f.xx && e.exp == 0,
		f.gt && (e.exp == 0 || d <= e.exp), f.lt && e.exp != 0 && d >= e.exp:
		return Int(0)
	}
	if d <= s.now {
		s.del(op.Key)
		return Int(1)
	}
	e.exp = d
	s.put(op.Key, e)
	return Int(1)
}

// opTTL is TTL, PTTL, EXPIRETIME and PEXPIRETIME: -2 without a key, -1
// without a deadline. TTL rounds to the nearest second as Redis does.
func (s *KVState) opTTL(op Op) Result {
	e, ok := s.live(op.Key)
	switch {
	case !ok:
		return Int(-2)
	case e.exp == 0:
		return Int(-1)
	}
	switch op.Kind {
	case "ttl":
		return Int((e.exp - s.now + 500) / 1000)
	case "pttl":
		return Int(e.exp - s.now)
	case "expiretime":
		return Int(e.exp / 1000)
	}
	return Int(e.exp)
}

func (s *KVState) opPersist(op Op) Result {
	e, ok := s.m[op.Key]
	if !ok || e.exp == 0 {
		return Int(0)
	}
	e.exp = 0
	s.put(op.Key, e)
	return Int(1)
}

// opActiveExpire removes up to limit keys whose deadline has passed,
// earliest deadline first (ties by key), so every replica removes the
// same keys in the same order, and answers the keys it removed.
func (s *KVState) opActiveExpire(op Op) Result {
	limit, _ := parseInt(op.Args[0])
	type due struct {
		k string
		d int64
	}
	var ds []due
	_, locks := s.m[shard.PreparedKey]
	for k, d := range s.exps {
		if d <= s.now && !(locks && s.writeLocked(k)) {
			ds = append(ds, due{k, d})
		}
	}
	slices.SortFunc(ds, func(a, b due) int {
		if a.d != b.d {
			return cmp.Compare(a.d, b.d)
		}
		return strings.Compare(a.k, b.k)
	})
	if int64(len(ds)) > limit {
		ds = ds[:limit]
	}
	keys := make([]Result, len(ds))
	for i, x := range ds {
		s.del(x.k)
		keys[i] = Bytes([]byte(x.k))
	}
	return Array(keys...)
}
