package gateway

import (
	"slices"
	"strings"
)

// COMMAND GETKEYS cmd [arg ...]: the key arguments of a command, as Redis's
// getKeysSubcommandImpl answers them: from the command's key positions
// (first, last, step), or its getkeys function where its keys move.
func (c *conn) commandGetKeys(args [][]byte) {
	if len(args) == 0 {
		c.writeError("ERR wrong number of arguments for 'command|getkeys' command")
		return
	}
	cmd, ok := commands[strings.ToLower(string(args[0]))]
	switch {
	case !ok:
		c.writeError("ERR Invalid command specified")
		return
	case cmd.first <= 0 && cmd.getkeys == nil:
		c.writeError("ERR The command has no key arguments")
		return
	case (cmd.arity > 0 && cmd.arity != len(args)) || len(args) < -cmd.arity:
		c.writeError("ERR Invalid number of arguments specified for command")
		return
	}
	keys := cmd.keysOf(args)
	if len(keys) == 0 {
		if slices.Contains(cmd.flags, "no_mandatory_keys") { // EVAL 0, FCALL 0
			c.w.WriteArray(0)
			return
		}
		c.writeError("ERR Invalid arguments specified for command")
		return
	}
	c.w.WriteArray(len(keys))
	for _, k := range keys {
		c.w.WriteBulk(k)
	}
}

// keysOf is the key arguments of a call of cmd: from its getkeys function
// where its keys move, else from its key positions (first, last, step).
func (cmd *command) keysOf(args [][]byte) [][]byte {
	if cmd.getkeys != nil {
		return cmd.getkeys(args)
	}
	if cmd.first <= 0 {
		return nil
	}
	var keys [][]byte
	last := cmd.last
	if last < 0 {
		last += len(args)
	}
	for i := cmd.first; i <= last && i < len(args); i += max(cmd.step, 1) {
		keys = append(keys, args[i])
	}
	return keys
}

// sortKeys is SORT's key finder (Redis's sortGetKeys): the sorted key and
// the destination of the last STORE, skipping the arguments of LIMIT, GET
// and BY.
func sortKeys(args [][]byte) [][]byte {
	keys := [][]byte{args[1]}
	var store []byte
	for i := 2; i < len(args); i++ {
		switch lower(args[i]) {
		case "limit":
			i += 2
		case "get", "by":
			i++
		case "store":
			if i+1 < len(args) {
				store = args[i+1]
			}
			i++
		}
	}
	if store != nil {
		keys = append(keys, store)
	}
	return keys
}
