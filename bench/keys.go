package bench

import (
	"math"
	"math/rand"
	"strconv"
)

// keyChooser draws key indexes in [0, keys) from a distribution. It owns no
// randomness: each client passes its own generator.
type keyChooser struct {
	spec DistSpec
	keys int
	hot  int // hotspot: keys [0, hot) are hot
	zipf *rand.Zipf
}

func hotKeys(h float64, keys int) int { return int(math.Round(h * float64(keys))) }

// newKeyChooser returns a chooser bound to r (Zipf keeps the generator).
func newKeyChooser(spec DistSpec, keys int, r *rand.Rand) *keyChooser {
	k := &keyChooser{spec: spec, keys: keys}
	switch spec.Kind {
	case "zipf":
		k.zipf = rand.NewZipf(r, spec.S, 1, uint64(keys-1))
	case "hotspot":
		k.hot = hotKeys(spec.H, keys)
	}
	return k
}

// next returns the next key index.
func (k *keyChooser) next(r *rand.Rand) int {
	switch k.spec.Kind {
	case "zipf":
		return int(k.zipf.Uint64())
	case "hotspot":
		if r.Float64() < k.spec.P {
			return r.Intn(k.hot)
		}
		return k.hot + r.Intn(k.keys-k.hot)
	}
	return r.Intn(k.keys)
}

// keyNamer formats fixed-width key names: prefix + zero-padded index, at least
// six digits ("key:000042").
type keyNamer struct {
	prefix string
	width  int
}

func newKeyNamer(prefix string, keys int) keyNamer {
	w := len(strconv.Itoa(keys - 1))
	if w < 6 {
		w = 6
	}
	return keyNamer{prefix: prefix, width: w}
}

func (n keyNamer) name(i int) string {
	b := make([]byte, 0, len(n.prefix)+n.width)
	b = append(b, n.prefix...)
	d := strconv.Itoa(i)
	for j := len(d); j < n.width; j++ {
		b = append(b, '0')
	}
	return string(append(b, d...))
}

// valueMaker builds printable values unique per write: a tag
// "<client>.<seq>." in base 36 followed by filler drawn once per client.
type valueMaker struct {
	client uint64
	seq    uint64
	buf    []byte // reused; targets must not retain op arguments
	filler []byte
}

const printable = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789"

func newValueMaker(client int, size int, r *rand.Rand) *valueMaker {
	f := make([]byte, size)
	for i := range f {
		f[i] = printable[r.Intn(len(printable))]
	}
	return &valueMaker{client: uint64(client), buf: make([]byte, size), filler: f}
}

// next returns the next value; it is valid until the following call.
func (v *valueMaker) next() []byte {
	v.seq++
	b := v.buf[:0]
	b = strconv.AppendUint(b, v.client, 36)
	b = append(b, '.')
	b = strconv.AppendUint(b, v.seq, 36)
	b = append(b, '.')
	if len(b) > len(v.filler) {
		// Only reachable past 36^10 writes by one client with MinValueSize values.
		panic("bench: value tag longer than the value size")
	}
	b = append(b, v.filler[len(b):]...)
	v.buf = b
	return b
}
