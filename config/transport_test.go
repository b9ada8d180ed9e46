package config

import (
	"strings"
	"testing"
)

// TestTransportField: a namespace's transport defaults to tcp, accepts the
// two gRPC transports, and refuses anything else naming the field.
func TestTransportField(t *testing.T) {
	c, err := Parse([]byte(good))
	if err != nil {
		t.Fatal(err)
	}
	if got := c.Namespaces[0].PeerTransport(); got != TransportTCP {
		t.Errorf("default transport = %q, want %q", got, TransportTCP)
	}
	for _, tr := range Transports {
		y := strings.Replace(good, `service: kv}`, `service: kv, transport: `+tr+`}`, 1)
		c, err := Parse([]byte(y))
		if err != nil {
			t.Fatalf("transport %s: %v", tr, err)
		}
		if got := c.Namespaces[0].PeerTransport(); got != tr {
			t.Errorf("transport = %q, want %q", got, tr)
		}
		// It survives a round trip through Marshal (cluster files are written by synod cluster up).
		b, err := c.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		c2, err := Parse(b)
		if err != nil || c2.Namespaces[0].Transport != tr {
			t.Errorf("after Marshal: %v, %+v", err, c2)
		}
	}
	for _, tr := range []string{"grpc", "udp", "TCP"} {
		y := strings.Replace(good, `service: kv}`, `service: kv, transport: `+tr+`}`, 1)
		_, err := Parse([]byte(y))
		if err == nil || !strings.Contains(err.Error(), `namespaces[0].transport: "`+tr+`" must be`) {
			t.Errorf("transport %q: error %v", tr, err)
		}
	}
}
