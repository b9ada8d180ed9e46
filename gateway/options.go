package gateway

import (
	"fmt"
	"sort"
	"strings"
	"sync"

	"github.com/synod-dev/synod/automaton"
)

// Protocol-declared request options over the Redis protocol
// (automaton/options.go). The gateway knows no option by meaning: it asks
// the protocol of the connection's namespace for its specs.
//
//	SYNOD OPT                  list the namespace protocol's options: for each,
//	                           [name, type, scope, value...] (scope "sticky"
//	                           or "next"; values as currently set)
//	SYNOD OPT name             show the option's current value (nil if unset;
//	                           a list shows as an array)
//	SYNOD OPT name value ...   set it: a sticky option for every later command
//	                           of the connection, any other for the next
//	                           command that runs operations (GET, SET, MGET,
//	                           INCR, ..., SYNOD OP), which consumes it whatever
//	                           its outcome; other commands (PING, SYNOD NS,
//	                           ...) leave it pending. A bool takes on|off.
//	SYNOD OPTRESET [name]      unset one option, or all of them
//	SYNOD LASTOPT name         the option's value on the operation with the
//	                           highest sequence number this connection handed
//	                           to the node (assigned values included)
//
// An option with an Assign function (ESDS's op id) gets its assigned value
// when the client set none, before the request reaches the node, so that
// LASTOPT and histories can name it. A PerOperation option (one that names a
// single operation) refuses a command that runs several operations (MGET,
// multi-key DEL); the pending options are then discarded. Changing the
// namespace (SYNOD NS) discards every option, since its meaning belongs to
// the old namespace's protocol.
//
// The eventually-serializable model's options (automaton.OptOpID, OptPrev,
// OptStrict) keep their historical spellings as aliases: SYNOD OPID [id],
// SYNOD PREV [id ...], SYNOD STRICT [on|off] and SYNOD LASTID.

// optConn is a connection's option state. Only the connection's goroutine
// touches it, except last and lastSeq, which run (called concurrently by
// runAll) updates under conn.mu; cur is set before runAll starts goroutines
// and only read by them.
type optConn struct {
	sticky  map[string][]string
	pending map[string][]string
	cur     map[string][]string // the options of the command being executed

	lastSeq  uint64              // of the connection's own client id
	lastLane automaton.RequestID // the last key's request of the multi-key command running (runAll)
	last     map[string][]string
}

func init() {
	synodHelp = append(synodHelp,
		"SYNOD OPT [name [value ...]] -- List, show or set a request option of the namespace's protocol.",
		"SYNOD OPTRESET [name] -- Unset a request option, or all of them.",
		"SYNOD LASTOPT name -- The option's value on this connection's last operation.",
		"SYNOD STRICT|PREV|OPID|LASTID -- Aliases for the eventually-serializable options strict, prev, opid.",
	)
}

// runsOps reports whether a command runs service operations.
func runsOps(cmd *command, args [][]byte) bool {
	if cmd.name == "synod" {
		return len(args) >= 2 && strings.EqualFold(string(args[1]), "op")
	}
	return cmd.first > 0
}

// protocol returns the protocol of the connection's namespace.
func (c *conn) protocol() string {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.ns.Protocol
}

// optBegin prepares the options of the command about to run. It answers
// and returns false when the command must not run.
func (c *conn) optBegin(cmd *command, args [][]byte) bool {
	o := &c.opts
	o.cur = nil
	if !runsOps(cmd, args) {
		return true
	}
	if len(o.sticky) == 0 && len(o.pending) == 0 {
		o.pending = nil
		return true // no options: nothing to merge or refuse (and no map per command)
	}
	cur := map[string][]string{}
	for k, v := range o.sticky {
		cur[k] = v
	}
	for k, v := range o.pending {
		cur[k] = v
	}
	o.pending = nil
	if len(cur) > 0 {
		o.cur = cur
	}
	if cmd.last < 0 && len(args) > 2 {
		proto := c.protocol()
		names := make([]string, 0, len(cur))
		for name := range cur {
			names = append(names, name)
		}
		sort.Strings(names)
		for _, name := range names {
			if spec, err := automaton.FindOption(proto, name); err == nil && spec.PerOperation {
				c.writeError(fmt.Sprintf("ERR option %s names one operation, but %s with %d keys runs one per key; the pending options were discarded",
					name, strings.ToUpper(cmd.name), len(args)-1))
				return false
			}
		}
	}
	return true
}

// requestOptions returns the options of request id (assigned values filled
// in) and records them as the connection's last operation's (the caller
// hands the request to the backend next).
func (c *conn) requestOptions(read automaton.ReadMode, id automaton.RequestID) automaton.Options {
	o := automaton.Options{Read: read}
	for k, v := range c.opts.cur {
		o.Set(k, append([]string(nil), v...))
	}
	o = automaton.AssignOptions(RequestOptionSpecs(c.protocol()), id, o)
	c.mu.Lock()
	switch {
	case id.Client == c.client && id.Seq > c.opts.lastSeq:
		c.opts.lastSeq, c.opts.last = id.Seq, o.Ext
	case id.Client != c.client && id == c.opts.lastLane:
		c.opts.last = o.Ext // a multi-key command's last key (runAll)
	}
	c.mu.Unlock()
	return o
}

// resetOptions drops every option set on the connection.
func (c *conn) resetOptions() {
	c.opts.sticky, c.opts.pending = nil, nil
}

