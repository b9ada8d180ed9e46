// Package plots draws the Fast Paxos model's curves (model/fastpaxos) with
// gonum/plot: time-to-learn CDFs and collision probabilities, as PNG and SVG.
package plots

import (
	"path/filepath"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/plotutil"
	"gonum.org/v1/plot/vg"

	"github.com/synod-dev/synod/model/fastpaxos"
)

// Line is one named curve.
type Line struct {
	Name   string
	X, Y   []float64
	Dashed bool
}

// Draw writes dir/base.png and dir/base.svg and returns their paths.
func Draw(dir, base, title, xlabel, ylabel string, lines []Line) ([]string, error) {
	p := plot.New()
	p.Title.Text = title
	p.X.Label.Text = xlabel
	p.Y.Label.Text = ylabel
	p.Legend.Top = false
	p.Legend.Left = false
	p.Legend.XOffs = -vg.Points(10)
	p.Legend.YOffs = vg.Points(30)
	for i, l := range lines {
		step := max(1, len(l.X)/1500)
		var pts plotter.XYs
		for j := 0; j < len(l.X); j += step {
			pts = append(pts, plotter.XY{X: l.X[j], Y: l.Y[j]})
		}
		ln, err := plotter.NewLine(pts)
		if err != nil {
			return nil, err
		}
		ln.Color = plotutil.Color(i)
		ln.Width = vg.Points(1.5)
		if l.Dashed {
			ln.Dashes = []vg.Length{vg.Points(5), vg.Points(3)}
		}
		p.Add(ln)
		p.Legend.Add(l.Name, ln)
	}
	p.Add(plotter.NewGrid())
	var files []string
	for _, ext := range []string{".png", ".svg"} {
		f := filepath.Join(dir, base+ext)
		if err := p.Save(7*vg.Inch, 4.5*vg.Inch, f); err != nil {
			return files, err
		}
		files = append(files, f)
	}
	return files, nil
}

// CDF draws P{L_c ≤ x}, P{L_f ≤ x} and the client-link CDF of c.
func CDF(dir, base, title string, c *fastpaxos.Curves) ([]string, error) {
	xs := c.Grid.Xs()
	return Draw(dir, base, title, "time to learn x (ms)", "P{L ≤ x}", []Line{
		{Name: "Classic P{L_c ≤ x}", X: xs, Y: c.Classic.Mids()},
		{Name: "Fast P{L_f ≤ x}", X: xs, Y: c.Fast.Mids()},
		{Name: "client link P{W ≤ x}", X: xs, Y: c.WAN, Dashed: true},
	})
}
