package bench

// KeyName returns the name the driver gives key index i (0 <= i < keys) in a
// run with this key prefix and key count: the prefix, then the index
// zero-padded to at least six digits (wider when keys needs more). Callers
// that must know key lengths (synod compare) use it.
func KeyName(prefix string, keys, i int) string { return newKeyNamer(prefix, keys).name(i) }
