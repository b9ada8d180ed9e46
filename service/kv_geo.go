package service

import (
	"fmt"
	"math"
	"slices"
	"strconv"
	"strings"
)

// Geo (issue 34), a port of Redis 7.0.15's geo.c, geohash.c and
// geohash_helper.c over sorted sets: a point is a member whose score is
// its 52-bit interleaved geohash (26 steps of longitude and latitude in
// Redis's ranges, latitude ±85.05112878), distances are Redis's haversine
// on a sphere of radius 6372797.560856 m, and a radius or box search scans
// the same nine geohash cells in the same order (the centre, N, S, E, W,
// NE, NW, SE, SW), so unsorted results come in Redis's order.
//
//	geopos [member ...]             R  array of [lon, lat] | nil per member
//	geohash [member ...]            R  array of 11-character geohashes | nil
//	geodist m1 m2 [unit]            R  bytes (4 decimals) | nil
//	geosearch name src [arg ...]    R  GEORADIUS(_RO), GEORADIUSBYMEMBER(_RO) or
//	                                   GEOSEARCH (name as the client spelled it,
//	                                   Op.Key = src, args after the key): the
//	                                   members, or [member, dist, hash, [lon, lat]]
//	geostore name src [arg ...]     W  GEORADIUS(BYMEMBER) ... STORE|STOREDIST dest,
//	                                   GEOSEARCHSTORE: Op.Key = dest; int (the
//	                                   members stored; dest deleted when none)
//
// GEOADD is ZADD of the encoded scores (the gateway encodes them).
//
// Decisions. The whole command, its argument checks included, runs in
// Apply in Redis's order (a WRONGTYPE source is found before a bad
// radius, a missing FROMMEMBER member after the options before it), so
// every error is Redis's. Results are sorted (ASC/DESC, COUNT) with a
// stable sort, as glibc's qsort (a merge sort) leaves ties in scan order;
// with COUNT smaller than the matches Redis's pqsort may order equal
// distances otherwise. The trigonometry is double-double (kv_geomath.go):
// it rounds correctly where glibc does, so distances and STOREDIST scores
// are redis-server's to the last bit but for about 1 argument in 1,000.

func init() {
	addKVOps(map[string]kvOp{
		"geopos":    {read: true, max: -1, run: (*KVState).opGeoPos},
		"geohash":   {read: true, max: -1, run: (*KVState).opGeoHash},
		"geodist":   {read: true, min: 2, max: -1, run: (*KVState).opGeoDist},
		"geosearch": {read: true, min: 1, max: -1, check: checkGeoSearch, run: (*KVState).opGeoSearch},
		"geostore": {min: 2, max: -1, check: checkGeoStore, run: (*KVState).opGeoSearch,
			keys: func(op Op) []string { return []string{string(op.Args[1])} }},
	})
}

const (
	geoStepMax  = 26
	geoLatMin   = -85.05112878
	geoLatMax   = 85.05112878
	geoLongMin  = -180.0
	geoLongMax  = 180.0
	earthRadius = 6372797.560856
	mercatorMax = 20037726.37
)

// geoDR is geohash_helper.c's D_R, M_PI / 180.0 in double arithmetic (a
// Go constant expression would divide the exact pi).
var geoDR = func() float64 { p := math.Pi; return p / 180.0 }()

func degRad(a float64) float64 { return a * geoDR }
func radDeg(a float64) float64 { return a / geoDR }

type geoHashBits struct {
	bits uint64
	step uint8
}

func (h geoHashBits) zero() bool { return h.bits == 0 && h.step == 0 }

type geoRange struct{ min, max float64 }

type geoArea struct {
	hash     geoHashBits
	lon, lat geoRange
}

var (
	geoLonRange = geoRange{geoLongMin, geoLongMax}
	geoLatRange = geoRange{geoLatMin, geoLatMax}
)

func interleave64(xlo, ylo uint32) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF}
	s := [...]uint{1, 2, 4, 8, 16}
	x, y := uint64(xlo), uint64(ylo)
	for i := 4; i >= 0; i-- {
		x = (x | x<<s[i]) & b[i]
		y = (y | y<<s[i]) & b[i]
	}
	return x | y<<1
}

