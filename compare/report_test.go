package compare

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/synod-dev/synod/bench"
)

func near(t *testing.T, what string, got *float64, want float64) {
	t.Helper()
	if got == nil {
		t.Fatalf("%s: nil, want %v", what, want)
	}
	if math.Abs(*got-want) > 1e-9 {
		t.Fatalf("%s = %v, want %v", what, *got, want)
	}
}

func TestComputeRatios(t *testing.T) {
	cells := []Cell{
		{System: "synod", Op: OpPut, Clients: 16, Throughput: 3000, P50Ms: 2, P99Ms: 9, Count: 30000},
		{System: "etcd", Op: OpPut, Clients: 16, Throughput: 1500, P50Ms: 4, P99Ms: 3, Count: 15000},
		{System: "zookeeper", Op: OpPut, Clients: 16, Throughput: 1000, P50Ms: 8, P99Ms: 18, Count: 10000},
		{System: "synod", Op: OpGet, Clients: 1, Throughput: 500, P50Ms: 1, P99Ms: 2, Count: 5000},
		{System: "etcd", Op: OpGet, Clients: 1, Failed: "connecting: refused"},
		// zookeeper get/1 missing; a zero-latency peer cell cannot divide.
		{System: "synod", Op: OpGet, Clients: 4, Throughput: 800, P50Ms: 1, P99Ms: 2, Count: 8000},
		{System: "etcd", Op: OpGet, Clients: 4, Throughput: 400, P50Ms: 0, P99Ms: 4, Count: 4000},
	}
	rs := ComputeRatios(cells, []string{"etcd", "zookeeper"})
	if len(rs) != 6 {
		t.Fatalf("%d ratios, want 3 Synod cells x 2 peers: %+v", len(rs), rs)
	}
	find := func(op string, clients int, peer string) Ratio {
		for _, r := range rs {
			if r.Op == op && r.Clients == clients && r.Peer == peer {
				return r
			}
		}
		t.Fatalf("no ratio for %s/%d/%s", op, clients, peer)
		return Ratio{}
	}
	r := find(OpPut, 16, "etcd")
	near(t, "put/16 etcd throughput", r.Throughput, 2)
	near(t, "put/16 etcd p50", r.P50, 0.5)
	near(t, "put/16 etcd p99", r.P99, 3)
	r = find(OpPut, 16, "zookeeper")
	near(t, "put/16 zk throughput", r.Throughput, 3)
	near(t, "put/16 zk p50", r.P50, 0.25)
	near(t, "put/16 zk p99", r.P99, 0.5)
	if r := find(OpGet, 1, "etcd"); r.Throughput != nil || r.P50 != nil || r.P99 != nil {
		t.Fatalf("ratio against a failed cell: %+v", r)
	}
	if r := find(OpGet, 1, "zookeeper"); r.Throughput != nil {
		t.Fatalf("ratio against a missing cell: %+v", r)
	}
	r = find(OpGet, 4, "etcd")
	near(t, "get/4 throughput", r.Throughput, 2)
	if r.P50 != nil {
		t.Fatalf("p50 ratio over a zero latency: %v", *r.P50)
	}
	near(t, "get/4 p99", r.P99, 0.5)

	// A failed Synod cell yields no ratio either.
	cells[0].Failed = "x"
	if r := ComputeRatios(cells, []string{"etcd"})[0]; r.Throughput != nil {
		t.Fatalf("ratio from a failed Synod cell: %+v", r)
	}
}

func testResult() *Result {
	cells := []Cell{
		{System: "etcd", Config: "v3 conns=1", Conns: 1, Fsync: "fsync on", Op: OpGet, Clients: 1, Throughput: 1000, P50Ms: 1, P99Ms: 2, Count: 1},
		{System: "synod", Config: "resp conns=pipeline:16", Conns: 1, Fsync: "fsync on", Op: OpGet, Clients: 1, Throughput: 4000, P50Ms: 0.25, P99Ms: 1, Count: 1},
		{System: "synod", Config: "resp conns=per-client", Conns: 64, Fsync: "fsync on", Op: OpPut, Clients: 64, Throughput: 9000, P50Ms: 7, P99Ms: 30, Count: 1, Errors: 2},
		{System: "etcd", Config: "v3 conns=1", Op: OpPut, Clients: 64, Failed: "connecting: refused"},
	}
	return &Result{
		Config: ReportConfig{Members: 3, Protocol: "abd", Keys: 10000, KeySize: 16, ValueSize: 100,
			Clients: []int{1, 64}, Ops: []string{OpPut, OpGet}, DurationSec: 5},
		Systems: []SystemReport{{Name: "synod", Version: "synod, protocol abd", Durability: "fsync: a"},
			{Name: "etcd", Version: "etcd 3.4.23", Durability: "fsync: b"}},
		Skipped: []Skipped{{Name: "zookeeper", Install: ZooKeeperInstall}},
		Cells:   cells,
		Ratios:  ComputeRatios(cells, []string{"etcd"}),
	}
}

