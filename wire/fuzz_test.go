package wire

import (
	"bytes"
	"fmt"
	"runtime"
	"testing"
)

// decodeSchema reads data with one field per schema byte (its value mod 7:
// uvarint, varint, byte, bool, bytes, string, count) until the schema ends
// or a read fails, and returns the values read and the decoder's verdict.
// Each count must fit the bytes left (checked here, as Count promises).
func decodeSchema(t *testing.T, schema, data []byte) ([]any, error) {
	d := NewDecoder(data)
	var vals []any
	for _, s := range schema {
		left := len(d.B)
		var v any
		switch s % 7 {
		case 0:
			v = d.Uvarint()
		case 1:
			v = d.Varint()
		case 2:
			v = d.Byte()
		case 3:
			v = d.Bool()
		case 4:
			b := d.Bytes()
			if len(b) > left || len(b) > MaxBytes {
				t.Fatalf("Bytes returned %d bytes with %d left", len(b), left)
			}
			v = string(b)
		case 5:
			v = d.String()
		case 6:
			minSize := int(s/7%4) + 1
			n := d.Count(1000, minSize)
			if n > 1000 || n*minSize > len(d.B) {
				t.Fatalf("Count returned %d elements of %d bytes with %d bytes left", n, minSize, len(d.B))
			}
			v = n
		}
		if d.Err() != nil {
			break
		}
		vals = append(vals, v)
	}
	return vals, d.Done()
}

// encodeSchema writes values as decodeSchema read them.
func encodeSchema(schema []byte, vals []any) []byte {
	var e Encoder
	for i, v := range vals {
		switch schema[i] % 7 {
		case 0:
			e.Uvarint(v.(uint64))
		case 1:
			e.Varint(v.(int64))
		case 2:
			e.Byte(v.(byte))
		case 3:
			e.Bool(v.(bool))
		case 4, 5:
			e.String(v.(string))
		case 6:
			e.Uvarint(uint64(v.(int)))
		}
	}
	return e.B
}

// FuzzDecoder reads fuzzed data with a fuzzed schema. Reads never return
// more than the buffer holds, counts never promise more elements than the
// bytes left can hold (a count or length claiming 4 GB is an error), and
// decoding allocates no more than the strings it copies (plus 64 KB: the
// fuzzing engine allocates in the background while a target runs). Data that decodes
// completely re-encodes (minimally, so in at most as many bytes) to bytes
// that decode to the same values and encode to the same bytes again.
func FuzzDecoder(f *testing.F) {
	var e Encoder
	e.Uvarint(300)
	e.Varint(-5)
	e.Byte(7)
	e.Bool(true)
	e.Bytes([]byte("bytes"))
	e.String("str")
	e.Uvarint(2)
	f.Add([]byte{0, 1, 2, 3, 4, 5, 6}, e.B)
	f.Add([]byte{4}, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})
	f.Add([]byte{6}, []byte{0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})
	f.Add([]byte{0}, []byte{0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x01})
	f.Add([]byte{0, 0}, []byte{0x80, 0x00, 0x01})
	f.Add([]byte{3}, []byte{2})
	f.Fuzz(func(t *testing.T, schema, data []byte) {
		var vals []any
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		vals, err = decodeSchema(t, schema, data)
		runtime.ReadMemStats(&m1)
		if n := m1.TotalAlloc - m0.TotalAlloc; n > 64<<10+64*uint64(len(schema))+2*uint64(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), n)
		}
		if err != nil || len(vals) < len(schema) {
			return
		}
		enc := encodeSchema(schema, vals)
		if len(enc) > len(data) {
			t.Fatalf("%x re-encodes in %d bytes, more than its %d", data, len(enc), len(data))
		}
		again, err := decodeSchema(t, schema, enc)
		if err != nil || fmt.Sprintf("%#v", again) != fmt.Sprintf("%#v", vals) {
			t.Fatalf("%x decodes to %#v; re-encoded %x decodes to %#v (%v)", data, vals, enc, again, err)
		}
		if enc2 := encodeSchema(schema, again); !bytes.Equal(enc, enc2) {
			t.Fatalf("values encode to %x, then %x", enc, enc2)
		}
	})
}
