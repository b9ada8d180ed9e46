package fastpaxos

import "math"

// Quantile returns the smallest grid point x_j with Mid(j) ≥ u, and the range
// [lo, hi] of grid points where the true quantile can lie (the first x_j with
// Hi ≥ u, the first with Lo ≥ u). Each is +Inf when the grid ends first.
func (b Bracket) Quantile(g Grid, u float64) (x, lo, hi float64) {
	x, lo, hi = math.Inf(1), math.Inf(1), math.Inf(1)
	for j := range b.Lo {
		if math.IsInf(lo, 1) && b.Hi[j] >= u {
			lo = g.X(j)
		}
		if math.IsInf(x, 1) && b.Mid(j) >= u {
			x = g.X(j)
		}
		if b.Lo[j] >= u {
			hi = g.X(j)
			break
		}
	}
	return x, lo, hi
}

// At returns Mid at the grid point nearest x (clamped to the grid).
func (b Bracket) At(g Grid, x float64) float64 {
	j := int(math.Round(x / g.H))
	j = min(max(j, 0), len(b.Lo)-1)
	return b.Mid(j)
}

// Comparison is how the Classic and Fast curves of one Setting relate.
type Comparison struct {
	// ClassicAhead / FastAhead: some grid point where that curve is above the
	// other by more than Margin beyond both brackets' errors (certainly and
	// visibly above: differences of 10⁻¹⁸ where both CDFs are ~0 do not count).
	ClassicAhead, FastAhead bool
	// TwoRegions: both, and every point where Classic is certainly ahead
	// comes before every point where Fast is (one crossing).
	TwoRegions bool
	// Crossover is the first grid point after the last certain-Classic point
	// where Fast's estimate reaches Classic's (NaN without two regions);
	// ClassicAt, FastAt are the two CDFs there.
	Crossover, ClassicAt, FastAt float64
	// MaxClassicLead = max_x (P{L_c ≤ x} − P{L_f ≤ x}) and MaxFastLead the
	// opposite, on the estimates; LeadErr bounds their error.
	MaxClassicLead, MaxFastLead, LeadErr float64
	// MaxClassicLeadAt, MaxFastLeadAt are where they occur.
	MaxClassicLeadAt, MaxFastLeadAt float64
}

// Margin is the smallest difference between two CDFs that counts as one
// curve being above the other (Compare, and the claims built on it).
const Margin = 1e-3

// Compare compares the two curves of c.
func Compare(c *Curves) Comparison {
	r := Comparison{Crossover: math.NaN(), ClassicAt: math.NaN(), FastAt: math.NaN()}
	lastA, firstB := -1, -1
	for j := range c.Classic.Lo {
		if c.Classic.Lo[j] > c.Fast.Hi[j]+Margin {
			lastA = j
			r.ClassicAhead = true
		}
		if c.Fast.Lo[j] > c.Classic.Hi[j]+Margin && firstB < 0 {
			firstB = j
			r.FastAhead = true
		}
		d := c.Classic.Mid(j) - c.Fast.Mid(j)
		if d > r.MaxClassicLead {
			r.MaxClassicLead, r.MaxClassicLeadAt = d, c.Grid.X(j)
		}
		if -d > r.MaxFastLead {
			r.MaxFastLead, r.MaxFastLeadAt = -d, c.Grid.X(j)
		}
		r.LeadErr = max(r.LeadErr, c.Classic.Err(j)+c.Fast.Err(j))
	}
	r.TwoRegions = r.ClassicAhead && r.FastAhead && lastA < firstB
	if r.TwoRegions {
		for j := lastA + 1; j <= firstB; j++ {
			if c.Fast.Mid(j) >= c.Classic.Mid(j) {
				r.Crossover, r.ClassicAt, r.FastAt = c.Grid.X(j), c.Classic.Mid(j), c.Fast.Mid(j)
				break
			}
		}
	}
	return r
}
