package storage

import (
	"bytes"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

// WAL file names inside the node's data directory.
const (
	WALFile    = "synod.wal"     // the log
	walTmpFile = "synod.wal.tmp" // a compaction in progress
)

const (
	walHeader   = 8       // uint32 payload length, uint32 CRC32C
	walAlign    = 8       // frames start at multiples of 8
	walMaxFrame = 1 << 30 // payload length limit
	walOpPut    = 1
	walOpDelete = 2
)

// DefaultWALChunk is how far ahead the WAL preallocates its file (fallocate).
const DefaultWALChunk = 4 << 20

// DefaultWALCompactMin is the log size below which the WAL never compacts.
const DefaultWALCompactMin = 64 << 20

var crc32c = crc32.MakeTable(crc32.Castagnoli)

// WALOptions configure OpenWAL.
type WALOptions struct {
	// Sync makes every Commit wait for fdatasync. Without it Commit returns
	// once the frame is written to the OS (survives a process crash only);
	// the node always uses Sync, the mode exists for storage benchmarks.
	Sync bool
	// DSync opens the log with O_DSYNC instead of calling fdatasync after
	// each write (same guarantee; see the package doc for the measurement).
	DSync bool
	// Chunk is the preallocation step in bytes: 0 means DefaultWALChunk,
	// negative disables preallocation (the file grows with each write).
	Chunk int64
	// CompactMin is the minimum log size that triggers a compaction; 0 means
	// DefaultWALCompactMin. The log is compacted when it exceeds
	// max(CompactMin, 2 x live size).
	CompactMin int64
	// ZeroFill (with Sync, without DSync, Chunk > 0) writes the space ahead
	// of the log with zeros and syncs it from a goroutine beside the
	// commits (fill), so that a frame overwrites blocks that are already
	// written instead of fallocate's unwritten extents, whose conversion
	// each frame's fdatasync would journal (see prealloc).
	ZeroFill bool
	// Logger receives recovery and compaction messages. Nil: slog.Default().
	Logger *slog.Logger
	// FS opens the log and compaction files. Nil: OSFS (tests inject
	// faults with a FaultFS).
	FS FS

	// crashAfter, when set (tests), is called after each compaction step
	// ("encode" after each chunk of the snapshot, without w.mu); returning
	// true abandons the compaction there, as a crash would, and fails the
	// engine.
	crashAfter func(step string) bool
	// encodeChunk, when positive (tests), replaces walEncodeChunk.
	encodeChunk int
	// fillPiece, when positive (tests), replaces walFillPiece.
	fillPiece int64
}

// WAL is the append-only log engine: one log file per node holding the
// records of every namespace (see the package doc).
type WAL struct {
	dir  string
	opts WALOptions
	lg   *slog.Logger

	mu      sync.Mutex
	cond    *sync.Cond
	pending []byte // encoded records of the next frame, after walHeader reserved bytes
	spare   []byte
	nextSeq uint64 // sequence number of the last Commit appended to pending
	doneSeq uint64 // every Commit up to this one is written (and synced)
	frames  uint64 // frames written (each one write and, with Sync, one fdatasync)
	writing bool   // one committer writes at a time; it owns f, off, alloc
	err     error  // sticky: a failed write or sync fails the engine (a *Failure)
	closed  bool
	data    map[string]map[string][]byte
	live    int64 // encoded size of the live records
	open    map[string]bool

	f     File
	off   int64 // end of the written (and synced) frames
	alloc int64 // preallocated file size

	// Zero-fill ahead (WALOptions.ZeroFill; prealloc, fill): while filling,
	// a fill goroutine writes zeros to f's [filled, fillEnd) a piece at a
	// time, syncing each, and advances filled; the writer never writes
	// beyond filled meanwhile. A frame that ends at or below filled lands
	// on zeros written and synced (if it starts at or above the fill's
	// start: fillFrom). fillOff: a fill failed on this file, none again.
	// fillWaits counts the frames that caught up with a fill (tests).
	filled, fillFrom, fillEnd int64
	filling, fillOff          bool
	fillWaits                 int
	closing                   bool // Close waits: a fill stops at its next piece

	// A compaction in progress (compact, finishCompaction): its snapshot
	// is written to the temporary file while commits go on appending to
	// the log; tail holds the frames they write meanwhile, which follow
	// the snapshot in the new log.
	compacting bool
	tail       []byte
	switching  bool // compactFiles waits for the writer's role: no commit takes it first

	// From the compaction's switch until its rename is durable, every frame
	// is written to both files, the old log (f at off) and the new one
	// (dual at dualOff), and synced in both: whichever of them the name
	// synod.wal leads to after a crash holds every acknowledged frame, so
	// the commits never wait for the rename's directory sync. The writer
	// owns dual and dualOff (set and cleared by compactFiles under w.mu
	// while no frame is in progress: the switching gate).
	dual    File
	dualOff int64
	// dualPre, set at the switch, is the last of the tail, which the new
	// file lacks: the next frame's writer writes it at dualOff ahead of
	// its frame (prefixDurable writes it when no commit comes first);
	// cleared under w.mu once synced.
	dualPre []byte
}

// OpenWAL opens (creating if needed) the log in dir and replays it.
func OpenWAL(dir string, o WALOptions) (*WAL, error) {
	if dir == "" {
		return nil, fmt.Errorf("storage: empty data directory")
	}
	if o.Chunk == 0 {
		o.Chunk = DefaultWALChunk
	}
	if o.CompactMin == 0 {
		o.CompactMin = DefaultWALCompactMin
	}
	if o.FS == nil {
		o.FS = OSFS{}
		if o.Sync && !o.DSync && ringMode != ringOff {
			if ok, err := RingStatus(); !ok {
				lg := o.Logger
				if lg == nil {
					lg = slog.Default()
				}
				lg.Warn("storage: wal: SYNOD_WAL_IOURING is set but io_uring is unavailable: fdatasync as a blocking system call", "dir", dir, "err", err)
			}
		}
	}
	w := &WAL{dir: dir, opts: o, lg: o.Logger, data: map[string]map[string][]byte{}, open: map[string]bool{}}
	if w.lg == nil {
		w.lg = slog.Default()
	}
	w.cond = sync.NewCond(&w.mu)
	w.pending = make([]byte, walHeader, 4096)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	// A leftover compaction output was never renamed into place: the log
	// beside it is complete, the temporary file may not be.
	tmp := filepath.Join(dir, walTmpFile)
	if err := os.Remove(tmp); err == nil {
		w.lg.Warn("storage: wal: removed an unfinished compaction", "file", tmp)
	} else if !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("storage: %w", err)
	}
	path := filepath.Join(dir, WALFile)
	b, err := os.ReadFile(path)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return nil, fmt.Errorf("storage: %w", err)
	}
	created := errors.Is(err, os.ErrNotExist)
	end, torn, err := w.replay(b)
	if err != nil {
		return nil, fmt.Errorf("storage: %s: %w", path, err)
	}
	flags := os.O_RDWR | os.O_CREATE
	if o.DSync && o.Sync {
		flags |= syscall.O_DSYNC
	}
	f, err := o.FS.OpenFile(path, flags, 0o644)
	if err != nil {
		return nil, fmt.Errorf("storage: %w", err)
	}
	w.f, w.off, w.alloc = f, end, int64(len(b))
	if torn {
		// Cut the torn frame off so that later frames are never followed by
		// its remains, and make the cut durable before appending.
		w.lg.Warn("storage: wal: truncated a torn frame at the end of the log", "file", path, "offset", end, "dropped_bytes", int64(len(b))-end)
		if err := f.Truncate(end); err != nil {
			f.Close()
			return nil, fmt.Errorf("storage: truncate %s: %w", path, err)
		}
		if err := f.Sync(); err != nil {
			f.Close()
			return nil, fmt.Errorf("storage: sync %s: %w", path, err)
		}
		w.alloc = end
	}
	if created {
		if err := syncDir(dir); err != nil {
			f.Close()
			return nil, err
		}
	}
	return w, nil
}

