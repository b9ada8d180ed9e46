package gateway

import (
	"strconv"
	"sync"
	"time"
)

// ACL LOG (issue 34): the node's refusals, as Redis's ACL LOG shows a
// server's. Synod refuses a login (a wrong password, an unknown user, a
// client certificate naming no configured user: reason "auth", object
// "AUTH") and a request the user's namespace access does not allow (a
// write by a read-only user: reason "command", object the command; Synod
// has no key or channel rules, so no "key" or "channel" entries). Entries
// are grouped as Redis 7.0's ACLAddLogEntry groups them: the same reason,
// context, object and user within 60 s count once more; the newest is
// first, at most 128 are kept (acllog-max-len's default). Each node keeps
// its own, as each Redis server does.

const (
	aclLogMax   = 128
	aclLogGroup = 60 * time.Second
)

type aclLogEntry struct {
	count                                    int64
	reason, context, object, user, clientInf string
	created, updated                         time.Time
}

type aclLog struct {
	mu      sync.Mutex
	entries []*aclLogEntry // newest first
}

// add records one refusal.
func (l *aclLog) add(reason, context, object, user, clientInfo string) {
	now := time.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, e := range l.entries {
		if e.reason == reason && e.context == context && e.object == object && e.user == user && now.Sub(e.updated) < aclLogGroup {
			e.count++
			e.updated, e.clientInf = now, clientInfo
			copy(l.entries[1:i+1], l.entries[:i])
			l.entries[0] = e
			return
		}
	}
	e := &aclLogEntry{count: 1, reason: reason, context: context, object: object, user: user, clientInf: clientInfo, created: now, updated: now}
	l.entries = append([]*aclLogEntry{e}, l.entries...)
	if len(l.entries) > aclLogMax {
		l.entries = l.entries[:aclLogMax]
	}
}

// logRefusal records a refusal of c's.
func (c *conn) logRefusal(reason, object, user string) {
	context := "toplevel"
	c.mu.Lock()
	if c.lastCmd == "exec" {
		context = "multi"
	}
	c.mu.Unlock()
	c.s.acllog.add(reason, context, object, user, c.infoLine(0, false))
}

// cmdACLLog is ACL LOG [count | RESET].
func cmdACLLog(c *conn, args [][]byte) {
	l := &c.s.acllog
	n := int64(10)
	switch {
	case len(args) == 2:
	case len(args) == 3 && lower(args[2]) == "reset":
		l.mu.Lock()
		l.entries = nil
		l.mu.Unlock()
		c.w.WriteSimple("OK")
		return
	case len(args) == 3:
		v, err := strconv.ParseInt(string(args[2]), 10, 64)
		if err != nil || v < 0 {
			c.writeError("ERR value is out of range, must be positive")
			return
		}
		n = v
	default:
		c.writeError("ERR syntax error")
		return
	}
	l.mu.Lock()
	entries := l.entries[:min(int64(len(l.entries)), n)]
	copies := make([]aclLogEntry, len(entries))
	for i, e := range entries {
		copies[i] = *e
	}
	l.mu.Unlock()
	c.w.WriteArray(len(copies))
	now := time.Now()
	for _, e := range copies {
		c.w.WriteMap(7)
		c.w.WriteBulkString("count")
		c.w.WriteInt(e.count)
		for _, kv := range [][2]string{{"reason", e.reason}, {"context", e.context}, {"object", e.object}, {"username", e.user}} {
			c.w.WriteBulkString(kv[0])
			c.w.WriteBulkString(kv[1])
		}
		c.w.WriteBulkString("age-seconds")
		c.w.WriteDouble([]byte(strconv.FormatFloat(now.Sub(e.updated).Seconds(), 'f', 3, 64)))
		c.w.WriteBulkString("client-info")
		c.w.WriteBulkString(e.clientInf)
	}
}
