package compare

import (
	"strings"
	"testing"
)

var sumNames = []string{"synod_peer_messages_sent_total", "synod_fsyncs_total", "process_cpu_seconds_total"}

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
	got, err := SumMetrics(strings.NewReader(text), sumNames)
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
	if _, err := SumMetrics(strings.NewReader("synod_fsyncs_total{node=\"n1\" 3\n"), sumNames); err == nil {
		t.Error("unterminated labels accepted")
	}
	if _, err := SumMetrics(strings.NewReader("synod_fsyncs_total x\n"), sumNames); err == nil {
		t.Error("bad value accepted")
	}
}

// The limit probes run (a few iterations each; their figures are not
// judged: no timed tests).
func TestLimitProbes(t *testing.T) {
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
}
