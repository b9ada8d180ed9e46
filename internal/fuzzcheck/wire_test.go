package fuzzcheck

import (
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// u64 is a toy codec: a value as 8 bytes big-endian.
var u64 = New("u64", func(b []byte) (any, error) {
	if len(b) != 8 {
		return nil, errors.New("want 8 bytes")
	}
	return binary.BigEndian.Uint64(b), nil
}, func(x any) []byte { return binary.BigEndian.AppendUint64(nil, x.(uint64)) })

// Wire.Verify accepts samples that round-trip to the golden bytes, and
// catches each way a codec or its pins can break: bytes other than the
// golden ones, a decoder that loses a field, a codec without a sample, a
// golden line without a sample.
func TestWireVerify(t *testing.T) {
	path := filepath.Join(t.TempDir(), "wire.txt")
	w := Wire{Golden: path, Codecs: []Codec{u64}}
	good := []Sample{Pin("one", "u64", uint64(1)), Pin("big", "u64", uint64(1<<40))}
	if errs := w.Verify(true, good); len(errs) > 0 {
		t.Fatal(errs)
	}
	if errs := w.Verify(false, good); len(errs) > 0 {
		t.Fatalf("the recorded file does not verify: %v", errs)
	}
	expect := func(what string, errs []error, want string) {
		t.Helper()
		if len(errs) == 0 || !strings.Contains(errors.Join(errs...).Error(), want) {
			t.Errorf("%s: %v, want an error containing %q", what, errs, want)
		}
	}
	expect("changed bytes", w.Verify(false, []Sample{Pin("one", "u64", uint64(2)), good[1]}), "golden")
	expect("missing sample", w.Verify(false, good[:1]), "golden bytes but no encoding")
	lossy := New("u64", u64.Dec, func(x any) []byte { return binary.BigEndian.AppendUint64(nil, x.(uint64)&0xff) })
	expect("lossy encoder", Wire{Golden: path, Codecs: []Codec{lossy}}.Verify(false, good), "decodes to")
	unpinned := Wire{Golden: path, Codecs: []Codec{u64, New("other", u64.Dec, u64.Enc)}}
	expect("codec without a sample", unpinned.Verify(false, good), "has no golden sample")
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
