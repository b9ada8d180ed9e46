package gateway

import (
	"strings"

	"github.com/synod-dev/synod/service"
)

// Geo commands (issue 34) over sorted sets, a port of Redis 7.0.15's
// geo.c (service/kv_geo.go). GEOADD is ZADD of the points' 52-bit geohash
// scores, encoded here (its errors all come before Redis looks the key
// up); every search is one KV operation, a read ("geosearch") or, with
// STORE, STOREDIST or GEOSEARCHSTORE, a write of the destination
// ("geostore", the destination its key), so a search and its store are
// atomic.

func init() {
	fWriteMovable := []string{"write", "denyoom", "movablekeys"}
	register("geo",
		key1("geoadd", -5, fWriteMem, planGeoAdd),
		key1("geodist", -4, fRead, keyPlan("geodist", 0, nil, nil)),
		key1("geohash", -2, fRead, keyPlan("geohash", 0, nil, nil)),
		key1("geopos", -2, fRead, keyPlan("geopos", 0, nil, geoPosReply)),
		&command{name: "georadius", arity: -6, flags: fWriteMovable, first: 1, last: 1, step: 1, plan: planGeoRadius, getkeys: geoRadiusKeys},
		key1("georadius_ro", -6, fRead, planGeoRadius),
		&command{name: "georadiusbymember", arity: -5, flags: fWriteMovable, first: 1, last: 1, step: 1, plan: planGeoRadius, getkeys: geoRadiusKeys},
		key1("georadiusbymember_ro", -5, fRead, planGeoRadius),
		key1("geosearch", -7, fRead, planGeoRadius),
		&command{name: "geosearchstore", arity: -8, flags: fWriteMem, first: 1, last: 2, step: 1, plan: planGeoSearchStore},
	)
}

// planGeoAdd is GEOADD key [NX|XX] [CH] longitude latitude member [...]:
// ZADD key [NX|XX] [CH] score member [...].
func planGeoAdd(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("geoadd"); !ok {
		return p
	}
	i := 2
	var zargs [][]byte
	nx, xx := false, false
opts:
	for ; i < len(args); i++ {
		switch w := lower(args[i]); w {
		case "nx", "xx", "ch":
			nx, xx = nx || w == "nx", xx || w == "xx"
			zargs = append(zargs, []byte(w))
		default:
			break opts
		}
	}
	if (len(args)-i)%3 != 0 || (nx && xx) || i == len(args) {
		return errPlan("ERR syntax error")
	}
	for ; i < len(args); i += 3 {
		lon, lat, err := service.GeoLongLat(args[i], args[i+1])
		if err != nil {
			return errPlan("%s", err.Error())
		}
		zargs = append(zargs, service.GeoScore(lon, lat), args[i+2])
	}
	return opPlan(kvOp("zadd", args[1], zargs...), nil)
}

// planGeoRadius is GEORADIUS(_RO), GEORADIUSBYMEMBER(_RO) and GEOSEARCH:
// a "geosearch" read, or with STORE|STOREDIST a "geostore" write of the
// destination.
func planGeoRadius(c *conn, args [][]byte) plan {
	name := string(args[0])
	if p, ok := c.kvOnly(strings.ToLower(name)); !ok {
		return p
	}
	if dest, store := service.GeoStoreKey(name, args[2:]); store {
		return opPlan(kvOp("geostore", []byte(dest), append([][]byte{args[0], args[1]}, args[2:]...)...), nil)
	}
	return opPlan(kvOp("geosearch", args[1], append([][]byte{args[0]}, args[2:]...)...), geoSearchReply)
}

// geoRadiusKeys is GEORADIUS(BYMEMBER)'s key finder (georadiusGetKeys):
// the key and the STORE or STOREDIST destination.
func geoRadiusKeys(args [][]byte) [][]byte {
	keys := [][]byte{args[1]}
	if dest, ok := service.GeoStoreKey(string(args[0]), args[2:]); ok {
		keys = append(keys, []byte(dest))
	}
	return keys
}

// planGeoSearchStore is GEOSEARCHSTORE destination source ....
func planGeoSearchStore(c *conn, args [][]byte) plan {
	if p, ok := c.kvOnly("geosearchstore"); !ok {
		return p
	}
	return opPlan(kvOp("geostore", args[1], append([][]byte{args[0], args[2]}, args[3:]...)...), nil)
}

// geoPosReply marks GEOPOS's coordinates as doubles (RESP3) and a missing
// member's nil as a null array, as Redis answers.
func geoPosReply(r service.Result) service.Result {
	if r.Type != service.ResultArray {
		return r
	}
	out := make([]service.Result, len(r.Elems))
	for i, e := range r.Elems {
		if e.Type == service.ResultNil {
			out[i] = nullArray()
		} else {
			out[i] = doubles(e)
		}
	}
	r.Elems = out
	return r
}

// geoSearchReply marks WITHCOORD's coordinates (the one nested array of
// an item) as doubles.
func geoSearchReply(r service.Result) service.Result {
	if r.Type != service.ResultArray {
		return r
	}
	out := make([]service.Result, len(r.Elems))
	for i, item := range r.Elems {
		if item.Type == service.ResultArray {
			sub := make([]service.Result, len(item.Elems))
			for j, e := range item.Elems {
				if e.Type == service.ResultArray {
					e = doubles(e)
				}
				sub[j] = e
			}
			item.Elems = sub
		}
		out[i] = item
	}
	r.Elems = out
	return r
}
