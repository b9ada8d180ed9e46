package service

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"strings"

	"github.com/synod-dev/synod/wire"
)

// DUMP and RESTORE (issue 34) with Redis's own payload (kv_rdb.go):
//
//	dump                         R  bytes | nil
//	restore ttl payload [replace] [absttl] [idletime s] [freq f]
//	                             W  OK (BUSYKEY when the key exists without replace)
//
// A payload dumped by redis-server restores on Synod and one dumped by
// Synod restores on redis-server. RESTORE checks the RDB version (at most
// 10) and the CRC64 as verifyDumpPayload does ("DUMP payload version or
// checksum are wrong"), then loads the object ("Bad data format" when it
// does not). It also accepts the payloads earlier Synod versions dumped
// (the value's canonical encoding, 0xff 'S', the first 8 bytes of its
// SHA-256), so a RESTORE logged before this change replays to the same
// state. IDLETIME and FREQ are checked and ignored (Synod keeps no LRU or
// LFU data). A relative TTL needs the operation's time, as EXPIRE does.

func init() {
	addKVOps(map[string]kvOp{
		"dump":    {read: true, run: (*KVState).opDump},
		"restore": {min: 2, max: 7, check: checkRestore, run: (*KVState).opRestore},
	})
}

// dumpVersion ends the payloads of earlier Synod versions: 0xff 'S'
// cannot end a Redis payload's version (10 for Redis 7.0, little endian).
var dumpVersion = []byte{0xff, 'S'}

func (s *KVState) opDump(op Op) Result {
	e, ok := s.live(op.Key)
	if !ok {
		return Nil()
	}
	return Bytes(redisDump(e))
}

// restoreOpts are RESTORE's options.
type restoreOpts struct {
	replace, absTTL bool
}

func parseRestore(op Op) (restoreOpts, error) {
	var o restoreOpts
	idle, freq := false, false
	a := op.Args[2:]
	for j := 0; j < len(a); j++ {
		more := len(a) - j - 1
		switch w := strings.ToLower(string(a[j])); {
		case w == "replace":
			o.replace = true
		case w == "absttl":
			o.absTTL = true
		case w == "idletime" && more >= 1 && !freq:
			n, ok := parseInt(a[j+1])
			if !ok {
				return o, fmt.Errorf(errNotInt)
			}
			if n < 0 {
				return o, fmt.Errorf("Invalid IDLETIME value, must be >= 0")
			}
			idle = true
			j++
		case w == "freq" && more >= 1 && !idle:
			n, ok := parseInt(a[j+1])
			if !ok {
				return o, fmt.Errorf(errNotInt)
			}
			if n < 0 || n > 255 {
				return o, fmt.Errorf("Invalid FREQ value, must be >= 0 and <= 255")
			}
			freq = true
			j++
		default:
			return o, fmt.Errorf(errSyntax)
		}
	}
	return o, nil
}

func checkRestore(op Op) error {
	_, err := parseRestore(op)
	return err
}

// undump decodes a payload: ok false for a wrong version or checksum,
// err for a payload that checks but does not decode.
func (s *KVState) undump(p []byte) (kvEntry, bool, error) {
	if checkRedisPayload(p) {
		e, err := redisUndump(p, s.tok)
		return e, true, err
	}
	n := len(p) - 8 - len(dumpVersion)
	if n < 1 || !bytes.Equal(p[n:n+len(dumpVersion)], dumpVersion) {
		return kvEntry{}, false, nil
	}
	sum := sha256.Sum256(p[:n+len(dumpVersion)])
	if !bytes.Equal(sum[:8], p[n+len(dumpVersion):]) {
		return kvEntry{}, false, nil
	}
	d := wire.NewDecoder(p[:n])
	e := decodeValue(d, s.tok)
	if d.Err() == nil && len(d.B) != 0 {
		return kvEntry{}, true, fmt.Errorf("trailing bytes")
	}
	return e, true, d.Err()
}

func (s *KVState) opRestore(op Op) Result {
	o, _ := parseRestore(op)
	if _, exists := s.live(op.Key); exists && !o.replace {
		return Errorf("BUSYKEY Target key name already exists.")
	}
	ttl, ok := parseInt(op.Args[0])
	if !ok {
		return Errorf(errNotInt)
	}
	if ttl < 0 {
		return Errorf("Invalid TTL value, must be >= 0")
	}
	e, good, err := s.undump(op.Args[1])
	if !good {
		return Errorf("ERR DUMP payload version or checksum are wrong")
	}
	if err != nil {
		return Errorf("Bad data format")
	}
	if ttl > 0 && !s.timed {
		return Errorf(errNoTime)
	}
	if ttl > 0 && !o.absTTL {
		ttl += s.now
	}
	if _, exists := s.m[op.Key]; exists && o.replace {
		s.del(op.Key)
	}
	if ttl > 0 && ttl <= s.now {
		return OK()
	}
	e.exp = ttl
	s.put(op.Key, e)
	return OK()
}
