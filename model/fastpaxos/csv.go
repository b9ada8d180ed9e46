package fastpaxos

import (
	"encoding/csv"
	"io"
	"strconv"
)

func ff(v float64) string { return strconv.FormatFloat(v, 'g', 8, 64) }

// WriteCSV writes the curves, one row per grid point: x_ms, the Classic and
// Fast estimates with their brackets, and the client-link CDF.
func (c *Curves) WriteCSV(w io.Writer) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"x_ms", "classic", "classic_lo", "classic_hi", "fast", "fast_lo", "fast_hi", "client_link"})
	for j := 0; j < c.Grid.N; j++ {
		cw.Write([]string{ff(c.Grid.X(j)),
			ff(c.Classic.Mid(j)), ff(c.Classic.Lo[j]), ff(c.Classic.Hi[j]),
			ff(c.Fast.Mid(j)), ff(c.Fast.Lo[j]), ff(c.Fast.Hi[j]), ff(c.WAN[j])})
	}
	cw.Flush()
	return cw.Error()
}

// CollisionPoint is one computed collision probability.
type CollisionPoint struct {
	T, Clients int
	Delta      float64
	P          Interval
}

// CollisionCurve computes Collision for each δ (clients δ apart).
func CollisionCurve(w Dist, t, clients int, deltas []float64, panels int) ([]CollisionPoint, error) {
	out := make([]CollisionPoint, 0, len(deltas))
	for _, d := range deltas {
		p, err := Collision(w, t, Staggered(clients, d), panels)
		if err != nil {
			return nil, err
		}
		out = append(out, CollisionPoint{T: t, Clients: clients, Delta: d, P: p})
	}
	return out, nil
}

// WriteCollisionCSV writes t, clients, delta_ms, p, p_lo, p_hi per point.
func WriteCollisionCSV(w io.Writer, pts []CollisionPoint) error {
	cw := csv.NewWriter(w)
	cw.Write([]string{"t", "clients", "delta_ms", "p", "p_lo", "p_hi"})
	for _, p := range pts {
		cw.Write([]string{strconv.Itoa(p.T), strconv.Itoa(p.Clients), ff(p.Delta), ff(p.P.Mid()), ff(p.P.Lo), ff(p.P.Hi)})
	}
	cw.Flush()
	return cw.Error()
}
