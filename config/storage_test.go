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
