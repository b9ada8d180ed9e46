package traces

import "testing"

func TestShippedTracesLoad(t *testing.T) {
	for _, name := range []string{"loopback-nws.txt", "loopback-rtt.txt"} {
		e, err := Load(name)
		if err != nil {
			t.Fatal(err)
		}
		if e.Len() != 20000 || e.Min() <= 0 || e.Quantile(0.5) > 1 {
			t.Errorf("%s: %v", name, e)
		}
	}
	if _, err := Load("wan-netem.txt"); err == nil {
		t.Error("a WAN trace is shipped: update the README and the experiment")
	}
}
