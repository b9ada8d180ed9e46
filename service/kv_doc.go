// # The KV data model (issue 17 items 2 to 4)
//
// One keyspace per namespace. A key holds one value of one type: a string,
// a hash, a list, a set, a sorted set or a stream (Redis's types). An operation on a key of another type answers
// the error WRONGTYPE exactly as Redis words it:
//
//	WRONGTYPE Operation against a key holding the wrong kind of value
//
// Other errors are worded as Redis words them, without the "ERR " prefix
// (the gateway adds it to every error that does not start with an upper-case
// code: WRONGTYPE, GUARDFAILED).
//
// # Operations
//
// This table is the contract with the gateway (gateway/commands.go maps
// every supported Redis command onto exactly these names). Op.Kind is the
// name, Op.Key the key, Op.Args the listed arguments as byte strings.
// Options are lower-case words; numbers are decimal text as Redis takes
// them. R marks a read (IsRead), W a write. Result shapes: int, bytes, nil,
// OK, array (service.ResultArray; "pairs" means a flat array of field,
// value, field, value, ...). A key whose value became empty (last field,
// element or member removed) is deleted, as in Redis.
//
// Register subset (the only operations ABD and the blocking protocol run,
// unchanged from before):
//
//	get                          R  bytes | nil                      WRONGTYPE
//	exists                       R  int 0/1
//	set value [nx|xx]            W  OK | nil (condition failed)
//	del                          W  int 0/1
//
// Strings:
//
//	set value [nx|xx] [get] [keepttl | ex s | px ms | exat s | pxat ms]
//	                             W  OK | nil; with get: the old value | nil
//	                                (WRONGTYPE when get meets a non-string;
//	                                SETEX/PSETEX are set ... ex/px)
//	getset value                 W  old bytes | nil (clears the TTL)
//	getdel                       W  bytes | nil
//	getex [ex s|px ms|exat s|pxat ms|persist]
//	                             W  bytes | nil (a write: it may change the TTL)
//	append suffix                W  int length
//	incr delta                   W  int (INCR, DECR, INCRBY, DECRBY: delta signed)
//	incrbyfloat delta            W  bytes (the new value, Redis's formatting)
//	strlen                       R  int
//	getrange start end           R  bytes ("" when out of range)
//	setrange offset value        W  int length (zero-padded)
//	cas expected new             W  int 1/0 (Synod's own)
//	unlink                       W  = del
//
// MSET is an atomic group of set operations; MSETNX is the atomic group
// [guard k1 exists 0, guard k2 exists 0, ..., set k1 v1, set k2 v2, ...]:
// a failed guard (the gateway answers 0) applies nothing. Both need a
// protocol that applies groups atomically (TxnSupport Atomic); elsewhere
// MSET is separate sets and MSETNX is refused.
//
// Keys (Op.Key "" for the keyspace-wide ones):
//
//	type                         R  bytes "string"|"hash"|"list"|"set"|"zset"|"none"
//	                                (the gateway renders it as a status reply)
//	rename newkey                W  OK | error "no such key" (TTL moves with the value)
//	renamenx newkey              W  int 1/0 | error "no such key"
//	keys pattern [served] (Key "")  R  array of keys, sorted (glob as Redis: * ? [a-z] [^a] \x)
//	scan cursor [match p] [count n] [type t] [slots FIRST-LAST]  (Key "")
//	                             R  array [bytes next-cursor, array of keys]
//	dbsize [served] (Key "")     R  int
//	randomkey [served] (Key "")  R  bytes | nil
//	flushdb [served] (Key "")    W  OK (FLUSHALL is the same: one database)
//	                                (served, and scan's slots: a shard group's part of a
//	                                sharded namespace's answer, the keys it serves; kv_served.go)
//	dbinfo          (Key "")     R  array [int keys, int expires, int avg_ttl_ms]
//	                                (INFO keyspace: db0:keys=..,expires=..,avg_ttl=..)
//	memusage                     R  int estimated bytes | nil (MEMORY USAGE: key,
//	                                canonical value encoding, 48 bytes per key)
//	version                      R  int: the key's write version (WATCH)
//	guard version v              R  OK | GUARDFAILED (the key's version is not v)
//	guard exists 0|1             R  OK | GUARDFAILED
//
// Expiry (deadlines in Unix milliseconds, see "Expiry" below):
//
//	expire s [nx|xx|gt|lt ...]   W  int 1/0 (XX with GT or LT allowed, as in Redis)
//	pexpire ms [nx|xx|gt|lt]     W  int 1/0
//	expireat s [nx|xx|gt|lt]     W  int 1/0
//	pexpireat ms [nx|xx|gt|lt]   W  int 1/0
//	ttl                          R  int seconds (-2 no key, -1 no TTL; rounded as Redis)
//	pttl                         R  int ms (-2, -1)
//	expiretime                   R  int Unix s (-2, -1)
//	pexpiretime                  R  int Unix ms (-2, -1)
//	persist                      W  int 1/0
//	activeexpire limit (Key "")  W  int keys removed: internal, proposed by the
//	                                protocols' active expiry (not for clients)
//
// Hashes:
//
//	hset field value [field value ...]    W  int fields added (HMSET: OK, gateway-side)
//	hsetnx field value           W  int 1/0
//	hget field                   R  bytes | nil
//	hmget field [field ...]      R  array of bytes | nil
//	hdel field [field ...]       W  int removed
//	hgetall                      R  pairs, sorted by field
//	hkeys / hvals                R  array, in field order
//	hlen                         R  int
//	hexists field                R  int 1/0
//	hstrlen field                R  int
//	hincrby field delta          W  int
//	hincrbyfloat field delta     W  bytes
//
// Lists (indexes as Redis: negative from the end):
//
//	lpush elem [elem ...]        W  int length (rpush, lpushx, rpushx alike;
//	                                the x forms answer 0 on a missing key)
//	lpop [count] / rpop [count]  W  bytes | nil; with count: array | nil
//	lrange start stop            R  array
//	llen                         R  int
//	lindex index                 R  bytes | nil
//	lset index elem              W  OK | error "no such key" | "index out of range"
//	lrem count elem              W  int removed (count>0 from the head, <0 from the tail, 0 all)
//	ltrim start stop             W  OK
//	linsert before|after pivot elem
//	                             W  int length | -1 (no pivot) | 0 (no key)
//
// Sets (members listed in byte order, so every replica answers alike):
//
//	sadd member [member ...]     W  int added
//	srem member [member ...]     W  int removed
//	smembers                     R  array
//	sismember member             R  int 1/0
//	smismember member [...]      R  array of int
//	scard                        R  int
//	spop [count]                 W  bytes | nil; with count: array
//	srandmember [count]          R  bytes | nil; with count: array (count<0 may repeat)
//	sinter / sunion / sdiff [key ...]
//	                             R  array: the first key is Op.Key, the others
//	                                Args; one operation, so one consistent cut
//
// Sorted sets (scores are float64, formatted as Redis 7.0 does, printf's
// %.17g: "3.5", "0.10000000000000001", "1e+20", "inf", "-inf"):
//
//	zadd [nx|xx] [gt|lt] [ch] [incr] score member [score member ...]
//	                             W  int added (changed with ch); with incr:
//	                                bytes new score | nil (condition failed)
//	zrem member [member ...]     W  int removed
//	zscore member                R  bytes | nil
//	zmscore member [...]         R  array of bytes | nil
//	zincrby delta member         W  bytes
//	zcard                        R  int
//	zcount min max               R  int (min/max as Redis: -inf, +inf, (1.5 exclusive)
//	zrank member [withscore] / zrevrank member [withscore]
//	                             R  int | nil; withscore (Redis 7.2): [int, score]
//	zrange start stop [byscore|bylex] [rev] [limit offset count] [withscores]
//	                             R  array (withscores: member, score pairs);
//	                                ZRANGEBYSCORE, ZREVRANGE, ZREVRANGEBYSCORE
//	                                and ZRANGEBYLEX are zrange with options
//	zpopmin [count] / zpopmax [count]
//	                             W  pairs
//
// More (kv_more.go; each one operation, so atomic wherever it runs; the
// second key is declared for locks and lazy expiry):
//
//	copy dst [replace]           W  int 1/0 (value and deadline; error when dst = key)
//	smove dst member             W  int 1/0
//	setstore sinter|sunion|sdiff key [key ...]   (Op.Key the destination)
//	                             W  int size (the destination is replaced; deleted when empty)
//	sintercard limit [key ...]   R  int (the first key is Op.Key; limit 0: none)
//	lmove dst left|right left|right
//	                             W  bytes | nil (RPOPLPUSH is right left)
//	lpos elem [rank r] [count n] [maxlen m]
//	                             R  int | nil; with count: array of int
//	hrandfield [count [withvalues]]
//	                             R  bytes | nil | array (random from the Env, as srandmember;
//	                                a count below -2^20 is refused: out of range)
//	zremrange start stop [byscore|bylex]
//	                             W  int removed (what zrange with the same arguments selects)
//
// Pops over several keys (kv_block.go; LMPOP, ZMPOP and the blocking
// commands, which the gateway repeats while blocked; wait "1" counts a key
// of another type as empty instead of answering WRONGTYPE):
//
//	lmpop wait left|right count [key ...]   W  [key, [elem ...]] | nil
//	zmpop wait min|max count [key ...]      W  [key, [member, score, ...]] | nil
//	blmove wait dst left|right left|right   W  bytes | nil (nil, not WRONGTYPE, for an empty source)
//	bready list|zset [key ...]              R  int 1 when a key holds a non-empty list (zset)
//
// Bits, HyperLogLog and SORT (issue 34; each one operation, so atomic
// wherever it runs): kv_bits.go (bitcount, bitpos, bitop, bitfield,
// bitfield_ro), kv_hll.go (pfadd, pfcount, pfmerge, pfdebug: Redis's HLL
// encoding byte for byte), kv_sort.go (sort, sortstore, and the sortkeys
// kinds for BY/GET patterns that read other keys), kv_geo.go (geopos,
// geohash, geodist, geosearch, geostore: Redis's geohash scores, cell scan
// and haversine), kv_function.go (fnload, fndelete, fnflush, fnlist,
// fndump, fnrestore: the replicated function library table); each file's
// comment lists its operations and decisions.
//
// Streams (issue 34; each command one operation, ported from Redis 7.0.15's
// t_stream.c): kv_stream.go (xadd, xrange, xrevrange, xlen, xdel, xtrim,
// xsetid, xread, xlastid, xinfo; the stream's nodes, the time of XADD *)
// and kv_stream_group.go (xgroup, xreadgroup, xack, xpending, xclaim,
// xautoclaim, xready); the files' comments list the arguments, results and
// decisions. A stream that became empty stays, as in Redis.
//
// # Choices (the seeds are silent on all of this; Redis is the reference)
//
// Randomness. SPOP, SRANDMEMBER and RANDOMKEY pick deterministically: SPOP
// (a write, which every replica must apply alike) from the state's write
// counter, the reads from the operation's Env (any answer is a valid
// random pick). KV stays a deterministic service.
//
// SCAN's cursor. A key's scan position is a 62-bit hash of the key (the
// Merkle leaf hash, FNV-1a 64 finalised by fmix64, its low 62 bits). A
// call with cursor c examines the keys whose position is at least c, in
// position order (ties by key), COUNT of them (default 10) and every key
// sharing the last one's position, filters them by MATCH and TYPE (so a
// page may be empty, as in Redis), and answers the last position plus one
// as the next cursor, or 0 when no key is left. The pages of one scan cover
// disjoint, contiguous ranges of positions, and a key's position never
// changes, so every key present for the whole scan is returned exactly
// once, whatever is written meanwhile, on any replica (Redis promises at
// least once). A page costs O(n) (the keyspace is filtered, not indexed).
//
// Per-key versions (WATCH). A present key carries a generation: at every
// write to it, its previous generation plus one; at its creation, its
// absent version plus one. Its version is its generation (plus one once it
// has expired, before its removal). A deletion (DEL, expiry, RENAME's
// source, an emptied collection) remembers the deleted key's version, its
// generation plus one, in a map of at most DefaultTombstones entries. An
// absent key's version is the larger of its remembered version and gone.
// When the map would outgrow its bound it is flushed whole: gone takes the
// largest remembered version and the map empties (a flush depends only on
// the history, so every replica flushes at the same operation; an
// oldest-first eviction would depend on the order in which a replica learnt
// the deletions, through a delta or its own log). FLUSHDB raises gone above
// every key's version and flushes. Nothing grows with deleted keys beyond
// the bound, and a key's version depends only on its own history until a
// flush, so snapshots of states reached in different orders stay equal.
//
// Proof that a guard cannot pass a changed key: version(k) never decreases
// and grows at every change of k. A write to a present key adds one. An
// expiry adds one (gen to gen+1), and the removal then keeps it (the
// remembered version is gen+1). A deletion moves it from gen to
// max(gen+1, gone) > gen. While k is absent, a flush moves it from
// max(w, gone) to the new gone, which is at least w and the old gone, and
// FLUSHDB only raises gone. A re-creation moves it from the absent version
// a to a+1. So if WATCH read v = version(k) and k changed afterwards,
// version(k) > v at the guard, and the guard fails. A guard may fail
// without a change of k (a flush while k was absent raised gone): a retry,
// never a lost update. Generations, remembered versions and gone travel in
// snapshots, deltas (with the sender's last flush) and range exports, so
// every replica answers a guard alike.
//
// Expiry. Deadlines (Unix ms) are part of the state. Time comes only from
// the operation's service.Env: KV states implement EnvApplier. The state
// keeps a clock, the largest Env.Time of any write it has applied; a write
// first advances the clock to its Env.Time (never back), then evaluates
// expiry at the clock; a read evaluates at the clock without changing it.
// So expiry is a function of the applied sequence: replicas that apply the
// same log agree on what expired, and time never runs backwards for a
// client even when the leaders' clocks disagree. An expired key met by a
// write is deleted then (Redis's lazy expiry); keys nobody touches are
// deleted by activeexpire, which the log-based protocols (paxos, pbpaxos:
// their expiry.go) propose every expiry period while the leader's clock
// has passed the earliest deadline.
//
// Which protocols. KV is declared deterministic, so ABD, ESDS and the
// blocking protocol accept its register subset. Operations reach a state
// without an environment there (State.Apply, a zero Env): time is unknown,
// and every operation that sets a deadline (set ex/px/exat/pxat, expire,
// pexpire, expireat, pexpireat, getex with a TTL) is refused with "expiry
// needs a protocol that orders time (paxos, pbpaxos, pb, unreplicated)";
// no key has a deadline there, so nothing expires and TTL answers -1. A
// protocol whose replicas each apply with their own Env would let clocks
// decide differently per replica; Synod's only such protocols do not pass
// an Env. Multi-Paxos and PB-Paxos put the leader's Env into the log entry
// (service.UsesTime), primary-backup ships the primary's resulting state,
// and the unreplicated server has one clock. The clock assumption: a key
// expires when the leader's clock passes its deadline; clock skew between
// nodes moves the moment, never the agreement.
//
// Cost. A collection is changed in place by the state that owns it (a
// clone's first write copies it: O(size) once). HSET, SADD, SREM, HDEL:
// O(fields written); ZADD, ZREM: O(log n) search plus an O(n) slice
// insertion; LPUSH O(n) (the list is a slice), RPUSH, LPOP, RPOP O(1)
// amortised; LRANGE, ZRANGE by rank O(returned); ZRANGE by score or lex,
// ZCOUNT O(n); SCAN, KEYS, DBSIZE, RANDOMKEY O(keys) per call. With a
// Merkle tree, a collection's entry hash covers its whole canonical
// encoding (sorted fields): it is taken once per StateHash for each
// collection written since, not per write (BenchmarkKVTypedWrites: HSET
// on a 1000-field hash, hashed every 64 writes, about 3 µs a write). A
// delta carries each changed collection whole.
//
// Snapshots (format 3) carry types, generations, deadlines, the clock,
// gone and the remembered versions of deleted keys; formats 1 and 2
// (strings only) still restore (generation 1 each). Deltas (format 2) carry the same per key. Merkle entry hashes:
// a string without a deadline hashes as before (EntryHash of its bytes),
// every other value by SHA-256 over a distinct tag, its type, deadline and
// canonical encoding (elements in order), so no string collides with a
// typed value.
package service
