package client

import (
	"context"
	"fmt"

	"github.com/synod-dev/synod/resp"
)

// Leader asks a node for the leader of the client's namespace (SYNOD
// LEADER): the leader's node id and client address, or "", "" while the node
// knows none (an election) or when the namespace's protocol has no leader.
func (c *Client) Leader(ctx context.Context) (id, addr string, err error) {
	rep, err := c.Do(ctx, "SYNOD", "LEADER")
	if err != nil {
		return "", "", err
	}
	if rep.IsNull() {
		return "", "", nil
	}
	if rep.Kind != resp.Array || len(rep.Elems) != 2 || rep.Elems[0].Kind != resp.Bulk || rep.Elems[1].Kind != resp.Bulk {
		return "", "", fmt.Errorf("client: unexpected SYNOD LEADER reply %s", rep)
	}
	return string(rep.Elems[0].Str), string(rep.Elems[1].Str), nil
}

// PreferLeader asks for the leader and, when its address is one of the
// client's, sends the next requests there (saving the forwarding hop of a
// follower); fail-over continues round robin from it. It reports whether it
// moved. Call it again after a fail-over; requests are served wherever they
// go either way.
func (c *Client) PreferLeader(ctx context.Context) (bool, error) {
	_, addr, err := c.Leader(ctx)
	if err != nil || addr == "" {
		return false, err
	}
	for i, p := range c.pools {
		if p.addr == addr {
			c.prefer(i)
			return true, nil
		}
	}
	return false, nil
}
