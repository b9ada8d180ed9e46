package experiment

import (
	"errors"
	"os/exec"
	"strings"
	"testing"
)

// NetemCheck either succeeds, or says why as an Unavailable error; and a
// failed probe leaves no namespace behind.
func TestNetemCheck(t *testing.T) {
	err := NetemCheck()
	if err != nil && !errors.Is(err, ErrUnavailable) {
		t.Fatalf("NetemCheck failed without marking the cells unavailable: %v", err)
	}
	t.Logf("netem: %v", err)
	if out, lerr := exec.Command("ip", "netns", "list").Output(); lerr == nil && len(out) > 0 {
		if strings.Contains(string(out), "synod-probe-") {
			t.Errorf("the probe left its namespace behind: %s", out)
		}
	}
}
