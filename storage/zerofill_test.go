package storage

import (
	"fmt"
	"math/rand"
	"os"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
)

// recFS records, in order, every WriteAt and Datasync on the files it opens
// (each file by the order it was opened: a compaction's new file is another).
type recFS struct {
	mu         sync.Mutex
	files      int
	ev         []recEv
	zeroDelay  time.Duration // each write of zeros (a fill's piece) takes this much longer
	frameDelay time.Duration // and each other write
}

type recEv struct {
	file      int
	zero      bool // a write of zeros only (a fill's; a frame's header is never zero)
	sync      bool
	off, end  int64
	afterSync int // for a write: how many syncs of its file preceded it
}

type recFile struct {
	File
	fs *recFS
	id int
}

func (fs *recFS) OpenFile(name string, flag int, perm os.FileMode) (File, error) {
	f, err := OSFS{}.OpenFile(name, flag, perm)
	if err != nil {
		return nil, err
	}
	fs.mu.Lock()
	defer fs.mu.Unlock()
	fs.files++
	return &recFile{File: f, fs: fs, id: fs.files}, nil
}

func (f *recFile) WriteAt(p []byte, off int64) (int, error) {
	if allZero(p) {
		time.Sleep(f.fs.zeroDelay)
	} else {
		time.Sleep(f.fs.frameDelay)
	}
	n, err := f.File.WriteAt(p, off)
	f.fs.mu.Lock()
	f.fs.ev = append(f.fs.ev, recEv{file: f.id, zero: allZero(p), off: off, end: off + int64(len(p))})
	f.fs.mu.Unlock()
	return n, err
}

func (f *recFile) Datasync() error {
	err := f.File.Datasync()
	f.fs.mu.Lock()
	f.fs.ev = append(f.fs.ev, recEv{file: f.id, sync: true})
	f.fs.mu.Unlock()
	return err
}

// TestWALZeroFill commits frames with ZeroFill and a small chunk, with
// compactions switching files, and checks from the file operations that
// (1) no zeros were ever written over a frame's bytes (the fill stays ahead
// of the writer), (2) almost every frame was written over zeros that were
// written and synced before it (the fill works: without it none is), and
// (3) the log reopens with every record committed.
func TestWALZeroFill(t *testing.T) {
	// Each frame's write 50 µs slower: on tmpfs (no flush) under load a
	// writer at CPU speed outran the filling goroutine (979 of 2002 frames
	// on zeros at load 6, session 60); a disk's fdatasync paces it more.
	fs := &recFS{frameDelay: 50 * time.Microsecond}
	nframes, onZeros, files, _ := zeroFillRun(t, fs, WALOptions{ZeroFill: true, Chunk: 64 << 10, CompactMin: 256 << 10}, 1500)
	// The snapshot and tail writes of compactions are frames here too, and
	// the first frames of each file precede its first fill.
	if files < 3 {
		t.Fatalf("%d files written: the test wants compactions", files)
	}
	if onZeros < nframes*2/3 {
		t.Fatalf("%d of %d frame writes landed on zeros written and synced before them, want most", onZeros, nframes)
	}
	t.Logf("%d of %d frame writes on zero-filled space, %d files", onZeros, nframes, files)
}

// TestWALZeroFillSlow makes every piece of zeros slow (2 ms, several of the
// log's frames with their fdatasync): a frame that catches up with a fill
// waits for its piece in flight only, and the next fill starts half a chunk
// ahead, so the frames do not wait for the zeros piece by piece (each piece
// is 4 KiB, four frames here: waiting piece by piece, about one frame in
// four waits). Safety and the records are checked as in TestWALZeroFill.
func TestWALZeroFillSlow(t *testing.T) {
	fs := &recFS{zeroDelay: 2 * time.Millisecond}
	const frames = 600
	_, _, _, waits := zeroFillRun(t, fs, WALOptions{ZeroFill: true, Chunk: 64 << 10, fillPiece: 4 << 10}, frames)
	if waits > frames/10 {
		t.Fatalf("%d of %d frames waited for a fill's zeros, want few", waits, frames)
	}
	t.Logf("%d of %d frames waited for a fill", waits, frames)
}

// TestWALZeroFillSoon: a lone writer (each frame 3 ms slower, as a client's
// round trip would make it) writes 40 frames of ~1 KiB after opening, less
// than half a chunk: the first fill starts a piece (4 KiB here) past the
// first frame, so most of them land on zeros; a fill started half a chunk
// ahead (32 KiB) would leave every one of them on fallocated space.
func TestWALZeroFillSoon(t *testing.T) {
	fs := &recFS{frameDelay: 3 * time.Millisecond}
	nframes, onZeros, _, _ := zeroFillRun(t, fs, WALOptions{ZeroFill: true, Chunk: 64 << 10, fillPiece: 4 << 10}, 40)
	if onZeros < nframes/2 {
		t.Fatalf("%d of %d frame writes landed on zeros written and synced before them, want most", onZeros, nframes)
	}
	t.Logf("%d of %d frame writes on zero-filled space", onZeros, nframes)
}

// zeroFillRun commits n random batches to a WAL on fs with options o (Sync
// on), closes it, checks from fs's record that no zeros were written over a
// frame written before them, reopens the log and checks every record. It
// returns the frame writes, those that landed on zeros written and synced
// before them, the files written, and the frames that waited for a fill.
func zeroFillRun(t *testing.T, fs *recFS, o WALOptions, n int) (nframes, onZeros, files, waits int) {
	t.Helper()
	dir := t.TempDir()
	o.FS = fs
	w := openWAL(t, dir, o)
	s := mustNS(t, w, "a")
	rng := rand.New(rand.NewSource(1))
	m := model{}
	for i := range n {
		var b []automaton.Persist
		for range 1 + rng.Intn(8) {
			b = append(b, put(fmt.Sprintf("k%d", rng.Intn(200)), strings.Repeat(fmt.Sprint(i%10), 50+rng.Intn(200))))
		}
		if err := s.Commit(b); err != nil {
			t.Fatal(err)
		}
		m.apply("a", b)
	}
	s.Close()
	w.mu.Lock()
	waits = w.fillWaits
	w.mu.Unlock()
	if err := w.Close(); err != nil {
		t.Fatal(err)
	}

	fs.mu.Lock()
	ev := fs.ev
	fs.mu.Unlock()
	type span struct{ off, end int64 }
	frames := map[int][]span{}   // per file: frame writes so far
	zeros := map[int][]span{}    // per file: zero writes synced
	pendingZ := map[int][]span{} // per file: zero writes not yet synced
	for _, e := range ev {
		switch {
		case e.sync:
			zeros[e.file] = append(zeros[e.file], pendingZ[e.file]...)
			pendingZ[e.file] = nil
		case e.zero:
			for _, f := range frames[e.file] {
				if e.off < f.end && f.off < e.end {
					t.Fatalf("file %d: zeros written at [%d, %d) over a frame at [%d, %d)", e.file, e.off, e.end, f.off, f.end)
				}
			}
			pendingZ[e.file] = append(pendingZ[e.file], span{e.off, e.end})
		default:
			if files < e.file {
				files = e.file
			}
			nframes++
			frames[e.file] = append(frames[e.file], span{e.off, e.end})
			for _, z := range zeros[e.file] {
				if z.off <= e.off && e.end <= z.end {
					onZeros++
					break
				}
			}
		}
	}
	w2 := openWAL(t, dir, WALOptions{})
	defer w2.Close()
	m.check(t, w2, "a")
	return nframes, onZeros, files, waits
}
