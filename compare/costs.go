package compare

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synod-dev/synod/automaton"
	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/cluster"
	"github.com/synod-dev/synod/resp"
)

// The cost model (issue 18 item 4, docs/COSTS.md): this machine's physical
// limits, and per protocol the messages, fsyncs and CPU one client
// operation costs, measured from a short live run's node metrics, so that
// the distance from each protocol to the limits is visible.

// Limits are this machine's physical limits, each the median of many tries.
type Limits struct {
	// LoopbackRTT is one TCP round trip over 127.0.0.1 (1 byte each way,
	// Nagle off), between two goroutines of this process.
	LoopbackRTT time.Duration `json:"loopback_rtt_ns"`
	// Fdatasync is one 4 KiB append and fdatasync of a file in the data
	// directory's file system.
	Fdatasync time.Duration `json:"fdatasync_ns"`
	FSDir     string        `json:"fs_dir"`
	// MapOpsPerSec is a Go map[string][]byte of 10,000 keys, half gets
	// and half sets, on one core.
	MapOpsPerSec float64 `json:"map_ops_per_s"`
	// RESPParseReply is parsing one RESP SET of a 16-byte key and a
	// 100-byte value (resp.Reader, the gateway's parser) and writing +OK
	// (resp.Writer), in memory.
	RESPParseReply time.Duration `json:"resp_parse_reply_ns"`
}

// MeasureLimits measures Limits; dir is where the fdatasync file goes
// (removed afterwards).
func MeasureLimits(dir string) (Limits, error) {
	l := Limits{FSDir: dir}
	var err error
	if l.LoopbackRTT, err = loopbackRTT(2000); err != nil {
		return l, fmt.Errorf("loopback round trip: %w", err)
	}
	if l.Fdatasync, err = fdatasyncLatency(dir, 200); err != nil {
		return l, fmt.Errorf("fdatasync: %w", err)
	}
	l.MapOpsPerSec = mapOpsPerSec(2_000_000)
	if l.RESPParseReply, err = respParseReply(200_000); err != nil {
		return l, fmt.Errorf("RESP parse and reply: %w", err)
	}
	return l, nil
}

func median(ds []time.Duration) time.Duration {
	sort.Slice(ds, func(i, j int) bool { return ds[i] < ds[j] })
	return ds[len(ds)/2]
}

func loopbackRTT(n int) (time.Duration, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	go func() {
		c, err := ln.Accept()
		if err != nil {
			return
		}
		defer c.Close()
		io.Copy(c, c) // echo
	}()
	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		return 0, err
	}
	defer c.Close()
	c.(*net.TCPConn).SetNoDelay(true)
	c.SetDeadline(time.Now().Add(30 * time.Second))
	b := []byte{1}
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := c.Write(b); err != nil {
			return 0, err
		}
		if _, err := io.ReadFull(c, b); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}

func fdatasyncLatency(dir string, n int) (time.Duration, error) {
	f, err := os.CreateTemp(dir, "synod-costs-fsync-")
	if err != nil {
		return 0, err
	}
	defer os.Remove(f.Name())
	defer f.Close()
	page := bytes.Repeat([]byte{'x'}, 4096)
	ds := make([]time.Duration, 0, n)
	for i := 0; i < n; i++ {
		t0 := time.Now()
		if _, err := f.Write(page); err != nil {
			return 0, err
		}
		if err := syscall.Fdatasync(int(f.Fd())); err != nil {
			return 0, err
		}
		ds = append(ds, time.Since(t0))
	}
	return median(ds), nil
}

func mapOpsPerSec(n int) float64 {
	const keys = 10000
	names := make([]string, keys)
	for i := range names {
		names[i] = bench.KeyName("synod-costs:", keys, i)
	}
	m := make(map[string][]byte, keys)
	val := make([]byte, 100)
	t0 := time.Now()
	var sink int
	for i := 0; i < n; i++ {
		k := names[(i*7919)%keys]
		if i&1 == 0 {
			m[k] = val
		} else {
			sink += len(m[k])
		}
	}
	el := time.Since(t0)
	_ = sink
	return float64(n) / el.Seconds()
}

func respParseReply(n int) (time.Duration, error) {
	var cmd bytes.Buffer
	key := bench.KeyName("synod-costs:", 10000, 42)
	val := bytes.Repeat([]byte{'v'}, 100)
	fmt.Fprintf(&cmd, "*3\r\n$3\r\nSET\r\n$%d\r\n%s\r\n$%d\r\n%s\r\n", len(key), key, len(val), val)
	one := cmd.Bytes()
	const batch = 1000
	input := bytes.Repeat(one, batch)
	src := bytes.NewReader(input)
	rd := resp.NewReader(bufio.NewReaderSize(src, 64<<10), resp.DefaultLimits())
	w := resp.NewWriter(io.Discard)
	t0 := time.Now()
	for i := 0; i < n; i++ {
		if i%batch == 0 {
			src.Reset(input)
		}
		args, err := rd.ReadCommand()
		if err != nil {
			return 0, err
		}
		if len(args) != 3 {
			return 0, fmt.Errorf("parsed %d arguments", len(args))
		}
		w.WriteSimple("OK")
		if w.Buffered() > 32<<10 {
			w.Flush()
		}
	}
	w.Flush()
	return time.Since(t0) / time.Duration(n), nil
}

