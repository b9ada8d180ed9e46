package seed002pbpaxos

import (
	"bytes"
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"testing"

	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/experiment"
	_ "github.com/synod-dev/synod/protocol/all"
)

func TestTxnOpsFollowTheSeedMix(t *testing.T) {
	count := func(mode string, n int) (r, w int) {
		for _, op := range txnOps(mode, n, []string{"a", "b"}, "x") {
			if op.Kind == "get" {
				r++
			} else {
				w++
			}
		}
		return
	}
	for _, c := range []struct {
		mode       string
		n, rd, wrt int
	}{{"read/write", 3, 2, 1}, {"read/write", 5, 3, 2}, {"optimized", 3, 2, 1}, {"write-only", 3, 0, 3}, {"write-only", 5, 0, 5}} {
		if r, w := count(c.mode, c.n); r != c.rd || w != c.wrt {
			t.Errorf("%s %d: %d reads %d writes, want %d and %d", c.mode, c.n, r, w, c.rd, c.wrt)
		}
	}
}

func TestCI99(t *testing.T) {
	m, h := ci99([]float64{1, 2, 3, 4})
	if m != 2.5 || math.Abs(h-2.576*math.Sqrt(5.0/3)/2) > 1e-12 {
		t.Errorf("ci99(1..4) = %v ± %v", m, h)
	}
}

func TestTxnSummaryOnSeedFigures(t *testing.T) {
	e := NewTxn()
	got := strings.Join(e.Summary(experiment.Figures{}, e.Seed().Values), "\n")
	for _, want := range []string{"3-req vs read/write -27%", "3-req vs write-only -34%", "5-req vs read/write -31%", "5-req vs write-only -39%"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

// Live: the original and Multi-Paxos kinds on real clusters, and the
// original and write on the WAN-spread replicas' relayed links: a write
// takes at least its chain's link delays (106.73 ms, with the replicas'
// round trip), which a relay that delayed only the client's links would
// not show.
func TestLiveRRTQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	bin, err := cluster.BuildSynod(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := NewRRT()
	e.Kinds, e.Configs, e.Samples, e.PerSample = []string{"original", "write", "paxos-quorum-read"}, []string{"local", "wan-replicas"}, 3, 5
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Reps: 1, Quick: true}, Out: t.TempDir(), Binary: bin, Work: t.TempDir(), Stdout: &stdout})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	rrt := map[string]float64{}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK || c.Metrics[mRRT] <= 0 || c.Metrics[mRRTCI] < 0 {
			t.Errorf("cell %s: %+v", c.Key, c)
		}
		rrt[c.Key] = c.Metrics[mRRT]
	}
	w := wanConfigs["wan-replicas"]
	orig, wr := rrt[experiment.NewCell("kind", "original", "config", "wan-replicas").Key], rrt[experiment.NewCell("kind", "write", "config", "wan-replicas").Key]
	// Load only adds time, so the bounds are the links' delays on each
	// kind's message chain (a write without delayed peer links would take
	// about the original's 70.8 ms).
	if orig < 0.98*2*w.clientLeader || wr < 0.98*(2*w.clientLeader+2*w.replicas) {
		t.Errorf("WAN rows: original %.2f ms (links %.2f), write %.2f ms (links %.2f: the write pays the replicas' round trip too)",
			orig, 2*w.clientLeader, wr, 2*w.clientLeader+2*w.replicas)
	}
	if !strings.Contains(stdout.String(), "memory") {
		t.Errorf("the table does not state the durability:\n%s", stdout.String())
	}
}

// figs builds ours' throughput figures: kind -> clients -> req/s.
func figs(m string, v map[string]map[int]float64) experiment.Figures {
	f := experiment.Figures{}
	for k, byC := range v {
		for c, x := range byC {
			f.Set(experiment.NewCell("kind", k, "clients", strconv.Itoa(c)).Key, m, x)
		}
	}
	return f
}

func TestClientSweepPeaks(t *testing.T) {
	e := NewClientSweep()
	got := strings.Join(e.Summary(figs(mTput, map[string]map[int]float64{
		"write": {8: 100, 16: 120, 32: 90, 64: 80, 128: 70},
		"read":  {8: 100, 16: 110, 32: 130, 64: 90, 128: 150},
	}), nil), "\n")
	for _, want := range []string{"write peaks at 16 clients (120 req/s); seed: between 8 and 32: holds",
		"read peaks at 128 clients (150 req/s); seed: between 16 and 64: does not hold"} {
		if !strings.Contains(got, want) {
			t.Errorf("summary lacks %q:\n%s", want, got)
		}
	}
}

func TestPipelineAndPathSummaries(t *testing.T) {
	p := NewPipeline()
	got := strings.Join(p.Summary(figs(mTput, map[string]map[int]float64{
		"write": {8: 1000}, "write-window8": {8: 1750}, "write-window32": {8: 900},
	}), nil), "\n")
	if want := "8 clients: against one outstanding proposal (1000 req/s): write-window8 +75%, write-window32 -10%"; !strings.Contains(got, want) {
		t.Errorf("pipeline summary lacks %q:\n%s", want, got)
	}
	q := NewPaths()
	got = strings.Join(q.Summary(figs(mLat, map[string]map[int]float64{
		"write": {1: 1}, "write-resp-follower": {1: 0.5}, "read": {1: 2}, "read-grpc-leader": {1: 3},
	}), nil), "\n")
	for _, want := range []string{"write, 1 clients: response time against fan-out (1.000 ms): resp-follower -50%",
		"read, 1 clients: response time against fan-out (2.000 ms): grpc-leader +50%"} {
		if !strings.Contains(got, want) {
			t.Errorf("paths summary lacks %q:\n%s", want, got)
		}
	}
}