// replay applies every valid frame of b to w.data and returns the end of the
// last valid frame. A frame that fails its check is the torn tail of the log
// (torn=true, or false when only zeros follow: preallocated space) unless a
// valid frame starts after it, which is corruption in the middle: an error.
func (w *WAL) replay(b []byte) (end int64, torn bool, err error) {
	off := 0
	for {
		payload, next, ok := walFrameAt(b, off)
		if !ok {
			break
		}
		if err := w.applyPayload(payload); err != nil {
			return 0, false, fmt.Errorf("frame at offset %d: %w", off, err)
		}
		off = next
	}
	if allZero(b[off:]) {
		return int64(off), false, nil
	}
	for p := off + walAlign; p+walHeader <= len(b); p += walAlign {
		if _, _, ok := walFrameAt(b, p); ok {
			return 0, false, fmt.Errorf("corrupt frame at offset %d followed by a valid frame at offset %d", off, p)
		}
	}
	return int64(off), true, nil
}

// walFrameAt decodes the frame at off: its payload, the offset of the next
// frame, and whether it is complete (padding included) and its checksum matches.
func walFrameAt(b []byte, off int) (payload []byte, next int, ok bool) {
	if off+walHeader > len(b) {
		return nil, 0, false
	}
	n := int(binary.LittleEndian.Uint32(b[off:]))
	// A frame without its padding was cut short by a partial write (frames
	// are written padded, in one write): torn, like a short payload.
	if n == 0 || n > walMaxFrame || walPad(off+walHeader+n) > len(b) {
		return nil, 0, false
	}
	payload = b[off+walHeader : off+walHeader+n]
	if walCRC(b[off:off+4], payload) != binary.LittleEndian.Uint32(b[off+4:]) {
		return nil, 0, false
	}
	return payload, walPad(off + walHeader + n), true
}

func walCRC(lenField, payload []byte) uint32 {
	return crc32.Update(crc32.Checksum(lenField, crc32c), crc32c, payload)
}

