package gateway

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/synod-dev/synod/service"
)

// Keyspace notifications (issue 34): CONFIG SET notify-keyspace-events
// with Redis's flags, and the events of the write commands below published
// on __keyspace@0__:<key> (the event as message) and __keyevent@0__:<event>
// (the key as message) through pub/sub (pubsub.go).
//
// Decisions for a replicated setting:
//
//   - Only the node whose gateway served the write publishes its events,
//     once, from the command's reply, and they reach every node's
//     subscribers as any PUBLISH does (at most once). The replicas that
//     apply the same write from the log publish nothing: if each did, a
//     subscriber would get one copy per replica, or, if each delivered only
//     to its own subscribers, a subscriber's events would depend on which
//     node applied first. So the events of one client's writes arrive in the
//     order of its replies; events of writes served by different nodes have
//     no common order (Redis Cluster's events are per node too).
//   - The flag setting belongs to each node, as Redis's does to each
//     process: set it at every node whose clients write.
//   - An event is derived from the reply, as Redis fires it when the
//     command changed something: SADD fires when it added (its reply > 0),
//     EXPIRE when it set a timeout (1), LPOP when it popped (not nil). A
//     multi-key DEL fires "del" for every key when all were deleted and for
//     none otherwise (its reply counts, it does not name the keys).
//   - "expired": a key whose deadline passed is invisible to every
//     operation at once (service/kv_doc.go, "Expiry"); it is removed by the
//     leader's active expiry, an operation the protocol proposes through
//     the log (service.ActiveExpire, protocol/paxos/expiry.go), whose
//     result names the keys it removed, the same at every replica. The
//     node whose replica proposed it, one node, gets that result once
//     (automaton.Announce) and hands it to every node (node/pubsub.go,
//     at most once, as PUBLISH); each node publishes "expired" to its own
//     subscribers only, as its own notify-keyspace-events asks
//     (receiveAnnounce). So the event fires once per key and subscriber,
//     whichever node leads, without the proposing node's setting, and
//     nothing about it enters the log but the sweep the leader made
//     anyway. Redis fires it also when an access finds the key expired
//     (lazy expiry); Synod's reads change nothing and a write that
//     replaces an expired key removes it silently, so the event comes
//     from the sweep, within expiry_period (100 ms by default) of the
//     deadline, and not at all for a key a write replaced first. A
//     leader that fails between applying a sweep and announcing it loses
//     those events (at most once).
//   - Not implemented: "evicted" (Synod evicts nothing), "new" (the reply
//     does not say that the key was new), the
//     "del" that follows a pop which emptied a key, events of writes a
//     script or FUNCTION makes (they run inside the log's Apply at every
//     replica) and the "xtrim" of an XADD that trimmed. The flags x, e, n,
//     t, m and d are accepted and shown by CONFIG GET.
//   - A consumer that XREADGROUP, XCLAIM or XAUTOCLAIM creates, and one
//     XGROUP DELCONSUMER deletes, fire xgroup-createconsumer and
//     xgroup-delconsumer as in Redis; their replies do not say so, so while
//     class t is on the operation carries service.ReportMark and its result
//     names the keys whose group gained or lost the consumer, the same at
//     every replica (consumerEvents). Inside MULTI they fire nothing (the
//     wrapped result would nest deeper than EXEC's reply may).

// Redis's notify-keyspace-events flags (server.h NOTIFY_*).
const (
	nKeyspace = 1 << iota // K
	nKeyevent             // E
	nGeneric              // g
	nString               // $
	nList                 // l
	nSet                  // s
	nHash                 // h
	nZset                 // z
	nExpired              // x
	nEvicted              // e
	nStream               // t
	nKeyMiss              // m
	nModule               // d
	nNew                  // n
	nAll      = nGeneric | nString | nList | nSet | nHash | nZset | nExpired | nEvicted | nStream | nModule
)

