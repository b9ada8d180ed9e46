//go:build race

package node

// raceDetector scales the flood tests down under the race detector, which
// slows every request about tenfold.
const raceDetector = true