// ProtocolCost is one protocol's cost per client operation in a short live
// run: a 3-node cluster, durability fsync, the closed-loop driver.
type ProtocolCost struct {
	Protocol string  `json:"protocol"`
	Clients  int     `json:"clients"`
	Ops      int64   `json:"ops"`
	OpsPerS  float64 `json:"ops_per_s"`
	P50Ms    float64 `json:"p50_ms"`
	// Per client operation, summed over the nodes: peer messages sent,
	// storage batches fsynced, CPU seconds of the node processes.
	MsgsPerOp   float64 `json:"messages_per_op"`
	FsyncsPerOp float64 `json:"fsyncs_per_op"`
	CPUPerOp    float64 `json:"cpu_s_per_op"`
	// FsyncsPerS is the cluster's fsyncs per second (group commit shows as
	// fewer fsyncs than writes).
	FsyncsPerS float64 `json:"fsyncs_per_s"`
	Failed     string  `json:"failed,omitempty"`
}

// CostOptions shape the live runs.
type CostOptions struct {
	Protocols []string
	// Binary is the synod executable ("" = this one); Dir holds the
	// clusters (each removed after its run).
	Binary, Dir string
	Clients     int
	Duration    time.Duration
	ReadRatio   float64
}

// costMetrics are the node counters the model reads (node/metrics.go).
var costMetrics = []string{"synod_peer_messages_sent_total", "synod_fsyncs_total", "process_cpu_seconds_total"}

// MeasureProtocol runs protocol on a fresh 3-node fsync cluster for
// o.Duration (after a second's warm-up) and divides the nodes' counter
// deltas by the client operations completed.
func MeasureProtocol(ctx context.Context, o CostOptions, protocol string) ProtocolCost {
	pc := ProtocolCost{Protocol: protocol, Clients: o.Clients}
	dir := filepath.Join(o.Dir, protocol)
	c, err := cluster.Up(cluster.UpOptions{Dir: dir, Nodes: Members, Protocol: protocol, Durability: "fsync", Binary: o.Binary})
	if err != nil {
		pc.Failed = err.Error()
		return pc
	}
	defer cluster.Down(dir, true)
	readMode := ""
	if m, err := automaton.ConsistencyOf(protocol); err == nil && m == automaton.Linearizable {
		readMode = "linearizable"
	}
	cfg := bench.DefaultConfig()
	cfg.Addrs = c.ClientAddrs()
	cfg.Clients = o.Clients
	cfg.Keys = 10000
	cfg.ReadRatio = o.ReadRatio
	cfg.ReadMode = readMode
	cfg.Leader = true
	cfg.Duration = time.Second
	if _, err := bench.Run(ctx, cfg, nil); err != nil { // warm-up: elections, connections
		pc.Failed = "warm-up: " + err.Error()
		return pc
	}
	before, err := scrapeAll(ctx, c)
	if err != nil {
		pc.Failed = err.Error()
		return pc
	}
	cfg.Duration = o.Duration
	rep, err := bench.Run(ctx, cfg, nil)
	if err != nil {
		pc.Failed = err.Error()
		return pc
	}
	after, err := scrapeAll(ctx, c)
	if err != nil {
		pc.Failed = err.Error()
		return pc
	}
	pc.Ops, pc.OpsPerS, pc.P50Ms = rep.All.Count, rep.All.Throughput, rep.All.P50Ms
	if pc.Ops == 0 {
		pc.Failed = "no operation completed"
		return pc
	}
	d := func(name string) float64 { return after[name] - before[name] }
	n := float64(pc.Ops)
	pc.MsgsPerOp = d("synod_peer_messages_sent_total") / n
	pc.FsyncsPerOp = d("synod_fsyncs_total") / n
	pc.CPUPerOp = d("process_cpu_seconds_total") / n
	pc.FsyncsPerS = d("synod_fsyncs_total") / rep.ElapsedSec
	return pc
}

// scrapeAll sums costMetrics over every node's /metrics.
func scrapeAll(ctx context.Context, c *cluster.Cluster) (map[string]float64, error) {
	sum := map[string]float64{}
	for _, n := range c.Nodes {
		req, err := http.NewRequestWithContext(ctx, "GET", "http://"+n.Metrics+"/metrics", nil)
		if err != nil {
			return nil, err
		}
		res, err := http.DefaultClient.Do(req)
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", n.ID, err)
		}
		vals, err := SumMetrics(res.Body, costMetrics)
		res.Body.Close()
		if err != nil {
			return nil, fmt.Errorf("%s metrics: %w", n.ID, err)
		}
		for k, v := range vals {
			sum[k] += v
		}
	}
	return sum, nil
}