func TestKindsAndClusterKeys(t *testing.T) {
	for _, e := range []*Throughput{NewThroughput(), NewClientSweep(), NewPipeline(), NewPaths()} {
		if _, err := e.Cells(experiment.Options{}); err != nil {
			t.Errorf("%s: %v", e.Name(), err)
		}
	}
	if err := checkKinds([]string{"write", "nope"}); err == nil {
		t.Error("an unknown kind was accepted")
	}
	w, _ := kindNamed("write")
	w8, _ := kindNamed("write-window8")
	wr, _ := kindNamed("write-resp-follower")
	if w.clusterKey("memory") == w8.clusterKey("memory") {
		t.Error("pipeline=8 shares the default cluster")
	}
	if w.clusterKey("memory") != wr.clusterKey("memory") {
		t.Error("the RESP path does not share the default cluster")
	}
	wc := wanConfigs["wan-replicas"]
	if math.Abs(2*wc.clientLeader-70.82) > 1e-9 || math.Abs(2*wc.clientLeader+2*wc.replicas-106.73) > 1e-9 || math.Abs(wc.clientBackup+wc.replicas+wc.clientLeader-75.49) > 1e-9 {
		t.Errorf("wan-replicas delays do not rebuild the seed's response times: %s", wc)
	}
}

// Live: the pipelined cluster and the one-node paths answer; every cell
// has a throughput and a response time.
func TestLiveKindsQuick(t *testing.T) {
	if testing.Short() {
		t.Skip("starts real node processes")
	}
	bin, err := cluster.BuildSynod(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	e := NewPaths()
	e.Kinds, e.Clients, e.Total, e.Reps = []string{"write-window8", "write-resp-follower", "read-resp-follower", "read-grpc-leader"}, []int{2}, 20, 1
	var stdout bytes.Buffer
	res, err := experiment.Run(context.Background(), e, experiment.RunOptions{Options: experiment.Options{Reps: 1}, Out: t.TempDir(), Binary: bin, Work: t.TempDir(), Stdout: &stdout})
	if err != nil {
		t.Fatalf("run: %v\n%s", err, stdout.String())
	}
	if len(res.Cells) != len(e.Kinds) {
		t.Fatalf("%d cells, want %d", len(res.Cells), len(e.Kinds))
	}
	for _, c := range res.Cells {
		if c.Status != experiment.StatusOK || c.Metrics[mTput] <= 0 || c.Metrics[mLat] <= 0 {
			t.Errorf("cell %s: %+v", c.Key, c)
		}
	}
}

// Figs VI.6 and VI.7 are judged at every client count that ran: a ratio
// inside the noise at one count makes the claim inconclusive, a clear
// one everywhere decides it, and a missing cell makes it not measured.
func TestWANThroughputClaims(t *testing.T) {
	e := NewWANThroughput()
	cells, err := e.Cells(experiment.Options{Quick: true})
	if err != nil || len(cells) != 2*3*2 {
		t.Fatalf("quick cells: %d, %v", len(cells), err)
	}
	if _, err := (&WANThroughput{Configs: []string{"moon"}, Kinds: []string{"read"}, Clients: []int{1}, Total: 4, Reps: 1, Durability: "memory"}).Cells(experiment.Options{}); err == nil {
		t.Error("unknown configuration accepted")
	}
	data := func(tput map[string][]float64) experiment.Data {
		d := experiment.Data{Ours: experiment.Figures{}, Samples: map[string]map[string]experiment.Sample{}}
		for _, c := range cells {
			s, ok := tput[c.Get("config")+"/"+c.Get("kind")+"/"+c.Get("clients")]
			if !ok {
				s = tput[c.Get("config")+"/"+c.Get("kind")]
			}
			if s == nil {
				continue
			}
			d.Cells = append(d.Cells, experiment.CellResult{Cell: c, Status: experiment.StatusOK})
			d.Samples[c.Key] = map[string]experiment.Sample{mTput: s}
			d.Ours.Set(c.Key, mTput, experiment.Sample(s).Mean())
			d.Ours.Set(c.Key, mLat, 100)
		}
		return d
	}
	verdicts := func(d experiment.Data) []experiment.Verdict {
		var v []experiment.Verdict
		for _, c := range e.Claims(d) {
			v = append(v, c.Verdict)
			if c.Verdict != experiment.NotMeasured && !strings.Contains(c.Cause, "4 clients: original") {
				t.Errorf("claim %q: cause %q", c.Text, c.Cause)
			}
		}
		return v
	}
	clear := map[string][]float64{
		"remote-clients/original": {10, 10.1, 9.9}, "remote-clients/read": {10, 10.05, 9.95}, "remote-clients/write": {9.9, 10, 9.95},
		"wan-replicas/original": {13, 13.1, 12.9}, "wan-replicas/read": {12.4, 12.5, 12.3}, "wan-replicas/write": {8.4, 8.5, 8.6},
	}
	if got := fmt.Sprint(verdicts(data(clear))); got != "[holds holds holds]" {
		t.Errorf("clear figures: %s", got)
	}
	noisy := map[string][]float64{}
	for k, v := range clear {
		noisy[k] = v
	}
	noisy["wan-replicas/read/4"] = []float64{4, 20, 12} // read ≈ 12 ± noise at 4 clients
	noisy["remote-clients/write"] = []float64{5, 5.1, 4.9}
	if got := fmt.Sprint(verdicts(data(noisy))); got != "[holds does not hold inconclusive]" {
		t.Errorf("noisy figures: %s", got)
	}
	delete(noisy, "remote-clients/read")
	if got := fmt.Sprint(verdicts(data(noisy))); !strings.HasPrefix(got, "[not measured") {
		t.Errorf("missing read cells: %s", got)
	}
}
