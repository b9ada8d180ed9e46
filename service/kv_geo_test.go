package service

import (
	"math"
	"math/big"
	"math/rand/v2"
	"testing"
)

// TestGeoRedisValues: scores, positions, geohashes and distances that
// redis-server 7.0.15 answered for the same commands (compat/testdata/geo
// compares every answer with a live redis-server; these pin the port
// where no server runs).
func TestGeoRedisValues(t *testing.T) {
	s := newKVState()
	if got := string(GeoScore(13.361389, 38.115556)); got != "3479099956230698" {
		t.Fatalf("Palermo's score %s, redis-server 3479099956230698", got)
	}
	kvScript(t, s, 0, `
zadd g 3479099956230698 Palermo 3479447370796909 Catania => (integer) 2
geopos g Palermo nosuch => [["13.36138933897018433" "38.11555639549629859"] (nil)]
geohash g Palermo Catania => ["sqc8b49rny0" "sqdtr74hyu0"]
geodist g Palermo Catania => "166274.1516"
geodist g Palermo Catania km => "166.2742"
geodist g Palermo Catania ft => "545518.8700"
geodist g Palermo Catania parsecs => (error) ERR unsupported unit provided. please use M, KM, FT, MI
geosearch g georadius 15 37 200 km => ["Palermo" "Catania"]
geosearch g georadius 15 37 200 km desc => ["Palermo" "Catania"]
geosearch g georadius 15 37 200 km asc withdist => [["Catania" "56.4413"] ["Palermo" "190.4424"]]
geosearch g georadius 15 37 100 km => ["Catania"]
geosearch g GEOSEARCH FROMMEMBER Palermo BYBOX 400 400 km ASC COUNT 1 WITHHASH => [["Palermo" (integer) 3479099956230698]]
geosearch g GEOSEARCH FROMLONLAT 15 37 BYRADIUS 1 km => []
geosearch g GEOSEARCH BYRADIUS 1 km => (error) ERR exactly one of FROMMEMBER or FROMLONLAT can be specified for GEOSEARCH
geosearch g georadius 15 37 200 km count 0 => (error) ERR COUNT must be > 0
geostore dst georadius g 15 37 200 km storedist dst => (integer) 2
zscore dst Catania => "56.441257870158204"
`)
}

// TestGeoTrigCorrectlyRounded: the double-double sin, cos and asin equal
// the correctly rounded value (math/big Taylor series, 300 bits) on
// random arguments in geo's ranges. Go's math.Sin fails this (about 4%
// of these arguments), which is why the port does not use it.
func TestGeoTrigCorrectlyRounded(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	bad := 0
	for range 2000 {
		x := (r.Float64() - 0.5) * 3
		if got, want := geoSin(x), bigSin(x); got != want {
			bad++
			t.Logf("sin(%v) = %v, correctly rounded %v", x, got, want)
		}
		if y := r.Float64(); geoSin(geoAsin(y)) != y && math.Abs(geoSin(geoAsin(y))-y) > 2e-16 {
			t.Errorf("sin(asin(%v)) = %v", y, geoSin(geoAsin(y)))
		}
	}
	if bad > 0 {
		t.Fatalf("%d of 2000 sin values misrounded", bad)
	}
	goBad := 0
	for range 2000 {
		x := (r.Float64() - 0.5) * 3
		if math.Sin(x) != bigSin(x) {
			goBad++
		}
	}
	if goBad == 0 {
		t.Fatal("math.Sin rounded every argument correctly: the test's broken variant is not caught")
	}
}

func bigSin(x float64) float64 {
	const prec = 300
	X := new(big.Float).SetPrec(prec).SetFloat64(x)
	sum := new(big.Float).SetPrec(prec)
	term := new(big.Float).SetPrec(prec).Set(X)
	x2 := new(big.Float).SetPrec(prec).Mul(X, X)
	for n := 1; n < 120; n += 2 {
		sum.Add(sum, term)
		term.Mul(term, x2)
		term.Quo(term, new(big.Float).SetPrec(prec).SetInt64(int64(-(n+1)*(n+2))))
	}
	f, _ := sum.Float64()
	return f
}
