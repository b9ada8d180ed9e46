package lab

import (
	"bytes"
	"context"
	"net/http"
	"net/http/httptest"
	"net/http/pprof"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/compare"
	"github.com/synod-dev/synod/internal/cli"
)

func TestCostsBoundAndRedisRatio(t *testing.T) {
	rep := &bench.Report{ElapsedSec: 1, All: bench.Stats{Count: 10000, Throughput: 10000}}
	node := bench.ProcCounters{CPUSeconds: 0.3, Syscr: 10000, Syscw: 10000}
	r := bench.NewCostRun("abd", "memory", rep, []string{"n1", "n2", "n3"}, []bench.ProcCounters{node, node, node},
		bench.ProcCounters{CPUSeconds: 0.1})
	redisRep := &bench.Report{ElapsedSec: 1, All: bench.Stats{Count: 40000, Throughput: 40000}}
	redis := bench.NewCostRun("redis-server", "memory", redisRep, []string{"redis-server"},
		[]bench.ProcCounters{{CPUSeconds: 0.4, Syscr: 40000, Syscw: 40000}}, bench.ProcCounters{CPUSeconds: 0.4})
	lim := compare.Limits{RESPParseReply: 500 * time.Nanosecond, MapOpsPerSec: 1e7}
	var b bytes.Buffer
	printBound(&b, r, lim, &redis)
	out := b.String()
	// servers 90 us/op + driver 10 us/op = 100 us/op; on N cores at most N*10,000 ops/s.
	for _, want := range []string{
		"bound: servers 90.0 + driver 10.0 us CPU/op on",
		"servers' CPU/op = 180 RESP parse+reply, 900 map ops",
		"ops/s 0.25x, servers' CPU/op 9.0x redis-server's (10.0 us), syscalls/op 3.0x",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("bound lacks %q:\n%s", want, out)
		}
	}
	var f bytes.Buffer
	printBound(&f, bench.CostRun{Failed: "x"}, lim, nil)
	if f.Len() != 0 {
		t.Errorf("a failed run printed a bound: %q", f.String())
	}
}

func TestCostsRejectsBadFlags(t *testing.T) {
	// cobra keeps flag values between runs: every case sets the flags an
	// earlier case made bad.
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"--protocols", "nosuch", "--read-ratio", "0.5", "--clients", "1"}, "--protocols"},
		{[]string{"--protocols", "abd", "--read-ratio", "2", "--clients", "1"}, "--read-ratio"},
		{[]string{"--protocols", "abd", "--read-ratio", "0.5", "--clients", "1", "--param", "window"}, "--param"},
		{[]string{"--protocols", "abd", "--read-ratio", "0.5", "--clients", "0"}, "--clients 0"}, // last: a repeated slice flag appends,
	} {
		clearHelp("costs") // TestLabCommands ran costs --help
		cli.Root().SetArgs(append([]string{"costs"}, c.args...))
		cli.Root().SetOut(new(bytes.Buffer))
		cli.Root().SetErr(new(bytes.Buffer))
		if err := cli.Root().Execute(); err == nil || !strings.Contains(err.Error(), c.want) {
			t.Errorf("%q: error %v, want one naming %s", c.args, err, c.want)
		}
	}
}

// TestStartProfilesSavesAndReads fetches a CPU profile from a pprof
// endpoint (this test process's own, as a node's metrics port serves it),
// saves it, and reads its top functions with go tool pprof, scaled to the
// row's CPU per operation.
func TestStartProfilesSavesAndReads(t *testing.T) {
	if _, err := exec.LookPath("go"); err != nil {
		t.Skip("go tool pprof needs the go command")
	}
	mux := http.NewServeMux()
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	srv := httptest.NewServer(mux)
	defer srv.Close()
	dir := t.TempDir()
	o := costsOptions{duration: time.Second, profileDir: dir}
	nodes := []cluster.Node{{ID: "n1", Metrics: strings.TrimPrefix(srv.URL, "http://")}}
	finish := startProfiles(context.Background(), o, "test", nodes, []string{"n1 (leader)"})
	r := bench.CostRun{OpsPerS: 1000, Procs: []bench.ProcCost{{Name: "n1 (leader)", CPUUsPerOp: 200}}}
	done := make(chan struct{})
	go func() { finish(&r); close(done) }()
	var x uint64 = 1 // CPU for the profile to sample, until it has been read
	for busy := true; busy; {
		for i := 0; i < 1_000_000; i++ {
			x = x*6364136223846793005 + 1442695040888963407
		}
		select {
		case <-done:
			busy = false
		default:
		}
	}
	path := filepath.Join(dir, "test-n1.pb.gz")
	if r.Profiles["n1 (leader)"] != path {
		t.Fatalf("profile recorded as %q, want %s (sink %d)", r.Profiles["n1 (leader)"], path, x)
	}
	if st, err := os.Stat(path); err != nil || st.Size() == 0 {
		t.Fatalf("profile file: %v", err)
	}
	found := false
	for _, f := range r.Top["n1 (leader)"] {
		if d := f.CumUs - f.CumPct*2; d < -0.01 || d > 0.01 {
			t.Errorf("%s: %.2f us/op cumulative for %.2f%% of a 200 us/op process", f.Name, f.CumUs, f.CumPct)
		}
		found = found || strings.Contains(f.Name, "TestStartProfilesSavesAndReads")
	}
	if !found {
		t.Errorf("the busy test function is not among the top functions: %+v", r.Top)
	}
}
