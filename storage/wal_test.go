package storage

import (
	"errors"
	"fmt"
	"log/slog"
	"math/rand"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

func openWAL(t *testing.T, dir string, o WALOptions) *WAL {
	t.Helper()
	o.Sync = true
	if o.Logger == nil {
		o.Logger = quietLog
	}
	w, err := OpenWAL(dir, o)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

var quietLog = slog.New(slog.DiscardHandler)

// model applies batches to an expected map of namespace -> records.
type model map[string]map[string]string

func (m model) apply(ns string, b []automaton.Persist) {
	if m[ns] == nil {
		m[ns] = map[string]string{}
	}
	for _, r := range b {
		if r.Delete {
			delete(m[ns], r.Key)
		} else {
			m[ns][r.Key] = string(r.Value)
		}
	}
}

func (m model) clone() model {
	c := model{}
	for ns, r := range m {
		c[ns] = map[string]string{}
		for k, v := range r {
			c[ns][k] = v
		}
	}
	return c
}

// check opens every namespace of want (and "other") and compares.
func (m model) check(t *testing.T, e Engine, nss ...string) {
	t.Helper()
	for _, ns := range nss {
		s := mustNS(t, e, ns)
		want := m[ns]
		if want == nil {
			want = map[string]string{}
		}
		equal(t, mustLoad(t, s), want)
		s.Close()
	}
}

// TestWALTornTail cuts the log at every byte offset inside its last frame
// (truncation, and zeroing the rest of the file as in preallocated space): the
// log reopens with exactly the batches before that frame, appends after the
// cut, and reopens again with them.
func TestWALTornTail(t *testing.T) {
	dir := t.TempDir()
	small := WALOptions{Chunk: 1 << 10} // preallocation, in small steps
	w := openWAL(t, dir, small)
	s := mustNS(t, w, "a")
	m := model{}
	var ends []int64
	for i := range 4 {
		b := []automaton.Persist{put(fmt.Sprintf("k%d", i), strings.Repeat("v", 10+i*7)), put("shared", fmt.Sprint(i))}
		if i == 3 {
			b = append(b, del("k0"))
		}
		if err := s.Commit(b); err != nil {
			t.Fatal(err)
		}
		if i < 3 {
			m.apply("a", b)
		}
		ends = append(ends, w.Size())
	}
	w.Close()
	path := filepath.Join(dir, WALFile)
	full, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if int64(len(full)) <= ends[3] {
		t.Fatalf("file %d bytes, frames end at %d: no preallocated space", len(full), ends[3])
	}
	for cut := ends[2]; cut < ends[3]; cut++ {
		for _, mode := range []string{"truncate", "zero"} {
			d := t.TempDir()
			b := append([]byte{}, full[:cut]...)
			if mode == "zero" {
				b = append(b, make([]byte, len(full)-int(cut))...)
			}
			if err := os.WriteFile(filepath.Join(d, WALFile), b, 0o644); err != nil {
				t.Fatal(err)
			}
			w2, err := OpenWAL(d, WALOptions{Sync: true, Chunk: small.Chunk, Logger: quietLog})
			if err != nil {
				t.Fatalf("cut at %d (%s): %v", cut, mode, err)
			}
			m.check(t, w2, "a")
			// Append after the cut: the torn bytes must not come back.
			s2 := mustNS(t, w2, "a")
			after := []automaton.Persist{put("after", "x")}
			if err := s2.Commit(after); err != nil {
				t.Fatal(err)
			}
			w2.Close()
			w3 := openWAL(t, d, small)
			m2 := m.clone()
			m2.apply("a", after)
			m2.check(t, w3, "a")
			w3.Close()
		}
	}
	// Uncut, all four batches are there.
	w4 := openWAL(t, dir, WALOptions{})
	defer w4.Close()
	m.apply("a", []automaton.Persist{put("k3", strings.Repeat("v", 31)), put("shared", "3"), del("k0")})
	m.check(t, w4, "a")
}

// TestWALCorruptMiddle: a damaged frame followed by a valid one is an error,
// not a silent truncation.
func TestWALCorruptMiddle(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, dir, WALOptions{Chunk: -1})
	s := mustNS(t, w, "a")
	var ends []int64
	for i := range 3 {
		if err := s.Commit([]automaton.Persist{put(fmt.Sprintf("k%d", i), "value")}); err != nil {
			t.Fatal(err)
		}
		ends = append(ends, w.Size())
	}
	w.Close()
	full, _ := os.ReadFile(filepath.Join(dir, WALFile))
	if int64(len(full)) != ends[2] {
		t.Fatalf("without preallocation the file is %d bytes, frames end at %d", len(full), ends[2])
	}
	for _, at := range []struct {
		name string
		off  int64
	}{{"length", ends[0]}, {"checksum", ends[0] + 5}, {"payload", ends[0] + 10}, {"last byte", ends[1] - 1}} {
		d := t.TempDir()
		b := append([]byte{}, full...)
		b[at.off] ^= 0x40
		os.WriteFile(filepath.Join(d, WALFile), b, 0o644)
		if at.name == "last byte" {
			// The byte may be padding, which no check covers: find a payload byte.
			b[at.off] ^= 0x40
			off := ends[1] - 1
			for b[off] == 0 {
				off--
			}
			b[off] ^= 0x40
			os.WriteFile(filepath.Join(d, WALFile), b, 0o644)
		}
		_, err := OpenWAL(d, WALOptions{Sync: true, Logger: quietLog})
		if err == nil || !strings.Contains(err.Error(), "corrupt frame at offset") {
			t.Errorf("damaged %s of frame 2: error %v, want corrupt frame", at.name, err)
		}
	}
}

// TestWALCompaction: with a small threshold the log is rewritten many times
// and always holds exactly the live records, across reopen.
func TestWALCompaction(t *testing.T) {
	dir := t.TempDir()
	o := WALOptions{CompactMin: 8 << 10, Chunk: 4 << 10}
	w := openWAL(t, dir, o)
	rng := rand.New(rand.NewSource(1))
	m := model{}
	stores := map[string]Store{"a": mustNS(t, w, "a"), "ab": mustNS(t, w, "ab")}
	var written int64
	for i := range 2000 {
		ns := []string{"a", "ab"}[i%2]
		var b []automaton.Persist
		for range 1 + rng.Intn(3) {
			k := fmt.Sprintf("k%d", rng.Intn(40))
			if rng.Intn(4) == 0 {
				b = append(b, del(k))
			} else {
				b = append(b, put(k, strings.Repeat(fmt.Sprint(i), 1+rng.Intn(20))))
			}
		}
		if err := stores[ns].Commit(b); err != nil {
			t.Fatal(err)
		}
		m.apply(ns, b)
		written += int64(len(b)) * 20
	}
	// The frames written during the last compaction follow its snapshot
	// and may take the log past the threshold again, with no commit after
	// them to start the next compaction (1 run in 100 under load once the
	// rename left the writer's role): wait for it to end, then one more
	// commit starts that compaction, which then carries only that frame.
	w.Size()
	last := []automaton.Persist{put("k0", "last")}
	if err := stores["a"].Commit(last); err != nil {
		t.Fatal(err)
	}
	m.apply("a", last)
	if size := w.Size(); size > max(o.CompactMin, 2*w.live)+8<<10 || written < 4*size {
		t.Fatalf("log is %d bytes after writing about %d (live %d): not compacted", size, written, w.live)
	}
	for _, s := range stores {
		s.Close()
	}
	m.check(t, w, "a", "ab")
	w.Close()
	w2 := openWAL(t, dir, o)
	defer w2.Close()
	m.check(t, w2, "a", "ab")
}

// TestWALCompactionCrash stops a compaction after each of its steps (as a
// crash would) and reopens: every record committed is there, nothing else,
// and the leftover temporary file is gone.
func TestWALCompactionCrash(t *testing.T) {
	for _, step := range []string{"write", "sync", "syncdir", "switch", "dual", "rename", "syncdir2"} {
		t.Run(step, func(t *testing.T) {
			dir := t.TempDir()
			stopped := false
			o := WALOptions{CompactMin: 4 << 10, crashAfter: func(s string) bool {
				if s == step && !stopped {
					stopped = true
					return true
				}
				return false
			}}
			w := openWAL(t, dir, o)
			s := mustNS(t, w, "a")
			m := model{}
			var err error
			// The compaction runs beside the writer: on a loaded machine
			// with a fast file system (tmpfs, no fsync) 1000 commits can
			// end before it reaches its step (CI, session 60), so after
			// them the test goes on committing, a millisecond apart, for
			// up to 10 s, past which it fails.
			deadline := time.Now().Add(10 * time.Second)
			for i := 0; err == nil && (i < 1000 || time.Now().Before(deadline)); i++ {
				if i >= 1000 {
					time.Sleep(time.Millisecond)
				}
				b := []automaton.Persist{put(fmt.Sprintf("k%d", i%10), strings.Repeat("x", i%50)), del(fmt.Sprintf("k%d", (i+5)%10))}
				// The batch that triggers the compaction is written before
				// it and succeeds; the next commit reports the failure.
				if err = s.Commit(b); err == nil {
					m.apply("a", b)
				}
			}
			if !stopped || err == nil {
				t.Fatalf("compaction never reached step %s (err %v)", step, err)
			}
			if err := s.Commit([]automaton.Persist{put("z", "z")}); err == nil {
				t.Fatal("commit after a failed compaction succeeded")
			}
			_, tmpErr := os.Stat(filepath.Join(dir, walTmpFile))
			if beforeRename := step != "rename" && step != "syncdir2"; beforeRename != (tmpErr == nil) {
				t.Fatalf("after step %s the temporary file exists: %v", step, tmpErr == nil)
			}
			w.Close()
			w2 := openWAL(t, dir, WALOptions{CompactMin: 4 << 10})
			defer w2.Close()
			m.check(t, w2, "a")
			if _, err := os.Stat(filepath.Join(dir, walTmpFile)); err == nil {
				t.Fatal("temporary file left after reopen")
			}
		})
	}
}

// TestWALConcurrentNamespaces: namespaces committing at once share frames
// (group commit) without mixing or losing records.
func TestWALConcurrentNamespaces(t *testing.T) {
	dir := t.TempDir()
	w := openWAL(t, dir, WALOptions{CompactMin: 16 << 10})
	var wg sync.WaitGroup
	const n = 4
	models := make([]model, n)
	errs := make([]error, n)
	for g := range n {
		ns := fmt.Sprintf("ns%d", g)
		s := mustNS(t, w, ns)
		models[g] = model{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range 150 {
				b := []automaton.Persist{put(fmt.Sprintf("k%d", i%7), fmt.Sprint(i)), put(fmt.Sprintf("j%d", i), ns)}
				if i%3 == 0 {
					b = append(b, del(fmt.Sprintf("j%d", i-1)))
				}
				if err := s.Commit(b); err != nil {
					errs[g] = err
					return
				}
				models[g].apply(ns, b)
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			t.Fatal(err)
		}
	}
	w.Close()
	w2 := openWAL(t, dir, WALOptions{})
	defer w2.Close()
	for g := range n {
		models[g].check(t, w2, fmt.Sprintf("ns%d", g))
	}
}

// TestOpenRefusesOtherEngine: switching a node's storage does not silently
// start from an empty store.
func TestOpenRefusesOtherEngine(t *testing.T) {
	cfg := &config.Cluster{Durability: config.Fsync, DataDir: t.TempDir()}
	for _, first := range []string{config.StoragePebble, config.StorageWAL} {
		cfg.Storage = first
		e, err := Open(cfg, first)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := e.(*WAL); ok != (first == config.StorageWAL) {
			t.Fatalf("storage %q opened %T", first, e)
		}
		s := mustNS(t, e, "a")
		if err := s.Commit([]automaton.Persist{put("k", "v")}); err != nil {
			t.Fatal(err)
		}
		e.Close()
		cfg.Storage = map[string]string{config.StoragePebble: "", config.StorageWAL: config.StoragePebble}[first]
		if _, err := Open(cfg, first); err == nil || !strings.Contains(err.Error(), "holds a") {
			t.Fatalf("storage %q over a %s directory: error %v", cfg.Storage, first, err)
		}
	}
	// Unset means the WAL.
	cfg.Storage = ""
	if e, err := Open(cfg, "fresh"); err != nil {
		t.Fatal(err)
	} else if _, ok := e.(*WAL); !ok {
		t.Fatalf("storage unset opened %T, want the WAL", e)
	} else {
		e.Close()
	}
	cfg.Storage = "tape"
	if _, err := Open(cfg, "n1"); err == nil || !strings.Contains(err.Error(), "tape") {
		t.Fatalf("storage tape: %v", err)
	}
}

// TestGroupCommitAcrossNamespaces: namespaces that commit while another's
// write is in progress share the next frame, one write and one fdatasync
// (the node's committers of different namespaces; WAL.Writes counts them).
// Each sync is made slow (50 ms) so that the commits surely overlap; the
// sync count of the file system agrees with the frames the WAL reports.
func TestGroupCommitAcrossNamespaces(t *testing.T) {
	fs := &FaultFS{}
	w, err := OpenWAL(t.TempDir(), WALOptions{Sync: true, FS: fs, Chunk: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	const ns, per = 8, 5
	var stores []Store
	for i := 0; i < ns; i++ {
		s, err := w.Namespace(fmt.Sprintf("ns%d", i))
		if err != nil {
			t.Fatal(err)
		}
		stores = append(stores, s)
	}
	fs.SlowSync(50 * time.Millisecond)
	syncs0 := fs.Syncs()
	c0, f0 := w.Writes()
	var wg sync.WaitGroup
	for i := range stores {
		wg.Add(1)
		go func(s Store) {
			defer wg.Done()
			for k := 0; k < per; k++ {
				if err := s.Commit([]automaton.Persist{{Key: fmt.Sprint(k), Value: []byte("v")}}); err != nil {
					t.Error(err)
				}
			}
		}(stores[i])
	}
	wg.Wait()
	c1, f1 := w.Writes()
	commits, frames := c1-c0, f1-f0
	t.Logf("%d commits of %d namespaces in %d frames (%d syncs)", commits, ns, frames, fs.Syncs()-syncs0)
	if commits != ns*per {
		t.Fatalf("%d commits counted, want %d", commits, ns*per)
	}
	// One namespace alone needs per frames; the others join: far fewer
	// frames than commits (each namespace waits for its own commit, so
	// at most ns commits share one frame, and a frame per round at least).
	if frames >= commits/2 || frames < per {
		t.Fatalf("%d frames for %d commits: namespaces did not share writes", frames, commits)
	}
	if got := uint64(fs.Syncs() - syncs0); got != frames {
		t.Fatalf("%d syncs for %d frames; want one each", got, frames)
	}
}

// TestWALCommitsDuringCompaction: while a compaction's snapshot is being
// encoded or written (held here after its first "encode" chunk, or at its
// "write" step), at its switch to writing both files, before the last of
// its tail is in the new file ("switch": the next frame carries it), or
// just before its new file is renamed over the log ("dual"; after the
// rename: TestWALCompactionRenameNotDurable), commits go on and return,
// and the frames they wrote are in the new log: after the compaction and
// a reopen every record is there. Fails when the compaction holds the
// commits (they never return while it is held: the snapshot encoded by the
// writer, as until session 48, and the last of the tail appended in the
// writer's role, as until session 49, both verified) and when the frames
// written meanwhile, or the last of the tail, are left out of the new log.
func TestWALCommitsDuringCompaction(t *testing.T) {
	for _, step := range []string{"encode", "write", "switch", "dual"} {
		t.Run(step, func(t *testing.T) { testCommitsDuringCompaction(t, step) })
	}
}

func testCommitsDuringCompaction(t *testing.T, at string) {
	dir := t.TempDir()
	held, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	o := WALOptions{CompactMin: 4 << 10, encodeChunk: 64, crashAfter: func(step string) bool {
		if step == at {
			once.Do(func() {
				close(held)
				<-release
			})
		}
		return false
	}}
	w := openWAL(t, dir, o)
	commitsWhileHeld(t, w, dir, held, release, 100000, nil,
		"no compaction started", fmt.Sprintf("commits did not return while the compaction was held at %q", at))
}

// TestWALFuzzySnapshot: commits that overwrite, delete and create keys
// between every chunk of a snapshot's encoding (the records a chunk
// already holds, and those it has not reached) leave, after the
// compaction and after a reopen, exactly the records committed (the hook
// runs on the compaction's goroutine, while the writer's role is free).
// Fails
// when the frames written while the snapshot is encoded are not in the
// new log's tail (verified: with the tail started after the encoding,
// the engine's records differ from the model's).
func TestWALFuzzySnapshot(t *testing.T) {
	dir := t.TempDir()
	var s Store
	m := model{}
	i, during := 0, 0
	var mu sync.Mutex // the test's commits and the hook's, one at a time, in the model's order
	closed := false
	commit := func() {
		mu.Lock()
		defer mu.Unlock()
		if closed {
			return // a compaction started by the last commits encodes after the test's end
		}
		b := []automaton.Persist{
			put(fmt.Sprintf("k%d", i%97), strings.Repeat(fmt.Sprint(i%10), 1+i%30)),
			del(fmt.Sprintf("k%d", (i*7+3)%97)),
			put(fmt.Sprintf("n%d", i), "x"),
		}
		if err := s.Commit(b); err != nil {
			t.Error(err)
			return
		}
		m.apply("a", b)
		i++
	}
	o := WALOptions{CompactMin: 4 << 10, encodeChunk: 32, crashAfter: func(step string) bool {
		if step == "encode" {
			commit()
			commit()
			mu.Lock()
			during++
			mu.Unlock()
		}
		return false
	}}
	w := openWAL(t, dir, o)
	s = mustNS(t, w, "a")
	for range 3000 {
		commit()
	}
	// The compaction runs beside the writer: on a loaded machine with a
	// fast file system (tmpfs) 3000 commits can end before it encodes a
	// chunk (session 60), so the test goes on committing, a millisecond
	// apart, until 20 chunks have had commits between them or 10 s pass.
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		mu.Lock()
		enough := during >= 20
		mu.Unlock()
		if enough {
			break
		}
		time.Sleep(time.Millisecond)
		commit()
	}
	mu.Lock()
	closed = true
	chunks := during
	mu.Unlock()
	s.Close()
	if chunks < 20 {
		t.Fatalf("%d chunks of a snapshot encoded with commits between them; want at least 20", chunks)
	}
	m.check(t, w, "a")
	w.Close()
	w2 := openWAL(t, dir, WALOptions{CompactMin: 4 << 10})
	defer w2.Close()
	m.check(t, w2, "a")
}

// TestWALCommitsDuringTailCatchUp: the frames written while a compaction's
// snapshot was written (here more than walCatchUp of them, the compaction
// held at its "write" step meanwhile) are appended to the new log without
// the writer's role: held at that append ("tail"), commits go on and
// return. Fails when the whole tail is left for the writer's role (as
// until session 48; verified with walCatchUp above the tail's size).
func TestWALCommitsDuringTailCatchUp(t *testing.T) {
	dir := t.TempDir()
	atWrite, atTail := make(chan struct{}), make(chan struct{})
	releaseWrite, releaseTail := make(chan struct{}), make(chan struct{})
	var onceW, onceT sync.Once
	o := WALOptions{CompactMin: 4 << 10, crashAfter: func(step string) bool {
		switch step {
		case "write":
			onceW.Do(func() {
				close(atWrite)
				<-releaseWrite
			})
		case "tail":
			onceT.Do(func() {
				close(atTail)
				<-releaseTail
			})
		}
		return false
	}}
	w := openWAL(t, dir, o)
	written := 0
	after := func() {
		select {
		case <-atWrite:
			// The tail grows while the snapshot's write is held.
			if written++; written == 2*walCatchUp/64 {
				close(releaseWrite)
			}
		default:
		}
	}
	commitsWhileHeld(t, w, dir, atTail, releaseTail, 200000, after,
		"the compaction never appended its tail beside the commits", "commits did not return while the compaction appended its tail")
}

// commitsWhileHeld commits to w's namespace "a" (after each commit, after
// if set) until held is closed, then 200 more, on a goroutine of its own: a
// compaction that held the commits would hold that goroutine too. It fails
// with notHeld when held is not closed within limit commits and with stuck
// when the commits do not return within 60 s; release is closed either
// way. Then every record committed must be in w, and in the log reopened;
// it returns the records committed.
func commitsWhileHeld(t *testing.T, w *WAL, dir string, held <-chan struct{}, release chan struct{}, limit int, after func(), notHeld, stuck string) model {
	t.Helper()
	s := mustNS(t, w, "a")
	m := model{}
	done := make(chan error, 1)
	go func() {
		more := -1
		for i := 0; more != 0; i++ {
			b := []automaton.Persist{put(fmt.Sprintf("k%d", i%50), strings.Repeat("v", 1+i%40)), del(fmt.Sprintf("k%d", (i+25)%50))}
			if err := s.Commit(b); err != nil {
				done <- err
				return
			}
			m.apply("a", b)
			if after != nil {
				after()
			}
			if more > 0 {
				more--
				continue
			}
			select {
			case <-held:
				more = 200
			default:
				if i > limit {
					done <- errors.New(notHeld)
					return
				}
			}
		}
		done <- nil
	}()
	select {
	case err := <-done:
		if err != nil {
			close(release)
			t.Fatal(err)
		}
	case <-time.After(60 * time.Second):
		close(release) // let the compaction end, so that the WAL closes
		<-done
		t.Fatal(stuck)
	}
	close(release)
	s.Close()
	m.check(t, w, "a")
	w.Close()
	w2 := openWAL(t, dir, WALOptions{CompactMin: 4 << 10})
	defer w2.Close()
	m.check(t, w2, "a")
	return m
}

// TestWALCompactionRenameNotDurable: until a compaction's rename is durable
// a machine crash may leave the directory with either file under the log's
// name, so each must hold every acknowledged commit. The old log is kept
// under a second name (a hard link made at the "dual" step, just before
// the rename); the compaction is held after the rename, before its
// directory sync, while 200 commits return (it fails on a hold there:
// the rename and its directory sync in the writer's role, as until session
// 49, verified), and copies of both files are taken then, as a crash
// would leave them. Each copy, reopened as the log, holds exactly the
// records committed. Fails when the frames written after the switch go
// only to the old file (the new log lacks them) or only to the new one
// (the old log lacks them; both verified).
func TestWALCompactionRenameNotDurable(t *testing.T) {
	dir, crash := t.TempDir(), t.TempDir()
	held, release := make(chan struct{}), make(chan struct{})
	var hookErr error
	var onceD, onceR sync.Once
	copies := []string{WALFile, "old.wal"}
	o := WALOptions{CompactMin: 4 << 10, crashAfter: func(step string) bool {
		switch step {
		case "dual":
			onceD.Do(func() { hookErr = os.Link(filepath.Join(dir, WALFile), filepath.Join(dir, "old.wal")) })
		case "rename":
			onceR.Do(func() {
				close(held)
				<-release // the commits have stopped: copy what a crash would leave
				for _, name := range copies {
					b, err := os.ReadFile(filepath.Join(dir, name))
					if err == nil {
						err = os.WriteFile(filepath.Join(crash, name), b, 0o644)
					}
					hookErr = errors.Join(hookErr, err)
				}
			})
		}
		return false
	}}
	w := openWAL(t, dir, o)
	m := commitsWhileHeld(t, w, dir, held, release, 100000, nil,
		"no compaction reached its rename", "commits did not return while the compaction was held after its rename")
	if hookErr != nil {
		t.Fatal(hookErr)
	}
	for _, name := range copies {
		d := t.TempDir()
		if err := os.Rename(filepath.Join(crash, name), filepath.Join(d, WALFile)); err != nil {
			t.Fatal(err)
		}
		w2 := openWAL(t, d, WALOptions{CompactMin: 4 << 10})
		m.check(t, w2, "a")
		w2.Close()
	}
}