func deinterleave64(v uint64) uint64 {
	b := [...]uint64{0x5555555555555555, 0x3333333333333333, 0x0F0F0F0F0F0F0F0F, 0x00FF00FF00FF00FF, 0x0000FFFF0000FFFF, 0x00000000FFFFFFFF}
	s := [...]uint{0, 1, 2, 4, 8, 16}
	x, y := v, v>>1
	for i := 0; i < 6; i++ {
		x = (x | x>>s[i]) & b[i]
		y = (y | y>>s[i]) & b[i]
	}
	return x | y<<32
}

// geohashEncode is geohash.c's geohashEncode.
func geohashEncode(lonR, latR geoRange, lon, lat float64, step uint8) (geoHashBits, bool) {
	if step > 32 || step == 0 || (latR.min == 0 && latR.max == 0) || (lonR.min == 0 && lonR.max == 0) {
		return geoHashBits{}, false
	}
	if lon > geoLongMax || lon < geoLongMin || lat > geoLatMax || lat < geoLatMin {
		return geoHashBits{}, false
	}
	h := geoHashBits{step: step}
	if lat < latR.min || lat > latR.max || lon < lonR.min || lon > lonR.max {
		return h, false
	}
	latOff := (lat - latR.min) / (latR.max - latR.min)
	lonOff := (lon - lonR.min) / (lonR.max - lonR.min)
	latOff *= float64(uint64(1) << step)
	lonOff *= float64(uint64(1) << step)
	h.bits = interleave64(uint32(latOff), uint32(lonOff))
	return h, true
}

// geohashDecode is geohash.c's geohashDecode.
func geohashDecode(lonR, latR geoRange, h geoHashBits) (geoArea, bool) {
	if h.zero() {
		return geoArea{}, false
	}
	sep := deinterleave64(h.bits)
	latScale := latR.max - latR.min
	lonScale := lonR.max - lonR.min
	ilato := uint32(sep)
	ilono := uint32(sep >> 32)
	div := float64(uint64(1) << h.step)
	return geoArea{
		hash: h,
		lat: geoRange{
			latR.min + float64(float64(ilato)*1.0/div*latScale),
			latR.min + float64((float64(ilato)+1)*1.0/div*latScale),
		},
		lon: geoRange{
			lonR.min + float64(float64(ilono)*1.0/div*lonScale),
			lonR.min + float64((float64(ilono)+1)*1.0/div*lonScale),
		},
	}, true
}

// decodeGeohash is geo.c's decodeGeohash: a score's longitude and latitude.
func decodeGeohash(score float64) (lon, lat float64) {
	a, _ := geohashDecode(geoLonRange, geoLatRange, geoHashBits{bits: scoreBits(score), step: geoStepMax})
	lon = min(max((a.lon.min+a.lon.max)/2, geoLongMin), geoLongMax)
	lat = min(max((a.lat.min+a.lat.max)/2, geoLatMin), geoLatMax)
	return lon, lat
}

// scoreBits is C's (uint64_t) of a score as x86-64 computes it (a
// negative score wraps; Redis's scores from GEOADD are never negative).
func scoreBits(f float64) uint64 {
	switch {
	case f != f || f < -(1<<63):
		return 1 << 63
	case f < 0:
		return uint64(int64(f))
	case f >= 1<<64:
		return 0
	}
	return uint64(f)
}

// geoEncodeScore is GEOADD's score of a point (52 bits).
func geoEncodeScore(lon, lat float64) uint64 {
	h, _ := geohashEncode(geoLonRange, geoLatRange, lon, lat, geoStepMax)
	return h.bits << (52 - 2*uint(h.step))
}

func geohashMoveX(h *geoHashBits, d int) { geohashMove(h, d, 0xaaaaaaaaaaaaaaaa) }

func geohashMoveY(h *geoHashBits, d int) { geohashMove(h, d, 0x5555555555555555) }

