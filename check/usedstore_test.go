package check

import (
	"fmt"
	"strings"
	"testing"

	"github.com/synod-dev/synod/history"
)

// TestUsedStoreExplained: a history recorded on keys that already held
// values (a second bench run with a fixed key prefix) fails on every key; the
// report explains one key, says why (a value no recorded write produced) and
// only counts the others instead of naming them.
func TestUsedStoreExplained(t *testing.T) {
	var ops []history.Op
	for i := range 50 {
		k := fmt.Sprintf("key:%06d", i)
		ops = append(ops,
			ok(1, int64(10*i), int64(10*i+1), rBytes("old-value"), "get", k),
			ok(1, int64(10*i+2), int64(10*i+3), rOK, "set", k, "new"))
	}
	r := mustCheck(t, hist(ops...), Options{})
	wantResult(t, r, "illegal")
	s := r.String()
	if !strings.Contains(s, `A GET returned "old-value", which no operation of the history wrote`) {
		t.Errorf("report does not explain the pre-existing value:\n%s", s)
	}
	if !strings.Contains(s, "(49 other partitions fail too)") {
		t.Errorf("report does not count the other failing keys:\n%s", s)
	}
	if strings.Contains(s, "key:000049") && r.FailedPartition != "key:000049" {
		t.Errorf("report names other failing keys:\n%s", s)
	}
}

// TestFreshKeysNoHint: a real violation on keys the history wrote gets no
// used-store hint.
func TestFreshKeysNoHint(t *testing.T) {
	r := mustCheck(t, hist(
		ok(1, 0, 1, rOK, "set", "k", "a"),
		ok(2, 2, 3, rOK, "set", "k", "b"),
		ok(3, 4, 5, rBytes("a"), "get", "k"),
	), Options{})
	wantResult(t, r, "illegal")
	if strings.Contains(r.String(), "no operation of the history wrote") {
		t.Errorf("hint given for a stale read of a recorded write:\n%s", r)
	}
}
