package gateway

import (
	"fmt"
	"regexp"
	"strings"

	"github.com/synod-dev/synod/automaton"
)

// ESDS request options over the Redis protocol (seed 000, chapter 3: every
// operation carries a client-chosen unique id, a set "prev" of ids of
// operations that must precede it, and a flag "strict").
//
//	SYNOD STRICT [on|off]      show or set strict mode for this connection's
//	                           operations (default off)
//	SYNOD PREV [id ...]        with ids: the prev set of the NEXT data command
//	                           (it replaces any pending set); without: show it
//	SYNOD OPID [id]            with an id: the op id of the NEXT data command;
//	                           without: show the pending one (nil if none)
//	SYNOD LASTID               the op id of the last operation this connection
//	                           handed to the node (nil if none)
//
// Choices where the seed and the issue are silent:
//
//   - Op ids. Unless SYNOD OPID set one, the gateway assigns
//     "<client id as 16 hex digits>-<seq>" from the request's RequestID, so a
//     request's op id is fixed by its identity. Ids of that form are reserved
//     for assigned ids: SYNOD OPID (and the gRPC API) refuse them, so a
//     client-chosen id can never collide with an assigned one. An id is 1-256
//     printable ASCII characters without spaces.
//   - "Next data command": PREV and OPID are pending until the next command
//     that runs operations (GET, SET, DEL, MGET, INCR, ..., SYNOD OP), which
//     consumes them whatever its outcome; other commands (PING, SYNOD NS, ...)
//     leave them pending. A multi-key command (MGET, DEL, EXISTS with several
//     keys) runs one operation per key: each carries the prev set; an OPID
//     cannot name several operations, so such a command with an OPID pending
//     is refused (and the pending options are discarded).
//   - LASTID is the id of the operation with the highest sequence number
//     that this connection handed to the backend, whatever its result
//     (errors and unknown outcomes included); operations refused before
//     reaching the backend (bad arguments) do not count. For a multi-key
//     command it is the last key's operation.
//   - Prev sets hold at most 1024 ids. Protocols other than ESDS ignore the
//     three options (their guarantees are at least as strong for operations
//     whose answers the client has already seen).

// MaxOpIDLen bounds an op id; MaxPrevIDs bounds a prev set.
const (
	MaxOpIDLen = 256
	MaxPrevIDs = 1024
)

// AssignedOpID is the op id a gateway assigns to the request id when the
// client chose none.
func AssignedOpID(id automaton.RequestID) string {
	return fmt.Sprintf("%016x-%d", id.Client, id.Seq)
}

var assignedRE = regexp.MustCompile(`^[0-9a-f]{16}-[0-9]+$`)

func checkID(id string) error {
	if id == "" {
		return fmt.Errorf("op id is empty")
	}
	if len(id) > MaxOpIDLen {
		return fmt.Errorf("op id too long (%d bytes, limit %d)", len(id), MaxOpIDLen)
	}
	for i := 0; i < len(id); i++ {
		if id[i] < '!' || id[i] > '~' {
			return fmt.Errorf("op id %q: only printable ASCII characters without spaces are allowed", id)
		}
	}
	return nil
}

// CheckOpID validates a client-chosen op id.
func CheckOpID(id string) error {
	if err := checkID(id); err != nil {
		return err
	}
	if assignedRE.MatchString(id) {
		return fmt.Errorf("op id %q has the form of an assigned id (16 hex digits, '-', a number), which is reserved; choose another", id)
	}
	return nil
}

// CheckPrev validates a prev set.
func CheckPrev(ids []string) error {
	if len(ids) > MaxPrevIDs {
		return fmt.Errorf("prev set too large (%d ids, limit %d)", len(ids), MaxPrevIDs)
	}
	for _, id := range ids {
		if err := checkID(id); err != nil {
			return fmt.Errorf("prev: %w", err)
		}
	}
	return nil
}

// esdsConn is a connection's ESDS state. Only the connection's goroutine
// touches it, except lastSeq and lastID, which run (called concurrently by
// runAll) updates under conn.mu; cur is set before runAll starts goroutines
// and only read by them.
type esdsConn struct {
	strict      bool
	pendingOpID string
	pendingPrev []string
	cur         esdsCmd // the options of the command being executed

	lastSeq uint64
	lastID  string
}

type esdsCmd struct {
	strict bool
	opID   string
	prev   []string
}

