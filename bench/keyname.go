package bench

import (
	"crypto/rand"
	"encoding/hex"
)

// KeyName returns the name the driver gives key index i (0 <= i < keys) in a
// run with this key prefix and key count: the prefix, then the index
// zero-padded to at least six digits (wider when keys needs more). Callers
// that must know key lengths (synod-lab compare) use it.
func KeyName(prefix string, keys, i int) string { return newKeyNamer(prefix, keys).name(i) }

// NewRunID returns a random run id for Config.RunID (8 hex digits).
func NewRunID() string {
	var b [4]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(err) // crypto/rand does not fail on Linux
	}
	return hex.EncodeToString(b[:])
}

// Initial-value assumptions a recorded history states in its meta field
// MetaInitial, read by synod check.
const (
	MetaInitial = "initial_values"
	// InitialAbsent: keys carry a fresh run id, so none existed at the start.
	InitialAbsent = "absent (fresh key prefix per run)"
	// InitialPreloaded: every key is written by the preload before any read.
	InitialPreloaded = "established by the preload"
	// InitialUnknown: fixed key names without a preload: the store may have
	// held values before the run, and the checker assumes absent keys.
	InitialUnknown = "unknown (fixed key prefix, no preload)"
)

// initialValues states what a run's history assumes about initial values.
func (c Config) initialValues() string {
	switch {
	case c.RunID != "":
		return InitialAbsent
	case c.Preload:
		return InitialPreloaded
	}
	return InitialUnknown
}

// keyPrefix is the prefix of every key name: KeyPrefix, then RunID and ":".
func (c Config) keyPrefix() string {
	if c.RunID == "" {
		return c.KeyPrefix
	}
	return c.KeyPrefix + c.RunID + ":"
}
