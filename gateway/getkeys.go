package gateway

import (
	"slices"
	"strconv"
	"strings"
)

// COMMAND GETKEYS cmd [arg ...]: the key arguments of a command, as Redis's
// getKeysSubcommandImpl answers them: from the command's key positions
// (first, last, step), or its getkeys function where its keys move.
// withFlags: COMMAND GETKEYSANDFLAGS, each key with its flags (keyFlags).
func (c *conn) commandGetKeys(args [][]byte, withFlags bool) {
	sub := "getkeys"
	if withFlags {
		sub = "getkeysandflags"
	}
	if len(args) == 0 {
		c.writeError("ERR wrong number of arguments for 'command|" + sub + "' command")
		return
	}
	cmd, ok := commands[strings.ToLower(string(args[0]))]
	switch {
	case !ok:
		c.writeError("ERR Invalid command specified")
		return
	case cmd.first <= 0 && cmd.getkeys == nil && len(redisKeySpecs[cmd.name]) == 0:
		c.writeError("ERR The command has no key arguments")
		return
	case (cmd.arity > 0 && cmd.arity != len(args)) || len(args) < -cmd.arity:
		c.writeError("ERR Invalid number of arguments specified for command")
		return
	}
	var keys [][]byte
	var flags [][]string
	if keys = cmd.keysOf(args); withFlags || len(keys) == 0 {
		keys, flags = keyFlags(cmd, args) // by Redis's key specs (XREAD's keys move and have no finder here)
	}
	if len(keys) == 0 {
		if slices.Contains(cmd.flags, "no_mandatory_keys") { // EVAL 0, FCALL 0
			c.w.WriteArray(0)
			return
		}
		c.writeError("ERR Invalid arguments specified for command")
		return
	}
	c.w.WriteArray(len(keys))
	for i, k := range keys {
		if !withFlags {
			c.w.WriteBulk(k)
			continue
		}
		c.w.WriteArray(2)
		c.w.WriteBulk(k)
		c.w.WriteSet(len(flags[i]))
		for _, f := range flags[i] {
			c.w.WriteSimple(f)
		}
	}
}

// keySpec is one of a Redis command's key specs (redis_cmdtable.go): where
// the search for keys begins (index: an argument position; keyword: after
// the keyword, searched from startfrom, backwards when negative) and how
// the keys are found (a range up to lastkey, every step, limited to a
// 1/limit part of the rest; or keynum: a count at keynumidx, keys from
// firstkey), and the flags of the keys it finds.
type keySpec struct {
	flags                []string
	index                int
	keyword              string
	startfrom            int
	lastkey, step, limit int
	keynum               bool
	keynumidx, firstkey  int
	unknown              bool
}

// keyFlags finds args' keys and their flags as Redis 7.0's
// getKeysFromCommandWithSpecs does: by the key specs, unless one of them
// has variable flags or cannot be walked (then by the command's own key
// finder: SET's and SORT's as Redis's setGetKeys and sortGetKeys flag
// them; any other's keys with its first spec's flags).
func keyFlags(cmd *command, args [][]byte) ([][]byte, [][]string) {
	specs := redisKeySpecs[cmd.name]
	variable := false
	for _, sp := range specs {
		variable = variable || slices.Contains(sp.flags, "variable_flags")
	}
	if !variable && len(specs) > 0 {
		if keys, flags, ok := walkKeySpecs(specs, args); ok {
			return keys, flags
		}
	}
	switch cmd.name {
	case "set":
		for _, a := range args[3:] {
			if strings.EqualFold(string(a), "get") {
				return [][]byte{args[1]}, [][]string{{"RW", "access", "update"}}
			}
		}
		return [][]byte{args[1]}, [][]string{{"OW", "update"}}
	case "sort", "sort_ro":
		keys := cmd.keysOf(args)
		flags := make([][]string, len(keys))
		for i := range keys {
			flags[i] = []string{"RO", "access"}
			if i > 0 {
				flags[i] = []string{"OW", "update"} // the STORE destination
			}
		}
		return keys, flags
	}
	keys := cmd.keysOf(args)
	var first []string
	if len(specs) > 0 {
		first = specs[0].flags
	}
	flags := make([][]string, len(keys))
	for i := range keys {
		flags[i] = first
	}
	return keys, flags
}

// walkKeySpecs is Redis 7.0's getKeysUsingKeySpecs (db.c): false where a
// spec is unknown, incomplete or does not fit args.
func walkKeySpecs(specs []keySpec, args [][]byte) ([][]byte, [][]string, bool) {
	var keys [][]byte
	var flags [][]string
	argc := len(args)
	for _, sp := range specs {
		if slices.Contains(sp.flags, "not_key") {
			continue
		}
		first := 0
		switch {
		case sp.unknown:
			return nil, nil, false
		case sp.keyword == "":
			first = sp.index
		default:
			start, end := sp.startfrom, 1
			if sp.startfrom > 0 {
				end = argc - 1
			} else {
				start = argc + sp.startfrom
			}
			for i := start; i != end; {
				if i >= argc || i < 1 {
					break
				}
				if strings.EqualFold(string(args[i]), sp.keyword) {
					first = i + 1
					break
				}
				if start <= end {
					i++
				} else {
					i--
				}
			}
			if first == 0 {
				continue // keyword not found
			}
		}
		var last, step int
		if !sp.keynum {
			step = sp.step
			switch {
			case sp.lastkey >= 0:
				last = first + sp.lastkey
			case sp.limit == 0:
				last = argc + sp.lastkey
			default:
				last = first + ((argc-first)/sp.limit + sp.lastkey)
			}
		} else {
			step = sp.step
			if sp.keynumidx >= argc || first+sp.keynumidx >= argc {
				return nil, nil, false
			}
			n, err := strconv.ParseInt(string(args[first+sp.keynumidx]), 10, 64)
			if err != nil || n < 0 {
				return nil, nil, false
			}
			first += sp.firstkey
			last = first + int(n) - 1
		}
		if last >= argc || last < first || first >= argc {
			return nil, nil, false
		}
		for i := first; i <= last; i += max(step, 1) {
			keys = append(keys, args[i])
			flags = append(flags, sp.flags)
		}
		if slices.Contains(sp.flags, "incomplete") {
			return nil, nil, false
		}
	}
	return keys, flags, true
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