var notifyFlagChars = []struct {
	c    byte
	flag int
}{
	{'g', nGeneric}, {'$', nString}, {'l', nList}, {'s', nSet}, {'h', nHash}, {'z', nZset},
	{'x', nExpired}, {'e', nEvicted}, {'t', nStream}, {'d', nModule}, {'n', nNew},
}

// parseNotifyFlags parses the flag string as Redis's keyspaceEventsStringToFlags.
func parseNotifyFlags(s string) (int, error) {
	flags := 0
	for i := 0; i < len(s); i++ {
		switch ch := s[i]; ch {
		case 'A':
			flags |= nAll
		case 'K':
			flags |= nKeyspace
		case 'E':
			flags |= nKeyevent
		case 'm':
			flags |= nKeyMiss
		default:
			found := false
			for _, f := range notifyFlagChars {
				if f.c == ch {
					flags |= f.flag
					found = true
				}
			}
			if !found {
				return 0, fmt.Errorf("Invalid event class character. Use 'Ag$lshzxeKEtmdn'.")
			}
		}
	}
	return flags, nil
}

// notifyFlagsString renders flags as CONFIG GET shows them
// (keyspaceEventsFlagsToString).
func notifyFlagsString(flags int) string {
	var b strings.Builder
	if flags&nAll == nAll {
		b.WriteByte('A')
	} else {
		for _, f := range notifyFlagChars {
			if flags&f.flag != 0 {
				b.WriteByte(f.c)
			}
		}
	}
	if flags&nKeyspace != 0 {
		b.WriteByte('K')
	}
	if flags&nKeyevent != 0 {
		b.WriteByte('E')
	}
	if flags&nKeyMiss != 0 {
		b.WriteByte('m')
	}
	return b.String()
}

// notifySetting is a server's notify-keyspace-events.
type notifySetting struct{ flags atomic.Int64 }

// ksEvent is one event a command fires: its class, its name and the
// argument index of its key (-1: every key of the command, from key 1).
type ksEvent struct {
	class int
	name  string
	key   int
}

// ksRule is a write command's events and when they fire.
type ksRule struct {
	events []ksEvent
	when   func(r service.Result, args [][]byte) bool
}

func always(service.Result, [][]byte) bool       { return true }
func positive(r service.Result, _ [][]byte) bool { return r.Type == service.ResultInt && r.Int > 0 }
func notNil(r service.Result, _ [][]byte) bool {
	return r.Type != service.ResultNil && !(r.Type == service.ResultArray && len(r.Elems) == 0)
}

// everyKeyCounted: the reply counts every key given (DEL, UNLINK).
func everyKeyCounted(r service.Result, args [][]byte) bool {
	return r.Type == service.ResultInt && r.Int == int64(len(args)-1)
}

func ev(class int, name string, key int) []ksEvent { return []ksEvent{{class, name, key}} }