// SumMetrics sums, per name, every sample of the named metrics in a
// Prometheus text exposition (all label sets).
func SumMetrics(r io.Reader, names []string) (map[string]float64, error) {
	want := map[string]bool{}
	for _, n := range names {
		want[n] = true
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if line == "" || line[0] == '#' {
			continue
		}
		name, rest := line, ""
		if i := strings.IndexAny(line, "{ "); i >= 0 {
			name, rest = line[:i], line[i:]
		}
		if !want[name] {
			continue
		}
		if strings.HasPrefix(rest, "{") {
			j := strings.LastIndexByte(rest, '}')
			if j < 0 {
				return nil, fmt.Errorf("unterminated labels: %q", line)
			}
			rest = rest[j+1:]
		}
		f := strings.Fields(rest)
		if len(f) == 0 {
			return nil, fmt.Errorf("no value: %q", line)
		}
		v, err := strconv.ParseFloat(f[0], 64)
		if err != nil {
			return nil, fmt.Errorf("bad value in %q", line)
		}
		out[name] += v
	}
	return out, sc.Err()
}

// CostReport is what `synod costs` prints and writes.
type CostReport struct {
	Limits    Limits         `json:"limits"`
	Protocols []ProtocolCost `json:"protocols"`
	ReadRatio float64        `json:"read_ratio"`
	Duration  float64        `json:"duration_s"`
}

// MeasureCosts measures the limits, then each protocol in turn.
func MeasureCosts(ctx context.Context, o CostOptions, progress io.Writer) (*CostReport, error) {
	if len(o.Protocols) == 0 || o.Clients < 1 || o.Duration <= 0 {
		return nil, errors.New("costs: give protocols, clients >= 1 and a positive duration")
	}
	if progress == nil {
		progress = io.Discard
	}
	fmt.Fprintf(progress, "measuring this machine's limits in %s\n", o.Dir)
	lim, err := MeasureLimits(o.Dir)
	if err != nil {
		return nil, err
	}
	r := &CostReport{Limits: lim, ReadRatio: o.ReadRatio, Duration: o.Duration.Seconds()}
	for _, p := range o.Protocols {
		if ctx.Err() != nil {
			return r, ctx.Err()
		}
		fmt.Fprintf(progress, "measuring %s (3 nodes, fsync, %d clients, %v)\n", p, o.Clients, o.Duration)
		r.Protocols = append(r.Protocols, MeasureProtocol(ctx, o, p))
	}
	return r, nil
}

// Print writes the limits and the per-protocol table with the distance to
// the limits: an operation's CPU against one map operation and one RESP
// parse and reply, its messages against loopback round trips, its fsyncs
// against fdatasync.
func (r *CostReport) Print(w io.Writer) {
	l := r.Limits
	us := func(d time.Duration) float64 { return float64(d) / 1e3 }
	mapNs := 1e9 / l.MapOpsPerSec
	fmt.Fprintf(w, "physical limits of this machine (medians; a shared machine makes them noisy)\n")
	fmt.Fprintf(w, "  loopback TCP round trip         %8.1f us\n", us(l.LoopbackRTT))
	fmt.Fprintf(w, "  4 KiB append + fdatasync        %8.1f us   (%s; at most %.0f fsyncs/s in sequence)\n", us(l.Fdatasync), l.FSDir, 1e9/float64(l.Fdatasync))
	fmt.Fprintf(w, "  Go map op (10k keys, get/set)   %8.3f us   (%.1fM ops/s on one core)\n", mapNs/1e3, l.MapOpsPerSec/1e6)
	fmt.Fprintf(w, "  RESP SET parse + +OK reply      %8.3f us\n", us(l.RESPParseReply))
	fmt.Fprintf(w, "\nper client operation, 3 nodes, fsync on, %.0f%% gets, %gs closed loop (counters summed over the nodes)\n", 100*r.ReadRatio, r.Duration)
	fmt.Fprintf(w, "  %-10s %7s %9s %7s %8s %8s %9s %10s %11s %12s\n", "protocol", "clients", "ops/s", "p50 ms", "msgs/op", "fsync/op", "fsync/s", "CPU us/op", "CPU/map op", "CPU/RESP op")
	for _, p := range r.Protocols {
		if p.Failed != "" {
			fmt.Fprintf(w, "  %-10s FAILED: %s\n", p.Protocol, p.Failed)
			continue
		}
		cpuUs := p.CPUPerOp * 1e6
		fmt.Fprintf(w, "  %-10s %7d %9.0f %7.3f %8.2f %8.3f %9.0f %10.1f %10.0fx %11.0fx\n", p.Protocol, p.Clients, p.OpsPerS, p.P50Ms,
			p.MsgsPerOp, p.FsyncsPerOp, p.FsyncsPerS, cpuUs, cpuUs*1e3/mapNs, cpuUs/us(l.RESPParseReply))
	}
	fmt.Fprintf(w, "  (CPU: all three node processes; the clients' CPU is not counted. On 2 cores the CPU per operation bounds throughput at about 2 s / (CPU s/op).)\n")
}