func walPad(n int) int { return (n + walAlign - 1) &^ (walAlign - 1) }

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if binary.LittleEndian.Uint64(b) != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// applyPayload applies the records of one frame to w.data.
func (w *WAL) applyPayload(p []byte) error {
	for len(p) > 0 {
		op := p[0]
		p = p[1:]
		var ns, key, val []byte
		var err error
		if ns, p, err = walField(p); err != nil {
			return err
		}
		if key, p, err = walField(p); err != nil {
			return err
		}
		switch op {
		case walOpPut:
			if val, p, err = walField(p); err != nil {
				return err
			}
			w.apply(string(ns), string(key), val, false)
		case walOpDelete:
			w.apply(string(ns), string(key), nil, true)
		default:
			return fmt.Errorf("bad record op %d", op)
		}
	}
	return nil
}

func walField(p []byte) (field, rest []byte, err error) {
	n, k := binary.Uvarint(p)
	if k <= 0 || n > uint64(len(p)-k) {
		return nil, nil, fmt.Errorf("bad record field")
	}
	return p[k : k+int(n)], p[k+int(n):], nil
}

func walRecSize(ns, key string, val []byte) int64 {
	return int64(1 + 3*binary.MaxVarintLen32 + len(ns) + len(key) + len(val))
}

// apply updates the live records (w.mu held, or during OpenWAL) with a
// copy of val: a record held is rewritten in place when it has the room
// (a store to a key held allocates nothing). The live records are the
// WAL's own: Load copies them out and a compaction encodes them under
// w.mu, so nothing else holds them.
func (w *WAL) apply(ns, key string, val []byte, del bool) {
	m := w.data[ns]
	if m == nil {
		m = map[string][]byte{}
		w.data[ns] = m
	}
	old, held := m[key]
	if held {
		w.live -= walRecSize(ns, key, old)
	}
	switch {
	case del:
		delete(m, key)
		return
	case held && old != nil && cap(old) >= len(val):
		val = append(old[:0], val...)
	default:
		val = bytes.Clone(val)
	}
	m[key] = val
	w.live += walRecSize(ns, key, val)
}

func walAppendRec(b []byte, op byte, ns, key string, val []byte) []byte {
	b = append(b, op)
	b = binary.AppendUvarint(b, uint64(len(ns)))
	b = append(b, ns...)
	b = binary.AppendUvarint(b, uint64(len(key)))
	b = append(b, key...)
	if op == walOpPut {
		b = binary.AppendUvarint(b, uint64(len(val)))
		b = append(b, val...)
	}
	return b
}

// Durability implements Engine.
func (w *WAL) Durability() string {
	if w.opts.Sync {
		return config.Fsync
	}
	return "nosync"
}

// Dir is the data directory.
func (w *WAL) Dir() string { return w.dir }

// Err is the engine's sticky failure (a *Failure, or the error that failed
// it), or nil while it works.
func (w *WAL) Err() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.err
}

// Writes reports how many Commits returned successfully and how many frames
// carried them (each frame one write and, with sync on, one fdatasync): the
// group commit across namespaces, one frame for every Commit that queued
// behind the write in progress.
func (w *WAL) Writes() (commits, frames uint64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.doneSeq, w.frames
}

// Size is the length of the log's frames (not counting preallocated space).
func (w *WAL) Size() int64 {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.writing || w.compacting {
		w.cond.Wait()
	}
	return w.off
}

// Namespace implements Engine.
func (w *WAL) Namespace(name string) (Store, error) {
	if err := checkNamespace(name); err != nil {
		return nil, err
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return nil, ErrClosed
	}
	if w.err != nil {
		return nil, w.err
	}
	if w.open[name] {
		return nil, fmt.Errorf("storage: namespace %q is already open", name)
	}
	w.open[name] = true
	return &walStore{w: w, name: name}, nil
}

// Close implements Engine: it waits for a commit in progress and closes the
// file.
func (w *WAL) Close() error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.closing = true
	for w.writing || w.compacting || w.filling {
		w.cond.Wait()
	}
	if w.closed {
		return nil
	}
	w.closed = true
	w.cond.Broadcast()
	return w.f.Close()
}