// ksRules maps each write command to its events (Redis 7.0's
// notifyKeyspaceEvent calls, for what a reply can tell).
var ksRules = map[string]ksRule{
	"set":              {ev(nString, "set", 1), notNil},
	"setnx":            {ev(nString, "set", 1), positive},
	"setex":            {[]ksEvent{{nString, "set", 1}, {nGeneric, "expire", 1}}, always},
	"psetex":           {[]ksEvent{{nString, "set", 1}, {nGeneric, "expire", 1}}, always},
	"getset":           {ev(nString, "set", 1), always},
	"mset":             {ev(nString, "set", -2), always},
	"append":           {ev(nString, "append", 1), always},
	"setrange":         {ev(nString, "setrange", 1), always},
	"incr":             {ev(nString, "incrby", 1), always},
	"decr":             {ev(nString, "decrby", 1), always},
	"incrby":           {ev(nString, "incrby", 1), always},
	"decrby":           {ev(nString, "decrby", 1), always},
	"incrbyfloat":      {ev(nString, "incrbyfloat", 1), always},
	"getdel":           {ev(nGeneric, "del", 1), notNil},
	"del":              {ev(nGeneric, "del", -1), everyKeyCounted},
	"unlink":           {ev(nGeneric, "del", -1), everyKeyCounted},
	"expire":           {ev(nGeneric, "expire", 1), positive},
	"pexpire":          {ev(nGeneric, "expire", 1), positive},
	"expireat":         {ev(nGeneric, "expire", 1), positive},
	"pexpireat":        {ev(nGeneric, "expire", 1), positive},
	"persist":          {ev(nGeneric, "persist", 1), positive},
	"rename":           {[]ksEvent{{nGeneric, "rename_from", 1}, {nGeneric, "rename_to", 2}}, always},
	"renamenx":         {[]ksEvent{{nGeneric, "rename_from", 1}, {nGeneric, "rename_to", 2}}, positive},
	"copy":             {ev(nGeneric, "copy_to", 2), positive},
	"lpush":            {ev(nList, "lpush", 1), positive},
	"rpush":            {ev(nList, "rpush", 1), positive},
	"lpushx":           {ev(nList, "lpush", 1), positive},
	"rpushx":           {ev(nList, "rpush", 1), positive},
	"lpop":             {ev(nList, "lpop", 1), notNil},
	"rpop":             {ev(nList, "rpop", 1), notNil},
	"linsert":          {ev(nList, "linsert", 1), positive},
	"lset":             {ev(nList, "lset", 1), always},
	"ltrim":            {ev(nList, "ltrim", 1), always},
	"lrem":             {ev(nList, "lrem", 1), positive},
	"rpoplpush":        {[]ksEvent{{nList, "rpop", 1}, {nList, "lpush", 2}}, notNil},
	"sadd":             {ev(nSet, "sadd", 1), positive},
	"srem":             {ev(nSet, "srem", 1), positive},
	"spop":             {ev(nSet, "spop", 1), notNil},
	"smove":            {[]ksEvent{{nSet, "srem", 1}, {nSet, "sadd", 2}}, positive},
	"hset":             {ev(nHash, "hset", 1), always},
	"hmset":            {ev(nHash, "hset", 1), always},
	"hsetnx":           {ev(nHash, "hset", 1), positive},
	"hdel":             {ev(nHash, "hdel", 1), positive},
	"hincrby":          {ev(nHash, "hincrby", 1), always},
	"hincrbyfloat":     {ev(nHash, "hincrbyfloat", 1), always},
	"zadd":             {ev(nZset, "zadd", 1), positive},
	"zincrby":          {ev(nZset, "zincr", 1), always},
	"zrem":             {ev(nZset, "zrem", 1), positive},
	"zpopmin":          {ev(nZset, "zpopmin", 1), notNil},
	"zpopmax":          {ev(nZset, "zpopmax", 1), notNil},
	"zremrangebyscore": {ev(nZset, "zremrangebyscore", 1), positive},
	"zremrangebyrank":  {ev(nZset, "zremrangebyrank", 1), positive},
	"zremrangebylex":   {ev(nZset, "zremrangebylex", 1), positive},
	"xadd":             {ev(nStream, "xadd", 1), notNil},
	"xdel":             {ev(nStream, "xdel", 1), positive},
	"xtrim":            {ev(nStream, "xtrim", 1), positive},
	"xsetid":           {ev(nStream, "xsetid", 1), always},
	// XGROUP's by subcommand (keyspaceNote): its key is args[2].
	"xgroup|create":         {ev(nStream, "xgroup-create", 2), always},
	"xgroup|setid":          {ev(nStream, "xgroup-setid", 2), always},
	"xgroup|destroy":        {ev(nStream, "xgroup-destroy", 2), positive},
	"xgroup|createconsumer": {ev(nStream, "xgroup-createconsumer", 2), positive},
}

