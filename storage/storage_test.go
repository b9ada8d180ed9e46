package storage

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/config"
)

func put(k, v string) automaton.Persist { return automaton.Persist{Key: k, Value: []byte(v)} }
func del(k string) automaton.Persist    { return automaton.Persist{Key: k, Delete: true} }

func mustNS(t *testing.T, e Engine, name string) Store {
	t.Helper()
	s, err := e.Namespace(name)
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func mustLoad(t *testing.T, s Store) map[string][]byte {
	t.Helper()
	m, err := s.Load()
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func equal(t *testing.T, got map[string][]byte, want map[string]string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("got %d records %v, want %d %v", len(got), got, len(want), want)
	}
	for k, v := range want {
		g, ok := got[k]
		if !ok || string(g) != v {
			t.Fatalf("record %q = %q (present %v), want %q", k, g, ok, v)
		}
	}
}

// engines runs f against each engine kind; reopen returns an engine over the
// same data (for Pebble and the WAL: the same directory; for Memory: the same value, since
// memory data does not outlive the engine).
func engines(t *testing.T, f func(t *testing.T, open func() Engine, persistent bool)) {
	t.Run("pebble", func(t *testing.T) {
		dir := t.TempDir()
		f(t, func() Engine {
			p, err := OpenPebble(dir, PebbleOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			return p
		}, true)
	})
	t.Run("wal", func(t *testing.T) {
		dir := t.TempDir()
		f(t, func() Engine {
			w, err := OpenWAL(dir, WALOptions{Sync: true})
			if err != nil {
				t.Fatal(err)
			}
			return w
		}, true)
	})
	t.Run("memory", func(t *testing.T) {
		m := NewMemory()
		f(t, func() Engine { return m }, false)
	})
}

func TestCommitLoadDeleteAcrossReopen(t *testing.T) {
	engines(t, func(t *testing.T, open func() Engine, persistent bool) {
		e := open()
		s := mustNS(t, e, "a")
		equal(t, mustLoad(t, s), map[string]string{})
		if err := s.Commit([]automaton.Persist{put("x", "1"), put("y", "2"), put("x", "3"), put("z", "")}); err != nil {
			t.Fatal(err)
		}
		if err := s.Commit([]automaton.Persist{del("y"), del("never-existed")}); err != nil {
			t.Fatal(err)
		}
		equal(t, mustLoad(t, s), map[string]string{"x": "3", "z": ""})
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if persistent {
			if err := e.Close(); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Load(); err == nil {
				t.Fatal("Load after Close succeeded")
			}
		}
		e2 := open()
		defer e2.Close()
		s2 := mustNS(t, e2, "a")
		equal(t, mustLoad(t, s2), map[string]string{"x": "3", "z": ""})
		// A deleted key stays deleted after reopen, and can be written again.
		if err := s2.Commit([]automaton.Persist{put("y", "again")}); err != nil {
			t.Fatal(err)
		}
		equal(t, mustLoad(t, s2), map[string]string{"x": "3", "y": "again", "z": ""})
	})
}

func TestNamespaceIsolation(t *testing.T) {
	engines(t, func(t *testing.T, open func() Engine, _ bool) {
		e := open()
		defer e.Close()
		// "a" is a prefix of "ab", and "a.b" sorts between them: none may leak.
		names := []string{"a", "ab", "a.b", "b"}
		stores := map[string]Store{}
		for _, n := range names {
			stores[n] = mustNS(t, e, n)
			if err := stores[n].Commit([]automaton.Persist{put("k", n), put("only-"+n, "1")}); err != nil {
				t.Fatal(err)
			}
		}
		if err := stores["a"].Commit([]automaton.Persist{del("k")}); err != nil {
			t.Fatal(err)
		}
		for _, n := range names {
			want := map[string]string{"k": n, "only-" + n: "1"}
			if n == "a" {
				delete(want, "k")
			}
			equal(t, mustLoad(t, stores[n]), want)
		}
		if _, err := e.Namespace("a"); err == nil {
			t.Fatal("opening namespace a twice succeeded")
		}
		if _, err := e.Namespace("x/y"); err == nil {
			t.Fatal("namespace with '/' accepted")
		}
	})
}

func TestLoadReturnsCopies(t *testing.T) {
	engines(t, func(t *testing.T, open func() Engine, _ bool) {
		e := open()
		defer e.Close()
		s := mustNS(t, e, "a")
		v := []byte("abc")
		if err := s.Commit([]automaton.Persist{{Key: "k", Value: v}}); err != nil {
			t.Fatal(err)
		}
		v[0] = 'X' // the caller may reuse its buffer after Commit
		m := mustLoad(t, s)
		m["k"][1] = 'Y'
		equal(t, mustLoad(t, s), map[string]string{"k": "abc"})
		// A record rewritten with a value of the same length, or of a
		// shorter one (the engines may rewrite their copy in place): an
		// earlier Load's copy and the caller's buffers stay apart.
		before := mustLoad(t, s)
		for _, next := range []string{"def", "gh", "ijkl"} {
			w := []byte(next)
			if err := s.Commit([]automaton.Persist{{Key: "k", Value: w}}); err != nil {
				t.Fatal(err)
			}
			w[0] = 'X'
			equal(t, mustLoad(t, s), map[string]string{"k": next})
		}
		equal(t, before, map[string]string{"k": "abc"})
	})
}

func TestMemoryIsLostWithEngine(t *testing.T) {
	cfg := &config.Cluster{Durability: config.Memory}
	e, err := Open(cfg, "n1")
	if err != nil {
		t.Fatal(err)
	}
	if e.Durability() != config.Memory {
		t.Fatalf("durability %q", e.Durability())
	}
	s := mustNS(t, e, "a")
	if err := s.Commit([]automaton.Persist{put("k", "v")}); err != nil {
		t.Fatal(err)
	}
	e.Close()
	e2, _ := Open(cfg, "n1")
	defer e2.Close()
	equal(t, mustLoad(t, mustNS(t, e2, "a")), map[string]string{})
}

func TestOpenFsyncUsesNodeDir(t *testing.T) {
	cfg := &config.Cluster{Durability: config.Fsync, DataDir: t.TempDir()}
	e, err := Open(cfg, "n7")
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	if e.Durability() != config.Fsync {
		t.Fatalf("durability %q", e.Durability())
	}
	if _, err := os.Stat(cfg.NodeDataDir("n7")); err != nil {
		t.Fatalf("node dir not created: %v", err)
	}
	if _, err := Open(&config.Cluster{Durability: "tape"}, "n1"); err == nil {
		t.Fatal("unknown durability accepted")
	}
}

// TestOpenWALCompactMin: the cluster file's wal_compact_min reaches the
// WAL: overwriting one key past 64 KiB of log compacts it with the setting
// (the log shrinks to about one record) and not without it.
func TestOpenWALCompactMin(t *testing.T) {
	for _, cm := range []int64{0, 64 << 10} {
		cfg := &config.Cluster{Durability: config.Fsync, DataDir: t.TempDir(), WALCompactMin: cm}
		e, err := Open(cfg, "n1")
		if err != nil {
			t.Fatal(err)
		}
		s, err := e.Namespace("ns")
		if err != nil {
			t.Fatal(err)
		}
		val := make([]byte, 1000)
		for i := 0; i < 100; i++ {
			if err := s.Commit([]automaton.Persist{{Key: "k", Value: val}}); err != nil {
				t.Fatal(err)
			}
		}
		size := e.(*WAL).Size()
		e.Close()
		if compacted := size < 64<<10; compacted != (cm > 0) {
			t.Errorf("wal_compact_min %d: log of %d bytes after 100 KB of overwrites of one key", cm, size)
		}
	}
}

const crashEnv = "SYNOD_STORAGE_CRASH_DIR"

// TestCrashChild is the child half of TestCrashKeepsCommitted: it commits
// records forever, printing each key after its Commit returned.
func TestCrashChild(t *testing.T) {
	dir := os.Getenv(crashEnv)
	if dir == "" {
		t.Skip("helper process for TestCrashKeepsCommitted")
	}
	e, err := openKind(os.Getenv(crashEnv+"_ENGINE"), dir)
	if err != nil {
		fmt.Println("ERR", err)
		os.Exit(2)
	}
	s, _ := e.Namespace("crash")
	w := bufio.NewWriter(os.Stdout)
	for i := 0; ; i++ {
		// Two records per batch: both or neither must survive.
		b := []automaton.Persist{put(fmt.Sprintf("k%06d", i), strconv.Itoa(i)), put(fmt.Sprintf("m%06d", i), "pair")}
		if err := s.Commit(b); err != nil {
			fmt.Fprintln(w, "ERR", err)
			w.Flush()
			os.Exit(2)
		}
		fmt.Fprintln(w, i)
		w.Flush()
	}
}

// openKind opens a durable engine by its config name.
func openKind(kind, dir string) (Engine, error) {
	switch kind {
	case config.StoragePebble:
		return OpenPebble(dir, PebbleOptions{Sync: true})
	case config.StorageWAL:
		return OpenWAL(dir, WALOptions{Sync: true})
	}
	return nil, fmt.Errorf("unknown engine %q", kind)
}

func TestCrashKeepsCommitted(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns a child process")
	}
	for _, kind := range []string{config.StoragePebble, config.StorageWAL} {
		t.Run(kind, func(t *testing.T) { crashKeepsCommitted(t, kind) })
	}
}

func crashKeepsCommitted(t *testing.T, kind string) {
	dir := t.TempDir()
	cmd := exec.Command(os.Args[0], "-test.run=^TestCrashChild$", "-test.v=false")
	cmd.Env = append(os.Environ(), crashEnv+"="+dir, crashEnv+"_ENGINE="+kind)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	sc := bufio.NewScanner(out)
	acked := -1
	deadline := time.Now().Add(20 * time.Second)
	for acked < 300 && time.Now().Before(deadline) && sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "ERR") {
			t.Fatalf("child: %s", line)
		}
		n, err := strconv.Atoi(line)
		if err != nil {
			continue
		}
		acked = n
	}
	// Kill while the child is in the middle of committing.
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	// Acks printed before the kill landed count too.
	for sc.Scan() {
		if n, err := strconv.Atoi(sc.Text()); err == nil {
			acked = n
		}
	}
	cmd.Wait()
	if acked < 0 {
		t.Fatal("child acknowledged no commit")
	}
	e, err := openKind(kind, dir)
	if err != nil {
		t.Fatal(err)
	}
	defer e.Close()
	m := mustLoad(t, mustNS(t, e, "crash"))
	for i := 0; i <= acked; i++ {
		if v := m[fmt.Sprintf("k%06d", i)]; string(v) != strconv.Itoa(i) {
			t.Fatalf("acknowledged record %d lost after kill -9 (value %q; %d acked)", i, v, acked+1)
		}
	}
	for k := range m {
		pair := "m" + k[1:]
		if k[0] == 'm' {
			pair = "k" + k[1:]
		}
		if _, ok := m[pair]; !ok {
			t.Fatalf("batch torn: %q present without %q", k, pair)
		}
	}
	t.Logf("%d acknowledged batches, %d records recovered", acked+1, len(m))
}