// commit appends batch to the next frame and waits until a frame holding it
// is on disk. Concurrent commits (different namespaces) share one write and
// one fdatasync: the first to find no write in progress writes everything
// appended so far.
func (w *WAL) commit(ns string, batch []automaton.Persist) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return ErrClosed
	}
	if w.err != nil {
		return w.err
	}
	for _, r := range batch {
		if r.Delete {
			w.pending = walAppendRec(w.pending, walOpDelete, ns, r.Key, nil)
			w.apply(ns, r.Key, nil, true)
		} else {
			w.pending = walAppendRec(w.pending, walOpPut, ns, r.Key, r.Value)
			w.apply(ns, r.Key, r.Value, false)
		}
	}
	if len(w.pending)-walHeader > walMaxFrame {
		w.err = fmt.Errorf("storage: wal: frame of %d bytes exceeds the %d-byte limit", len(w.pending)-walHeader, walMaxFrame)
		return w.err
	}
	w.nextSeq++
	seq := w.nextSeq
	for w.doneSeq < seq {
		if w.err != nil {
			return w.err
		}
		if w.closed {
			return ErrClosed
		}
		if w.writing || w.switching {
			w.cond.Wait()
			continue
		}
		w.writing = true
		buf, upto := w.pending, w.nextSeq
		w.pending = append(w.spare[:0], make([]byte, walHeader)...)
		w.mu.Unlock()
		frame, err := w.writeFrame(buf)
		w.mu.Lock()
		w.spare = buf[:0]
		if err == nil {
			w.doneSeq = upto
			w.frames++
			if w.compacting && w.dual == nil {
				w.tail = append(w.tail, frame...)
			} else if w.compacting {
				w.dualPre = nil // written ahead of the frame, in both files' sync
			} else if w.off > max(w.opts.CompactMin, 2*w.live) {
				w.compact()
			}
		}
		if err != nil {
			w.fail(err)
		}
		w.writing = false
		w.cond.Broadcast()
	}
	return nil
}

// writeFrame fills in buf's header, pads it, writes it at w.off with one
// write, and syncs; it returns the frame as written. Called by the one
// writer, without w.mu.
func (w *WAL) writeFrame(buf []byte) ([]byte, error) {
	n := len(buf) - walHeader
	binary.LittleEndian.PutUint32(buf[0:], uint32(n))
	binary.LittleEndian.PutUint32(buf[4:], walCRC(buf[0:4], buf[walHeader:]))
	for len(buf)%walAlign != 0 {
		buf = append(buf, 0)
	}
	if err := w.prealloc(int64(len(buf))); err != nil {
		return nil, err
	}
	if _, err := w.f.WriteAt(buf, w.off); err != nil {
		return nil, failure("write", w.f.Name(), err)
	}
	pre := int64(len(w.dualPre))
	if w.dual != nil && pre > 0 {
		if _, err := w.dual.WriteAt(w.dualPre, w.dualOff); err != nil {
			return nil, failure("write", w.dual.Name(), err)
		}
	}
	if w.dual != nil {
		if _, err := w.dual.WriteAt(buf, w.dualOff+pre); err != nil {
			return nil, failure("write", w.dual.Name(), err)
		}
	}
	if w.opts.Sync && !w.opts.DSync {
		if err := w.datasync(w.f, len(buf)); err != nil {
			return nil, failure("fdatasync", w.f.Name(), err)
		}
		if w.dual != nil {
			if err := w.datasync(w.dual, int(pre)+len(buf)); err != nil {
				return nil, failure("fdatasync", w.dual.Name(), err)
			}
		}
	}
	w.off += int64(len(buf))
	if w.dual != nil {
		w.dualOff += pre + int64(len(buf))
	}
	return buf, nil
}

// walBulkFrame is the frame size from which the WAL syncs through the
// file's DatasyncBulk (osFile: the io_uring's held wait, uring_linux.go):
// about 5 SETs of 100-byte values. A lone writer's frame is smaller (one
// paxos put of 100 bytes: 216 bytes at the leader) and keeps fdatasync,
// whose latency the ring's io-wq wake-up would raise; a loaded node's group
// commits take the ring and save the P hand-off that a blocking fdatasync
// costs (redis-benchmark -c 50 -P 16: 1 % of the leader's frames below
// 1 KiB, a quarter below 4 KiB; docs/COSTS.md, pxs46, session 46).
const walBulkFrame = 1 << 10

// datasync syncs f (the log, or the compaction's new file) after a frame
// of n bytes.
func (w *WAL) datasync(f File, n int) error {
	if b, ok := f.(bulkSyncer); ok && n >= walBulkFrame {
		return b.DatasyncBulk()
	}
	return f.Datasync()
}