// changedNamespace drops every option and the last operation's: their
// meaning belonged to the old namespace's protocol.
func (c *conn) changedNamespace() {
	c.resetOptions()
	c.multi.watch = nil // the versions belong to the old namespace (multi.go)
	c.mu.Lock()
	c.opts.last, c.opts.lastSeq = nil, 0
	c.mu.Unlock()
}

func (c *conn) setOption(name string, vals []string) error {
	spec, err := automaton.FindOption(c.protocol(), name)
	if err != nil {
		return err
	}
	vals, err = spec.Parse(vals)
	if err != nil {
		return err
	}
	m := &c.opts.pending
	if spec.Sticky {
		m = &c.opts.sticky
	}
	if *m == nil {
		*m = map[string][]string{}
	}
	if vals == nil {
		delete(*m, name)
	} else {
		(*m)[name] = vals
	}
	return nil
}

func (c *conn) optionValue(name string) ([]string, bool) {
	if v, ok := c.opts.pending[name]; ok {
		return v, true
	}
	v, ok := c.opts.sticky[name]
	return v, ok
}

func (c *conn) writeValue(spec automaton.OptionSpec, vals []string, set bool) {
	switch {
	case spec.Type == automaton.OptList:
		c.w.WriteArray(len(vals))
		for _, v := range vals {
			c.w.WriteBulkString(v)
		}
	case spec.Type == automaton.OptBool:
		if set && len(vals) > 0 {
			c.w.WriteBulkString("on")
		} else {
			c.w.WriteBulkString("off")
		}
	case !set || len(vals) == 0:
		c.w.WriteNull()
	default:
		c.w.WriteBulkString(vals[0])
	}
}

// optCommand runs the option subcommands of SYNOD; it returns false for any
// other subcommand.
func (c *conn) optCommand(sub string, args [][]byte) bool {
	strs := func(from int) []string {
		out := make([]string, 0, len(args)-from)
		for _, a := range args[from:] {
			out = append(out, string(a))
		}
		return out
	}
	switch sub {
	case "opt":
		c.optSubcommand(strs(2))
	case "optreset":
		switch len(args) {
		case 2:
			c.resetOptions()
		case 3:
			name := strings.ToLower(string(args[2]))
			if _, err := automaton.FindOption(c.protocol(), name); err != nil {
				c.writeError("ERR " + err.Error())
				return true
			}
			delete(c.opts.pending, name)
			delete(c.opts.sticky, name)
		default:
			c.writeError(arityErr("synod|optreset"))
			return true
		}
		c.w.WriteSimple("OK")
	case "lastopt":
		if len(args) != 3 {
			c.writeError(arityErr("synod|lastopt"))
			return true
		}
		c.writeLast(strings.ToLower(string(args[2])))
	// Aliases of the eventually-serializable model's options.
	case "strict":
		if len(args) > 3 {
			c.writeError(arityErr("synod|strict"))
			return true
		}
		c.optSubcommand(append([]string{automaton.OptStrict}, strs(2)...))
	case "prev":
		c.optSubcommand(append([]string{automaton.OptPrev}, strs(2)...))
	case "opid":
		if len(args) > 3 {
			c.writeError(arityErr("synod|opid"))
			return true
		}
		c.optSubcommand(append([]string{automaton.OptOpID}, strs(2)...))
	case "lastid":
		if len(args) != 2 {
			c.writeError(arityErr("synod|lastid"))
			return true
		}
		c.writeLast(automaton.OptOpID)
	default:
		return false
	}
	return true
}

func (c *conn) optSubcommand(a []string) {
	proto := c.protocol()
	if len(a) == 0 {
		specs := automaton.RequestOptions(proto)
		c.w.WriteArray(len(specs))
		for _, s := range specs {
			vals, _ := c.optionValue(s.Name)
			scope := "next"
			if s.Sticky {
				scope = "sticky"
			}
			c.w.WriteArray(3 + len(vals))
			c.w.WriteBulkString(s.Name)
			c.w.WriteBulkString(s.Type.String())
			c.w.WriteBulkString(scope)
			for _, v := range vals {
				if s.Type == automaton.OptBool {
					v = "on"
				}
				c.w.WriteBulkString(v)
			}
		}
		return
	}
	name := strings.ToLower(a[0])
	spec, err := automaton.FindOption(proto, name)
	if err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	if len(a) == 1 {
		vals, set := c.optionValue(name)
		c.writeValue(spec, vals, set)
		return
	}
	if err := c.setOption(name, a[1:]); err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	c.w.WriteSimple("OK")
}

func (c *conn) writeLast(name string) {
	c.mu.Lock()
	vals, set := c.opts.last[name]
	c.mu.Unlock()
	spec, err := automaton.FindOption(c.protocol(), name)
	if err != nil {
		c.writeError("ERR " + err.Error())
		return
	}
	c.writeValue(spec, vals, set)
}

// optionSpecs caches automaton.RequestOptions by protocol name: a registry
// lookup per request costs more than the rest of the gateway's work on it
// (protocols register at init, so a name's specs do not change).
var optionSpecs sync.Map // protocol name -> []automaton.OptionSpec

// RequestOptionSpecs returns automaton.RequestOptions(proto), cached (the
// gRPC server uses it too).
func RequestOptionSpecs(proto string) []automaton.OptionSpec {
	if v, ok := optionSpecs.Load(proto); ok {
		return v.([]automaton.OptionSpec)
	}
	specs := automaton.RequestOptions(proto)
	optionSpecs.Store(proto, specs)
	return specs
}
