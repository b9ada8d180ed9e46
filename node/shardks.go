package node

import (
	"context"
	"math/rand/v2"
	"strconv"
	"strings"
	"sync"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
	"github.com/synod-dev/synod/service"
	"github.com/synod-dev/synod/shard"
)

// Whole-keyspace commands on a sharded namespace (issue 33; shardks49,
// session 49): DBSIZE, KEYS, SCAN, RANDOMKEY and FLUSHDB/FLUSHALL, and
// INFO keyspace's figures (dbinfo).
//
// Decision: every node answers them for the whole namespace, to every
// client, by fan-out over the namespace's groups (each group answers for
// the keys it serves: service/kv_served.go). Redis Cluster answers them
// per node, and cluster clients fan out themselves — but they cannot be
// told apart from plain clients: go-redis's ClusterClient and redis-py's
// RedisCluster open plain connections to each node (no READONLY, no
// CLUSTER) and send these commands as a plain client would. A plain
// client may talk to any node, so the per-node answer would be wrong for
// it; the cluster-wide one is right for a plain client and for every
// cluster-client path that sends the command to one node (go-redis 9.22:
// Keys, Scan, FlushDB, RandomKey go to one node; redis-py: dbsize, keys,
// randomkey go to its default node). What it costs the paths that fan out
// themselves: go-redis's ClusterClient.DBSize sums every master's answer
// (the total times the masters: use Do(ctx, "DBSIZE") instead); redis-py's
// scan_iter and a ForEachMaster scan return each key once per master (SCAN
// allows repeats); FLUSHDB on every master flushes again (idempotent).
//
// FLUSHDB is not atomic across groups: each group deletes its keys in one
// write of its log, the groups concurrently; a write racing it in another
// group may survive, and a reader may see one group flushed before
// another. It answers OK once every group has.
//
// SCAN's cursor is cluster-wide and names no node or group: the slot in
// the bits above service.ClusterCursorBits (50), the position within the
// slot (the top 50 bits of the key's 62-bit scan position) below. A page
// asks the group owning the cursor's slot, by the node's current map, for
// its served keys in the run of slots it owns from there on; when the run
// is done the cursor moves to the next slot. So a cursor survives a split
// or a migration between calls (the slot's next owner continues it) and
// any node continues a cursor another node answered (go-redis sends each
// SCAN of an iteration to a random node). A key present for the whole
// scan is returned at least once (twice only while its slot is handed
// over during the page that reads it).
//
// In MULTI (or any atomic group) these commands stay refused on a sharded
// namespace.

// keyspaceKinds are the operations answered by fan-out.
var keyspaceKinds = map[string]bool{"dbsize": true, "keys": true, "scan": true, "randomkey": true, "flushdb": true, "dbinfo": true}

// keyspaceMaxHops bounds the groups one SCAN page visits.
const keyspaceMaxHops = 8

// wholeKeyspace answers req (a single keyspace operation) for sharded
// namespace s.
func (n *Node) wholeKeyspace(ctx context.Context, s *shardedNS, req automaton.Request) (automaton.Response, error) {
	op := req.Op
	resp := automaton.Response{ID: req.ID}
	if op.Kind == "scan" {
		r, err := n.scanSharded(ctx, s, req)
		resp.Result = r
		return resp, err
	}
	served := service.Op{Kind: op.Kind, Args: append(append([][]byte(nil), op.Args...), []byte(service.ServedArg))}
	gs := n.keyGroups(s)
	if op.Kind == "randomkey" {
		for _, gi := range rand.Perm(len(gs)) {
			r, err := n.groupOne(ctx, s, gs[gi], served, req.Opts)
			if err != nil || r.IsErr() || r.Type != service.ResultNil {
				resp.Result = r
				return resp, err
			}
		}
		resp.Result = service.Nil()
		return resp, nil
	}
	rs := make([]service.Result, len(gs))
	errs := make([]error, len(gs))
	var wg sync.WaitGroup
	for i, gi := range gs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rs[i], errs[i] = n.groupOne(ctx, s, gi, served, req.Opts)
		}()
	}
	wg.Wait()
	var sum, expires, ttl int64
	var keys []service.Result
	for i := range gs {
		if errs[i] != nil {
			return resp, errs[i]
		}
		if rs[i].IsErr() {
			resp.Result = rs[i]
			return resp, nil
		}
		sum += rs[i].Int
		keys = append(keys, rs[i].Elems...)
		if op.Kind == "dbinfo" && len(rs[i].Elems) == 3 {
			sum += rs[i].Elems[0].Int
			expires += rs[i].Elems[1].Int
			ttl += rs[i].Elems[1].Int * rs[i].Elems[2].Int
		}
	}
	switch op.Kind {
	case "dbinfo": // INFO keyspace: keys, keys with a deadline, their mean time left
		avg := int64(0)
		if expires > 0 {
			avg = ttl / expires
		}
		resp.Result = service.Array(service.Int(sum), service.Int(expires), service.Int(avg))
	case "dbsize":
		resp.Result = service.Int(sum)
	case "keys":
		resp.Result = service.Array(keys...)
	default: // flushdb
		resp.Result = service.OK()
	}
	return resp, nil
}

