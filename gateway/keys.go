package gateway

// Key commands (plans, plan.go) on a KV namespace.

func planDel(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("del"); !ok {
		return p
	}
	return perKey("del", args[1:], sumReply)
}

func planExists(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("exists"); !ok {
		return p
	}
	return perKey("exists", args[1:], sumReply)
}