// keyspaceNote returns the function that publishes the events of command
// name with args once its reply is known, or nil when nothing can fire
// (notifications off, or no rule).
func (c *conn) keyspaceNote(name string, args [][]byte) func(service.Result) {
	flags := int(c.s.notify.flags.Load())
	if flags&(nKeyspace|nKeyevent) == 0 {
		return nil
	}
	if name == "xgroup" && len(args) > 1 {
		name += "|" + lower(args[1])
	}
	rule, ok := ksRules[name]
	if !ok {
		return nil
	}
	fire := false
	for _, e := range rule.events {
		fire = fire || flags&e.class != 0
	}
	if !fire {
		return nil
	}
	return func(r service.Result) {
		if r.Type == service.ResultErr || !rule.when(r, args) {
			return
		}
		for _, e := range rule.events {
			if flags&e.class == 0 {
				continue
			}
			switch {
			case e.key == -1: // every argument is a key
				for _, k := range args[1:] {
					c.s.notifyEvent(flags, e.name, string(k))
				}
			case e.key == -2: // key value pairs
				for i := 1; i < len(args); i += 2 {
					c.s.notifyEvent(flags, e.name, string(args[i]))
				}
			case e.key < len(args):
				c.s.notifyEvent(flags, e.name, string(args[e.key]))
			}
		}
	}
}

// AnnounceBackend is a Backend that reports the results of the operations
// a protocol proposes on its own (automaton.Announce), from this node's
// replica and from every other node's.
type AnnounceBackend interface {
	// ReceiveAnnounce registers f, called with each announcement once
	// (from any goroutine; f must not block).
	ReceiveAnnounce(f func(ns string, op service.Op, res service.Result))
}

// receiveAnnounce publishes to this node's subscribers the "expired"
// events of the keys an active expiry removed.
func (s *Server) receiveAnnounce(_ string, op service.Op, res service.Result) {
	if op.Kind != service.ActiveExpireOp || res.Type != service.ResultArray {
		return
	}
	flags := int(s.notify.flags.Load())
	if flags&(nKeyspace|nKeyevent) == 0 || flags&nExpired == 0 {
		return
	}
	for _, k := range res.Elems {
		s.notifyHere(flags, "expired", string(k.Bytes))
	}
}

// notifyHere delivers one event to this node's subscribers only.
func (s *Server) notifyHere(flags int, event, key string) {
	if flags&nKeyspace != 0 {
		s.deliver(psChannel, "__keyspace@0__:"+key, event)
	}
	if flags&nKeyevent != 0 {
		s.deliver(psChannel, "__keyevent@0__:"+event, key)
	}
}

// notifyEvent publishes one event on the channels flags ask for.
func (s *Server) notifyEvent(flags int, event, key string) {
	if flags&nKeyspace != 0 {
		s.publish(psChannel, "__keyspace@0__:"+key, event)
	}
	if flags&nKeyevent != 0 {
		s.publish(psChannel, "__keyevent@0__:"+event, key)
	}
}

// consumerEvents marks p's only operation with service.ReportMark, so that
// its result names the stream keys whose group gained or lost the
// consumer, and publishes event for each of them, when keyspace events of
// class t are on and neither MULTI nor an interactive transaction is open.
func (c *conn) consumerEvents(p plan, event string) plan {
	if c.s == nil || c.multi.open || c.txn.open || len(p.ops) != 1 {
		return p
	}
	flags := int(c.s.notify.flags.Load())
	if flags&(nKeyspace|nKeyevent) == 0 || flags&nStream == 0 {
		return p
	}
	op := p.ops[0]
	op.Args = append(slices.Clip(op.Args), []byte(service.ReportMark))
	p.ops = []service.Op{op}
	p.reported = func(keys []service.Result) {
		for _, k := range keys {
			c.s.notifyEvent(flags, event, string(k.Bytes))
		}
	}
	return p
}

// withConsumerEvents is f's plan with consumerEvents.
func withConsumerEvents(f planFunc, event string) planFunc {
	return func(c *conn, args [][]byte) plan { return c.consumerEvents(f(c, args), event) }
}

// unwrapReport splits a result of an operation marked with
// service.ReportMark into the plain result and the keys it names.
func unwrapReport(r service.Result) (service.Result, []service.Result) {
	if r.Type == service.ResultArray && len(r.Elems) == 2 && r.Elems[0].Type == service.ResultArray {
		return r.Elems[1], r.Elems[0].Elems
	}
	return r, nil
}
