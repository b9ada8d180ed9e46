package orcabcast

import (
	"bytes"
	"math"
	"reflect"
	"runtime"
	"testing"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/orca"
	"github.com/synod-dev/synod/service"
)

var codecs = []fuzzCodec{
	{"message", func(b []byte) (any, error) { return decodeMessage(b) }, func(x any) []byte { return x.(message).encode() }},
	{"update-record", func(b []byte) (any, error) {
		d, err := header.OpenRecord(b, "update")
		if err != nil {
			return nil, err
		}
		x := decodeEntry(d)
		return x, d.Done()
	}, func(x any) []byte { return encodeEntryRecord(x.(entry)) }},
	{"snapshot-record", func(b []byte) (any, error) {
		d, err := header.OpenRecord(b, "snapshot")
		if err != nil {
			return nil, err
		}
		s := decodeSnapshot(d)
		return s, d.Done()
	}, func(x any) []byte { return encodeSnapRecord(x.(snapshot)) }},
}

// seeds are one message of each kind and both records.
func seeds() [][]byte {
	x := entry{seq: 7, origin: "n2", req: automaton.Request{ID: automaton.RequestID{Client: 3, Seq: 4},
		Op: service.Op{Kind: "set", Key: "k", Args: [][]byte{[]byte("v")}}}}
	s := snapshot{seq: 9, state: []byte("state"), dedup: orca.Dedup{3: {Seq: 4, Res: service.OK()}}, blocked: []entry{x}}
	out := [][]byte{encodeEntryRecord(x), encodeSnapRecord(s)}
	for k := byte(1); k <= kNack; k++ {
		out = append(out, message{kind: k, bal: 4, n: 5, c: 3, x: x, xs: []entry{x, x}, hasSnap: true, snap: s}.encode())
	}
	return out
}

// FuzzCodecs fuzzes every message and record decoder of the package (see
// checkCodec).
func FuzzCodecs(f *testing.F) { fuzzDecoders(f, seeds(), codecs) }

// fuzzCodec is one of the package's decoders with the encoder that inverts it.
type fuzzCodec struct {
	name string
	dec  func([]byte) (any, error)
	enc  func(any) []byte
}

// fuzzDecoders runs one fuzz target over several decoders: the input's first
// byte picks the decoder, the rest is its input. The seeds are every seed
// each decoder accepts, and each of them again with a length prefix claiming
// 4 GB spliced in at each of its first 48 offsets.
func fuzzDecoders(f *testing.F, seeds [][]byte, codecs []fuzzCodec) {
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	for _, s := range seeds {
		for i, c := range codecs {
			if _, err := c.dec(s); err != nil {
				continue
			}
			f.Add(append([]byte{byte(i)}, s...))
			for k := 0; k < len(s) && k < 48; k++ {
				f.Add(append(append(append([]byte{byte(i)}, s[:k]...), huge...), s[k:]...))
			}
		}
	}
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) > 0 {
			checkCodec(t, codecs[int(in[0])%len(codecs)], in[1:])
		}
	})
}

// checkCodec: decoding b returns an error or a value, allocating at most
// 1 MB plus 256 bytes per input byte; a value re-encodes to bytes that decode
// to an equal value, and that value re-encodes to the same bytes.
func checkCodec(t *testing.T, c fuzzCodec, b []byte) {
	var x any
	var err error
	var a0, a1 runtime.MemStats
	runtime.ReadMemStats(&a0)
	x, err = c.dec(b)
	runtime.ReadMemStats(&a1)
	if n := a1.TotalAlloc - a0.TotalAlloc; n > 1<<20+256*uint64(len(b)) {
		t.Fatalf("%s: decoding %d bytes allocated %d bytes", c.name, len(b), n)
	}
	if err != nil {
		return
	}
	enc := c.enc(x)
	y, err := c.dec(enc)
	if err != nil {
		t.Fatalf("%s: %x decodes to %+v, whose encoding %x does not decode: %v", c.name, b, x, enc, err)
	}
	if !sameValue(reflect.ValueOf(x), reflect.ValueOf(y)) {
		t.Fatalf("%s: %x decodes to %+v, re-encoded %x decodes to %+v", c.name, b, x, enc, y)
	}
	if again := c.enc(y); !bytes.Equal(again, enc) {
		t.Fatalf("%s: %+v encodes to %x, then %x", c.name, x, enc, again)
	}
}

// sameValue is reflect.DeepEqual except that a nil slice or map equals an
// empty one (decoders may return either for an empty field).
func sameValue(a, b reflect.Value) bool {
	if a.IsValid() != b.IsValid() || a.IsValid() && a.Type() != b.Type() {
		return false
	}
	if !a.IsValid() {
		return true
	}
	switch a.Kind() {
	case reflect.Slice, reflect.Array, reflect.Map:
		if a.Len() != b.Len() {
			return false
		}
		if a.Kind() == reflect.Map {
			for _, k := range a.MapKeys() {
				if v := b.MapIndex(k); !v.IsValid() || !sameValue(a.MapIndex(k), v) {
					return false
				}
			}
			return true
		}
		for i := 0; i < a.Len(); i++ {
			if !sameValue(a.Index(i), b.Index(i)) {
				return false
			}
		}
		return true
	case reflect.Pointer, reflect.Interface:
		if a.IsNil() || b.IsNil() {
			return a.IsNil() == b.IsNil()
		}
		return sameValue(a.Elem(), b.Elem())
	case reflect.Struct:
		for i := 0; i < a.NumField(); i++ {
			if !sameValue(a.Field(i), b.Field(i)) {
				return false
			}
		}
		return true
	}
	switch {
	case a.CanInt():
		return a.Int() == b.Int()
	case a.CanUint():
		return a.Uint() == b.Uint()
	case a.CanFloat():
		return math.Float64bits(a.Float()) == math.Float64bits(b.Float())
	case a.Kind() == reflect.String:
		return a.String() == b.String()
	case a.Kind() == reflect.Bool:
		return a.Bool() == b.Bool()
	}
	return false // funcs, channels: not decoded values
}
