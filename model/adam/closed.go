package adam

// Closed forms of the unit-slice model (one slice local, one remote; notes
// §1.4.4, derived from the model and checked against Run by the tests).

func ceilDiv(n, k int) int { return (n + k - 1) / k }

// NaiveSlices is 2N: every slice of remote computation leaves the machine idle.
func NaiveSlices(n int) int { return 2 * n }

// WallsSlices is 2⌈N/k⌉: k requests per round, each round local then remote.
func WallsSlices(n, k int) int { return 2 * ceilDiv(n, k) }

// WallsCheckpoints is ⌈N/k⌉ walls plus the end of the batch.
func WallsCheckpoints(n, k int) int { return ceilDiv(n, k) + 1 }

// SPMSlices is N+1 with at least two threads: the local slices back to back,
// then the last remote one.
func SPMSlices(n, k int) int {
	if k == 1 {
		return NaiveSlices(n)
	}
	return n + 1
}

// PPMSlices is ⌈N/k⌉+1 with at least two groups: one turn of k requests per
// slice, then the last remote slice.
func PPMSlices(n, g, k int) int {
	if g == 1 {
		return WallsSlices(n, k)
	}
	return ceilDiv(n, k) + 1
}

// PPMCheckpoints is one per turn plus the end of the batch, as many as the
// walls strategy takes with k threads (§4.1).
func PPMCheckpoints(n, k int) int { return ceilDiv(n, k) + 1 }

// PPMSpeedup is 2N/(⌈N/k⌉+1), which tends to 2k (§4.2) and never reaches it.
func PPMSpeedup(n, g, k int) float64 {
	return float64(NaiveSlices(n)) / float64(PPMSlices(n, g, k))
}