// keyGroups lists the groups to ask: every group with a node (each
// answers for the keys it serves by its own slot states, whatever this
// node's map says, so a map older than a split or a migration counts
// every key; a spare declared without nodes holds none).
func (n *Node) keyGroups(s *shardedNS) []int {
	var out []int
	for gi := range s.groups {
		if len(n.targets(s.group(gi))) > 0 { // its incarnated name (groups.go)
			out = append(out, gi)
		}
	}
	return out
}

// groupOne runs one operation of the node's own on group gi, here or
// forwarded; no slot check (internal: the operation names no key).
func (n *Node) groupOne(ctx context.Context, s *shardedNS, gi int, op service.Op, opts automaton.Options) (service.Result, error) {
	g := s.group(gi) // its incarnated name (groups.go)
	req := automaton.Request{ID: n.nextInternalID(), Op: op, Opts: opts, Checked: true}
	ctx = internalCtx(ctx)
	var resp automaton.Response
	var err error
	if n.serves(g.Namespace.Name) {
		resp, err = n.do(ctx, g.Namespace.Name, req)
	} else {
		resp, err = n.forward(ctx, s, g, req)
	}
	return resp.Result, err
}

// scanSharded is one page of a cluster-wide SCAN (see above).
func (n *Node) scanSharded(ctx context.Context, s *shardedNS, req automaton.Request) (service.Result, error) {
	args := req.Op.Args
	cur, err := strconv.ParseUint(string(args[0]), 10, 64)
	if err != nil { // 14 bits of slot and 50 of position: every uint64 is a cursor
		return service.Errorf("invalid cursor"), nil
	}
	count := 10
	for i := 1; i+1 < len(args); i += 2 {
		if string(args[i]) == "count" {
			if c, err := strconv.Atoi(string(args[i+1])); err == nil && c > 0 {
				count = c
			}
		}
	}
	var keys []service.Result
	v := s.view()
	only := -1 // the group a refusal named for the cursor's slot
	for hop := 0; hop < keyspaceMaxHops && len(keys) < count; hop++ {
		slot := int(cur >> service.ClusterCursorBits)
		gi := int(v.m.Owner[slot])
		last := slot
		for last+1 < shard.Slots && int(v.m.Owner[last+1]) == gi {
			last++
		}
		if only >= 0 {
			gi, last, only = only, slot, -1
		}
		next := uint64(0)
		if gi != shard.Unowned {
			a := append([][]byte{[]byte(strconv.FormatUint(cur, 10))}, args[1:]...)
			a = append(a, []byte("slots"), []byte(shard.Range{First: slot, Last: last}.String()))
			epoch := v.epoch
			r, err := n.groupOne(ctx, s, gi, service.Op{Kind: "scan", Args: a}, req.Opts)
			if err != nil {
				return r, err
			}
			if service.IsGuardFailure(r) {
				// The group does not serve the slot (the map moved it, or
				// it is being handed over): the group its state names, or
				// the map read anew.
				// A group is asked only for slots it owned at some
				// epoch (its map's, or a state naming it): one that never
				// owned a slot holds no state for it and would answer it
				// empty, so the group a state names is asked for that
				// slot alone, and the map is read meanwhile.
				n.nudgePlacement()
				if f := strings.Fields(r.Err); len(f) >= 4 {
					if pi, ok := s.index[config.GroupName(s.ns.Name, f[3])]; ok && pi != gi {
						only, v = pi, s.view()
						continue
					}
				}
				n.consultPlacement(ctx, s, epoch)
				v = s.view()
				continue
			}
			if r.IsErr() {
				return r, nil
			}
			if r.Type != service.ResultArray || len(r.Elems) != 2 {
				return service.Errorf("bad scan answer from %s", s.groups[gi].Namespace.Name), nil
			}
			next, _ = strconv.ParseUint(string(r.Elems[0].Bytes), 10, 64)
			keys = append(keys, r.Elems[1].Elems...)
		}
		switch {
		case next != 0:
			cur = next // more from this slot on
		case last == shard.Slots-1:
			cur = 0 // the whole keyspace is done
		default:
			cur = uint64(last+1) << service.ClusterCursorBits
		}
		if cur == 0 {
			break
		}
	}
	return service.Array(service.Bytes([]byte(strconv.FormatUint(cur, 10))), service.Array(keys...)), nil
}
