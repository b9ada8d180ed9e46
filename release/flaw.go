package release

// Flaw makes an interpreter deliberately wrong, so that a test can show a
// check catching it: the simulator's history check must fail when the
// interpreter every runtime runs releases an answer too early
// (sim/release_flaw_test.go). No runtime sets it outside tests.
type Flaw uint8

const (
	// FlawNone is the correct interpreter.
	FlawNone Flaw = iota
	// FlawRespondUndurable releases a Respond without waiting for the
	// Persists emitted before it: a crash before their fsync then loses
	// a write whose answer a client has seen.
	FlawRespondUndurable
)
