package gateway

import (
	"maps"
	"slices"
	"strings"
)

// ACL (issue 34) over Synod's users (acl.go): ACL WHOAMI names the
// connection's user, ACL USERS lists "default" and the cluster file's
// users, ACL CAT lists Redis 7.0's command categories, ACL LOG this node's
// refused logins and requests (acllog.go).
//
// Decision: runtime users are refused, not replicated state. A Synod user
// is defined in the cluster file (users:, docs/SECURITY.md) with read-only
// or read-write access per namespace, and every node must agree on the
// users before it admits a request to any namespace. Users set at run time
// would have to be replicated state above the namespaces, and Synod has no
// such log: each namespace's protocol orders only that namespace's
// requests, so a user stored in one namespace could not guard another
// consistently. The cluster file, which every node reads at start, is that
// agreement. So ACL SETUSER, DELUSER, LOAD and SAVE answer an error naming
// the cluster file; GETUSER, LIST and DRYRUN, which describe or check
// Redis's command, key and channel rules, answer an error too, as access
// per namespace has no exact form in those rules, and GENPASS is left to
// the cluster file's password hashing (synod certs hash-password).

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
	case sub == "log":
		cmdACLLog(c, args) // acllog.go
	case sub == "whoami" || sub == "users":
		c.writeError(arityErr("acl|" + sub))
	case sub == "help":
		help := []string{"ACL WHOAMI: the connection's user.", "ACL USERS: default and the cluster file's users.",
			"ACL CAT: Redis's command categories.", "ACL LOG [<count> | RESET]: this node's refused logins and requests.", "Users and their per-namespace access are defined in the cluster file (users:, docs/SECURITY.md)."}
		c.w.WriteArray(len(help))
		for _, h := range help {
			c.w.WriteSimple(h)
		}
	case slices.Contains([]string{"setuser", "deluser", "getuser", "list", "cat", "load", "save", "genpass", "dryrun"}, sub):
		c.writeError("ERR ACL " + strings.ToUpper(sub) + " is not supported by Synod: users and their per-namespace read-only or read-write access are defined in the cluster file (users:, docs/SECURITY.md), not by Redis's ACL rules")
	default:
		c.writeError("ERR unknown subcommand '" + string(args[1]) + "'. Try ACL HELP.")
	}
}
