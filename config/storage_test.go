package config

import (
	"strings"
	"testing"
)

func TestStorageField(t *testing.T) {
	for _, s := range []string{"", "storage: pebble\n", "storage: wal\n"} {
		c, err := Parse([]byte(s + good))
		if err != nil {
			t.Fatalf("%q: %v", s, err)
		}
		if want := strings.TrimSpace(strings.TrimPrefix(s, "storage:")); c.Storage != want {
			t.Errorf("%q: Storage = %q, want %q", s, c.Storage, want)
		}
	}
	_, err := Parse([]byte("storage: tape\n" + good))
	if err == nil || !strings.Contains(err.Error(), `storage: "tape" must be "pebble" or "wal"`) {
		t.Fatalf("storage: tape: error %v", err)
	}
}

func TestWALCompactMinField(t *testing.T) {
	c, err := Parse([]byte("wal_compact_min: 262144\n" + good))
	if err != nil || c.WALCompactMin != 262144 {
		t.Fatalf("wal_compact_min: 262144: %v, %d", err, c.WALCompactMin)
	}
	_, err = Parse([]byte("wal_compact_min: -1\n" + good))
	if err == nil || !strings.Contains(err.Error(), "wal_compact_min: -1 must be 0") {
		t.Fatalf("wal_compact_min: -1: error %v", err)
	}
}