func init() {
	synodHelp = append(synodHelp,
		"SYNOD STRICT [on|off] -- Show or set ESDS strict mode for this connection.",
		"SYNOD PREV [id ...] -- Set (or show) the ESDS prev set of the next data command.",
		"SYNOD OPID [id] -- Set (or show) the ESDS op id of the next data command.",
		"SYNOD LASTID -- The op id of this connection's last operation.",
	)
}

// runsOps reports whether a command runs service operations.
func runsOps(cmd *command, args [][]byte) bool {
	if cmd.name == "synod" {
		return len(args) >= 2 && strings.EqualFold(string(args[1]), "op")
	}
	return cmd.first > 0
}

// esdsBegin prepares the ESDS options of the command about to run. It
// answers and returns false when the command must not run.
func (c *conn) esdsBegin(cmd *command, args [][]byte) bool {
	e := &c.esds
	e.cur = esdsCmd{strict: e.strict}
	if !runsOps(cmd, args) {
		return true
	}
	e.cur.opID, e.cur.prev = e.pendingOpID, e.pendingPrev
	e.pendingOpID, e.pendingPrev = "", nil
	if e.cur.opID != "" && cmd.last < 0 && len(args) > 2 {
		c.w.WriteError(fmt.Sprintf("ERR SYNOD OPID names one operation, but %s with %d keys runs one per key; the pending op id and prev set were discarded",
			strings.ToUpper(cmd.name), len(args)-1))
		return false
	}
	return true
}

// esdsOptions returns the options of request id and records it as the
// connection's last operation (the caller hands it to the backend next).
func (c *conn) esdsOptions(read automaton.ReadMode, id automaton.RequestID) automaton.Options {
	cur := c.esds.cur
	o := automaton.Options{Read: read, OpID: cur.opID, Strict: cur.strict}
	if o.OpID == "" {
		o.OpID = AssignedOpID(id)
	}
	if len(cur.prev) > 0 {
		o.Prev = append([]string(nil), cur.prev...)
	}
	c.mu.Lock()
	if id.Seq > c.esds.lastSeq {
		c.esds.lastSeq, c.esds.lastID = id.Seq, o.OpID
	}
	c.mu.Unlock()
	return o
}

// esdsCommand runs the ESDS subcommands of SYNOD; it returns false for any
// other subcommand.
func (c *conn) esdsCommand(sub string, args [][]byte) bool {
	e := &c.esds
	switch sub {
	case "strict":
		switch {
		case len(args) == 2:
			if e.strict {
				c.w.WriteBulkString("on")
			} else {
				c.w.WriteBulkString("off")
			}
		case len(args) > 3:
			c.w.WriteError(arityErr("synod|strict"))
		default:
			switch strings.ToLower(string(args[2])) {
			case "on":
				e.strict = true
			case "off":
				e.strict = false
			default:
				c.w.WriteError(fmt.Sprintf("ERR SYNOD STRICT takes 'on' or 'off', not '%s'", args[2]))
				return true
			}
			c.w.WriteSimple("OK")
		}
	case "prev":
		if len(args) == 2 {
			c.w.WriteArray(len(e.pendingPrev))
			for _, id := range e.pendingPrev {
				c.w.WriteBulkString(id)
			}
			return true
		}
		ids := make([]string, len(args)-2)
		for i, a := range args[2:] {
			ids[i] = string(a)
		}
		if err := CheckPrev(ids); err != nil {
			c.w.WriteError("ERR " + err.Error())
			return true
		}
		e.pendingPrev = ids
		c.w.WriteSimple("OK")
	case "opid":
		switch len(args) {
		case 2:
			if e.pendingOpID == "" {
				c.w.WriteNull()
			} else {
				c.w.WriteBulkString(e.pendingOpID)
			}
		case 3:
			id := string(args[2])
			if err := CheckOpID(id); err != nil {
				c.w.WriteError("ERR " + err.Error())
				return true
			}
			e.pendingOpID = id
			c.w.WriteSimple("OK")
		default:
			c.w.WriteError(arityErr("synod|opid"))
		}
	case "lastid":
		if len(args) != 2 {
			c.w.WriteError(arityErr("synod|lastid"))
			return true
		}
		c.mu.Lock()
		id := e.lastID
		c.mu.Unlock()
		if id == "" {
			c.w.WriteNull()
		} else {
			c.w.WriteBulkString(id)
		}
	default:
		return false
	}
	return true
}