// prealloc makes sure n more bytes fit in the allocated file. With
// ZeroFill it first keeps a fill going ahead of the log: when less than half
// a chunk of zero-filled space is left past this frame, a fill goroutine
// writes and syncs zeros over the next chunk beyond it (beside the commits,
// not in any commit's wait); a frame that lands on that space needs no
// fallocate and its fdatasync flushes data only. On ext4 a write into
// fallocate's unwritten extents converts them, a metadata change that the
// frame's fdatasync must journal: 2,000 fdatasyncs after 1.5 KB writes on
// this machine's disk took a mean of 110-472 µs and a p99 of 0.22-6.3 ms
// into fallocated space, 99-278 µs and 0.16-2.6 ms into zero-filled
// space, lower in 8 of 8 alternated rounds (docs/costs/s56-esds56.md;
// PostgreSQL zero-fills its WAL segments for this reason). The writer
// never writes where a fill may still write zeros: a frame that catches up
// with a fill (the log outruns the zeros) stops it after its piece in
// flight (walFillPiece bytes), waits for that piece only, and the next fill
// starts half a chunk past the frame, so that the log does not wait for
// the zeros piece by piece; the frames in between, like the first piece's
// worth after opening or after a compaction's switch (the first fill
// starts a piece ahead), are preallocated with fallocate as before.
func (w *WAL) prealloc(n int64) error {
	if w.opts.Chunk < 0 {
		return nil
	}
	if w.opts.ZeroFill && w.opts.Sync && !w.opts.DSync {
		end := w.off + n
		w.mu.Lock()
		behind := w.filling && end > w.filled
		if behind {
			w.fillWaits++
			w.fillEnd = min(w.fillEnd, w.filled+w.fillPiece())
			for w.filling {
				w.cond.Wait() // the piece in flight may write zeros where this frame goes
			}
		}
		filled := w.off >= w.fillFrom && end <= w.filled
		if !w.filling && !w.fillOff && w.dual == nil && end+w.opts.Chunk/2 > w.filled {
			if behind || w.filled < end {
				// A gap: the first fill of this file starts a piece (at
				// most half a chunk) past this frame, so that a lone
				// writer's frames land on zeros soon after opening (the
				// frames before are fallocated); one after the log caught
				// up with the last fill starts half a chunk past it.
				lead := min(w.fillPiece(), w.opts.Chunk/2)
				if behind {
					lead = w.opts.Chunk / 2
				}
				w.fillFrom = max(w.filled, end) + lead
				w.filled = w.fillFrom
			}
			w.filling, w.fillEnd = true, w.filled+w.opts.Chunk
			go w.fill(w.f, w.filled)
		}
		w.mu.Unlock()
		if filled {
			return nil
		}
	}
	if w.off+n <= w.alloc {
		return nil
	}
	size := w.off + n + w.opts.Chunk
	if err := w.f.Allocate(w.alloc, size-w.alloc); err != nil {
		if errors.Is(err, syscall.EOPNOTSUPP) {
			w.opts.Chunk = -1 // the file system cannot: grow with each write
			return nil
		}
		return failure("fallocate", w.f.Name(), err)
	}
	w.alloc = size
	return nil
}

// walFillPiece is how many bytes of zeros fill writes and syncs at a
// time: a frame's fdatasync that runs beside a piece may wait for that
// piece's writeback, so pieces are small.
const walFillPiece = 256 << 10

var walZeros [walFillPiece]byte

func (w *WAL) fillPiece() int64 {
	if w.opts.fillPiece > 0 {
		return min(w.opts.fillPiece, walFillPiece)
	}
	return walFillPiece
}

// fill writes zeros to f's [from, w.fillEnd) and syncs them, a piece at a
// time, advancing w.filled after each synced piece (see prealloc). It stops
// early when a frame cuts w.fillEnd, the engine closes or fails, or a
// compaction switches files; a failed
// write or sync ends it and the fills of this file (the frames go on with
// fallocate, which reports a full disk as before). Zeros past the last
// frame are what recovery takes for preallocated space.
func (w *WAL) fill(f File, from int64) {
	off := from
	for {
		w.mu.Lock()
		n := min(w.fillPiece(), w.fillEnd-off)
		stop := n <= 0 || w.closing || w.err != nil || w.switching || w.f != f
		w.mu.Unlock()
		if stop {
			break
		}
		_, err := f.WriteAt(walZeros[:n], off)
		if err == nil {
			err = f.Datasync()
		}
		w.mu.Lock()
		if err != nil {
			w.fillOff = true
			w.mu.Unlock()
			break
		}
		off += n
		if w.f == f {
			w.filled = off
		}
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	w.mu.Lock()
	w.filling = false
	w.cond.Broadcast()
	w.mu.Unlock()
}

// fail makes err the engine's sticky failure (the writer calls it, w.mu
// held) and cuts the log back to the end of the last frame whose sync
// succeeded: what follows it (the frame of the failed write or sync, or
// preallocated space) may sit in the page cache without being on disk, and
// a restart must not replay it as if it were durable. The cut is best
// effort: if it fails too, the engine is failed all the same and the log
// says so (see "Storage faults" in the package doc).
func (w *WAL) fail(err error) {
	if _, ok := AsFailure(err); !ok && !errors.Is(err, errWALCrash) {
		err = failure("write", filepath.Join(w.dir, WALFile), err)
	}
	w.err = err
	if cut := w.f.Truncate(w.off); cut != nil {
		w.lg.Error("storage: wal: failed; could not cut the log back to its last synced frame (a restart may replay a frame that never synced)",
			"dir", w.dir, "err", err, "cut_err", cut, "offset", w.off)
		return
	}
	w.alloc = w.off
	if cut := w.f.Datasync(); cut != nil {
		w.lg.Error("storage: wal: failed; cut the log back to its last synced frame, but the cut did not sync (after a machine crash the failed frame may be back)",
			"dir", w.dir, "err", err, "cut_err", cut, "offset", w.off)
		return
	}
	if w.dual != nil {
		// The compaction's new file may be the log after a restart (its
		// rename may be durable): cut it back the same way.
		if cut := w.dual.Truncate(w.dualOff); cut != nil {
			w.lg.Error("storage: wal: failed; could not cut the compaction's new log back to its last synced frame (a restart may replay a frame that never synced)",
				"dir", w.dir, "err", err, "cut_err", cut, "offset", w.dualOff)
			return
		}
		if cut := w.dual.Datasync(); cut != nil {
			w.lg.Error("storage: wal: failed; cut the compaction's new log back to its last synced frame, but the cut did not sync (after a machine crash the failed frame may be back)",
				"dir", w.dir, "err", err, "cut_err", cut, "offset", w.dualOff)
			return
		}
	}
	w.lg.Error("storage: wal: failed; refusing every commit until the node restarts", "dir", w.dir, "err", err, "durable_end", w.off)
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return fmt.Errorf("storage: %w", err)
	}
	defer d.Close()
	if err := d.Sync(); err != nil {
		return failure("fsync", dir, err)
	}
	return nil
}