// geohashMove moves h by d (-1, 0, +1) cells along the axis whose bits
// mask selects (odd bits: longitude, geohash_move_x; even bits: latitude,
// geohash_move_y), leaving the other axis's bits alone.
func geohashMove(h *geoHashBits, d int, mask uint64) {
	if d == 0 {
		return
	}
	m := h.bits & mask
	o := h.bits &^ mask
	zz := ^mask >> (64 - uint(h.step)*2)
	if d > 0 {
		m += zz + 1
	} else {
		m |= zz
		m -= zz + 1
	}
	m &= mask >> (64 - uint(h.step)*2)
	h.bits = m | o
}

// geoNeighbors are a cell's eight neighbours in membersOfAllNeighbors'
// order after the cell itself: N, S, E, W, NE, NW, SE, SW.
func geoNeighbors(h geoHashBits) [8]geoHashBits {
	dirs := [8][2]int{{0, 1}, {0, -1}, {1, 0}, {-1, 0}, {1, 1}, {-1, 1}, {1, -1}, {-1, -1}}
	var out [8]geoHashBits
	for i, d := range dirs {
		n := h
		geohashMoveX(&n, d[0])
		geohashMoveY(&n, d[1])
		out[i] = n
	}
	return out
}

// geoShape is a search area: a circle (radius) or a box (width, height),
// in units of conversion metres, around (lon, lat).
type geoShape struct {
	box                   bool
	lon, lat              float64
	conversion            float64
	radius, width, height float64
	bounds                [4]float64
}

func geoEstimateSteps(rangeMeters, lat float64) uint8 {
	if rangeMeters == 0 {
		return 26
	}
	step := 1
	for rangeMeters < mercatorMax {
		rangeMeters *= 2
		step++
	}
	step -= 2
	if lat > 66 || lat < -66 {
		step--
		if lat > 80 || lat < -80 {
			step--
		}
	}
	return uint8(min(max(step, 1), 26))
}

func (sh *geoShape) boundingBox() {
	height, width := sh.conversion*sh.radius, sh.conversion*sh.radius
	if sh.box {
		height, width = sh.conversion*(sh.height/2), sh.conversion*(sh.width/2)
	}
	latDelta := radDeg(height / earthRadius)
	lonDeltaTop := radDeg(width / earthRadius / geoCos(degRad(sh.lat+latDelta)))
	lonDeltaBottom := radDeg(width / earthRadius / geoCos(degRad(sh.lat-latDelta)))
	if sh.lat < 0 {
		sh.bounds[0], sh.bounds[2] = sh.lon-lonDeltaBottom, sh.lon+lonDeltaBottom
	} else {
		sh.bounds[0], sh.bounds[2] = sh.lon-lonDeltaTop, sh.lon+lonDeltaTop
	}
	sh.bounds[1], sh.bounds[3] = sh.lat-latDelta, sh.lat+latDelta
}

