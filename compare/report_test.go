package compare

import (
	"bytes"
	"encoding/json"
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
		{System: "etcd", Op: OpGet, Clients: 1, Throughput: 1000, P50Ms: 1, P99Ms: 2, Count: 1},
		{System: "synod", Op: OpGet, Clients: 1, Throughput: 4000, P50Ms: 0.25, P99Ms: 1, Count: 1},
		{System: "synod", Op: OpPut, Clients: 64, Throughput: 9000, P50Ms: 7, P99Ms: 30, Count: 1, Errors: 2},
		{System: "etcd", Op: OpPut, Clients: 64, Failed: "connecting: refused"},
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
	testResult().Print(&b)
	out := b.String()
	for _, want := range []string{
		"fsync on for every system",
		"10000 keys of 16 bytes, 100-byte values",
		"etcd 3.4.23; durability fsync: b",
		"zookeeper not run: not installed (install with: apt-get install -y zookeeperd)",
		"synod/etcd",
		"FAILED: connecting: refused",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("output lacks %q:\n%s", want, out)
		}
	}
	lines := strings.Split(out, "\n")
	row := func(prefix ...string) string {
		for _, l := range lines {
			f := strings.Fields(l)
			if len(f) >= len(prefix) && strings.Join(f[:len(prefix)], " ") == strings.Join(prefix, " ") {
				return l
			}
		}
		t.Fatalf("no row starting %v in:\n%s", prefix, out)
		return ""
	}
	if f := strings.Fields(row("put", "64", "synod")); strings.Join(f[3:], " ") != "9000.0 7.000 30.000 2" {
		t.Errorf("synod put/64 row: %v", f)
	}
	// Ratio row: synod/etcd get/1 = 4000/1000, 0.25/1, 1/2.
	var ratioRow string
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "get" && f[1] == "1" {
			ratioRow = l
		}
	}
	if f := strings.Fields(ratioRow); len(f) != 5 || strings.Join(f[2:], " ") != "4.00 0.25 0.50" {
		t.Errorf("get/1 ratio row %q, want 4.00 0.25 0.50", ratioRow)
	}
	// put/64 has no etcd figures: dashes.
	for _, l := range lines {
		if f := strings.Fields(l); len(f) == 5 && f[0] == "put" && f[1] == "64" && strings.Join(f[2:], " ") != "- - -" {
			t.Errorf("put/64 ratio row %q, want dashes", l)
		}
	}
	// Rows are ordered by op (put before get), then clients, then system.
	if strings.Index(out, "put      64  synod") > strings.Index(out, "get       1  synod") {
		t.Errorf("puts not listed before gets:\n%s", out)
	}
	if strings.Index(out, "get       1  synod") > strings.Index(out, "get       1  etcd") {
		t.Errorf("synod not listed before etcd:\n%s", out)
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