type walStore struct {
	w      *WAL
	name   string
	closed bool // guarded by w.mu
}

func (s *walStore) Load() (map[string][]byte, error) {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if s.closed || s.w.closed {
		return nil, ErrClosed
	}
	if s.w.err != nil {
		// The live records may include batches that never reached the disk.
		return nil, s.w.err
	}
	m := s.w.data[s.name]
	out := make(map[string][]byte, len(m))
	for k, v := range m {
		out[k] = bytes.Clone(v)
		if out[k] == nil {
			out[k] = []byte{}
		}
	}
	return out, nil
}

func (s *walStore) Commit(batch []automaton.Persist) error {
	s.w.mu.Lock()
	c := s.closed
	s.w.mu.Unlock()
	if c {
		return ErrClosed
	}
	if len(batch) == 0 {
		return nil
	}
	return s.w.commit(s.name, batch)
}

func (s *walStore) Close() error {
	s.w.mu.Lock()
	defer s.w.mu.Unlock()
	if !s.closed {
		s.closed = true
		delete(s.w.open, s.name)
	}
	return nil
}

// errWALCrash is the error of a compaction that a test stopped.
var errWALCrash = errors.New("compaction stopped by test (simulated crash)")

// compact rewrites the log with only the live records, without holding
// the node's commits for the work. Called by the writer with w.mu held: it
// marks the compaction started (every frame written from now on is also
// kept in w.tail) and starts compactFiles, which encodes the live records
// (encodeLive, taking w.mu only a chunk at a time), writes them to a
// temporary file, fsyncs it and the directory, and appends the frames
// written meanwhile (w.tail) and fsyncs them, all while commits go on
// appending to the log; then, waiting only for a frame in progress, it
// makes the writer write every later frame to both files (w.dual), the
// first of them preceded in the new file by the last of the tail (less
// than walCatchUp: w.dualPre, written by the compaction itself if no
// commit comes); beside the commits again it renames the file over the
// log and fsyncs the directory, and then (waiting only for a frame in
// progress) makes the new file the log. Until
// the rename the old log is complete by itself; from the switch on the new
// file holds the snapshot, then every frame written since the compaction
// started, and every frame is synced in both files until the rename is
// durable, so whichever file a crash leaves under the name is complete.
//
// Holding the commits for the whole compaction (as this did before) took
// 266-825 ms with a 40 MB live set under redis-benchmark -P 16 at load 24,
// and a leader whose loop waited that long lost its leadership each time
// (docs/COSTS.md, issue 28's rt-cpu section). Encoding the snapshot in the
// writer (as this did until session 48) still held them 27-368 ms per
// compaction with that live set at load 22-25, every ~8 s on each node,
// and the switch (the whole tail, two directory syncs) 48-208 ms more
// (docs/COSTS.md, pxs48); the rename's directory sync in the writer's role
// (until session 49) still held them 58-400 ms at load 34-41 (pxs48), and
// the last of the tail's fsync there up to 95 ms at load 31 (pxs49).
func (w *WAL) compact() {
	w.compacting, w.tail = true, nil
	go w.compactFiles(w.off, time.Now())
}

// walEncodeChunk is how many bytes of snapshot encodeLive encodes between
// releases of w.mu (a commit waits at most about that long to append).
const walEncodeChunk = 256 << 10

