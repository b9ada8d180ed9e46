package livetest

import (
	"fmt"
	"testing"
	"time"

	"github.com/synod-dev/synod/history"
)

// keyNames returns n keys "k00", "k01", ...
func keyNames(n int) []string {
	keys := make([]string, n)
	for i := range keys {
		keys[i] = fmt.Sprintf("k%02d", i)
	}
	return keys
}

// newRecorder returns a load recorder whose clock starts now, with the test,
// protocol and (when given) durability recorded in the history's metadata.
func newRecorder(t *testing.T, protocol, durability string) *recorder {
	start := time.Now()
	r := &recorder{
		Recorder: history.NewRecorder(func() int64 { return int64(time.Since(start)) }),
		keys:     &keyLog{acked: map[string]bool{}},
		stats:    &loadStats{},
	}
	r.SetMeta("test", t.Name())
	r.SetMeta("protocol", protocol)
	if durability != "" {
		r.SetMeta("durability", durability)
	}
	return r
}
