// Package fuzzcheck holds what every protocol's decoder fuzz target checks
// (docs/FUZZING.md): decoding returns an error or a value with bounded
// allocation, a value round-trips through its encoder, and length prefixes
// claiming 4 GB are refused before allocating. Imported by tests only.
package fuzzcheck

import (
	"bytes"
	"encoding/hex"
	"fmt"
	"math"
	"os"
	"reflect"
	"runtime"
	"strings"
	"testing"

	"github.com/synod-dev/synod/protocol/proto"
)

// Codec is one of a package's decoders with the encoder that inverts it.
type Codec struct {
	Name string
	Dec  func([]byte) (any, error)
	Enc  func(any) []byte
}

// Decoders runs one fuzz target over several decoders: the input's first
// byte picks the decoder, the rest is its input. The seeds are every seed
// each decoder accepts, and each of them again with a length prefix claiming
// 4 GB spliced in at each of its first 48 offsets.
func Decoders(f *testing.F, seeds [][]byte, codecs []Codec) {
	huge := []byte{0xff, 0xff, 0xff, 0xff, 0x0f}
	for _, s := range seeds {
		for i, c := range codecs {
			if _, err := c.Dec(s); err != nil {
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
			Check(t, codecs[int(in[0])%len(codecs)], in[1:])
		}
	})
}

// Check: decoding b returns an error or a value, allocating at most
// 1 MB plus 256 bytes per input byte; a value re-encodes to bytes that decode
// to an equal value, and that value re-encodes to the same bytes.
func Check(t *testing.T, c Codec, b []byte) {
	var x any
	var err error
	var a0, a1 runtime.MemStats
	runtime.ReadMemStats(&a0)
	x, err = c.Dec(b)
	runtime.ReadMemStats(&a1)
	if n := a1.TotalAlloc - a0.TotalAlloc; n > 1<<20+256*uint64(len(b)) {
		t.Fatalf("%s: decoding %d bytes allocated %d bytes", c.Name, len(b), n)
	}
	if err != nil {
		return
	}
	enc := c.Enc(x)
	y, err := c.Dec(enc)
	if err != nil {
		t.Fatalf("%s: %x decodes to %+v, whose encoding %x does not decode: %v", c.Name, b, x, enc, err)
	}
	if !SameValue(x, y) {
		t.Fatalf("%s: %x decodes to %+v, re-encoded %x decodes to %+v", c.Name, b, x, enc, y)
	}
	if again := c.Enc(y); !bytes.Equal(again, enc) {
		t.Fatalf("%s: %+v encodes to %x, then %x", c.Name, x, enc, again)
	}
}

// GoldenSeeds returns the encodings recorded in a golden/wire.txt file.
func GoldenSeeds(f *testing.F, path string) [][]byte {
	raw, err := os.ReadFile(path)
	if err != nil {
		f.Fatal(err)
	}
	var out [][]byte
	for _, line := range strings.Split(strings.TrimSpace(string(raw)), "\n") {
		_, hx, _ := strings.Cut(line, " ")
		b, err := hex.DecodeString(hx)
		if err != nil {
			f.Fatal(err)
		}
		out = append(out, b)
	}
	return out
}

// SameValue is reflect.DeepEqual except that a nil slice or map equals an
// empty one (decoders may return either for an empty field).
func SameValue(x, y any) bool { return sameValue(reflect.ValueOf(x), reflect.ValueOf(y)) }

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

// New returns the Codec named name.
func New(name string, dec func([]byte) (any, error), enc func(any) []byte) Codec {
	return Codec{Name: name, Dec: dec, Enc: enc}
}

// Sample is one value a package's golden file records: Name names its
// line, Codec the codec (by Codec.Name) that encodes it.
type Sample struct {
	Name  string
	Codec string
	Value any
}

// Wire is one protocol package's codecs and golden file (issue 32 item 1):
// the one harness its wire-golden test and its fuzz target both run
// through, so that every message and record kind the golden file pins is
// also a fuzz seed, and every codec the fuzzer exercises is pinned.
type Wire struct {
	Golden string // the golden file, "golden/wire.txt"
	Codecs []Codec
}

// Check encodes every sample with its codec and requires that the bytes
// decode to a value equal to the sample (SameValue) that encodes to the
// same bytes, and pass Check's round trip; then it compares the
// encodings with the golden file (proto.CheckGolden: every line has a
// sample and every sample a line). With update it rewrites the file
// instead. Every codec must have a sample.
func (w Wire) Check(t *testing.T, update bool, samples []Sample) {
	t.Helper()
	for _, err := range w.Verify(update, samples) {
		t.Error(err)
	}
	if t.Failed() {
		t.FailNow()
	}
	byName := map[string]Codec{}
	for _, c := range w.Codecs {
		byName[c.Name] = c
	}
	for _, s := range samples {
		c := byName[s.Codec]
		Check(t, c, c.Enc(s.Value))
	}
}

// Verify is Check without the allocation and re-decoding round trip of
// Check, returning what it finds.
func (w Wire) Verify(update bool, samples []Sample) []error {
	var errs []error
	byName := map[string]Codec{}
	for _, c := range w.Codecs {
		byName[c.Name] = c
	}
	used := map[string]bool{}
	var cases []proto.Encoded
	for _, s := range samples {
		c, ok := byName[s.Codec]
		if !ok {
			errs = append(errs, fmt.Errorf("%s: no codec %q", s.Name, s.Codec))
			continue
		}
		used[s.Codec] = true
		enc := c.Enc(s.Value)
		x, err := c.Dec(enc)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("%s: %x does not decode: %v", s.Name, enc, err))
		case !SameValue(s.Value, x):
			errs = append(errs, fmt.Errorf("%s: %+v encodes to %x, which decodes to %+v", s.Name, s.Value, enc, x))
		case !bytes.Equal(c.Enc(x), enc):
			errs = append(errs, fmt.Errorf("%s: %x decodes to a value that encodes to %x", s.Name, enc, c.Enc(x)))
		}
		cases = append(cases, proto.Encoded{Name: s.Name, Bytes: enc})
	}
	for _, c := range w.Codecs {
		if !used[c.Name] {
			errs = append(errs, fmt.Errorf("codec %s has no golden sample", c.Name))
		}
	}
	if len(errs) > 0 {
		return errs
	}
	if err := proto.CheckGolden(w.Golden, cases, update); err != nil {
		errs = append(errs, err)
	}
	return errs
}

// Fuzz is the package's fuzz target: Decoders over its codecs, seeded
// with the golden file's encodings.
func (w Wire) Fuzz(f *testing.F) { Decoders(f, GoldenSeeds(f, w.Golden), w.Codecs) }

// Pin returns the Sample named name: value v, encoded by codec.
func Pin(name, codec string, v any) Sample { return Sample{Name: name, Codec: codec, Value: v} }