// encodeLive encodes the live records as a snapshot: frames of at most
// ~4 MiB of put records. It takes w.mu a chunk at a time, so commits go on
// meanwhile, and the snapshot is fuzzy: a key's record is its value at the
// moment its chunk was encoded, a key deleted before its chunk is absent,
// one created meanwhile may be there or not. Every record applied since
// the compaction started is also in a frame of w.tail, which follows the
// snapshot in the new log, and records are blind puts and deletes of whole
// values: replaying the snapshot and then the tail in order ends in the
// state after the tail's last frame, as replaying the old log does. (A key
// whose snapshot record is newer than some of its tail records ends at its
// last tail record, the newest value.)
func (w *WAL) encodeLive() ([]byte, error) {
	chunk := walEncodeChunk
	if w.opts.encodeChunk > 0 {
		chunk = w.opts.encodeChunk
	}
	w.mu.Lock()
	// w.live bounds the records' encoded size (walRecSize counts each varint
	// at its longest) and each frame adds a header and at most 7 bytes of
	// padding: sized once, the snapshot is built without regrowing unless
	// the live set grows meanwhile (appends regrowing from nil copied and
	// cleared it about twice over, 5-9 % of each node's CPU under
	// redis-benchmark -P 16 with a 40 MB live set).
	snap := make([]byte, 0, w.live+(w.live>>22+2)*(walHeader+walAlign))
	start, mark := -1, 0
	seal := func() {
		if start < 0 {
			return
		}
		n := len(snap) - start - walHeader
		binary.LittleEndian.PutUint32(snap[start:], uint32(n))
		binary.LittleEndian.PutUint32(snap[start+4:], walCRC(snap[start:start+4], snap[start+walHeader:]))
		for len(snap)%walAlign != 0 {
			snap = append(snap, 0)
		}
		start = -1
	}
	// Ranging over the maps across releases of w.mu is ranging over maps
	// modified during the iteration, which the language defines: an entry
	// deleted before it is reached is not produced, one added may be or
	// not, every other is produced once. w.mu orders each step with the
	// commits' changes.
	for ns, m := range w.data {
		for k, v := range m {
			if start < 0 {
				start = len(snap)
				snap = append(snap, make([]byte, walHeader)...)
			}
			snap = walAppendRec(snap, walOpPut, ns, k, v)
			if len(snap)-start > 4<<20 {
				seal()
			}
			if len(snap)-mark >= chunk {
				mark = len(snap)
				w.mu.Unlock()
				if w.stop("encode") {
					return nil, errWALCrash
				}
				w.mu.Lock()
			}
		}
	}
	seal()
	w.mu.Unlock()
	return snap, nil
}

// compactFiles carries out a compaction's file steps (see compact); it
// ends the compaction, failing the engine if a step failed.
func (w *WAL) compactFiles(old int64, t0 time.Time) {
	snap, err := w.encodeLive()
	var f File
	if err == nil {
		f, err = w.writeSnapshot(snap)
	}
	if err == nil {
		// The temporary file's directory entry, made durable before the
		// commits are held (a directory sync waits for the journal: it
		// took tens of ms with three nodes' compactions on one disk).
		if err = syncDir(w.dir); err != nil {
			err = w.compactionStepFailed(f, err)
		} else if w.stop("syncdir") {
			err = w.compactionStepFailed(f, errWALCrash)
		}
	}
	// Catch up: the frames written meanwhile are appended to the temporary
	// file and fsynced without the writer's role, until what is left is
	// small, so that the commits wait only for the rest (w.tail only grows
	// until the compaction ends, and its bytes never change).
	done := 0
	for err == nil {
		w.mu.Lock()
		more := w.tail[done:]
		w.mu.Unlock()
		if len(more) < walCatchUp {
			break
		}
		err = w.appendTail(f, more)
		done += len(more)
	}
	// Switch, without the writer's role: the last of the tail (less than
	// walCatchUp) becomes the new file's pending prefix (w.dualPre), which
	// the next frame's writer writes ahead of that frame, under the same
	// fdatasync; from then on the writer writes every frame to both files
	// (w.dual), and the rename and its directory sync run beside the
	// commits.
	w.mu.Lock()
	w.switching = true
	for w.writing {
		w.cond.Wait()
	}
	tail, gone := w.tail, w.err != nil
	dualFrames := w.frames // the frames written to both files: each paid two fdatasyncs
	switch {
	case err == nil && !gone:
		w.dual, w.dualOff = f, int64(len(snap)+done)
		if len(tail) > done {
			w.dualPre = tail[done:]
		}
		w.tail = nil
	case err == nil:
		f.Close() // the engine failed meanwhile: the log stays as it is
	}
	w.switching = false
	w.cond.Broadcast()
	w.mu.Unlock()
	var held time.Duration
	if err == nil && !gone && w.stop("switch") {
		err = errWALCrash
	}
	if err == nil && !gone {
		held, err = w.prefixDurable()
	}
	if err == nil && !gone {
		err = w.renameLog()
	}
	// End: no writer in progress (the switching gate keeps the next one
	// out while w.mu is held), only to swap the files or fail the engine.
	w.mu.Lock()
	w.switching = true
	for w.writing || w.filling {
		w.cond.Wait() // a fill stops at its next piece (switching)
	}
	t2 := time.Now()
	done2 := w.dual // closed below: the old log after the swap, or the new file given up
	switch {
	case err != nil:
		if fl, ok := AsFailure(err); ok {
			err = &Failure{Op: "compaction: " + fl.Op, Path: fl.Path, Err: fl.Err}
		}
		if w.err == nil {
			w.fail(err) // cuts the new file back too while it is w.dual
		}
		w.dualPre = nil
	case gone || w.err != nil:
		// The engine failed meanwhile (a frame's write or sync): the writer
		// that failed it cut both files back.
	default:
		done2 = w.f
		end := w.dualOff
		w.f, w.off, w.alloc = w.dual, end, end
		w.filled, w.fillFrom, w.fillOff = 0, 0, false
		w.lg.Info("storage: wal: compacted the log", "dir", w.dir, "from_bytes", old, "to_bytes", end,
			"tail_bytes", len(tail), "took", time.Since(t0), "held", held, "held_end", time.Since(t2), "dual_frames", w.frames-dualFrames)
	}
	w.dual, w.dualPre = nil, nil
	w.compacting, w.tail = false, nil
	w.switching = false
	w.cond.Broadcast()
	w.mu.Unlock()
	if done2 != nil {
		done2.Close()
	}
}

