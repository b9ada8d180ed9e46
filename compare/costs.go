package compare

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"os"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/synod-dev/synod/bench"
	"github.com/synod-dev/synod/resp"
)

// The cost model (issue 18 item 4, docs/COSTS.md): this machine's physical
// limits, and SumMetrics to read a node's counters, for `synod-lab costs`,
// which measures per node what one client operation costs (cmd/synod,
// costs.go), so that the distance from each protocol to the limits is
// visible.

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
