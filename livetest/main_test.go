package livetest

import (
	"fmt"
	"os"
	"testing"

	"github.com/synod-dev/synod/cluster"
)

// synodBin is the synod binary built once by TestMain.
var synodBin string

func TestMain(m *testing.M) {
	tmp, err := os.MkdirTemp("", "synod-livetest-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(2)
	}
	synodBin, err = cluster.BuildSynod(tmp)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.RemoveAll(tmp)
		os.Exit(2)
	}
	code := m.Run()
	os.RemoveAll(tmp)
	os.Exit(code)
}

// upCluster starts a cluster in a fresh directory; t.Cleanup always stops it.
func upCluster(t testing.TB, opts cluster.UpOptions) *cluster.Cluster {
	t.Helper()
	opts.Dir = t.TempDir()
	opts.Binary = synodBin
	opts.DieWithParent = true // a test binary killed by its timeout leaves no nodes
	c, err := cluster.Up(opts)
	if err != nil {
		t.Fatalf("cluster.Up: %v", err)
	}
	t.Cleanup(func() {
		if _, err := cluster.Down(c.Dir, false); err != nil {
			t.Errorf("cluster.Down: %v", err)
		}
	})
	return c
}
