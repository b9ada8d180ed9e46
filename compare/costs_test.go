package compare

import (
	"bytes"
	"strings"
	"testing"
)

func TestSumMetrics(t *testing.T) {
	text := `# HELP synod_fsyncs_total Storage batches committed with fsync.
# TYPE synod_fsyncs_total counter
synod_fsyncs_total{namespace="default",node="n1"} 120
synod_fsyncs_total{namespace="other",node="n1"} 3
synod_fsyncs_total_created 5
synod_peer_messages_sent_total{namespace="default",node="n1"} 4.5e+03
process_cpu_seconds_total 1.25
process_cpu_seconds_totalx 99
synod_requests_total{namespace="default",node="n1"} 7
`
	got, err := SumMetrics(strings.NewReader(text), costMetrics)
	if err != nil {
		t.Fatal(err)
	}
	want := map[string]float64{"synod_fsyncs_total": 123, "synod_peer_messages_sent_total": 4500, "process_cpu_seconds_total": 1.25}
	if len(got) != len(want) {
		t.Fatalf("got %v, want %v", got, want)
	}
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s = %v, want %v", k, got[k], v)
		}
	}
	if _, err := SumMetrics(strings.NewReader("synod_fsyncs_total{node=\"n1\" 3\n"), costMetrics); err == nil {
		t.Error("unterminated labels accepted")
	}
	if _, err := SumMetrics(strings.NewReader("synod_fsyncs_total x\n"), costMetrics); err == nil {
		t.Error("bad value accepted")
	}
}

// The limit probes run (a few iterations each; their figures are not
// judged: no timed tests) and the report prints every limit and protocol.
func TestLimitProbesAndPrint(t *testing.T) {
	if d, err := loopbackRTT(5); err != nil || d <= 0 {
		t.Errorf("loopback: %v, %v", d, err)
	}
	if d, err := fdatasyncLatency(t.TempDir(), 3); err != nil || d <= 0 {
		t.Errorf("fdatasync: %v, %v", d, err)
	}
	if d, err := respParseReply(2500); err != nil || d <= 0 {
		t.Errorf("RESP: %v, %v", d, err)
	}
	if mapOpsPerSec(1000) <= 0 {
		t.Error("map ops")
	}
	r := &CostReport{Limits: Limits{LoopbackRTT: 20000, Fdatasync: 1000000, MapOpsPerSec: 1e7, RESPParseReply: 500, FSDir: "/d"},
		ReadRatio: 0.5, Duration: 3,
		Protocols: []ProtocolCost{
			{Protocol: "paxos", Clients: 16, Ops: 3000, OpsPerS: 1000, P50Ms: 2, MsgsPerOp: 2.5, FsyncsPerOp: 0.5, CPUPerOp: 200e-6, FsyncsPerS: 500},
			{Protocol: "abd", Failed: "no operation completed"},
		}}
	var b bytes.Buffer
	r.Print(&b)
	out := b.String()
	for _, want := range []string{"20.0 us", "1000.0 us", "at most 1000 fsyncs/s", "10.0M ops/s", "0.500 us",
		"paxos           16      1000   2.000     2.50    0.500       500      200.0       2000x         400x",
		"abd        FAILED: no operation completed"} {
		if !strings.Contains(out, want) {
			t.Errorf("report lacks %q:\n%s", want, out)
		}
	}
}
