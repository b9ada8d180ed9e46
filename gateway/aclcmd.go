package gateway

import (
	"maps"
	"slices"
	"strings"
)

// ACL (issue 34) over Synod's users (acl.go): ACL WHOAMI names the
// connection's user, ACL USERS lists "default" and the cluster file's
// users, ACL CAT lists Redis 7.0's command categories. Users are defined
// in the cluster file (users:, docs/SECURITY.md), with per-namespace
// read-only or read-write access rather than Redis's command and key
// rules, so the subcommands that would change or describe those rules
// (SETUSER, DELUSER, GETUSER, LIST, ...) answer an error saying so.

func init() {
	register("server",
		keyless("acl", -2, []string{"noscript", "loading", "stale"}, nil))
	commands["acl"].fn = cmdACL
}

func cmdACL(c *conn, args [][]byte) {
	switch sub := lower(args[1]); {
	case sub == "whoami" && len(args) == 2:
		if c.user != nil {
			c.w.WriteBulkString(c.user.name)
		} else {
			c.w.WriteBulkString("default")
		}
	case sub == "users" && len(args) == 2:
		users := append([]string{"default"}, slices.Sorted(maps.Keys(c.s.acl.users))...)
		c.w.WriteArray(len(users))
		for _, u := range users {
			c.w.WriteBulkString(u)
		}
	case sub == "cat" && len(args) == 2:
		c.w.WriteArray(len(aclCategories))
		for _, cat := range aclCategories {
			c.w.WriteBulkString(cat)
		}
	case sub == "whoami" || sub == "users":
		c.writeError(arityErr("acl|" + sub))
	case sub == "help":
		help := []string{"ACL WHOAMI: the connection's user.", "ACL USERS: default and the cluster file's users.",
			"ACL CAT: Redis's command categories.", "Users and their per-namespace access are defined in the cluster file (users:, docs/SECURITY.md)."}
		c.w.WriteArray(len(help))
		for _, h := range help {
			c.w.WriteSimple(h)
		}
	case slices.Contains([]string{"setuser", "deluser", "getuser", "list", "cat", "load", "save", "log", "genpass", "dryrun"}, sub):
		c.writeError("ERR ACL " + strings.ToUpper(sub) + " is not supported by Synod: users and their per-namespace read-only or read-write access are defined in the cluster file (users:, docs/SECURITY.md), not by Redis's ACL rules")
	default:
		c.writeError("ERR unknown subcommand '" + string(args[1]) + "'. Try ACL HELP.")
	}
}
