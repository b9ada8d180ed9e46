//go:build !linux

package programs

import "time"

// threadCPU is not available here: spin uses the wall clock.
func threadCPU() (time.Duration, bool) { return 0, false }