// writeSnapshot opens the temporary file, writes the snapshot and fsyncs
// it (a compaction's first steps, run beside the commits).
func (w *WAL) writeSnapshot(snap []byte) (File, error) {
	tmp := filepath.Join(w.dir, walTmpFile)
	flags := os.O_RDWR | os.O_CREATE | os.O_TRUNC
	if w.opts.DSync && w.opts.Sync {
		flags |= syscall.O_DSYNC
	}
	f, err := w.opts.FS.OpenFile(tmp, flags, 0o644)
	if err != nil {
		return nil, failure("open", tmp, err)
	}
	if _, err := f.Write(snap); err != nil {
		return nil, w.compactionStepFailed(f, err)
	}
	if w.stop("write") {
		return nil, w.compactionStepFailed(f, errWALCrash)
	}
	if err := f.Sync(); err != nil {
		return nil, w.compactionStepFailed(f, failure("fsync", tmp, err))
	}
	if w.stop("sync") {
		return nil, w.compactionStepFailed(f, errWALCrash)
	}
	return f, nil
}

// prefixDurable waits until the new file's pending prefix (w.dualPre, the
// last of the tail) is written and synced there: by the next frame's
// writer, or, when no commit takes the writer's role first, by the
// compaction itself, which then holds the role for that write and sync
// (held). It returns at once if the engine failed meanwhile (compactFiles
// sees w.err).
func (w *WAL) prefixDurable() (held time.Duration, err error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for w.dualPre != nil && w.err == nil {
		if w.writing || w.switching {
			w.cond.Wait()
			continue
		}
		w.writing = true
		t, pre, off := time.Now(), w.dualPre, w.dualOff
		w.mu.Unlock()
		if _, err = w.dual.WriteAt(pre, off); err != nil {
			err = failure("write", w.dual.Name(), err)
		} else if w.opts.Sync && !w.opts.DSync {
			if err = w.datasync(w.dual, len(pre)); err != nil {
				err = failure("fdatasync", w.dual.Name(), err)
			}
		}
		w.mu.Lock()
		if err == nil {
			w.dualOff += int64(len(pre))
			w.dualPre = nil
		}
		w.writing = false
		w.cond.Broadcast()
		return time.Since(t), err
	}
	return 0, nil
}

// renameLog renames the compaction's new file over the log and makes the
// rename durable (a compaction's last steps, beside the commits: until
// they end, the writer writes every frame to both files, so either name
// the directory holds after a crash leads to a complete log). It leaves
// the new file open either way (compactFiles closes it or makes it the
// log).
func (w *WAL) renameLog() error {
	if w.stop("dual") {
		return errWALCrash
	}
	tmp := filepath.Join(w.dir, walTmpFile)
	if err := os.Rename(tmp, filepath.Join(w.dir, WALFile)); err != nil {
		return failure("rename", tmp, err)
	}
	if w.stop("rename") {
		return errWALCrash
	}
	if err := syncDir(w.dir); err != nil {
		return err
	}
	if w.stop("syncdir2") {
		return errWALCrash
	}
	return nil
}

// walCatchUp is the most of the tail a compaction leaves for the
// writer's role to write: more is appended before the commits are held.
const walCatchUp = 64 << 10

// appendTail appends frames of the tail to the temporary file f and
// fsyncs it. On failure f is closed.
func (w *WAL) appendTail(f File, b []byte) error {
	tmp := filepath.Join(w.dir, walTmpFile)
	if _, err := f.Write(b); err != nil {
		return w.compactionStepFailed(f, err)
	}
	if w.stop("tail") {
		return w.compactionStepFailed(f, errWALCrash)
	}
	if err := f.Sync(); err != nil {
		return w.compactionStepFailed(f, failure("fsync", tmp, err))
	}
	return nil
}

// stop reports whether a test's crashAfter abandons the compaction after
// step.
func (w *WAL) stop(step string) bool { return w.opts.crashAfter != nil && w.opts.crashAfter(step) }

// compactionStepFailed closes the temporary file f and returns err as a
// Failure (errWALCrash, a test's simulated crash, as it is).
func (w *WAL) compactionStepFailed(f File, err error) error {
	f.Close()
	if errors.Is(err, errWALCrash) {
		return err
	}
	if _, ok := AsFailure(err); ok {
		return err
	}
	return failure("write", filepath.Join(w.dir, walTmpFile), err)
}