// areas is geohashCalculateAreasByShapeWGS84: the nine cells to scan, the
// centre first, a zero value for a neighbour that cannot hold a match.
func (sh *geoShape) areas() [9]geoHashBits {
	sh.boundingBox()
	minLon, minLat, maxLon, maxLat := sh.bounds[0], sh.bounds[1], sh.bounds[2], sh.bounds[3]
	radius := sh.radius
	if sh.box {
		radius = math.Sqrt(float64(sh.width/2*(sh.width/2)) + float64(sh.height/2*(sh.height/2)))
	}
	radius *= sh.conversion
	steps := geoEstimateSteps(radius, sh.lat)
	hash, _ := geohashEncode(geoLonRange, geoLatRange, sh.lon, sh.lat, steps)
	nb := geoNeighbors(hash)
	area, _ := geohashDecode(geoLonRange, geoLatRange, hash)
	north, _ := geohashDecode(geoLonRange, geoLatRange, nb[0])
	south, _ := geohashDecode(geoLonRange, geoLatRange, nb[1])
	east, _ := geohashDecode(geoLonRange, geoLatRange, nb[2])
	west, _ := geohashDecode(geoLonRange, geoLatRange, nb[3])
	decrease := north.lat.max < maxLat || south.lat.min > minLat || east.lon.max < maxLon || west.lon.min > minLon
	if steps > 1 && decrease {
		steps--
		hash, _ = geohashEncode(geoLonRange, geoLatRange, sh.lon, sh.lat, steps)
		nb = geoNeighbors(hash)
		area, _ = geohashDecode(geoLonRange, geoLatRange, hash)
	}
	const n, s, e, w, ne, nw, se, sw = 0, 1, 2, 3, 4, 5, 6, 7
	if steps >= 2 {
		if area.lat.min < minLat {
			nb[s], nb[sw], nb[se] = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
		if area.lat.max > maxLat {
			nb[n], nb[ne], nb[nw] = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
		if area.lon.min < minLon {
			nb[w], nb[sw], nb[nw] = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
		if area.lon.max > maxLon {
			nb[e], nb[se], nb[ne] = geoHashBits{}, geoHashBits{}, geoHashBits{}
		}
	}
	return [9]geoHashBits{hash, nb[n], nb[s], nb[e], nb[w], nb[ne], nb[nw], nb[se], nb[sw]}
}

func geoLatDistance(lat1, lat2 float64) float64 {
	return earthRadius * math.Abs(degRad(lat2)-degRad(lat1))
}

// geoDistance is geohashGetDistance: the haversine distance in metres.
func geoDistance(lon1, lat1, lon2, lat2 float64) float64 {
	lon1r, lon2r := degRad(lon1), degRad(lon2)
	v := geoSin((lon2r - lon1r) / 2)
	if v == 0 {
		return geoLatDistance(lat1, lat2)
	}
	lat1r, lat2r := degRad(lat1), degRad(lat2)
	u := geoSin((lat2r - lat1r) / 2)
	a := float64(u*u) + float64(float64(float64(geoCos(lat1r)*geoCos(lat2r))*v)*v)
	return 2.0 * earthRadius * geoAsin(math.Sqrt(a))
}

// within is geoWithinShape: whether the point of score is in the shape,
// with its coordinates and distance from the centre.
func (sh *geoShape) within(score float64) (lon, lat, dist float64, ok bool) {
	lon, lat = decodeGeohash(score)
	if !sh.box {
		dist = geoDistance(sh.lon, sh.lat, lon, lat)
		return lon, lat, dist, dist <= sh.radius*sh.conversion
	}
	w, h := sh.width*sh.conversion, sh.height*sh.conversion
	if geoLatDistance(lat, sh.lat) > h/2 {
		return lon, lat, 0, false
	}
	if geoDistance(lon, lat, sh.lon, lat) > w/2 {
		return lon, lat, 0, false
	}
	return lon, lat, geoDistance(sh.lon, sh.lat, lon, lat), true
}

type geoPoint struct {
	lon, lat, dist, score float64
	member                string
}

// scanCells is membersOfAllNeighbors: the matches of each cell in turn,
// each cell's members in score order, stopping at limit (0: none).
func (sh *geoShape) scanCells(c *coll, limit int) []geoPoint {
	cells := sh.areas()
	var out []geoPoint
	last := -1
	for i, h := range cells {
		if h.zero() {
			continue
		}
		if last >= 0 && h == cells[last] {
			continue
		}
		if len(out) > 0 && limit > 0 && len(out) >= limit {
			break
		}
		lo := float64(h.bits << (52 - 2*uint(h.step)))
		hi := float64((h.bits + 1) << (52 - 2*uint(h.step)))
		j, _ := slices.BinarySearchFunc(c.zs, lo, func(e zel, t float64) int {
			if e.score < t {
				return -1
			}
			return 1
		})
		for ; j < len(c.zs) && c.zs[j].score < hi; j++ {
			e := c.zs[j]
			if lon, lat, d, ok := sh.within(e.score); ok {
				out = append(out, geoPoint{lon, lat, d, e.score, e.m})
			}
			if len(out) > 0 && limit > 0 && len(out) >= limit {
				break
			}
		}
		last = i
	}
	return out
}

// formatDistance is addReplyDoubleDistance: 4 decimals, rounded half to
// even as llrint does.
func formatDistance(d float64) []byte {
	if d == 0 {
		return []byte("0.0000")
	}
	v := math.RoundToEven(d * 10000)
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatUint(uint64(v), 10)
	for len(s) < 5 {
		s = "0" + s
	}
	s = s[:len(s)-4] + "." + s[len(s)-4:]
	if neg {
		s = "-" + s
	}
	return []byte(s)
}

// formatHumanDouble is addReplyHumanLongDouble's text: %.17Lf without
// trailing zeros.
func formatHumanDouble(f float64) []byte {
	s := strconv.FormatFloat(f, 'f', 17, 64)
	if strings.Contains(s, ".") {
		s = strings.TrimRight(s, "0")
		s = strings.TrimSuffix(s, ".")
	}
	if s == "-0" {
		s = "0"
	}
	return []byte(s)
}

// cFloat is C's %f of a double.
func cFloat(f float64) string {
	switch {
	case math.IsInf(f, 1):
		return "inf"
	case math.IsInf(f, -1):
		return "-inf"
	}
	return strconv.FormatFloat(f, 'f', 6, 64)
}

// GeoLongLat parses a longitude and a latitude as extractLongLatOrReply.
func GeoLongLat(lon, lat []byte) (float64, float64, error) {
	x, ok := parseFloat(lon)
	if !ok {
		return 0, 0, fmt.Errorf("ERR " + errNotFloat)
	}
	y, ok := parseFloat(lat)
	if !ok {
		return 0, 0, fmt.Errorf("ERR " + errNotFloat)
	}
	if x < geoLongMin || x > geoLongMax || y < geoLatMin || y > geoLatMax {
		return 0, 0, fmt.Errorf("ERR invalid longitude,latitude pair %s,%s", cFloat(x), cFloat(y))
	}
	return x, y, nil
}

// GeoScore is GEOADD's score of a point, as ZADD's argument.
func GeoScore(lon, lat float64) []byte {
	return strconv.AppendUint(nil, geoEncodeScore(lon, lat), 10)
}

func geoUnit(u []byte) (float64, error) {
	switch strings.ToLower(string(u)) {
	case "m":
		return 1, nil
	case "km":
		return 1000, nil
	case "ft":
		return 0.3048, nil
	case "mi":
		return 1609.34, nil
	}
	return 0, fmt.Errorf("ERR unsupported unit provided. please use M, KM, FT, MI")
}

func geoNumber(b []byte, msg string) (float64, error) {
	f, ok := parseFloat(b)
	if !ok {
		return 0, fmt.Errorf("ERR %s", msg)
	}
	return f, nil
}

func geoErr(err error) Result { return Errorf("%s", err.Error()) }

func (s *KVState) opGeoPos(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	out := make([]Result, len(op.Args))
	for i, m := range op.Args {
		out[i] = Nil()
		if c == nil {
			continue
		}
		if sc, ok := c.z[string(m)]; ok {
			lon, lat := decodeGeohash(sc)
			out[i] = Array(Bytes(formatHumanDouble(lon)), Bytes(formatHumanDouble(lat)))
		}
	}
	return Array(out...)
}

const geoAlphabet = "0123456789bcdefghjkmnpqrstuvwxyz"

func (s *KVState) opGeoHash(op Op) Result {
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	out := make([]Result, len(op.Args))
	for i, m := range op.Args {
		out[i] = Nil()
		if c == nil {
			continue
		}
		sc, ok := c.z[string(m)]
		if !ok {
			continue
		}
		lon, lat := decodeGeohash(sc)
		h, _ := geohashEncode(geoRange{-180, 180}, geoRange{-90, 90}, lon, lat, 26)
		buf := make([]byte, 11)
		for j := range 11 {
			idx := 0
			if j < 10 {
				idx = int(h.bits>>(52-(uint(j)+1)*5)) & 0x1f
			}
			buf[j] = geoAlphabet[idx]
		}
		out[i] = Bytes(buf)
	}
	return Array(out...)
}

func (s *KVState) opGeoDist(op Op) Result {
	toMeter := 1.0
	if len(op.Args) == 3 {
		u, err := geoUnit(op.Args[2])
		if err != nil {
			return geoErr(err)
		}
		toMeter = u
	} else if len(op.Args) > 3 {
		return Errorf("ERR " + errSyntax)
	}
	_, c, bad := s.liveOf(op.Key, tZSet)
	if bad != nil {
		return *bad
	}
	if c == nil {
		return Nil()
	}
	s1, ok1 := c.z[string(op.Args[0])]
	s2, ok2 := c.z[string(op.Args[1])]
	if !ok1 || !ok2 {
		return Nil()
	}
	lon1, lat1 := decodeGeohash(s1)
	lon2, lat2 := decodeGeohash(s2)
	return Bytes(formatDistance(geoDistance(lon1, lat1, lon2, lat2) / toMeter))
}

// GeoStoreKey is the destination a GEORADIUS or GEORADIUSBYMEMBER (name,
// any case) with args (after the key) stores into, found as georadiusGeneric
// parses its options; "" and false without STORE or STOREDIST.
func GeoStoreKey(name string, args [][]byte) (string, bool) {
	base := 4
	switch strings.ToLower(name) {
	case "georadius":
	case "georadiusbymember":
		base = 3
	default:
		return "", false
	}
	if len(args) < base {
		return "", false
	}
	opts := args[base:]
	key, found := "", false
	for i := 0; i < len(opts); i++ {
		switch w := strings.ToLower(string(opts[i])); {
		case w == "withdist" || w == "withhash" || w == "withcoord" || w == "any" || w == "asc" || w == "desc":
		case w == "count" && i+1 < len(opts):
			i++
		case (w == "store" || w == "storedist") && i+1 < len(opts):
			key, found = string(opts[i+1]), true
			i++
		default:
			return key, found
		}
	}
	return key, found
}

func checkGeoSearch(op Op) error {
	if _, store := GeoStoreKey(string(op.Args[0]), op.Args[1:]); store || strings.EqualFold(string(op.Args[0]), "geosearchstore") {
		return fmt.Errorf("geosearch: a search that stores is a geostore")
	}
	return nil
}

func checkGeoStore(op Op) error {
	name := string(op.Args[0])
	if strings.EqualFold(name, "geosearchstore") {
		return nil
	}
	if k, store := GeoStoreKey(name, op.Args[2:]); !store || k != op.Key {
		return fmt.Errorf("geostore: the destination is not the command's STORE key")
	}
	return nil
}

const (
	geoCoords   = 1 << iota // GEORADIUS
	geoMember               // GEORADIUSBYMEMBER
	geoNoStore              // the _RO forms
	geoSearch               // GEOSEARCH
	geoSearchSt             // GEOSEARCHSTORE
)

// opGeoSearch is georadiusGeneric: geosearch and geostore.
func (s *KVState) opGeoSearch(op Op) Result {
	name := string(op.Args[0])
	var flags int
	switch strings.ToLower(name) {
	case "georadius":
		flags = geoCoords
	case "georadius_ro":
		flags = geoCoords | geoNoStore
	case "georadiusbymember":
		flags = geoMember
	case "georadiusbymember_ro":
		flags = geoMember | geoNoStore
	case "geosearch":
		flags = geoSearch
	case "geosearchstore":
		flags = geoSearch | geoSearchSt
	default:
		return Errorf("ERR Unknown georadius search type")
	}
	// argv as Redis sees it: name, [dest,] src, arguments.
	src, rest := op.Key, op.Args[1:]
	if op.Kind == "geostore" {
		src, rest = string(op.Args[1]), op.Args[2:]
	}
	argv := append([][]byte{op.Args[0]}, []byte(src))
	if flags&geoSearchSt != 0 {
		argv = [][]byte{op.Args[0], []byte(op.Key), []byte(src)}
	}
	argv = append(argv, rest...)
	_, zobj, bad := s.liveOf(src, tZSet)
	if bad != nil {
		return *bad
	}
	var sh geoShape
	var storeKey []byte
	storeDist := false
	var base int
	var err error
	switch {
	case flags&geoCoords != 0:
		base = 6
		if len(argv) < base {
			return Errorf("ERR wrong number of arguments for '%s' command", strings.ToLower(name))
		}
		if sh.lon, sh.lat, err = GeoLongLat(argv[2], argv[3]); err != nil {
			return geoErr(err)
		}
		if sh.conversion, sh.radius, err = geoDistanceArg(argv[base-2:]); err != nil {
			return geoErr(err)
		}
	case flags&geoMember != 0 && zobj == nil:
		base = 5
	case flags&geoMember != 0:
		base = 5
		if len(argv) < base {
			return Errorf("ERR wrong number of arguments for '%s' command", strings.ToLower(name))
		}
		sc, ok := zobj.z[string(argv[2])]
		if !ok {
			return Errorf("ERR could not decode requested zset member")
		}
		sh.lon, sh.lat = decodeGeohash(sc)
		if sh.conversion, sh.radius, err = geoDistanceArg(argv[base-2:]); err != nil {
			return geoErr(err)
		}
	default:
		base = 2
		if flags&geoSearchSt != 0 {
			base = 3
			storeKey = argv[1]
		}
	}
	withDist, withHash, withCoords := false, false, false
	fromMember, fromLoc, byRadius, byBox := false, false, false, false
	sort := 0 // 1 ASC, 2 DESC
	anyOpt := false
	var count int64
	if len(argv) > base {
		rem := len(argv) - base
		for i := 0; i < rem; i++ {
			arg := strings.ToLower(string(argv[base+i]))
			switch {
			case arg == "withdist":
				withDist = true
			case arg == "withhash":
				withHash = true
			case arg == "withcoord":
				withCoords = true
			case arg == "any":
				anyOpt = true
			case arg == "asc":
				sort = 1
			case arg == "desc":
				sort = 2
			case arg == "count" && i+1 < rem:
				n, ok := parseInt(argv[base+i+1])
				if !ok {
					return Errorf("ERR " + errNotInt)
				}
				if n <= 0 {
					return Errorf("ERR COUNT must be > 0")
				}
				count = n
				i++
			case (arg == "store" || arg == "storedist") && i+1 < rem && flags&geoNoStore == 0 && flags&geoSearch == 0:
				storeKey = argv[base+i+1]
				storeDist = arg == "storedist"
				i++
			case arg == "storedist" && flags&geoSearch != 0 && flags&geoSearchSt != 0:
				storeDist = true
			case arg == "frommember" && i+1 < rem && flags&geoSearch != 0 && !fromLoc:
				if zobj == nil {
					fromMember = true
					i++
					continue
				}
				sc, ok := zobj.z[string(argv[base+i+1])]
				if !ok {
					return Errorf("ERR could not decode requested zset member")
				}
				sh.lon, sh.lat = decodeGeohash(sc)
				fromMember = true
				i++
			case arg == "fromlonlat" && i+2 < rem && flags&geoSearch != 0 && !fromMember:
				if sh.lon, sh.lat, err = GeoLongLat(argv[base+i+1], argv[base+i+2]); err != nil {
					return geoErr(err)
				}
				fromLoc = true
				i += 2
			case arg == "byradius" && i+2 < rem && flags&geoSearch != 0 && !byBox:
				if sh.conversion, sh.radius, err = geoDistanceArg(argv[base+i+1:]); err != nil {
					return geoErr(err)
				}
				sh.box = false
				byRadius = true
				i += 2
			case arg == "bybox" && i+3 < rem && flags&geoSearch != 0 && !byRadius:
				w, e1 := geoNumber(argv[base+i+1], "need numeric width")
				if e1 != nil {
					return geoErr(e1)
				}
				h, e2 := geoNumber(argv[base+i+2], "need numeric height")
				if e2 != nil {
					return geoErr(e2)
				}
				if h < 0 || w < 0 {
					return Errorf("ERR height or width cannot be negative")
				}
				u, e3 := geoUnit(argv[base+i+3])
				if e3 != nil {
					return geoErr(e3)
				}
				sh.width, sh.height, sh.conversion, sh.box = w, h, u, true
				byBox = true
				i += 3
			default:
				return Errorf("ERR " + errSyntax)
			}
		}
	}
	if storeKey != nil && (withDist || withHash || withCoords) {
		what := "STORE option in GEORADIUS"
		if flags&geoSearchSt != 0 {
			what = "GEOSEARCHSTORE"
		}
		return Errorf("ERR %s is not compatible with WITHDIST, WITHHASH and WITHCOORD options", what)
	}
	if flags&geoSearch != 0 && !(fromMember || fromLoc) {
		return Errorf("ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for %s", name)
	}
	if flags&geoSearch != 0 && !(byRadius || byBox) {
		return Errorf("ERR exactly one of BYRADIUS and BYBOX can be specified for %s", name)
	}
	if anyOpt && count == 0 {
		return Errorf("ERR the ANY argument requires COUNT argument")
	}
	if storeKey != nil && string(storeKey) != op.Key {
		// The gateway names the STORE key as the operation's key (checkGeoStore).
		return Errorf("ERR geostore: the destination is not the command's STORE key")
	}
	if zobj == nil {
		if storeKey != nil {
			s.opDel(Op{Kind: "del", Key: string(storeKey)})
			return Int(0)
		}
		return Array()
	}
	if count != 0 && sort == 0 && !anyOpt {
		sort = 1
	}
	limit := 0
	if anyOpt {
		limit = int(min(count, math.MaxInt32))
	}
	ga := sh.scanCells(zobj, limit)
	if len(ga) == 0 && storeKey == nil {
		return Array()
	}
	returned := len(ga)
	if count != 0 && int64(len(ga)) > count {
		returned = int(count)
	}
	switch sort {
	case 1:
		slices.SortStableFunc(ga, func(a, b geoPoint) int { return cmpDist(a.dist, b.dist) })
	case 2:
		slices.SortStableFunc(ga, func(a, b geoPoint) int { return -cmpDist(a.dist, b.dist) })
	}
	ga = ga[:returned]
	if storeKey == nil {
		out := make([]Result, len(ga))
		for i, gp := range ga {
			dist := gp.dist / sh.conversion
			if !withDist && !withHash && !withCoords {
				out[i] = Bytes([]byte(gp.member))
				continue
			}
			item := []Result{Bytes([]byte(gp.member))}
			if withDist {
				item = append(item, Bytes(formatDistance(dist)))
			}
			if withHash {
				item = append(item, Int(int64(gp.score)))
			}
			if withCoords {
				item = append(item, Array(Bytes(formatHumanDouble(gp.lon)), Bytes(formatHumanDouble(gp.lat))))
			}
			out[i] = Array(item...)
		}
		return Array(out...)
	}
	s.opDel(Op{Kind: "del", Key: string(storeKey)})
	if len(ga) == 0 {
		return Int(0)
	}
	c := newColl(tZSet, s.tok)
	for _, gp := range ga {
		sc := gp.score
		if storeDist {
			sc = gp.dist / sh.conversion
		}
		c.zsetScore(gp.member, sc)
	}
	s.store(string(storeKey), kvEntry{}, c)
	return Int(int64(len(ga)))
}

func cmpDist(a, b float64) int {
	switch {
	case a > b:
		return 1
	case a == b:
		return 0
	}
	return -1
}

// geoDistanceArg is extractDistanceOrReply: radius, unit.
func geoDistanceArg(a [][]byte) (conversion, radius float64, err error) {
	d, err := geoNumber(a[0], "need numeric radius")
	if err != nil {
		return 0, 0, err
	}
	if d < 0 {
		return 0, 0, fmt.Errorf("ERR radius cannot be negative")
	}
	u, err := geoUnit(a[1])
	if err != nil {
		return 0, 0, err
	}
	return u, d, nil
}