func TestPrint(t *testing.T) {
	var b bytes.Buffer
	res := testResult()
	// A second etcd configuration, slower: the sweep lists it, the best
	// table does not.
	res.Cells = append(res.Cells, Cell{System: "etcd", Config: "v3 conns=per-client", Conns: 1, Fsync: "fsync on", Op: OpGet, Clients: 1, Throughput: 800, P50Ms: 2, P99Ms: 3, Count: 1})
	res.Best = BestCells(res.Cells)
	res.Print(&b)
	out := b.String()
	for _, want := range []string{
		"durability beside every figure",
		"10000 keys of 16 bytes, 100-byte values",
		"etcd 3.4.23; durability fsync: b",
		"zookeeper not run: not installed (install with: apt-get install -y zookeeperd)",
		"FAILED: connecting: refused",
		"best configuration of each system",
		"best against best",
		"noisy",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	sweep, rest, _ := strings.Cut(out, "best configuration of each system")
	bestTable, ratios, _ := strings.Cut(rest, "ratios Synod/peer")
	rows := func(table string, prefix ...string) [][]string {
		var out [][]string
		for _, l := range strings.Split(table, "\n") {
			f := strings.Fields(l)
			if len(f) >= len(prefix) && strings.Join(f[:len(prefix)], " ") == strings.Join(prefix, " ") {
				out = append(out, f)
			}
		}
		return out
	}
	if r := rows(sweep, "put", "64", "synod"); len(r) != 1 || strings.Join(r[0][3:], " ") != "resp conns=per-client 64 9000.0 7.000 30.000 2 fsync on" {
		t.Errorf("synod put/64 sweep row: %v", r)
	}
	if r := rows(sweep, "get", "1", "etcd"); len(r) != 2 {
		t.Errorf("etcd get/1: %d sweep rows, want both configurations", len(r))
	}
	if r := rows(bestTable, "get", "1", "etcd"); len(r) != 1 || strings.Join(r[0][3:], " ") != "v3 conns=1 1000.0 1.000 2.000 fsync on" {
		t.Errorf("etcd get/1 best row: %v", r)
	}
	// Ratio row: synod/etcd get/1 = 4000/1000, 0.25/1, 1/2, with the
	// configurations and durabilities compared.
	if r := rows(ratios, "get", "1", "etcd"); len(r) != 1 || strings.Join(r[0][3:], " ") != "4.00 0.25 0.50 resp conns=pipeline:16 [fsync on] vs v3 conns=1 [fsync on]" {
		t.Errorf("get/1 ratio row %v", r)
	}
	// put/64 has no etcd figures: dashes.
	if r := rows(ratios, "put", "64", "etcd"); len(r) != 1 || strings.Join(r[0][3:6], " ") != "- - -" {
		t.Errorf("put/64 ratio row %v, want dashes", r)
	}
	// Rows are ordered by op (put before get), then clients, then system.
	if strings.Index(sweep, "put      64  synod") > strings.Index(sweep, "get       1  synod") {
		t.Errorf("puts not listed before gets:\n%s", out)
	}
	if strings.Index(sweep, "get       1  synod") > strings.Index(sweep, "get       1  etcd") {
		t.Errorf("synod not listed before etcd:\n%s", out)
	}
}

func TestBestCells(t *testing.T) {
	cells := []Cell{
		{System: "etcd", Config: "per-client", Op: OpPut, Clients: 256, Throughput: 5500, P99Ms: 90, Count: 1},
		{System: "etcd", Config: "1", Op: OpPut, Clients: 256, Throughput: 10500, P99Ms: 60, Count: 1},
		{System: "etcd", Config: "16", Op: OpPut, Clients: 256, Throughput: 8700, P99Ms: 50, Count: 1},
		{System: "synod", Config: "resp", Op: OpPut, Clients: 256, Throughput: 15500, P99Ms: 40, Count: 1},
		{System: "synod", Config: "grpc", Op: OpPut, Clients: 256, Throughput: 99999, Count: 1, Failed: "x"},
		// Equal throughput: the lower p99 wins.
		{System: "synod", Config: "slow tail", Op: OpGet, Clients: 16, Throughput: 100, P99Ms: 9, Count: 1},
		{System: "synod", Config: "fast tail", Op: OpGet, Clients: 16, Throughput: 100, P99Ms: 3, Count: 1},
		// None usable: the first stays, to show the failure.
		{System: "etcd", Config: "a", Op: OpGet, Clients: 16, Failed: "refused"},
		{System: "etcd", Config: "b", Op: OpGet, Clients: 16, Failed: "refused too"},
		// A failed first cell gives way to a usable one.
		{System: "redis", Config: "a", Op: OpGet, Clients: 16, Failed: "refused"},
		{System: "redis", Config: "b", Op: OpGet, Clients: 16, Throughput: 1, Count: 1},
	}
	got := map[string]string{}
	for _, c := range BestCells(cells) {
		got[c.System+" "+c.Op+" "+fmt.Sprint(c.Clients)] = c.Config
	}
	want := map[string]string{"etcd put 256": "1", "synod put 256": "resp", "synod get 16": "fast tail", "etcd get 16": "a", "redis get 16": "b"}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("best configurations %v, want %v", got, want)
	}
	rs := ComputeRatios(cells, []string{"etcd"})
	if len(rs) != 2 {
		t.Fatalf("ratios %+v", rs)
	}
	// Issue 18's measurement: best against best is 15.5k/10.5k, not 15.5k/5.5k.
	near(t, "put/256 best against best", rs[0].Throughput, 15500.0/10500)
	if rs[0].SynodConfig != "resp" || rs[0].PeerConfig != "1" {
		t.Errorf("ratio configurations %q vs %q", rs[0].SynodConfig, rs[0].PeerConfig)
	}
}

