//go:build race

package transport

// raceDetector: sync.Pool drops a quarter of what it is given under the
// race detector, so allocation counts of pooled paths are not checked.
const raceDetector = true
