package durability

import (
	"bytes"
	"fmt"
	"os"
	"runtime"
	"testing"

	"gopkg.in/yaml.v3"

	"github.com/synod-dev/synod/wire"
)

// FuzzParseMapping parses a durability mapping. Parsing allocates at most
// 4 MB plus 4 KB per input byte; a mapping that parses marshals to YAML
// that parses to an equal mapping, and marshals again to the same bytes.
func FuzzParseMapping(f *testing.F) {
	for _, p := range []string{"examples/counter/db.yaml", "examples/counter/pb.yaml", "examples/counter/reconstructible.yaml"} {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("objects:\n  c:\n    mechanism: database\n    methods:\n      inc: {sql: \"UPDATE t SET v = v + 1\"}\n      get: none\n      set: {sql: [a, b]}\n"))
	f.Add([]byte("objects: {c: {methods: {m: {sql: {x: 1}}}}}\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		var m *Mapping
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		m, err = ParseMapping(data)
		runtime.ReadMemStats(&m1)
		if n := m1.TotalAlloc - m0.TotalAlloc; n > 4<<20+4096*uint64(len(data)) {
			t.Fatalf("parsing %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		b, err := yaml.Marshal(m)
		if err != nil {
			t.Fatalf("a parsed mapping does not marshal: %v", err)
		}
		again, err := ParseMapping(b)
		if err != nil {
			t.Fatalf("marshalled mapping %s does not parse: %v", b, err)
		}
		b2, _ := yaml.Marshal(again)
		if !bytes.Equal(b, b2) {
			t.Fatalf("mapping marshals as\n%s\nthen as\n%s", b, b2)
		}
		for name, om := range m.Objects {
			if om == nil {
				continue
			}
			for meth, in := range om.Methods {
				a := again.Objects[name].Methods[meth]
				if in != nil && (a == nil || in.String() != a.String()) {
					t.Fatalf("%s.%s: instruction %v reads back as %v", name, meth, in, a)
				}
			}
		}
	})
}

// FuzzUpdates decodes a replication proxy's update buffer (what commitA
// ships to the backups). Decoding allocates a bounded amount per input
// byte; a buffer that decodes re-encodes to bytes that decode to equal
// updates, and encode again to the same bytes.
func FuzzUpdates(f *testing.F) {
	var e wire.Encoder
	EncodeUpdates(&e, []Update{{Object: "c", Method: "inc", Args: []Value{int64(-3), 2.5, "s", []byte("b"), true, nil}}, {Object: "m", Method: "set", State: []byte("st")}})
	f.Add(e.B)
	f.Add([]byte{1, 1, 'c', 1, 'm', 0, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add([]byte{0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, data []byte) {
		var ups []Update
		var err error
		var m0, m1 runtime.MemStats
		runtime.ReadMemStats(&m0)
		d := wire.NewDecoder(data)
		ups = DecodeUpdates(d)
		err = d.Done()
		runtime.ReadMemStats(&m1)
		if n := m1.TotalAlloc - m0.TotalAlloc; n > 1<<20+256*uint64(len(data)) {
			t.Fatalf("decoding %d bytes allocated %d", len(data), n)
		}
		if err != nil {
			return
		}
		var enc wire.Encoder
		EncodeUpdates(&enc, ups)
		d = wire.NewDecoder(enc.B)
		again := DecodeUpdates(d)
		if err := d.Done(); err != nil || len(again) != len(ups) {
			t.Fatalf("%x decodes to %v, re-encoded %x does not decode back (%v)", data, ups, enc.B, err)
		}
		for i := range ups {
			if fmt.Sprintf("%#v", again[i]) != fmt.Sprintf("%#v", ups[i]) { // NaN equals NaN
				t.Fatalf("update %d: %#v decodes back as %#v", i, ups[i], again[i])
			}
		}
		var enc2 wire.Encoder
		EncodeUpdates(&enc2, again)
		if !bytes.Equal(enc.B, enc2.B) {
			t.Fatalf("updates encode as %x, then %x", enc.B, enc2.B)
		}
	})
}