func TestConfigs(t *testing.T) {
	o := DefaultOptions()
	f := func(context.Context, string, int) (bench.Target, error) { return nil, nil }
	names := func(inst *Instance, clients int) string {
		var out []string
		for _, c := range Configs(inst, o, clients) {
			out = append(out, c.Name)
		}
		return strings.Join(out, ", ")
	}
	etcd := &Instance{NewTarget: f, Shareable: true, Via: "v3"}
	synod := &Instance{NewTarget: f, Via: "resp", Pipelined: f, GRPC: f, GRPCPipelined: f}
	redis := &Instance{NewTarget: f, Via: "resp", Pipelined: f}
	for _, c := range []struct {
		inst    *Instance
		clients int
		want    string
	}{
		{etcd, 256, "v3 conns=per-client, v3 conns=1, v3 conns=16"},
		{etcd, 16, "v3 conns=per-client, v3 conns=1"},
		{etcd, 1, "v3 conns=per-client"},
		{synod, 256, "resp conns=per-client, resp conns=pipeline:16, resp conns=pipeline:64, grpc conns=1, grpc conns=16, grpc conns=pipeline:16, grpc conns=pipeline:64"},
		// Depth 64 opens the one connection depth 16 opens.
		{synod, 16, "resp conns=per-client, resp conns=pipeline:16, grpc conns=1, grpc conns=pipeline:16"},
		{synod, 1, "resp conns=per-client, grpc conns=1"},
		{redis, 64, "resp conns=per-client, resp conns=pipeline:16, resp conns=pipeline:64"},
	} {
		if got := names(c.inst, c.clients); got != c.want {
			t.Errorf("%s at %d clients: %s, want %s", c.inst.Via, c.clients, got, c.want)
		}
	}
	// A configuration's factory arranges the connections as its name says.
	for _, cc := range Configs(synod, o, 64) {
		if _, err := cc.factory(synod, 64); err != nil {
			t.Errorf("%s: %v", cc.Name, err)
		}
	}
	if _, err := (ClientConfig{Spec: bench.ConnSpec{Depth: 4}}).factory(etcd, 64); err == nil {
		t.Error("pipelining a system without a pipelined connection accepted")
	}
}

func TestWriteJSON(t *testing.T) {
	path := filepath.Join(t.TempDir(), "r.json")
	r := testResult()
	if err := r.WriteJSON(path); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var back Result
	if err := json.Unmarshal(b, &back); err != nil {
		t.Fatal(err)
	}
	if len(back.Cells) != 4 || len(back.Ratios) != 2 || back.Skipped[0].Install != ZooKeeperInstall {
		t.Fatalf("round trip lost data: %+v", back)
	}
	if !strings.Contains(string(b), `"throughput": null`) || !strings.Contains(string(b), `"throughput": 4`) {
		t.Fatalf("ratios not as expected in JSON:\n%s", b)
	}
}

func TestParseClients(t *testing.T) {
	got, err := ParseClients("1, 16,64,256")
	if err != nil || len(got) != 4 || got[0] != 1 || got[3] != 256 {
		t.Fatalf("ParseClients: %v %v", got, err)
	}
	for _, bad := range []string{"", "0", "1,,2", "x", "1,1", "-3", "2.5", "16x"} {
		if _, err := ParseClients(bad); err == nil {
			t.Errorf("ParseClients(%q) accepted", bad)
		}
	}
}

func TestKeyPrefixGivesExactKeySize(t *testing.T) {
	for _, c := range []struct{ size, keys int }{{16, 10000}, {16, 1}, {8, 1000}, {40, 5}, {16, 10000000}} {
		p, err := KeyPrefix(c.size, c.keys)
		if err != nil {
			t.Fatalf("KeyPrefix(%d, %d): %v", c.size, c.keys, err)
		}
		for _, i := range []int{0, c.keys / 2, c.keys - 1} {
			if k := bench.KeyName(p, c.keys, i); len(k) != c.size {
				t.Fatalf("key %q has %d bytes, want %d", k, len(k), c.size)
			}
		}
		if err := checkKeyChars(p); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := KeyPrefix(7, 10000); err == nil || !strings.Contains(err.Error(), "at least 8") {
		t.Fatalf("too small a key size: %v", err)
	}
}

// checkKeyChars: prefixes must be usable as etcd keys, RESP arguments and
// znode names alike.
func checkKeyChars(p string) error {
	if strings.ContainsAny(p, "/ \x00") {
		return os.ErrInvalid
	}
	return nil
}
