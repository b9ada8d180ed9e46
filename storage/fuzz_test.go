package storage

import (
	"encoding/binary"
	"runtime"
	"testing"
)

// walFrames frames payloads as the WAL writes them: header (length, CRC32C)
// and zero padding to the next multiple of walAlign.
func walFrames(payloads ...[]byte) []byte {
	var b []byte
	for _, p := range payloads {
		b = binary.LittleEndian.AppendUint32(b, uint32(len(p)))
		b = binary.LittleEndian.AppendUint32(b, walCRC(b[len(b)-4:], p))
		b = append(b, p...)
		for len(b)%walAlign != 0 {
			b = append(b, 0)
		}
	}
	return b
}

// replayed replays a log image into a fresh WAL, counting what it allocates.
func replayed(b []byte) (w *WAL, end int64, torn bool, err error, alloc uint64) {
	var m0, m1 runtime.MemStats
	runtime.ReadMemStats(&m0)
	w = &WAL{data: map[string]map[string][]byte{}, open: map[string]bool{}}
	end, torn, err = w.replay(b)
	runtime.ReadMemStats(&m1)
	return w, end, torn, err, m1.TotalAlloc - m0.TotalAlloc
}

// FuzzWALReplay replays a log image: the input itself (first byte 0), or
// the rest of the input as the payload of one well-formed frame (first byte
// 1, so that the fuzzer reaches the record decoder behind the checksum).
// Replay returns an error or the end of the valid frames: a multiple of
// walAlign within the image, followed by zeros unless the tail is torn; it
// allocates a bounded amount per input byte; the live records, written
// again as one frame, replay to the same records; and the valid prefix alone
// replays to the same records with no torn tail.
func FuzzWALReplay(f *testing.F) {
	put := walAppendRec(walAppendRec(nil, walOpPut, "kv", "k", []byte("v")), walOpPut, "paxos", "p", []byte{1, 2})
	del := walAppendRec(nil, walOpDelete, "kv", "k", nil)
	f.Add(append([]byte{0}, walFrames(put, del)...))
	f.Add(append([]byte{0}, append(walFrames(put), make([]byte, 64)...)...))
	f.Add(append([]byte{0}, append(walFrames(put), 5, 0, 0, 0, 1, 2)...))
	f.Add(append([]byte{0}, append(append(walFrames(put), 1, 2, 3, 4, 5, 6, 7, 8), walFrames(del)...)...))
	f.Add(append([]byte{1}, put...))
	f.Add(append([]byte{1}, append(del, 3)...))
	f.Add([]byte{1, walOpPut, 0xff, 0xff, 0xff, 0xff, 0x0f, 'a'})
	f.Add([]byte{0, 0xff, 0xff, 0xff, 0xff, 0, 0, 0, 0})
	f.Fuzz(func(t *testing.T, in []byte) {
		if len(in) == 0 {
			return
		}
		img := in[1:]
		if in[0]%2 == 1 && len(img) > 0 {
			img = walFrames(img)
		}
		w, end, torn, err, alloc := replayed(img)
		if alloc > 1<<17+256*uint64(len(img)) {
			t.Fatalf("replaying %d bytes allocated %d", len(img), alloc)
		}
		if err != nil {
			return
		}
		if end < 0 || end > int64(len(img)) || end%walAlign != 0 {
			t.Fatalf("end %d of a %d-byte image", end, len(img))
		}
		if !torn && !allZero(img[end:]) {
			t.Fatalf("untorn log with nonzero bytes after %d", end)
		}
		var recs []byte
		for ns, m := range w.data {
			for k, v := range m {
				recs = walAppendRec(recs, walOpPut, ns, k, v)
			}
		}
		for _, again := range [][]byte{walFrames(recs), img[:end]} {
			if len(recs) == 0 && len(again) > 0 && len(img[:end]) != len(again) {
				continue // walFrames(nil) is a zero-length frame, never written
			}
			w2, end2, torn2, err, _ := replayed(again)
			if err != nil || torn2 || end2 != int64(len(again)) || !sameData(w.data, w2.data) {
				t.Fatalf("replaying %x again: end %d torn %v err %v, records %v want %v", again, end2, torn2, err, w2.data, w.data)
			}
		}
	})
}

// sameData reports whether two WALs hold the same live records (a
// namespace with no records counts as absent).
func sameData(a, b map[string]map[string][]byte) bool {
	n := 0
	for ns, m := range a {
		for k, v := range m {
			if w, ok := b[ns][k]; !ok || string(w) != string(v) {
				return false
			}
			n++
		}
	}
	for _, m := range b {
		n -= len(m)
	}
	return n == 0
}

// A last frame whose padding is missing is a torn tail, cut off at its
// start (found by FuzzWALReplay: replay sliced past the end of the log and
// panicked, so such a log stopped the node from opening).
func TestWALFrameWithoutPaddingIsTorn(t *testing.T) {
	first := walFrames(walAppendRec(nil, walOpPut, "kv", "a", []byte("1")))
	img := walFrames(walAppendRec(nil, walOpPut, "kv", "k", []byte("vv"))) // 17 bytes, padded to 24
	img = append(first, img[:len(img)-1]...)
	w, end, torn, err, _ := replayed(img)
	if err != nil || !torn || end != int64(len(first)) || len(w.data["kv"]) != 1 {
		t.Fatalf("end %d torn %v err %v records %v", end, torn, err, w.data)
	}
}
