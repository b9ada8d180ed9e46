package abd

import (
	"reflect"
	"strings"
	"testing"

	"github.com/synod-dev/synod/wire"
)

// BenchmarkDecodeFrame is decodeFrame of a store (10-byte key, 100-byte
// value) and of a query-above, the replica's per-message decode
// (BenchmarkReplica's messages).
//
//	go test ./protocol/abd -run '^$' -bench DecodeFrame
func BenchmarkDecodeFrame(b *testing.B) {
	t := Tag{TS: 1 << 20, Node: "n1", Seq: 3}
	for _, tc := range []struct {
		name string
		msg  []byte
	}{
		{"store", appendRegister(nil, kindStore, 7<<32|12345, "key:001234", t, false, make([]byte, 100))},
		{"query-above", appendQueryAbove(nil, 7<<32|12345, "key:001234", t, true)},
	} {
		b.Run(tc.name, func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				if _, err := decodeFrame(tc.msg); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// refDecodeFrame is decodeFrame with every field read by wire.Decoder's
// own methods (before shortUvarint and shortBytes), the fields of each
// kind spelled as a string: k key, t timestamp, n writer, s sequence,
// d tomb, v value, w writes.
func refDecodeFrame(b []byte) (frame, error) {
	var f frame
	k, err := header.MessageKind(b)
	if err != nil {
		return f, err
	}
	f.Kind = k
	d := &wire.Decoder{B: b[2:]}
	f.Op = d.Uvarint()
	fields := map[byte]string{kindQuery: "k", kindQueryReply: "ktnsdv", kindStore: "ktnsdv", kindQueryAbove: "ktnsw"}
	bytesAt := map[rune]*[]byte{'k': &f.Key, 'n': &f.Node, 'v': &f.Value}
	uintAt := map[rune]*uint64{'t': &f.TS, 's': &f.Seq}
	boolAt := map[rune]*bool{'d': &f.Tomb, 'w': &f.Writes}
	for _, c := range fields[k] {
		if p, ok := bytesAt[c]; ok {
			*p = d.Bytes()
		} else if p, ok := uintAt[c]; ok {
			*p = d.Uvarint()
		} else {
			*boolAt[c] = d.Bool()
		}
	}
	return f, d.Done()
}

// TestDecodeFrameShortPaths: decodeFrame (one-byte lengths and varints
// read in place) decodes what wire.Decoder's methods decode, and fails
// where they fail, for lengths and sequence numbers on both sides of the
// one-byte boundary (127, 128), every truncation of each message, and a
// trailing byte.
func TestDecodeFrameShortPaths(t *testing.T) {
	var msgs [][]byte
	for _, kl := range []int{0, 1, 127, 128, 300} {
		key := strings.Repeat("k", kl)
		for _, vl := range []int{0, 5, 126, 127, 128, 1000} {
			for _, seq := range []uint64{0, 127, 128, 1 << 40} {
				tag := Tag{TS: seq + 1, Node: "n1", Seq: seq}
				msgs = append(msgs,
					appendRegister(nil, kindStore, seq<<3, key, tag, vl%2 == 0, make([]byte, vl)),
					appendRegister(nil, kindQueryReply, 5, key, tag, false, make([]byte, vl)),
					appendQueryAbove(nil, seq, key, tag, vl%2 == 0),
					appendQuery(nil, seq, key))
			}
		}
	}
	for _, m := range msgs {
		for n := 0; n <= len(m)+1; n++ {
			b := m[:min(n, len(m))]
			if n > len(m) {
				b = append(append([]byte(nil), m...), 0) // a trailing byte
			}
			got, gerr := decodeFrame(b)
			want, werr := refDecodeFrame(b)
			if (gerr == nil) != (werr == nil) {
				t.Fatalf("% x: error %v, want %v", b, gerr, werr)
			}
			if gerr == nil && !reflect.DeepEqual(got, want) {
				t.Fatalf("% x: %+v, want %+v", b, got, want)
			}
			if n == len(m) && gerr != nil {
				t.Fatalf("% x: %v for a whole message", b, gerr)
			}
		}
	}
}
