package gateway

import (
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/synod-dev/synod/service"
)

// Server commands that read no replicated state: TIME (the node's own
// clock, as each Redis server answers its own; never applied through a
// log, so replicated state stays deterministic) and FUNCTION (Synod runs
// no functions: FLUSH empties the empty library, LIST and STATS show it;
// LOAD, DELETE, DUMP, RESTORE and KILL are refused naming why).

func init() {
	register("server",
		keyless("time", 1, []string{"random", "loading", "stale", "fast"}, planTime),
	)
	register("scripting",
		&command{name: "function", arity: -2, flags: []string{"noscript"}, fn: cmdFunction},
	)
}

// planTime answers [seconds, microseconds] of the node's clock when the
// reply is rendered (inside MULTI: at EXEC, as Redis).
func planTime(c *conn, args [][]byte) plan {
	return plan{reply: func([]service.Result) service.Result {
		now := time.Now()
		return service.Array(
			service.Bytes([]byte(strconv.FormatInt(now.Unix(), 10))),
			service.Bytes([]byte(strconv.Itoa(now.Nanosecond()/1000))),
		)
	}}
}

// cmdFunction is FUNCTION subcommand [args]: Synod has no function library
// (Lua is not run), so the library is always empty.
func cmdFunction(c *conn, args [][]byte) {
	sub := strings.ToLower(string(args[1]))
	switch sub {
	case "flush":
		if len(args) > 3 || (len(args) == 3 && lower(args[2]) != "async" && lower(args[2]) != "sync") {
			c.writeError("ERR FUNCTION FLUSH only supports SYNC|ASYNC option")
			return
		}
		c.w.WriteSimple("OK")
	case "list":
		c.w.WriteArray(0)
	case "load", "delete", "dump", "restore", "kill", "stats":
		c.writeError(fmt.Sprintf("ERR FUNCTION %s is not supported: Synod does not run Lua functions (its function library is always empty)", strings.ToUpper(sub)))
	case "help":
		c.w.WriteArray(3)
		c.w.WriteSimple("FUNCTION FLUSH [ASYNC|SYNC]: remove every function (Synod's library is always empty).")
		c.w.WriteSimple("FUNCTION LIST: list the functions (none).")
		c.w.WriteSimple("Synod does not run Lua functions: LOAD, DELETE, DUMP, RESTORE, STATS and KILL are refused.")
	default:
		c.writeError(fmt.Sprintf("ERR unknown subcommand '%s'. Try FUNCTION HELP.", args[1]))
	}
}
