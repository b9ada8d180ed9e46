//go:build !linux

package cpuwork

import "time"

// ThreadCPU cannot read a thread's CPU time here: it reports false.
func ThreadCPU() (time.Duration, bool) { return 0, false }
