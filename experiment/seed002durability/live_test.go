package seed002durability

import (
	"bytes"
	"context"
	"os"
	"strings"
	"sync"
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
)

var (
	buildOnce sync.Once
	binPath   string
	buildErr  error
)

// synodBinary builds the synod binary once for the package's live tests
// (TestMain removes it).
func synodBinary(t *testing.T) string {
	t.Helper()
	buildOnce.Do(func() {
		dir, err := os.MkdirTemp("", "seed002durability-")
		if err != nil {
			buildErr = err
			return
		}
		buildDir = dir
		binPath, buildErr = cluster.BuildSynod(dir)
	})
	if buildErr != nil {
		t.Fatal(buildErr)
	}
	return binPath
}

var buildDir string

func TestMain(m *testing.M) {
	code := m.Run()
	if buildDir != "" {
		os.RemoveAll(buildDir)
	}
	os.Exit(code)
}

// The live Counter, --quick on SQLite: every cell runs on a real cluster
// (the counter ends at exactly the adds answered, checked in the cell),
// states its fsync and where it ran, and the summary gives a verdict per
// seed claim.
func TestCounterLiveQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	e := &Counter{adds: 2000, clients: "1,2,4,8,12,16", databases: "sqlite", beds: "live,process"}
	res := runQuick(t, e, 16)
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK || c.Metrics[mLatency] <= 0 || c.Metrics[mThrough] <= 0 || c.Labels["adds"] != "100" {
			t.Errorf("cell %s: %+v", c.Key, c)
		}
		want := c.Params[3].Value // fsync
		if want == "-" {
			want = "- (no database)"
		}
		if c.Labels["state fsync"] != want {
			t.Errorf("cell %s states fsync %q", c.Key, c.Labels["state fsync"])
		}
		if live := strings.Contains(c.Key, "bed=live"); live != strings.Contains(c.Labels["runs on"], "synod node") {
			t.Errorf("cell %s runs on %q", c.Key, c.Labels["runs on"])
		}
	}
	sum := strings.Join(res.Summary, "\n")
	for _, claim := range []string{"live: PB RTT", "live: DB on sqlite, state fsync on: RTT", "process: DB on sqlite, state fsync off: throughput lower"} {
		if !strings.Contains(sum, claim) {
			t.Errorf("summary lacks %q:\n%s", claim, sum)
		}
	}
	if !strings.Contains(sum, "holds") {
		t.Errorf("summary gives no verdict:\n%s", sum)
	}
}

// The live Matchmaker, --quick on SQLite, both beds: every cell runs (the
// live cell checks the machines left against the jobs placed), shows the
// seed's note for its configuration (the notes' keys are the cells'), and
// the summary speaks of the intervals that ran (--quick's), with a
// verdict per claim.
func TestMatchmakerLiveQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	e := &Matchmaker{rounds: 30, intervals: "0-20ms,0-100ms,0-400ms", databases: "sqlite", fsync: true, beds: "live,process"}
	res := runQuick(t, e, 16)
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK || c.Metrics[mLatency] <= 0 || c.SeedNote == "" {
			t.Errorf("cell %s: %+v", c.Key, c)
		}
		if db := strings.Contains(c.Key, "db=sqlite"); db != (c.Labels["state fsync"] == "on") {
			t.Errorf("cell %s states fsync %q", c.Key, c.Labels["state fsync"])
		}
		// A live cell's time inside the nodes is part of its latency.
		if in, ok := c.Metrics[mInNode]; strings.Contains(c.Key, "bed=live") && (!ok || in <= 0 || in > c.Metrics[mLatency]) {
			t.Errorf("cell %s: %.3f ms inside the nodes of a %.3f ms jobSubmit", c.Key, in, c.Metrics[mLatency])
		}
		// Of that, the database transaction (timed by the node around its
		// durability.sql effect): some with a database object, none without.
		if db, in := c.Metrics[mDBCommit], c.Metrics[mInNode]; strings.Contains(c.Key, "bed=live") {
			if withDB := strings.Contains(c.Key, "db=sqlite"); withDB && (db <= 0 || db >= in) || !withDB && db != 0 {
				t.Errorf("cell %s: database transaction %.3f ms of %.3f ms inside the nodes", c.Key, db, in)
			}
		}
	}
	for _, cl := range res.Claims {
		if strings.Contains(cl.Text, "live") && !strings.Contains(cl.Cause, "second database object (DB's transaction") {
			t.Errorf("claim %q: the cause does not split PB+DB against DB: %s", cl.Text, cl.Cause)
		}
	}
	sum := strings.Join(res.Summary, "\n")
	for _, want := range []string{"live, sqlite, state fsync on, interval " + strings.Split(quickIntervals, ",")[0], "live: db on sqlite: latency", "process: pb: latency"} {
		if !strings.Contains(sum, want) {
			t.Errorf("summary lacks %q:\n%s", want, sum)
		}
	}
	if strings.Contains(sum, "0-400ms") {
		t.Errorf("the summary names an interval --quick did not run:\n%s", sum)
	}
}

// runQuick runs e --quick live, on a binary built once, and checks it ran
// want cells.
func runQuick(t *testing.T, e experiment.Experiment, want int) *experiment.Results {
	t.Helper()
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Quick: true, Reps: 1},
		Out: t.TempDir(), Binary: synodBinary(t), Work: t.TempDir(), Stdout: &stdout})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	if len(res.Cells) != want {
		t.Fatalf("%d cells, want %d (2 beds x 2 client counts or intervals x 4 configurations)", len(res.Cells), want)
	}
	return res
}
