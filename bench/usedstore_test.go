package bench

import (
	"context"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/check"
	"github.com/synod-dev/synod/history"
)

// runAndCheck runs one recorded bench run against addr and checks its history.
func runAndCheck(t *testing.T, addr, runID string, n int) (*history.History, *check.Report) {
	t.Helper()
	cfg := testConfig(addr)
	cfg.Ops, cfg.Clients, cfg.Keys, cfg.ReadRatio = 600, 4, 20, 0.5
	cfg.Seed = int64(n) // a different value stream per run
	cfg.RunID = runID
	cfg.HistoryPath = filepath.Join(t.TempDir(), fmt.Sprintf("h%d.json", n))
	if _, err := Run(context.Background(), cfg, io.Discard); err != nil {
		t.Fatal(err)
	}
	h, err := history.Load(cfg.HistoryPath)
	if err != nil {
		t.Fatal(err)
	}
	r, err := check.Linearizable(h, check.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return h, r
}

// TestTwoRunsOnOneStore: two recorded runs against one store (the second
// finds the first one's data) both check linearizable, because each run
// uses a fresh key prefix and its history says so.
func TestTwoRunsOnOneStore(t *testing.T) {
	s := newFakeServer(t)
	for n := 1; n <= 2; n++ {
		id := NewRunID()
		h, r := runAndCheck(t, s.addr(), id, n)
		if r.Result != check.Ok {
			t.Fatalf("run %d on a used store: %s", n, r)
		}
		if got := h.Meta[MetaInitial]; got != InitialAbsent {
			t.Fatalf("run %d: history states initial values %q, want %q", n, got, InitialAbsent)
		}
		for _, op := range h.Ops {
			if !strings.HasPrefix(op.Key, "key:"+id+":") {
				t.Fatalf("run %d: key %q lacks the run id %s", n, op.Key, id)
			}
		}
	}
}

// TestFixedPrefixOnUsedStoreExplained is the control: without a run id the
// second run reads the first run's values, its check fails, and the report
// explains one key by the value no recorded write produced.
func TestFixedPrefixOnUsedStoreExplained(t *testing.T) {
	s := newFakeServer(t)
	if _, r := runAndCheck(t, s.addr(), "", 1); r.Result != check.Ok {
		t.Fatalf("first run on an empty store: %s", r)
	}
	h, r := runAndCheck(t, s.addr(), "", 2)
	if got := h.Meta[MetaInitial]; got != InitialUnknown {
		t.Fatalf("history states initial values %q, want %q", got, InitialUnknown)
	}
	if r.Result != check.Illegal {
		t.Fatalf("second run with a fixed prefix checked %s, want a violation", r.Result)
	}
	if s := r.String(); !strings.Contains(s, "which no operation of the history wrote") {
		t.Fatalf("report does not explain the pre-existing value:\n%s", s)
	}
}
